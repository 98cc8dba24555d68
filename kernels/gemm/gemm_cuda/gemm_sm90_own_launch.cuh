// The launch of our own kernel (gemm_sm90_own_kernel.cuh) for one tile configuration: the four
// TMA descriptors and a persistent grid, one CTA per SM (two for the configurations built so).
// Included by each gemm_sm90_own_*.cu.
// The tile order is the kernel's own (groups of 8 row blocks); Problem's swizzle and raster, the
// CUTLASS scheduler's settings, do not apply.
// Run numbers (run 15b, 25a-25c) cite the gemm tuning log: git show c631808:benchmarks/RESULTS.md
#pragma once

#include <atomic>
#include <cstdint>
#include <numeric>  // std::gcd

#include <cuda.h>
#include <cuda_runtime.h>  // cudaLaunchKernelEx

#include "../gemm/fp8.h"
#include "device.h"
#include "gemm_sm90_configs.h"
#include "gemm_sm90_own_kernel.cuh"

namespace fp8gemm::sm90_own_launch {

using fp8gemm::sm90::Problem;
using namespace fp8gemm::sm90_own;

// cuTensorMapEncodeTiled is a driver function: fetched through the runtime, so that nothing links
// libcuda directly (torch's CUDA runtime is all the extension loads).
inline cudaError_t encode_tiled(CUtensorMap* map, CUtensorMapDataType dtype, const void* base,
                                uint64_t dim0, uint64_t dim1, uint64_t stride1_bytes, uint32_t box0,
                                uint32_t box1, CUtensorMapSwizzle swizzle) {
  using Encode = decltype(&cuTensorMapEncodeTiled);
  static const Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<Encode>(fn);
  }();
  if (encode == nullptr) return cudaErrorNotSupported;
  const cuuint64_t dims[2] = {dim0, dim1};
  const cuuint64_t strides[1] = {stride1_bytes};
  const cuuint32_t box[2] = {box0, box1};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode(map, dtype, 2, const_cast<void*>(base), dims, strides, box,
                            elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // out-of-bounds reads give 0
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// pdl: launch with programmatic stream serialization, so that the kernel's set-up overlaps the
// end of the previous kernel in the stream (the kernel waits for that kernel's completion before
// it touches global memory: griddepcontrol in gemm_kernel).
template <class Cfg>
cudaError_t run(const Problem& p, cudaStream_t stream, bool pdl) {
  constexpr CUtensorMapSwizzle kStoreSwizzle = Cfg::kStoreSwizzleBytes == 128
                                                   ? CU_TENSOR_MAP_SWIZZLE_128B
                                               : Cfg::kStoreSwizzleBytes == 64
                                                   ? CU_TENSOR_MAP_SWIZZLE_64B
                                                   : CU_TENSOR_MAP_SWIZZLE_32B;
  const int64_t m = p.m, n = p.n, k = p.k;
  if (m < 1 || n < fp8gemm::kNMultiple || k < kBlockK || n % fp8gemm::kNMultiple != 0 ||
      k % kBlockK != 0 ||
      p.a_scale_ld < m || p.a_scale_ld % 4 != 0 || p.sm_count < 1)
    return cudaErrorInvalidValue;

  // Swapped tiles (Cfg::kSwapAB): the kernel's row operand is bt, its column operand a, and its
  // column scales a_scale's; an output box is BN rows of 64 columns.
  constexpr bool kSwap = Cfg::kSwapAB;
  const int64_t rows = kSwap ? n : m, cols = kSwap ? m : n;
  CUtensorMap tmap_a, tmap_b, tmap_sfa, tmap_d;
  cudaError_t err;
  // M below one row block: A's boxes hold M rows, a_scale's M rounded up to 4 (16 bytes), so
  // that the TMA fills in no rows past M; the stage's other rows keep what they held, and the
  // math on them goes to output rows past M, which are never stored. Rows past M in A's boxes
  // slowed whole calls (tile_row0 in gemm_sm90_own_kernel.cuh); trimmed, 350 against 323 TFLOP/s at
  // 76 x 11008 x 5120, 292 against 259 at 68 x 9984 x 3584, equal at 116 x 12032 x 2048
  // (tuning log 29b). Not where the shift is 0 (the boxes as they were), nor swapped (N rows).
  const bool trim = !kSwap && p.shift != 0 && rows < Cfg::kBlockM;
  const uint32_t a_rows = trim ? static_cast<uint32_t>(rows) : Cfg::kBlockM;
  const uint32_t scale_slots = trim ? static_cast<uint32_t>((rows + 3) / 4 * 4) : Cfg::kScaleSlots;
  if ((err = encode_tiled(&tmap_a, CU_TENSOR_MAP_DATA_TYPE_UINT8, kSwap ? p.bt : p.a, k, rows, k,
                          kBlockK, a_rows, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess ||
      (err = encode_tiled(&tmap_b, CU_TENSOR_MAP_DATA_TYPE_UINT8, kSwap ? p.a : p.bt, k, cols, k,
                          kBlockK, Cfg::kBlockN, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess ||
      (err = encode_tiled(&tmap_sfa, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, p.a_scale, p.a_scale_ld,
                          k / kBlockK, p.a_scale_ld * 4, scale_slots, 1,
                          CU_TENSOR_MAP_SWIZZLE_NONE)) != cudaSuccess ||
      (err = encode_tiled(&tmap_d, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, p.out, n, m, n * 2,
                          Cfg::kStoreCols, kSwap ? Cfg::kBlockN : 64, kStoreSwizzle)) !=
          cudaSuccess)
    return err;

  Params params{};
  params.m = p.m;
  params.n = p.n;
  params.k = p.k;
  params.b_scale = p.b_scale;
  params.stage_bytes = a_rows * kBlockK + Cfg::kSmemB + scale_slots * 4;
  params.num_n_scales = static_cast<int>(fp8gemm::scale_columns(p.n));
  params.num_m_blocks = static_cast<int>((rows + Cfg::kBlockM - 1) / Cfg::kBlockM);
  params.num_n_blocks = static_cast<int>((cols + Cfg::kBlockN - 1) / Cfg::kBlockN);
  // The last row block's tile (tile_row0 in gemm_sm90_own_kernel.cuh): moved back to end at M
  // where the shift asks for it and M holds a whole block. Its first row rounds up to a multiple
  // of 4, where a_scale's TMA box may start (16 bytes; an unaligned start is an illegal
  // instruction): up to 3 rows past M stay. Swapped, the tile's rows are b's columns, never
  // moved: a tile of them lies in one scale block (128-row tiles), the last one's rows past N
  // zero-filled by the TMA and never stored.
  const int64_t last_block_row0 = int64_t{params.num_m_blocks - 1} * Cfg::kBlockM;
  const int64_t last_rows = rows - last_block_row0;
  // Shift 1 moves a 128-row tile where the block is less than half full (moved over a half-full
  // one it lost 4-7 %, tuning log 28), a 64-row tile wherever it is part full. Those had moved
  // as the 128-row ones did until run 30; a half-full block (32 of 64 rows past M) then slowed
  // them as much as an emptier one: moved, +10 % (geometric mean) at 16 random such shapes,
  // 1.00-1.29 (624 against 484 TFLOP/s at 160 x 7296 x 7936, 884 against 686 at
  // 288 x 29440 x 6144); over blocks more than half full, +2 % at 12, 0.99-1.20 (805 against 656
  // at 291 x 18048 x 8192; tuning log 30c).
  const bool move_on_shift_1 = Cfg::kBlockM == 64 || 2 * last_rows < Cfg::kBlockM;
  const bool shift_rows = !kSwap && rows >= Cfg::kBlockM && last_rows < Cfg::kBlockM &&
                          (p.shift == 2 || (p.shift == 1 && move_on_shift_1));
  params.last_row0 =
      static_cast<int>(shift_rows ? (rows - Cfg::kBlockM + 3) / 4 * 4 : last_block_row0);
  // The last column block's tile (tile_col0): moved back to end at N wherever it runs past N and
  // the shift is not 0 (N holds a whole block), and where its first column is then a multiple of
  // gcd(BN, 128), as every other tile's is, so that its b-scale split is one the math warpgroups'
  // dispatch has (N % 128 = 64 moves 64-, 96- or 192-wide tiles, not 128- or 256-wide ones).
  // Unmoved, its columns past N are zero-filled by the TMA and never stored.
  const int64_t last_block_col0 = int64_t{params.num_n_blocks - 1} * Cfg::kBlockN;
  constexpr int64_t kSplitStep = std::gcd(int64_t{Cfg::kBlockN}, int64_t{kScaleBlockN});
  const bool shift_cols = !kSwap && p.shift != 0 && cols > Cfg::kBlockN &&
                          cols % Cfg::kBlockN != 0 && cols % kSplitStep == 0;
  params.last_col0 = static_cast<int>(shift_cols ? cols - Cfg::kBlockN : last_block_col0);
  const int64_t tiles = int64_t{params.num_m_blocks} * params.num_n_blocks;
  if (tiles > INT32_MAX) return cudaErrorInvalidValue;
  params.num_tiles = static_cast<int>(tiles);

  static std::atomic<uint64_t> opted_in{0};
  if ((err = fp8gemm::opt_in_shared_memory(reinterpret_cast<const void*>(gemm_kernel<Cfg>),
                                           Cfg::kSmemBytes, p.device, opted_in)) != cudaSuccess)
    return err;
  // Persistent: kCtasPerSm CTAs per SM (their shared memory allows no more), or one per tile.
  const int64_t slots = int64_t{p.sm_count} * Cfg::kCtasPerSm;
  const int grid = static_cast<int>(params.num_tiles < slots ? params.num_tiles : slots);
  cudaLaunchAttribute serialization{};
  serialization.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  serialization.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t launch{};
  launch.gridDim = dim3(static_cast<unsigned>(grid));
  launch.blockDim = dim3(Cfg::kThreads);
  launch.dynamicSmemBytes = Cfg::kSmemBytes;
  launch.stream = stream;
  launch.attrs = &serialization;
  launch.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&launch, gemm_kernel<Cfg>, tmap_a, tmap_b, tmap_sfa, tmap_d, params);
}

}  // namespace fp8gemm::sm90_own_launch

// Defines configuration NAME of gemm_sm90_configs.h as our own kernel with
// TileConfig<__VA_ARGS__> (it needs no workspace), launched with programmatic dependent launch if
// PDL, as GEMM_SM90_DEFINE_CONFIG (gemm_sm90_kernel.cuh) does for CUTLASS's.
#define GEMM_SM90_DEFINE_OWN_CONFIG(NAME, PDL, ...)                                     \
  namespace fp8gemm::sm90 {                                                             \
  size_t workspace_bytes_##NAME(const Problem&) { return 0; }                           \
  cudaError_t run_##NAME(const Problem& p, void*, cudaStream_t stream) {                \
    return sm90_own_launch::run<sm90_own::TileConfig<__VA_ARGS__>>(p, stream, PDL);     \
  }                                                                                     \
  }
