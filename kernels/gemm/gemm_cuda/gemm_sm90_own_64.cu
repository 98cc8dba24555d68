// 64-row tiles of our own kernel (gemm_sm90_own_kernel.cuh): one math warpgroup, 256 threads, up
// to 16 pipeline stages, k-block loops not unrolled but pipelined (kPipe: the next k block's wgmma
// runs while the last one's result is promoted). Unrolled by turns instead, they were 7 % ahead
// to 31 % behind the plain loop, and 64 x 64 behind the pipelined one at all 16 shapes measured
// (tuning log runs 17a, 17b). For small M at long K (the table in
// gemm_sm90.cu): a 128 x 2048 problem is 64 tiles of 128 x 32 for 132 SMs, 128 of 64 x 32; at
// M <= 64 a 128-row tile computes and stores half its rows for nothing (the TMA fills the rows
// past M with zeros). DeepGEMM takes 64-row tiles there too.
// The _pdl configurations: the same kernels launched with programmatic dependent launch (their
// set-up overlaps the end of the kernel before), the table's choice at M <= 64. There a call is a
// few microseconds and the set-up a larger part of it: 5-23 % ahead at 16 of 17 such shapes
// measured with the width the table takes (tuning log 19b, 19c). At M = 96 and 192 with long K
// they lost up to 25 % (377 vs 281 at 96 x 4096 x 7168, 64 x 96; 751 vs 678 at
// 192 x 7168 x 7168): not taken there. Nor for 128-row tiles at long K (run 15b; 128 x 112:
// -5 % to +3 %, 19c).
// Run numbers (run 15b, 25a-25c) cite the gemm tuning log: git show c631808:benchmarks/RESULTS.md
#include "gemm_sm90_own_launch.cuh"

// own_64xW and own_64xW_pdl: one kernel (the same TileConfig), launched without and with
// programmatic dependent launch.
#define GEMM_SM90_OWN_64_TILE(W) W, 1, false, W, 64, 16, true
#define GEMM_SM90_DEFINE_OWN_64(W)                                                       \
  GEMM_SM90_DEFINE_OWN_CONFIG(own_64x##W, false, GEMM_SM90_OWN_64_TILE(W))               \
  GEMM_SM90_DEFINE_OWN_CONFIG(own_64x##W##_pdl, true, GEMM_SM90_OWN_64_TILE(W))

GEMM_SM90_DEFINE_OWN_64(16)
GEMM_SM90_DEFINE_OWN_64(32)
GEMM_SM90_DEFINE_OWN_64(48)
GEMM_SM90_DEFINE_OWN_64(64)
GEMM_SM90_DEFINE_OWN_64(96)
GEMM_SM90_DEFINE_OWN_64(128)

// own_64x64_x2 and own_64x96_x2: 64 x 64 and 64 x 96 tiles, two CTAs per SM (each with half the
// SM's shared memory: 6 and 4 stages of the ring; 128 registers per thread at launch, of which the
// math warpgroup takes 216 through setmaxnreg), launched with programmatic dependent launch.
// 64 x 96: the table's choice at 128 < M <= 192 (the second 128-row block at most half full) at
// short K, and to K = 1536 in up to three waves of 96-wide tiles. 64 x 64: at M <= 64 beyond one
// wave of them, and among the candidates of the table's fullest-waves choice at M <= 512 (run
// 21). 2-28 % ahead of the configurations the table took before (tuning log run 20); likely
// because a CTA's epilogue and the start of its next tile overlap the other CTA's mainloop (not
// profiled). Also tried (20a, 20b, 21a): two CTAs of 64 x 128, 64 x 48 and 64 x 32 tiles, three
// of 64 x 64 and 64 x 32, seldom ahead.
// The same tiles as own_64x64 and own_64x96, kCtasPerSm = 2.
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x64_x2, true, GEMM_SM90_OWN_64_TILE(64), 2)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x96_x2, true, GEMM_SM90_OWN_64_TILE(96), 2)
