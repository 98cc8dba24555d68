// Our own H100 (sm_90a) FP8 kernel, first for the tiles CUTLASS 4.2's blockwise mainloop cannot
// build: 128 x BLOCK_N with BLOCK_N not a multiple of 128 (gemm_sm90.cu's table uses 64, 96, 112,
// 160 and 192), 128 x 256 in two 128-column waves (kWaveN below), and 64 x 16 to 64 x 128 with
// one math warpgroup; since run 21 of the tuning log also for CUTLASS's own tile,
// 128 x 128, where ours was faster.
// Same layouts and result as the CUTLASS configurations (gemm_sm90_kernel.cuh):
//   a        (M, K) row-major e4m3
//   bt       (N, K) row-major e4m3 (b column-major)
//   a_scale  (K/128, a_scale_ld) fp32, M contiguous: one scale per row and 128-wide K block
//   b_scale  (K/128, ceil(N/128)) fp32: one scale per 128 x 128 block of b (the last one part
//            full where N % 128 != 0)
//   out      (M, N) row-major bf16
// out[m][n] = sum_kb a_scale[kb][m] * b_scale[kb][n/128] * sum_{k in kb} a[m][k] * bt[n][k]
//
// Why a kernel of our own: a 128 x 192 tile does 1.5x the math of a 128 x 128 one per byte of A it
// loads, and leaves fewer idle SMs in the last wave at the shapes DeepGEMM wins with it. CUTLASS's
// scale copies partition only N tiles that are multiples of 128, and it keeps two full fp32
// accumulators. Here each math warpgroup keeps one accumulator plus a 64 x kWaveN temporary that
// wgmma fills for a single 128-deep K block; the temporary is then added into the accumulator
// ("promotion") with the b scale of each column's own 128-column block, so a tile may straddle
// two b-scale blocks.
//
// Structure: persistent, warp-specialised, 384 threads (256 for 64-row tiles). Warpgroup 0 is the
// producer: one thread fills a ring of shared-memory stages with TMA loads of A, Bt and a_scale,
// and a second warp writes each k block's two b scales into the same stages. Warpgroups 1 and 2
// (1 alone for 64-row tiles) do the math, 64 rows each; each stores its bf16 rows through a
// swizzled shared-memory buffer with TMA stores (which clip rows >= M and columns >= N) that
// drain while its next tile's mainloop runs. One CTA per SM, or two (kCtasPerSm) for some tiles
// at short K.
//
// Swapped tiles (kSwapAB; gemm_sm90_own_swap.cu): the kernel computes out's transpose, with bt as
// its row operand and a as its column operand, for M not a multiple of 128. A tile's 128 rows are
// then 128 columns of out (one b-scale block: one b scale per k block, no split), its BN columns
// BN rows of out, each with its own a scale: the producer's TMA loads a_scale for the tile's
// columns, and the promotion reads each thread's column scales from the stage (so the stage is
// released after the promotion, not before). The epilogue writes the accumulator transposed
// (stmatrix .trans) into a buffer in out's own layout, BN rows of the warpgroup's 64 columns, and
// stores it with one TMA store, which clips rows >= M. The last column block leaves at most 15 of
// its BN columns empty, where a 128-row tile's last row block leaves up to 127 rows empty.
// Run numbers (run 15b, 25a-25c) cite the gemm tuning log: git show c631808:benchmarks/RESULTS.md
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include <cuda.h>  // CUtensorMap (types only: the driver's encoder is fetched at run time)
#include <cuda_bf16.h>

#include "cute/arch/cluster_sm90.hpp"
#include "cute/arch/copy_sm90_tma.hpp"
#include "cute/arch/mma_sm90.hpp"
#include "cute/arch/mma_sm90_desc.hpp"
#include "cute/arch/mma_sm90_gmma.hpp"
#include "cute/arch/mma_sm90_gmma_ext.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/arch/reg_reconfig.h"

// FP8GEMM_OWN_STAMP(phase): nothing, unless a timing harness defines it before including this
// header (benchmarks/phase_stamps.cu records %globaltimer per CTA and call). Each call site names
// one thread. The phases, in the order a CTA passes them: 0 entry and 1 past griddepcontrol.wait
// (thread 0), 2 the producer's last load issued; then thread 128, the first math warpgroup's:
// 3 its first stage's data in (pipelined tiles only), 4 its mainloop done, 5 its last stores
// issued, 6 their reads of shared memory done (exit). With more than one tile per CTA, 3-5 are
// the last tile's.
#ifndef FP8GEMM_OWN_STAMP
#define FP8GEMM_OWN_STAMP(phase) ((void)0)
#endif

