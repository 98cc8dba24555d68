// Our own H100 (sm_90a) FP8 e4m3 GEMM with DeepSeek-style block scales, bf16 output:
//   a        (M, K) row-major e4m3
//   bt       (N, K) row-major e4m3 (b column-major)
//   a_scale  (K/128, a_scale_ld) fp32, M contiguous: one scale per row per 128-wide K block
//   b_scale  (K/128, N/128) fp32 row-major: one scale per 128x128 block of b
//   out      (M, N) row-major bf16
// out[m][n] = sum_kb a_scale[kb][m] * b_scale[kb][n/128] * sum_{k in kb} a[m][k] * bt[n][k]
//
// Why not CUTLASS's blockwise mainloop: it keeps two full-size fp32 accumulators and its scale
// copies only partition tiles whose N is a multiple of 128, so the 128x192 tile that fills an
// H100 best neither compiles nor fits in registers. Here each math warpgroup keeps one
// full-precision accumulator plus one 64 x BLOCK_N temporary that wgmma writes for a single
// 128-wide K block; the temporary is folded into the accumulator right away ("promotion") with
// the b scale of each accumulator column's own 128-column block, so a tile may straddle two
// b-scale blocks.
//
// Structure: persistent, warp-specialised, 384 threads. Warpgroup 0 is the producer: one thread
// fills a ring of smem stages with TMA loads of A, Bt and a_scale and cp.async copies of the two
// b scales of the k block. Warpgroups 1 and 2 do the math, each owning BLOCK_M/2 rows of the
// tile; each stores its bf16 rows through a swizzled smem buffer with TMA stores (which clip
// rows >= M and columns >= N) that drain while the next tile's mainloop runs. Optionally the K
// blocks of a tile are split over several CTAs (split-K) when there are too few tiles to fill
// the GPU.
#pragma once

#include <cstdint>
#include <utility>

#include <cuda.h>  // CUtensorMap (types only: the driver entry point is fetched at run time)
#include <cuda_bf16.h>

#include "cute/arch/cluster_sm90.hpp"
#include "cute/arch/copy_sm90_tma.hpp"
#include "cute/arch/mma_sm90_desc.hpp"
#include "cute/arch/mma_sm90_gmma.hpp"
#include "cute/arch/mma_sm90_gmma_ext.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/arch/reg_reconfig.h"

namespace fp8gemm::sm90_own {

constexpr int kBlockK = 128;           // one a/b scale per 128 K; also 128 bytes = one swizzle row
constexpr int kScaleBlockN = 128;      // b scales cover 128 columns
constexpr int kNumThreads = 384;       // producer warpgroup + 2 math warpgroups
constexpr int kSmemCapacity = 232448;  // H100 opt-in dynamic smem per block

// The wgmma atom 64 x N x 32 (e4m3 x e4m3 -> f32, both operands K-major in smem).
template <int N>
struct Wgmma;
#define FP8GEMM_WGMMA(N) \
  template <>            \
  struct Wgmma<N> {      \
    using Op = cute::SM90::GMMA::MMA_64x##N##x32_F32E4M3E4M3_SS_TN<>; \
  };
FP8GEMM_WGMMA(128)
FP8GEMM_WGMMA(160)
FP8GEMM_WGMMA(192)
#undef FP8GEMM_WGMMA

template <int BM, int BN>
struct TileConfig {
  static constexpr int kBlockM = BM;
  static constexpr int kBlockN = BN;
  static constexpr int kWgRows = BM / 2;       // rows per math warpgroup
  static constexpr int kAtomsM = kWgRows / 64;  // wgmma m64 atoms per math warpgroup
  static constexpr int kAccum = BN / 2;         // fp32 values per thread per 64 x BN atom
  // Output store atom: TMA box of kStoreCols columns, swizzled to its row width in bytes.
  static constexpr int kStoreCols = BN % 64 == 0 ? 64 : (BN % 32 == 0 ? 32 : 16);
  static constexpr int kStoreSwizzleBytes = kStoreCols * 2;

