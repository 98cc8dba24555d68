// 64-row tiles of our own kernel (gemm_sm90_own_kernel.cuh): one math warpgroup, 256 threads, up
// to 16 pipeline stages, k-block loops not unrolled but pipelined (kPipe: the next k block's wgmma
// runs while the last one's result is promoted). Unrolled by turns instead, they were 7 % ahead
// to 31 % behind the plain loop, and 64 x 64 behind the pipelined one at all 16 shapes measured
// (RESULTS.md runs 17a, 17b). For small M at long K (the table in
// gemm_sm90.cu): a 128 x 2048 problem is 64 tiles of 128 x 32 for 132 SMs, 128 of 64 x 32; at
// M <= 64 a 128-row tile computes and stores half its rows for nothing (the TMA fills the rows
// past M with zeros). DeepGEMM takes 64-row tiles there too.
#include "gemm_sm90_own_launch.cuh"

GEMM_SM90_DEFINE_OWN_CONFIG(own_64x16, false, 16, 1, false, 16, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x32, false, 32, 1, false, 32, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x48, false, 48, 1, false, 48, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x64, false, 64, 1, false, 64, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x96, false, 96, 1, false, 96, 64, 16, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_64x128, false, 128, 1, false, 128, 64, 16, true)
