// 64-row tiles of our own kernel (gemm_sm90_own_kernel.cuh): one math warpgroup, 256 threads, up
// to 16 pipeline stages, k-block loops not unrolled but pipelined (kPipe: the next k block's wgmma
// runs while the last one's result is promoted). Unrolled by turns instead, they were 7 % ahead
// to 31 % behind the plain loop, and 64 x 64 behind the pipelined one at all 16 shapes measured
// (RESULTS.md runs 17a, 17b). For small M at long K (the table in
// gemm_sm90.cu): a 128 x 2048 problem is 64 tiles of 128 x 32 for 132 SMs, 128 of 64 x 32; at
// M <= 64 a 128-row tile computes and stores half its rows for nothing (the TMA fills the rows
// past M with zeros). DeepGEMM takes 64-row tiles there too.
// The _pdl configurations: the same kernels launched with programmatic dependent launch (their
// set-up overlaps the end of the kernel before), the table's choice at M <= 64. There a call is a
// few microseconds and the set-up a larger part of it: 5-23 % ahead at 16 of 17 such shapes
// measured with the width the table takes (RESULTS.md 19b, 19c). At M = 96 and 192 with long K
// they lost up to 25 % (377 vs 281 at 96 x 4096 x 7168, 64 x 96; 751 vs 678 at
// 192 x 7168 x 7168): not taken there. Nor for 128-row tiles at long K (run 15b; 128 x 112:
// -5 % to +3 %, 19c).
#include "gemm_sm90_own_launch.cuh"

GEMM_SM90_DEFINE_OWN_CONFIG(own_64x16, false, 16, 1, false, 16, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x32, false, 32, 1, false, 32, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x48, false, 48, 1, false, 48, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x64, false, 64, 1, false, 64, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x96, false, 96, 1, false, 96, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x128, false, 128, 1, false, 128, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x16_pdl, true, 16, 1, false, 16, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x32_pdl, true, 32, 1, false, 32, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x48_pdl, true, 48, 1, false, 48, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x64_pdl, true, 64, 1, false, 64, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x96_pdl, true, 96, 1, false, 96, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x128_pdl, true, 128, 1, false, 128, 64, 16, true)