  static constexpr int kSmemA = BM * kBlockK;
  static constexpr int kSmemB = BN * kBlockK;
  // Per stage: a_scale for the tile's rows (TMA), then the two b scales of the k block.
  static constexpr int kSmemScales = (BM * 4 + 8 + 127) / 128 * 128;
  static constexpr int kSmemDPerWg = kWgRows * BN * 2;
  static constexpr int kSmemPerStage = kSmemA + kSmemB + kSmemScales + 16;  // + 2 mbarriers
  static constexpr int kStagesFit = (kSmemCapacity - 2 * kSmemDPerWg) / kSmemPerStage;
  static constexpr int kStages = kStagesFit > 8 ? 8 : kStagesFit;
  // smem map: [A stages][B stages][D wg0][D wg1][scale stages][full barriers][empty barriers]
  static constexpr int kOffB = kStages * kSmemA;
  static constexpr int kOffD = kOffB + kStages * kSmemB;
  static constexpr int kOffScales = kOffD + 2 * kSmemDPerWg;
  static constexpr int kOffBar = kOffScales + kStages * kSmemScales;
  static constexpr int kSmemBytes = kOffBar + 2 * kStages * 8;

  static_assert(BM == 128 || BM == 256, "two math warpgroups of 64 or 128 rows");
  static_assert(BN % 16 == 0 && BN <= 256, "wgmma N");
  static_assert(kStages >= 3, "too few pipeline stages fit in shared memory");
  static_assert(kSmemA % 1024 == 0 && kSmemB % 1024 == 0 && kSmemDPerWg % 1024 == 0,
                "128-byte swizzled tiles must stay 1024-byte aligned");
};

struct Params {
  int m, n, k;
  const float* b_scale;  // (K/128, N/128)
  int num_n_scales;      // N/128
  int num_m_blocks, num_n_blocks, num_tiles;
  int group;             // tiles are rasterised in groups of `group` blocks along M (or N)
  int group_along_n;
  // Split-K: each tile's K blocks are divided among `splits` consecutive work units (unit
  // u = tile * splits + split; the grid is a multiple of `splits`, so the units of a tile run in
  // the same round on co-resident CTAs). Units with split > 0 leave fp32 partials in `workspace`
  // and count up flags[tile][warpgroup]; split 0 waits for them, adds them, stores the tile and
  // resets the flag for the next launch.
  int splits;
  int num_units;
  float* workspace;  // (num_tiles, splits - 1, BLOCK_M * BLOCK_N)
  int* flags;        // (num_tiles, 2), zero between launches
};

// ---------------------------------------------------------------------------------------------
// Small device helpers.

// Named barrier 1 + wg: the 128 threads of math warpgroup wg (0 is __syncthreads').
__device__ __forceinline__ void warpgroup_barrier(int wg) {
  asm volatile("bar.sync %0, 128;" ::"r"(1 + wg) : "memory");
}

// 4-byte asynchronous global -> smem copy (not TMA: b_scale rows need not be 16-byte aligned),
// and an arrival on `bar` once all of this thread's cp.async copies so far have landed.
__device__ __forceinline__ void cp_async_4(void* smem_dst, const float* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(
                   cute::cast_smem_ptr_to_uint(smem_dst)),
               "l"(src)
               : "memory");
}
__device__ __forceinline__ void cp_async_arrive(void* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(
                   cute::cast_smem_ptr_to_uint(bar))
               : "memory");
}

// wgmma smem descriptor of a K-major tile stored with the 128-byte swizzle (8 rows x 128 bytes
// per 1024-byte atom, atoms stacked along M/N).
__device__ __forceinline__ uint64_t make_sw128_desc(const void* smem) {
  cute::GmmaDescriptor desc;
  desc.bitfield.start_address_ = static_cast<uint16_t>(cute::cast_smem_ptr_to_uint(smem) >> 4);
  desc.bitfield.leading_byte_offset_ = 1;  // unused for swizzled K-major layouts
  desc.bitfield.stride_byte_offset_ = 1024 >> 4;
  desc.bitfield.base_offset_ = 0;
  desc.bitfield.layout_type_ = 1;  // SWIZZLE_128B
  return desc.desc_;
}