namespace fp8gemm::sm90_own {

constexpr int kBlockK = 128;           // one a/b scale per 128 K; also 128 bytes = one swizzle row
constexpr int kScaleBlockN = 128;      // b scales cover 128 columns
constexpr int kSmemCapacity = 232448;  // H100 opt-in dynamic shared memory per block
constexpr int kSmemPerSm = 233472;     // H100 shared memory per SM
// The TMA loads' L2 cache policy (.L2::cache_hint): createpolicy's encoding of evict_normal, the
// value of CuTe's TMA::CacheHintSm90::EVICT_NORMAL. Through run 13 the kernel passed 0, which
// encodes no documented policy; tuning log run 14 timed 0, evict_normal, and evict_last for B,
// within the noise of one another.
constexpr uint64_t kEvictNormal = 0x1000000000000000ull;
constexpr int kGroupM = 8;             // tiles are walked in groups of 8 row blocks (L2 reuse)

// The wgmma atom 64 x N x 32 (e4m3 x e4m3 -> f32, both operands K-major in shared memory), as
// CuTe's selector names it for an N-wide wave (MMA_64xNx32_F32E4M3E4M3_SS_TN). N = 48, 80, 112,
// 144, 160 and 176 are among the shapes CuTe keeps apart, in mma_sm90_gmma_ext.hpp, which its
// selector offers only under CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED: named here instead.
template <int N>
struct WgmmaAtom {
  using type = decltype(cute::SM90::GMMA::ss_op_selector<
                        cute::float_e4m3_t, cute::float_e4m3_t, float,
                        cute::Shape<cute::_64, cute::Int<N>, cute::_32>>());
};
#define FP8GEMM_OWN_EXT_ATOM(N)                                  \
  template <>                                                    \
  struct WgmmaAtom<N> {                                          \
    using type = cute::SM90::GMMA::MMA_64x##N##x32_F32E4M3E4M3_SS_TN<>; \
  };
FP8GEMM_OWN_EXT_ATOM(48)
FP8GEMM_OWN_EXT_ATOM(80)
FP8GEMM_OWN_EXT_ATOM(112)
FP8GEMM_OWN_EXT_ATOM(144)
FP8GEMM_OWN_EXT_ATOM(160)
FP8GEMM_OWN_EXT_ATOM(176)
#undef FP8GEMM_OWN_EXT_ATOM
template <int N>
using WgmmaOp = typename WgmmaAtom<N>::type;

// kDBufs: output staging buffers per math warpgroup. With two, a tile's bf16 rows go into one
// while the TMA still reads the previous tile's from the other, for short K, where a tile's
// mainloop is too short to hide its stores; it costs a pipeline stage of shared memory. Since the
// epilogue writes with stmatrix (tuning log run 14), one buffer is as fast or faster at every
// shape measured, and the table no longer takes two.
// kTurns: the k-block loops unrolled by turns of the ring (for_each_k_block), for long K.
// kWaveN: the tile's columns are computed kWaveN at a time (BN / kWaveN "waves" per k block, one
// wgmma result in registers at a time, each promoted into its part of the accumulator). A
// 128 x 256 tile in one wgmma would need 128 accumulator values and a 128-value result per
// thread, more than the math warpgroups' 232 registers hold beside the rest; in two waves of 128
// it needs 128 and 64, as many as a 128 x 192 tile (96 and 96).
// BM: the tile's rows, 64 per math warpgroup. 64-row tiles (one math warpgroup, 256 threads) are
// for small M at long K (gemm_sm90.cu's few-tiles rule), where 128-row ones would be too few to
// occupy the SMs, or part empty: DeepGEMM's choice there too, with its heuristic's note that
// smaller row blocks avoid the cost of the TMA's out-of-bounds rows.
// kMaxStages: the ring's stages if that many fit. 8 for the 128-row tiles (as measured through
// run 15); 16 for the 64-row ones, whose stages are 10-25 KB: the ring DeepGEMM gives its small
// tiles (against 8: the same within 2 % but at 16 x 7168 x 2048 and 32 x 7168 x 7168, 11 % and
// 20 % ahead; tuning log run 17a).
// kPipe: two wgmma results in flight (math_tile): a k block's promotion overlaps the next k
// block's wgmma, where otherwise each result is waited for and promoted before the next wgmma
// starts. For one wave per k block and loops not unrolled by turns. The 64-row tiles take it,
// 1-40 % faster at 16 shapes, ahead of DeepGEMM's 64-row kernels at most small-M shapes now, and
// 128 x 64, 2 % behind to 15 % ahead (tuning log run 17b). 128 x 96 is built both ways: pipelined
// it is -1 % to +15 % in up to three waves, but up to 12 % behind the loops unrolled by turns in
// more, where their throughput counts (17g, 17i; the table takes each where it is ahead).
// kCtasPerSm: CTAs resident per SM (the grid holds that many per SM), each with an equal share of
// its shared memory and registers. 2 for 64 x 64, 64 x 96 and 128 x 64 tiles at short K and few
// tiles (own_64x64_x2, own_64x96_x2, own_128x64_x2): likely, one CTA's epilogue and next tile's
// start overlap the other's mainloop.
// kStoreBoxes_: the output staging buffer's size in TMA store boxes (64 x kStoreCols), 0 for the
// whole tile. A smaller buffer takes a tile's columns a part at a time, each part's stores read
// out of it before the next part goes in, and leaves its shared memory to the ring: one box gives
// 128 x 128 tiles a sixth stage (own_128x128_pipe). Where a CTA runs many tiles, the wait between
// parts delays its next tile: 128 x 192 and 128 x 256 lost 5-10 % with one box (tuning log run
// 23), though it gave them a stage too.
// kSwapAB_: the tile's rows are columns of the output and its columns rows (swapped tiles, at the
// top of this file).
template <int BN, int kDBufs_, bool kTurns_, int kWaveN_ = BN, int BM = 128, int kMaxStages = 8,
          bool kPipe_ = false, int kCtasPerSm_ = 1, int kStoreBoxes_ = 0, bool kSwapAB_ = false>
struct TileConfig {
  static constexpr bool kSwapAB = kSwapAB_;
  static constexpr bool kPipe = kPipe_;
  static constexpr int kCtasPerSm = kCtasPerSm_;
  // Shared memory one CTA may use: the opt-in maximum alone on its SM, else an equal share of the
  // SM's 228 KB less the 1 KB the hardware reserves per CTA.
  static constexpr int kSmemLimit =
      kCtasPerSm_ == 1 ? kSmemCapacity : kSmemPerSm / kCtasPerSm_ - 1024;
  static constexpr int kBlockM = BM;
  static constexpr int kMathWgs = BM / 64;
  static constexpr int kThreads = 128 * (1 + kMathWgs);  // producer warpgroup + math warpgroups
  // Registers per thread at launch (the compiler's count for kThreads x kCtasPerSm threads per
  // SM), and what the math warpgroups take through setmaxnreg once the producer keeps 40 of them.
  static constexpr int kLaunchRegs = 65536 / (kThreads * kCtasPerSm_) / 8 * 8;
  static constexpr int kMathRegs = (kLaunchRegs * kThreads - 40 * 128) / (128 * kMathWgs) / 8 * 8;
  static constexpr int kBlockN = BN;
  static constexpr int kDBufs = kDBufs_;
  static constexpr bool kTurns = kTurns_;
  static constexpr int kWaveN = kWaveN_;
  static constexpr int kWaves = BN / kWaveN;
  static constexpr int kAccum = kWaveN / 2;  // fp32 values per thread of a 64 x kWaveN result
  // Output store: TMA boxes of 64 rows x kStoreCols columns, swizzled to the box's row width;
  // swapped, one box of BN output rows x the warpgroup's 64 output columns.
  static constexpr int kStoreCols = kSwapAB_ || BN % 64 == 0 ? 64 : (BN % 32 == 0 ? 32 : 16);
  static constexpr int kStoreSwizzleBytes = kStoreCols * 2;