template <class Op, std::size_t... I>
__device__ __forceinline__ void wgmma_call(uint64_t desc_a, uint64_t desc_b, float* d,
                                           cute::SM90::GMMA::ScaleOut scale_d,
                                           std::index_sequence<I...>) {
  Op::fma(desc_a, desc_b, d[I]..., scale_d);
}

// Tile index -> (m block, n block), rasterised in groups so that the ~132 tiles in flight share
// A rows and Bt rows in L2.
__device__ __forceinline__ void tile_coords(const Params& p, int tile, int& m_blk, int& n_blk) {
  const int major = p.group_along_n ? p.num_n_blocks : p.num_m_blocks;
  const int minor = p.group_along_n ? p.num_m_blocks : p.num_n_blocks;
  const int per_group = p.group * minor;
  const int first = tile / per_group * p.group;
  const int in_group = tile % per_group;
  const int width = min(p.group, major - first);
  const int a = first + in_group % width;
  const int b = in_group / width;
  m_blk = p.group_along_n ? b : a;
  n_blk = p.group_along_n ? a : b;
}

// ---------------------------------------------------------------------------------------------
// One math warpgroup's work on one unit (a tile, or its share of the K blocks under split-K).
// kSplit: the tile's first kSplit columns take the k block's first b scale, the rest its second
// (kSplit >= BN: one scale block). It is a template argument so that the per-chunk choice of
// scale in the promotion costs nothing.
template <class Cfg, int kSplit>
__device__ __forceinline__ void math_unit(const Params& p, uint8_t* smem, int tile, int split,
                                          int m_blk, int n_blk, int wg, int& stage,
                                          uint32_t& phase, const CUtensorMap* tmap_d) {
  using Op = typename Wgmma<Cfg::kBlockN>::Op;
  constexpr int BN = Cfg::kBlockN;
  constexpr int kAcc = Cfg::kAccum;
  const int tid = threadIdx.x % 128;
  const int warp = tid / 32, lane = tid % 32;
  const int row0 = warp * 16 + lane / 4;  // this thread's rows in a 64-row atom: row0, row0 + 8

  auto* full = reinterpret_cast<cutlass::arch::ClusterTransactionBarrier*>(smem + Cfg::kOffBar);
  auto* empty = reinterpret_cast<cutlass::arch::ClusterBarrier*>(smem + Cfg::kOffBar +
                                                                 Cfg::kStages * 8);

  const int n0 = n_blk * BN;
  const int num_k_blocks = p.k / kBlockK;
  const int kb_begin = split * num_k_blocks / p.splits;
  const int kb_end = (split + 1) * num_k_blocks / p.splits;

  float acc[Cfg::kAtomsM][kAcc];
#pragma unroll
  for (int a = 0; a < Cfg::kAtomsM; ++a)
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[a][i] = 0.f;
  float tmp[kAcc];

  for (int kb = kb_begin; kb < kb_end; ++kb) {
    full[stage].wait(phase);
    const uint8_t* a_stage = smem + stage * Cfg::kSmemA;
    const uint64_t desc_b = make_sw128_desc(smem + Cfg::kOffB + stage * Cfg::kSmemB);
    const float* scales =
        reinterpret_cast<const float*>(smem + Cfg::kOffScales + stage * Cfg::kSmemScales);
    const float sb_lo = scales[Cfg::kBlockM], sb_hi = scales[Cfg::kBlockM + 1];

#pragma unroll
    for (int a = 0; a < Cfg::kAtomsM; ++a) {
      const int atom_row = wg * Cfg::kWgRows + a * 64;
      // Read everything this stage holds for us before releasing it.
      const float sa0 = scales[atom_row + row0];
      const float sa1 = scales[atom_row + row0 + 8];
      const uint64_t desc_a = make_sw128_desc(a_stage + atom_row * kBlockK);

#pragma unroll
      for (int i = 0; i < kAcc; ++i) cute::warpgroup_fence_operand(tmp[i]);
      cute::warpgroup_arrive();
#pragma unroll
      for (int kk = 0; kk < kBlockK / 32; ++kk) {
        // K step of 32 e4m3 = 32 bytes = 2 units of the descriptor's 16-byte address field.
        wgmma_call<Op>(desc_a + 2 * kk, desc_b + 2 * kk, tmp,
                       kk == 0 ? cute::SM90::GMMA::ScaleOut::Zero
                               : cute::SM90::GMMA::ScaleOut::One,
                       std::make_index_sequence<kAcc>{});
      }
      cute::warpgroup_commit_batch();
      cute::warpgroup_wait<0>();
#pragma unroll
      for (int i = 0; i < kAcc; ++i) cute::warpgroup_fence_operand(tmp[i]);

      if (a == Cfg::kAtomsM - 1 && lane == 0) empty[stage].arrive();

      // Promotion. Accumulator layout of m64nNk32: value 4*j + {0,1} is (row0, 8*j + 2*(lane%4)
      // + {0,1}), value 4*j + {2,3} is row0 + 8; so an 8-column chunk j lies wholly on one side
      // of the b-scale boundary kSplit (a multiple of 16).
      const float s00 = sa0 * sb_lo, s10 = sa1 * sb_lo;
      const float s01 = sa0 * sb_hi, s11 = sa1 * sb_hi;
#pragma unroll
      for (int j = 0; j < kAcc / 4; ++j) {
        const bool lo = j * 8 < kSplit;
        acc[a][4 * j + 0] += (lo ? s00 : s01) * tmp[4 * j + 0];
        acc[a][4 * j + 1] += (lo ? s00 : s01) * tmp[4 * j + 1];
        acc[a][4 * j + 2] += (lo ? s10 : s11) * tmp[4 * j + 2];
        acc[a][4 * j + 3] += (lo ? s10 : s11) * tmp[4 * j + 3];
      }
    }
    stage = stage + 1 == Cfg::kStages ? 0 : stage + 1;
    phase ^= stage == 0;
  }

  if (p.splits > 1) {
    // Partials travel in the accumulator's own register layout: thread t of warpgroup wg owns
    // float4 number (chunk * 128 + t) of its slice, so both sides are coalesced 16-byte accesses.
    constexpr int kChunks = Cfg::kAtomsM * kAcc / 4;
    int* flag = p.flags + tile * 2 + wg;
    auto slice = [&](int s) {
      return reinterpret_cast<float4*>(p.workspace) +
             ((static_cast<int64_t>(tile) * (p.splits - 1) + (s - 1)) * 2 + wg) * kChunks * 128;
    };
    if (split > 0) {
      float4* dst = slice(split);
#pragma unroll
      for (int a = 0; a < Cfg::kAtomsM; ++a)
#pragma unroll
        for (int j = 0; j < kAcc / 4; ++j)
          __stcg(dst + (a * kAcc / 4 + j) * 128 + tid,
                 make_float4(acc[a][4 * j], acc[a][4 * j + 1], acc[a][4 * j + 2],
                             acc[a][4 * j + 3]));
      __threadfence();
      warpgroup_barrier(wg);
      if (tid == 0) atomicAdd(flag, 1);
      return;
    }
    if (tid == 0) {
      int seen;
      do {
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(flag) : "memory");
      } while (seen < p.splits - 1);
      *flag = 0;
    }
    warpgroup_barrier(wg);
    for (int s = 1; s < p.splits; ++s) {
      const float4* src = slice(s);
#pragma unroll
      for (int a = 0; a < Cfg::kAtomsM; ++a)
#pragma unroll
        for (int j = 0; j < kAcc / 4; ++j) {
          const float4 v = __ldcg(src + (a * kAcc / 4 + j) * 128 + tid);
          acc[a][4 * j] += v.x;
          acc[a][4 * j + 1] += v.y;
          acc[a][4 * j + 2] += v.z;
          acc[a][4 * j + 3] += v.w;
        }
    }
  }

  // Epilogue: bf16 into this warpgroup's swizzled smem buffer, then TMA stores (which clip rows
  // >= M and columns >= N). The buffer is free once our previous tile's stores have read it.
  // The 16-byte chunk (column / 8) of a row is XORed with the row's position in its 8-row (or
  // 4-, 2-row) swizzle atom, as the TMA expects; the 8 rows a warp writes at once then hit 8
  // different chunks, so the 4-byte stores are free of bank conflicts.
  constexpr int kCols = Cfg::kStoreCols;
  constexpr int kSwizzleMask = Cfg::kStoreSwizzleBytes / 16 - 1;
  constexpr int kBoxBytes = Cfg::kWgRows * kCols * 2;
  uint8_t* d_smem = smem + Cfg::kOffD + wg * Cfg::kSmemDPerWg;
  if (tid == 0) cute::tma_store_wait<0>();
  warpgroup_barrier(wg);