  static constexpr int kSmemA = kBlockM * kBlockK;
  static constexpr int kSmemB = BN * kBlockK;
  // Per stage: the k block's a_scale of the tile's rows (of its columns, swapped) by TMA, then
  // its two b scales.
  static constexpr int kScaleSlots = kSwapAB_ ? BN : kBlockM;
  static constexpr int kSmemScales = (kScaleSlots * 4 + 8 + 127) / 128 * 128;
  static constexpr int kStoreBoxes =
      kSwapAB_ ? 1 : (kStoreBoxes_ == 0 ? BN / kStoreCols : kStoreBoxes_);
  static constexpr int kSmemDPerWg = kSwapAB_ ? BN * 128 : 64 * kStoreCols * kStoreBoxes * 2;
  static constexpr int kSmemPerStage = kSmemA + kSmemB + kSmemScales + 16;  // + 2 mbarriers
  static constexpr int kStagesFit =
      (kSmemLimit - kMathWgs * kDBufs * kSmemDPerWg) / kSmemPerStage;
  static constexpr int kStages = kStagesFit > kMaxStages ? kMaxStages : kStagesFit;
  // Shared memory: [A stages][B stages][D: wg0's buffers, wg1's][scale stages][full bars]
  // [empty bars]
  static constexpr int kOffB = kStages * kSmemA;
  static constexpr int kOffD = kOffB + kStages * kSmemB;
  static constexpr int kOffScales = kOffD + kMathWgs * kDBufs * kSmemDPerWg;
  static constexpr int kOffBar = kOffScales + kStages * kSmemScales;
  static constexpr int kSmemBytes = kOffBar + 2 * kStages * 8;