#pragma unroll
  for (int a = 0; a < Cfg::kAtomsM; ++a) {
#pragma unroll
    for (int j = 0; j < kAcc / 4; ++j) {
      const int col = j * 8 + 2 * (lane % 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = a * 64 + row0 + 8 * h;
        uint32_t off = (col / kCols) * kBoxBytes + row * (kCols * 2) + (col % kCols) * 2;
        off ^= ((off >> 7) & kSwizzleMask) << 4;
        *reinterpret_cast<__nv_bfloat162*>(d_smem + off) =
            __floats2bfloat162_rn(acc[a][4 * j + 2 * h], acc[a][4 * j + 2 * h + 1]);
      }
    }
  }
  cute::tma_store_fence();  // make the generic-proxy smem writes visible to the TMA (async proxy)
  warpgroup_barrier(wg);
  if (tid == 0) {
    const int m0 = m_blk * Cfg::kBlockM + wg * Cfg::kWgRows;
#pragma unroll
    for (int c = 0; c < BN / kCols; ++c)
      cute::SM90_TMA_STORE_2D::copy(tmap_d, d_smem + c * kBoxBytes, n0 + c * kCols, m0);
    cute::tma_store_arrive();
  }
}

// Runtime -> compile-time b-scale split column (128 - n0 % 128, a multiple of gcd(BN, 128)).
template <class Cfg, int kSplit>
__device__ __forceinline__ void math_unit_dispatch(int scale_split, const Params& p,
                                                   uint8_t* smem, int tile, int split, int m_blk,
                                                   int n_blk, int wg, int& stage, uint32_t& phase,
                                                   const CUtensorMap* tmap_d) {
  constexpr int kGcd = Cfg::kBlockN % 128 == 0 ? 128
                       : Cfg::kBlockN % 64 == 0 ? 64
                       : Cfg::kBlockN % 32 == 0 ? 32
                                                 : 16;
  if constexpr (kSplit > kGcd) {
    if (scale_split != kSplit) {
      math_unit_dispatch<Cfg, kSplit - kGcd>(scale_split, p, smem, tile, split, m_blk, n_blk, wg,
                                             stage, phase, tmap_d);
      return;
    }
  }
  math_unit<Cfg, kSplit>(p, smem, tile, split, m_blk, n_blk, wg, stage, phase, tmap_d);
}