  static_assert(kWaveN % 16 == 0 && kWaveN <= 256 && BN % kWaveN == 0, "wgmma N");
  static_assert(kDBufs == 1 || kDBufs == 2, "one or two output buffers");
  static_assert(kSwapAB_ || BN % (kStoreCols * kStoreBoxes) == 0 &&
                    (kDBufs == 1 || kStoreBoxes * kStoreCols == BN),
                "a staging buffer holds whole boxes, and a tile's parts go through one buffer");
  static_assert(BM == 64 || BM == 128, "one or two math warpgroups");
  static_assert(!kPipe_ || (!kTurns_ && kWaveN_ == BN), "pipelined k blocks: one wave, no turns");
  static_assert(kStages >= 3, "too few pipeline stages fit in shared memory");
  static_assert((kMathWgs == 1 && kCtasPerSm_ == 1) || kMathRegs <= 256, "setmaxnreg: 24 to 256");
  static_assert(kSmemA % 1024 == 0 && kSmemB % 1024 == 0 && kSmemDPerWg % 1024 == 0,
                "128-byte swizzled tiles must stay 1024-byte aligned");
  static_assert(!kSwapAB_ || (kWaveN_ == BN && kDBufs_ == 1 && kStoreBoxes_ == 0 && BN <= 256),
                "swapped tiles: one wave, one whole-tile store buffer, a TMA box of BN rows");
};

struct Params {
  int m, n, k;
  const float* b_scale;  // (K/128, ceil(N/128))
  int num_n_scales;      // ceil(N/128)
  int num_m_blocks, num_n_blocks, num_tiles;
  int last_row0;  // the first row of the last row block's tile (tile_row0)
  int last_col0;  // the first column of the last column block's tile (tile_col0)
  // What a stage's TMA loads of A, Bt and a_scale bring (out-of-bounds parts count too): less
  // than the stage holds where the launch trims A's boxes to M rows (M below one row block).
  uint32_t stage_bytes;
};

// ---------------------------------------------------------------------------------------------
// Small device helpers.

// Named barrier 1 + wg: the 128 threads of math warpgroup wg (barrier 0 is __syncthreads').
__device__ __forceinline__ void warpgroup_barrier(int wg) {
  asm volatile("bar.sync %0, 128;" ::"r"(1 + wg) : "memory");
}

// mbarrier wait and arrive on a shared-memory address the caller computed once (CUTLASS's take
// a pointer, which the compiler turns into an address again in every k block).
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t phase) {
  asm volatile(
      "{\n\t"
      ".reg .pred P1;\n\t"
      "WAIT_%=:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1, %2;\n\t"
      "@!P1 bra WAIT_%=;\n\t"
      "}" ::"r"(bar),
      "r"(phase), "r"(0x989680u)
      : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// The next stage of the ring, and its phase bit, which flips each time the ring wraps.
template <int kStages>
__device__ __forceinline__ void advance(int& stage, uint32_t& phase) {
  stage = stage + 1 == kStages ? 0 : stage + 1;
  phase ^= stage == 0;
}

// Runs body(stage, phase, kb) for the next num k blocks of the ring, starting at (stage, phase),
// and leaves both where the next tile starts. kTurns: whole turns of the ring (from stage 0) are
// unrolled, so that the stage is a compile-time constant in them and its barrier, tile and scale
// addresses fold into immediates; only the k blocks before the ring's next stage 0 and after the
// last whole turn run with the stage at run time. At K = 2048 to 7168 that is 3-8 % where the
// table takes these tiles, about what DeepGEMM's JIT gets from compiling K in; at K = 256 to 512,
// where a tile is a few k blocks, it costs 3-15 %, and for 96-wide tiles it lost up to K = 1536
// even where the unrolled code did not run (a larger kernel): hence configurations of both kinds,
// the table's choice from K = 2048 (tuning log run 14).
template <int kStages, bool kTurns, class Body>
__device__ __forceinline__ void for_each_k_block(int num, int& stage, uint32_t& phase,
                                                 Body&& body) {
  int kb = 0;
  if constexpr (kTurns) {
    for (; kb < num && stage != 0; ++kb) {
      body(stage, phase, kb);
      advance<kStages>(stage, phase);
    }
    for (; kb + kStages <= num; kb += kStages) {
#pragma unroll
      for (int s = 0; s < kStages; ++s) body(s, phase, kb + s);
      phase ^= 1;
    }
  }
  for (; kb < num; ++kb) {
    body(stage, phase, kb);
    advance<kStages>(stage, phase);
  }
}

// wgmma shared-memory descriptor of a K-major tile stored with the 128-byte swizzle (8 rows x 128
// bytes per 1024-byte atom, atoms stacked along M/N).
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

// Tile index -> (m block, n block): groups of kGroupM row blocks, column by column inside a
// group, so that the ~132 tiles in flight share A rows and Bt rows in L2. Host-callable for
// benchmarks/phase_stamps.cu, which groups its per-CTA times by row block.
__host__ __device__ __forceinline__ void tile_coords(const Params& p, int tile, int& m_blk,
                                                     int& n_blk) {
  const int per_group = kGroupM * p.num_n_blocks;
  const int first = tile / per_group * kGroupM;
  const int in_group = tile % per_group;
  const int height = p.num_m_blocks - first < kGroupM ? p.num_m_blocks - first : kGroupM;
  m_blk = first + in_group % height;
  n_blk = in_group / height;
}

// The first of the rows a tile loads, computes and stores: its row block's, except in the last
// row block where the launch moved the tile back to end at row M (Sm90Order::shift, where that
// block is less than half full, for 64-row tiles wherever it is part full; the launch's
// last_row0). Its rows then overlap the block before's, whose tile computes the same values for
// them bit for bit (an output element's sum does not depend on where its row sits in the tile),
// and both store them. Why: TMA loads of A boxes mostly past M (rows the TMA fills with zeros)
// slowed every CTA of the call, not only those loading them: 36.1 against 26.4 us per call at
// 388 x 3712 x 8192 (tuning log 28).
template <class Cfg>
__device__ __forceinline__ int tile_row0(const Params& p, int m_blk) {
  return m_blk == p.num_m_blocks - 1 ? p.last_row0 : m_blk * Cfg::kBlockM;
}

// The first of the columns a tile loads, computes and stores: its column block's, except in a
// last column block that runs past N, where the launch moved the tile back to end at column N
// (Sm90Order::shift; the launch's last_col0), as tile_row0 does for rows. Measured (tuning log
// 29g): 901 against 791 TFLOP/s for our 128 x 96 at 2176 x 640 x 5632 (seven tiles across N, the
// last two-thirds full), 746 against 641 at 2816 x 512 x 3072; within 1 % where N holds many
// tiles (600 x 20992 x 7680, 128 x 160). The launch moves it only where its first column is then
// a multiple of gcd(BN, 128), like every other tile's: its b-scale split is one the math
// warpgroups' dispatch has.
template <class Cfg>
__device__ __forceinline__ int tile_col0(const Params& p, int n_blk) {
  return n_blk == p.num_n_blocks - 1 ? p.last_col0 : n_blk * Cfg::kBlockN;
}

// Four 8 x 8 bf16 matrices into shared memory at addr (this lane's row address): v[0..7] are a
// thread's values of two 8-column chunks of a wgmma result (rows row0 and row0 + 8 of each),
// rounded to bf16; kTrans stores each matrix transposed.
template <bool kTrans>
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const float* v) {
  uint32_t packed[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const __nv_bfloat162 two = __floats2bfloat162_rn(v[2 * q], v[2 * q + 1]);
    packed[q] = *reinterpret_cast<const uint32_t*>(&two);
  }
  if constexpr (kTrans)
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};"
                 :
                 : "r"(addr), "r"(packed[0]), "r"(packed[1]), "r"(packed[2]), "r"(packed[3])
                 : "memory");
  else
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
                 :
                 : "r"(addr), "r"(packed[0]), "r"(packed[1]), "r"(packed[2]), "r"(packed[3])
                 : "memory");
}

// The epilogue of a swapped tile: the accumulator's rows are 64 output columns (this warpgroup's
// of the tile's 64 or 128), its columns BN output rows. stmatrix .trans writes each 8 x 8 matrix
// of the result transposed, so that the buffer holds the output's own layout: BN rows of 64 bf16
// columns (128 bytes, swizzled as the TMA expects), one TMA store. A thread's values
// 4*j .. 4*j + 7 are matrices q = 0..3 (chunk j + q / 2, the warp's rows 8 * (q % 2) on); lane l
// names the row l % 8 of matrix l / 8 as stored: output row (j + l / 16) * 8 + l % 8, from output
// column warp * 16 + 8 * (l / 8 % 2) on.
template <class Cfg>
__device__ __forceinline__ void store_swapped(const float* acc, uint8_t* smem, int m_blk,
                                              int n_blk, int wg, const CUtensorMap* tmap_d) {
  constexpr int kAcc = Cfg::kAccum;
  static_assert(kAcc % 8 == 0, "chunks go to stmatrix in pairs");
  const int tid = threadIdx.x % 128;
  const int warp = tid / 32, lane = tid % 32;
  uint8_t* d_smem = smem + Cfg::kOffD + wg * Cfg::kSmemDPerWg;
  const uint32_t d_addr = cute::cast_smem_ptr_to_uint(d_smem);
  // The buffer is free once the previous tile's store has read it.
  if (tid == 0) cute::tma_store_wait<0>();
  warpgroup_barrier(wg);
  const int chunk16 = warp * 2 + lane / 8 % 2;  // the 16-byte chunk of a row this lane names
#pragma unroll
  for (int j = 0; j < kAcc / 4; j += 2) {
    const int row = (j + lane / 16) * 8 + lane % 8;
    stmatrix_x4<true>(d_addr + row * 128 + ((chunk16 ^ (row % 8)) << 4), acc + 4 * j);
  }
  cute::tma_store_fence();  // make the generic-proxy writes visible to the TMA (async proxy)
  warpgroup_barrier(wg);
  if (tid == 0) {
    cute::SM90_TMA_STORE_2D::copy(tmap_d, d_smem, m_blk * Cfg::kBlockM + wg * 64,
                                  n_blk * Cfg::kBlockN);
    cute::tma_store_arrive();
  }
}

// ---------------------------------------------------------------------------------------------
// One math warpgroup's work on one tile. kSplit: the tile's first kSplit columns take the k
// block's first b scale, the rest its second (kSplit >= BN: one scale block). It is a template
// argument so that choosing a column's scale in the promotion costs nothing.
template <class Cfg, int kSplit>
__device__ __forceinline__ void math_tile(const Params& p, uint8_t* smem, int m_blk, int n_blk,
                                          int wg, int& stage, uint32_t& phase, int d_buf,
                                          const CUtensorMap* tmap_d) {
  using Op = WgmmaOp<Cfg::kWaveN>;
  constexpr int BN = Cfg::kBlockN;
  constexpr int kAcc = Cfg::kAccum;
  constexpr int kWaves = Cfg::kWaves;
  const int tid = threadIdx.x % 128;
  const int warp = tid / 32, lane = tid % 32;
  const int row0 = warp * 16 + lane / 4;  // this thread's rows of the 64-row atom: row0, row0 + 8

  // Shared-memory addresses of stage 0's full barrier (empty barriers follow the full ones) and
  // its scales, read through a shuffle for the reason given below.
  const uint32_t full0 =
      __shfl_sync(0xffffffffu, cute::cast_smem_ptr_to_uint(smem + Cfg::kOffBar), 0);
  const uint32_t scales0 =
      __shfl_sync(0xffffffffu, cute::cast_smem_ptr_to_uint(smem + Cfg::kOffScales), 0);
  const int num_k_blocks = p.k / kBlockK;

  float acc[kWaves * kAcc];  // wave w's values at w * kAcc
#pragma unroll
  for (int i = 0; i < kWaves * kAcc; ++i) acc[i] = 0.f;

  // wgmma descriptors: only the low word (the start address, in 16-byte units) changes between
  // stages and K steps, so it is one integer add from stage 0's. Read through a shuffle, stage 0's
  // is computed once: otherwise the compiler rebuilds it from the shared-memory base in every k
  // block.
  const uint64_t desc_a0 = make_sw128_desc(smem + wg * 64 * kBlockK);
  const uint64_t desc_b0 = make_sw128_desc(smem + Cfg::kOffB);
  const uint32_t desc_a0_lo = __shfl_sync(0xffffffffu, static_cast<uint32_t>(desc_a0), 0);
  const uint32_t desc_b0_lo = __shfl_sync(0xffffffffu, static_cast<uint32_t>(desc_b0), 0);
  const uint64_t desc_a_hi = desc_a0 & ~uint64_t{0xffffffffu};
  const uint64_t desc_b_hi = desc_b0 & ~uint64_t{0xffffffffu};

  // The parts of a k block, shared by the two loops below. Each reads all this warpgroup needs
  // from a stage before the stage is released: sc = {sa0, sa1, sb_lo, sb_hi}. Swapped, the
  // a scales are the columns', many per thread: promote reads them from the stage, which is
  // released after it.
  auto load_scales = [&](int stage, float (&sc)[4]) {
    const uint32_t scales = scales0 + stage * Cfg::kSmemScales;
    if constexpr (!Cfg::kSwapAB) {
      asm volatile("ld.shared.f32 %0, [%1];"
                   : "=f"(sc[0])
                   : "r"(scales + 4 * (wg * 64 + row0))
                   : "memory");
      asm volatile("ld.shared.f32 %0, [%1];"
                   : "=f"(sc[1])
                   : "r"(scales + 4 * (wg * 64 + row0 + 8))
                   : "memory");
    }
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];"
                 : "=f"(sc[2]), "=f"(sc[3])
                 : "r"(scales + 4 * Cfg::kScaleSlots)
                 : "memory");
  };
  // Wave w's wgmma of the stage into t, committed as one group (not waited for).
  auto issue = [&](int stage, int w, float* t) {
    const uint32_t desc_a_lo = desc_a0_lo + stage * (Cfg::kSmemA >> 4);
    const uint32_t desc_b_lo = desc_b0_lo + stage * (Cfg::kSmemB >> 4);
#pragma unroll
    for (int i = 0; i < kAcc; ++i) cute::warpgroup_fence_operand(t[i]);
    cute::warpgroup_arrive();
#pragma unroll
    for (int kk = 0; kk < kBlockK / 32; ++kk) {
      // K step of 32 e4m3 = 32 bytes = 2 units of the descriptor's 16-byte address field; wave
      // w's rows of the B tile start w * kWaveN rows (of 128 bytes) in.
      wgmma_call<Op>(desc_a_hi | (desc_a_lo + 2 * kk),
                     desc_b_hi | (desc_b_lo + w * (Cfg::kWaveN * kBlockK >> 4) + 2 * kk), t,
                     kk == 0 ? cute::SM90::GMMA::ScaleOut::Zero : cute::SM90::GMMA::ScaleOut::One,
                     std::make_index_sequence<kAcc>{});
    }
    cute::warpgroup_commit_batch();
  };
  // The stage's operands are consumed once its last wgmma is done: release it to the producer.
  // Every thread arrives for its own reads (one lane per warp would do by the memory model after
  // a __syncwarp, but compute-sanitizer's racecheck then reports the other lanes' reads as racing
  // the producer's next writes: benchmarks/racecheck_repro.cu).
  auto release = [&](int stage) { mbarrier_arrive(full0 + (Cfg::kStages + stage) * 8); };
  // Promotion of wave w's finished result t into the accumulator. wgmma m64nNk32's result
  // layout: value 4*j + {0,1} is (row0, 8*j + 2*(lane%4) + {0,1}), value 4*j + {2,3} is row0 + 8;
  // so an 8-column chunk j lies wholly on one side of the b-scale boundary kSplit (a multiple of
  // 16). The fence first: the reads of t stay after the wgmma wait that precedes the call.
  // Swapped: one b scale (the tile's rows are 128 or 64 columns of b, in one scale block) and a
  // scale per column, this thread's two of each chunk read as a pair from the stage.
  auto promote = [&](int w, const float (&sc)[4], float* t, int stage) {
#pragma unroll
    for (int i = 0; i < kAcc; ++i) cute::warpgroup_fence_operand(t[i]);
    if constexpr (Cfg::kSwapAB) {
      const uint32_t cols =
          scales0 + stage * Cfg::kSmemScales + 4 * (w * Cfg::kWaveN + 2 * (lane % 4));
#pragma unroll
      for (int j = 0; j < kAcc / 4; ++j) {
        float c0, c1;
        asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];"
                     : "=f"(c0), "=f"(c1)
                     : "r"(cols + 32 * j)
                     : "memory");
        const float s0 = sc[2] * c0, s1 = sc[2] * c1;
        float* out = acc + w * kAcc + 4 * j;
        out[0] += s0 * t[4 * j + 0];
        out[1] += s1 * t[4 * j + 1];
        out[2] += s0 * t[4 * j + 2];
        out[3] += s1 * t[4 * j + 3];
      }
      return;
    }
    const float s00 = sc[0] * sc[2], s10 = sc[1] * sc[2];
    const float s01 = sc[0] * sc[3], s11 = sc[1] * sc[3];