template <class Cfg>
__global__ void __launch_bounds__(kNumThreads, 1)
    gemm_kernel(const __grid_constant__ CUtensorMap tmap_a,
                const __grid_constant__ CUtensorMap tmap_b,
                const __grid_constant__ CUtensorMap tmap_sfa,
                const __grid_constant__ CUtensorMap tmap_d, const Params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(1024) uint8_t smem[];
  auto* full = reinterpret_cast<cutlass::arch::ClusterTransactionBarrier*>(smem + Cfg::kOffBar);
  auto* empty = reinterpret_cast<cutlass::arch::ClusterBarrier*>(smem + Cfg::kOffBar +
                                                                 Cfg::kStages * 8);
  const int warp = threadIdx.x / 32;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    // The 128-byte swizzle is a function of the smem address: tiles must be 1024-byte aligned.
    if (cute::cast_smem_ptr_to_uint(smem) % 1024 != 0) __trap();
    for (int s = 0; s < Cfg::kStages; ++s) {
      full[s].init(2);       // the producer's arrive (with the TMA bytes) + its cp.async arrival
      empty[s].init(2 * 4);  // lane 0 of each math warp
    }
    cutlass::arch::fence_barrier_init();
  }
  if (warp == 1 && cute::elect_one_sync()) {
    cute::prefetch_tma_descriptor(&tmap_a);
    cute::prefetch_tma_descriptor(&tmap_b);
    cute::prefetch_tma_descriptor(&tmap_sfa);
    cute::prefetch_tma_descriptor(&tmap_d);
  }
  __syncthreads();

  const int num_k_blocks = p.k / kBlockK;
  int stage = 0;
  uint32_t phase = 0;

  if (wg == 0) {
    cutlass::arch::warpgroup_reg_dealloc<40>();
    if (warp == 0 && cute::elect_one_sync()) {
      constexpr uint32_t kStageBytes =
          Cfg::kSmemA + Cfg::kSmemB + Cfg::kBlockM * 4;  // OOB parts count too (zero-filled)
      for (int unit = blockIdx.x; unit < p.num_units; unit += gridDim.x) {
        const int tile = unit / p.splits, split = unit % p.splits;
        int m_blk, n_blk;
        tile_coords(p, tile, m_blk, n_blk);
        const int m0 = m_blk * Cfg::kBlockM, n0 = n_blk * Cfg::kBlockN;
        const int s0 = n0 / kScaleBlockN;  // b-scale blocks of the tile's columns
        const int s1 = min(s0 + 1, p.num_n_scales - 1);
        const int kb_end = (split + 1) * num_k_blocks / p.splits;
        for (int kb = split * num_k_blocks / p.splits; kb < kb_end; ++kb) {
          empty[stage].wait(phase ^ 1);
          full[stage].arrive_and_expect_tx(kStageBytes);
          uint64_t* bar = reinterpret_cast<uint64_t*>(&full[stage]);
          uint8_t* scales = smem + Cfg::kOffScales + stage * Cfg::kSmemScales;
          cute::SM90_TMA_LOAD_2D::copy(&tmap_a, bar, 0, smem + stage * Cfg::kSmemA,
                                       kb * kBlockK, m0);
          cute::SM90_TMA_LOAD_2D::copy(&tmap_b, bar, 0, smem + Cfg::kOffB + stage * Cfg::kSmemB,
                                       kb * kBlockK, n0);
          cute::SM90_TMA_LOAD_2D::copy(&tmap_sfa, bar, 0, scales, m0, kb);
          const float* b_scale_row = p.b_scale + static_cast<int64_t>(kb) * p.num_n_scales;
          float* sfb = reinterpret_cast<float*>(scales) + Cfg::kBlockM;
          cp_async_4(sfb, b_scale_row + s0);
          cp_async_4(sfb + 1, b_scale_row + s1);
          cp_async_arrive(bar);
          stage = stage + 1 == Cfg::kStages ? 0 : stage + 1;
          phase ^= stage == 0;
        }
      }
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<232>();
    const int math_wg = wg - 1;
    for (int unit = blockIdx.x; unit < p.num_units; unit += gridDim.x) {
      const int tile = unit / p.splits, split = unit % p.splits;
      int m_blk, n_blk;
      tile_coords(p, tile, m_blk, n_blk);
      const int scale_split = kScaleBlockN - (n_blk * Cfg::kBlockN) % kScaleBlockN;
      math_unit_dispatch<Cfg, kScaleBlockN>(scale_split, p, smem, tile, split, m_blk, n_blk,
                                            math_wg, stage, phase, &tmap_d);
    }
    // The smem being stored must outlive the stores.
    if (threadIdx.x % 128 == 0) cute::tma_store_wait<0>();
  }
#endif
}

}  // namespace fp8gemm::sm90_own