#pragma unroll
    for (int j = 0; j < kAcc / 4; ++j) {
      const bool lo = w * Cfg::kWaveN + j * 8 < kSplit;
      float* out = acc + w * kAcc + 4 * j;
      out[0] += (lo ? s00 : s01) * t[4 * j + 0];
      out[1] += (lo ? s00 : s01) * t[4 * j + 1];
      out[2] += (lo ? s10 : s11) * t[4 * j + 2];
      out[3] += (lo ? s10 : s11) * t[4 * j + 3];
    }
  };

  if constexpr (Cfg::kPipe) {
    // Two results in flight: k block kb + 1's wgmma runs while kb's result is promoted, so a k
    // block costs the longer of the two, not their sum (one math warpgroup has nothing else to
    // overlap them with). Buffer b's stage and scales travel with it. The loop starts and ends
    // with buffer 0 in flight and the tail drains both: with the pending groups the same on every
    // path, ptxas can tell that no promotion reads a result still being written (otherwise it
    // serializes every wgmma: its note C7514, tests/test_gemm_project.py).
    float t[2][kAcc];
    float sc[2][4];
    int st[2];
    auto start = [&](auto buffer) {  // a std::integral_constant
      constexpr int b = decltype(buffer)::value;
      mbarrier_wait(full0 + stage * 8, phase);
      load_scales(stage, sc[b]);
      issue(stage, 0, t[b]);
      st[b] = stage;
      advance<Cfg::kStages>(stage, phase);
    };
    auto finish = [&](auto buffer) {
      constexpr int b = decltype(buffer)::value;
      if constexpr (!Cfg::kSwapAB) release(st[b]);
      promote(0, sc[b], t[b], st[b]);
      if constexpr (Cfg::kSwapAB) release(st[b]);
    };
    constexpr std::integral_constant<int, 0> b0{};
    constexpr std::integral_constant<int, 1> b1{};
    start(b0);
    if (threadIdx.x == 128) FP8GEMM_OWN_STAMP(3);
    int kb = 0;
    for (; kb + 2 < num_k_blocks; kb += 2) {
      start(b1);
      cute::warpgroup_wait<1>();
      finish(b0);
      start(b0);
      cute::warpgroup_wait<1>();
      finish(b1);
    }
    if (kb + 1 < num_k_blocks) {
      start(b1);
      cute::warpgroup_wait<1>();
      finish(b0);
      cute::warpgroup_wait<0>();
      finish(b1);
    } else {
      cute::warpgroup_wait<0>();
      finish(b0);
    }
  } else {
    // One k block at the ring position for_each_k_block passes in (a compile-time constant stage
    // inside whole turns); it shadows the running stage and phase on purpose. Each wave's result
    // is waited for and promoted before the next wgmma starts.
    float tmp[kAcc];
    auto k_block = [&](int stage, uint32_t phase, int) {
      mbarrier_wait(full0 + stage * 8, phase);
      float sc[4];
      load_scales(stage, sc);
#pragma unroll
      for (int w = 0; w < kWaves; ++w) {
        issue(stage, w, tmp);
        cute::warpgroup_wait<0>();
        if (!Cfg::kSwapAB && w == kWaves - 1) release(stage);
        promote(w, sc, tmp, stage);
        if (Cfg::kSwapAB && w == kWaves - 1) release(stage);
      }
    };
    for_each_k_block<Cfg::kStages, Cfg::kTurns>(num_k_blocks, stage, phase, k_block);
  }

  if (threadIdx.x == 128) FP8GEMM_OWN_STAMP(4);
  // Epilogue: bf16 into this warpgroup's swizzled buffer d_buf, then TMA stores. The buffer is
  // free once the stores that last read it (kDBufs tiles ago, or this tile's previous part) are
  // done. stmatrix writes four 8 x 8 bf16 matrices per instruction: a thread's values
  // 4*j .. 4*j + 7 are exactly its parts of the warp's rows 0-7 and 8-15 in column chunks j and
  // j + 1 (8 columns = 16 bytes each), and lane l names the row l % 16 of chunk j + l / 16. Each
  // 16-byte chunk of a row is XORed with the row's position in its swizzle atom, as the TMA
  // expects, so the 8 rows of one matrix land in 8 different bank groups.
  if constexpr (Cfg::kSwapAB) {
    store_swapped<Cfg>(acc, smem, m_blk, n_blk, wg, tmap_d);
    if (threadIdx.x == 128) FP8GEMM_OWN_STAMP(5);
    return;
  }
  constexpr int kCols = Cfg::kStoreCols;
  constexpr int kSwizzleMask = Cfg::kStoreSwizzleBytes / 16 - 1;
  constexpr int kBoxBytes = 64 * kCols * 2;
  static_assert(kAcc % 8 == 0, "chunks go to stmatrix in pairs");
  uint8_t* d_smem = smem + Cfg::kOffD + (wg * Cfg::kDBufs + d_buf) * Cfg::kSmemDPerWg;
  const uint32_t d_addr = cute::cast_smem_ptr_to_uint(d_smem);
  const int st_row = warp * 16 + lane % 16;
  // A buffer of kStoreBoxes boxes takes the tile's columns kGroups parts at a time; a thread's
  // chunk j holds columns 8 j .. 8 j + 7 of the tile (waves follow one another).
  constexpr int kGroupCols = kCols * Cfg::kStoreBoxes;
  constexpr int kGroups = BN / kGroupCols;
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    if (tid == 0) {
      if (g == 0)
        cute::tma_store_wait<Cfg::kDBufs - 1>();
      else
        cute::tma_store_wait<0>();
    }
    warpgroup_barrier(wg);
#pragma unroll
    for (int j = g * kGroupCols / 8; j < (g + 1) * kGroupCols / 8; j += 2) {
      const int col = (j + lane / 16) * 8 - g * kGroupCols;  // in this part
      uint32_t off = (col / kCols) * kBoxBytes + st_row * (kCols * 2) + (col % kCols) * 2;
      off ^= ((off >> 7) & kSwizzleMask) << 4;
      stmatrix_x4<false>(d_addr + off, acc + 4 * j);
    }
    cute::tma_store_fence();  // make the generic-proxy writes visible to the TMA (async proxy)
    warpgroup_barrier(wg);
    if (tid == 0) {
      const int m0 = tile_row0<Cfg>(p, m_blk) + wg * 64;
      const int n0 = tile_col0<Cfg>(p, n_blk) + g * kGroupCols;
#pragma unroll
      for (int c = 0; c < Cfg::kStoreBoxes; ++c)
        cute::SM90_TMA_STORE_2D::copy(tmap_d, d_smem + c * kBoxBytes, n0 + c * kCols, m0);
      cute::tma_store_arrive();
    }
  }
  if (threadIdx.x == 128) FP8GEMM_OWN_STAMP(5);
}

// Runtime -> compile-time b-scale split column (128 - n0 % 128, a multiple of gcd(BN, 128)).
template <class Cfg, int kSplit>
__device__ __forceinline__ void math_tile_dispatch(int scale_split, const Params& p,
                                                   uint8_t* smem, int m_blk, int n_blk, int wg,
                                                   int& stage, uint32_t& phase, int d_buf,
                                                   const CUtensorMap* tmap_d) {
  constexpr int kGcd = Cfg::kBlockN % 128 == 0 ? 128
                       : Cfg::kBlockN % 64 == 0 ? 64
                       : Cfg::kBlockN % 32 == 0 ? 32
                                                 : 16;
  if constexpr (kSplit > kGcd) {
    if (scale_split != kSplit) {
      math_tile_dispatch<Cfg, kSplit - kGcd>(scale_split, p, smem, m_blk, n_blk, wg, stage, phase,
                                             d_buf, tmap_d);
      return;
    }
  }
  math_tile<Cfg, kSplit>(p, smem, m_blk, n_blk, wg, stage, phase, d_buf, tmap_d);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kCtasPerSm)
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
  // Read through a shuffle so that the compiler knows it is the same in every lane: then the
  // wgmma descriptors that depend on it are built in uniform registers, not moved there before
  // every wgmma (threadIdx.x / 128 is uniform per warp, but the compiler cannot tell).
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);

  if (threadIdx.x == 0) {
    FP8GEMM_OWN_STAMP(0);
    // The 128-byte swizzle is a function of the address: tiles must be 1024-byte aligned.
    if (cute::cast_smem_ptr_to_uint(smem) % 1024 != 0) __trap();
    for (int s = 0; s < Cfg::kStages; ++s) {
      full[s].init(2);  // warp 0's arrival, which also expects the TMA bytes, and warp 1's
      empty[s].init(Cfg::kMathWgs * 128);  // every math thread
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
  // Programmatic dependent launch (when the launch allows it, gemm_sm90_own_launch.cuh): the
  // set-up above may overlap the previous kernel in the stream; nothing below touches global
  // memory before that kernel has completed and its writes are visible (our inputs may be its
  // outputs, and it may still read what we are about to overwrite). Then the next kernel may be
  // scheduled: its CTAs take the SMs ours leave, and do their own set-up during our last tiles.
  // Without the launch attribute both instructions do nothing.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (threadIdx.x == 0) FP8GEMM_OWN_STAMP(1);
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");

  const int num_k_blocks = p.k / kBlockK;
  int stage = 0;
  uint32_t phase = 0;

  // Registers move between warpgroups only through setmaxnreg: launched at 168 each (the
  // compiler's count for 384 threads), the producer gives back (168 - 40) x 128 and the two math
  // warpgroups take (232 - 168) x 256, the same number; asking for more than was given back makes
  // the math warpgroups wait forever (48 / 232 hangs). With one math warpgroup (256 threads)
  // alone on its SM every thread may have the 255 registers a thread can address: nothing to
  // move. Two such CTAs per SM launch at 128 and the math warpgroup takes 216 (kMathRegs); two
  // CTAs of 128-row tiles launch at 80 and their math warpgroups take 96.
  constexpr bool kReconfigure = Cfg::kMathWgs == 2 || Cfg::kCtasPerSm > 1;
  if (wg == 0) {
    if constexpr (kReconfigure) cutlass::arch::warpgroup_reg_dealloc<40>();
    if (warp == 0 && cute::elect_one_sync()) {
      // Warp 0: the TMA loads of A, Bt and a_scale, nothing else (no load of its own to wait for).
      const uint32_t stage_bytes = p.stage_bytes;
      for (int tile = blockIdx.x; tile < p.num_tiles; tile += gridDim.x) {
        int m_blk, n_blk;
        tile_coords(p, tile, m_blk, n_blk);
        const int m0 = tile_row0<Cfg>(p, m_blk), n0 = tile_col0<Cfg>(p, n_blk);
        // The lambda's stage and phase are the ring position for_each_k_block passes in.
        for_each_k_block<Cfg::kStages, Cfg::kTurns>(num_k_blocks, stage, phase,
                                                    [&](int stage, uint32_t phase, int kb) {
          empty[stage].wait(phase ^ 1);
          full[stage].arrive_and_expect_tx(stage_bytes);
          uint64_t* bar = reinterpret_cast<uint64_t*>(&full[stage]);
          float* scales = reinterpret_cast<float*>(smem + Cfg::kOffScales + stage * Cfg::kSmemScales);
          cute::SM90_TMA_LOAD_2D::copy(&tmap_a, bar, kEvictNormal, smem + stage * Cfg::kSmemA,
                                       kb * kBlockK, m0);
          cute::SM90_TMA_LOAD_2D::copy(&tmap_b, bar, kEvictNormal,
                                       smem + Cfg::kOffB + stage * Cfg::kSmemB, kb * kBlockK, n0);
          cute::SM90_TMA_LOAD_2D::copy(&tmap_sfa, bar, kEvictNormal, scales,
                                       Cfg::kSwapAB ? n0 : m0, kb);
        });
      }
      FP8GEMM_OWN_STAMP(2);
    } else if (warp == 1) {
      // Warp 1: the k blocks' two b scales (a tile straddles at most two scale blocks), plain
      // loads, 32 k blocks at a time (lane i holds block kb0 + i), written into each stage by
      // lane 0 before its arrival, the stage's second (mbarrier arrive releases, the math warps'
      // wait acquires). So the TMA issue above never waits for a load's latency. It walks the
      // ring with a plain loop, not for_each_k_block: unrolled, its loads' addresses spilled out
      // of the producer warpgroup's 40 registers (tuning log run 14), and it is off the critical
      // path.
      const int lane = threadIdx.x % 32;
      for (int tile = blockIdx.x; tile < p.num_tiles; tile += gridDim.x) {
        int m_blk, n_blk;
        tile_coords(p, tile, m_blk, n_blk);
        // Swapped, the tile's rows are b's columns, all in one scale block.
        const int s0 = Cfg::kSwapAB ? m_blk * Cfg::kBlockM / kScaleBlockN
                                    : tile_col0<Cfg>(p, n_blk) / kScaleBlockN;
        const int s1 = min(s0 + 1, p.num_n_scales - 1);
        for (int kb0 = 0; kb0 < num_k_blocks; kb0 += 32) {
          float mine_lo = 0.f, mine_hi = 0.f;
          if (kb0 + lane < num_k_blocks) {
            const float* row = p.b_scale + static_cast<int64_t>(kb0 + lane) * p.num_n_scales;
            mine_lo = __ldg(row + s0);
            mine_hi = __ldg(row + s1);
          }
          const int count = min(32, num_k_blocks - kb0);
          for (int i = 0; i < count; ++i) {
            const float lo = __shfl_sync(0xffffffffu, mine_lo, i);
            const float hi = __shfl_sync(0xffffffffu, mine_hi, i);
            empty[stage].wait(phase ^ 1);
            if (lane == 0) {
              float* scales =
                  reinterpret_cast<float*>(smem + Cfg::kOffScales + stage * Cfg::kSmemScales);
              scales[Cfg::kScaleSlots] = lo;
              scales[Cfg::kScaleSlots + 1] = hi;
              full[stage].arrive();
            }
            advance<Cfg::kStages>(stage, phase);
          }
        }
      }
    }
  } else {
    if constexpr (kReconfigure) cutlass::arch::warpgroup_reg_alloc<Cfg::kMathRegs>();
    const int math_wg = wg - 1;
    int d_buf = 0;
    for (int tile = blockIdx.x; tile < p.num_tiles; tile += gridDim.x) {
      int m_blk, n_blk;
      tile_coords(p, tile, m_blk, n_blk);
      if constexpr (Cfg::kSwapAB) {
        math_tile<Cfg, kScaleBlockN>(p, smem, m_blk, n_blk, math_wg, stage, phase, d_buf, &tmap_d);
      } else {
        const int scale_split = kScaleBlockN - tile_col0<Cfg>(p, n_blk) % kScaleBlockN;
        math_tile_dispatch<Cfg, kScaleBlockN>(scale_split, p, smem, m_blk, n_blk, math_wg, stage,
                                              phase, d_buf, &tmap_d);
      }
      d_buf = d_buf + 1 == Cfg::kDBufs ? 0 : d_buf + 1;
    }
    // The shared memory being stored must outlive the stores.
    if (threadIdx.x % 128 == 0) cute::tma_store_wait<0>();
    if (threadIdx.x == 128) FP8GEMM_OWN_STAMP(6);
  }
#endif
}

}  // namespace fp8gemm::sm90_own
