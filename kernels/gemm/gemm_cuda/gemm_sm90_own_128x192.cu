// 128 x 192 tiles of our own kernel (gemm_sm90_own_kernel.cuh): own_128x192 (one output buffer
// per math warpgroup, 4 pipeline stages, k-block loops unrolled by turns of the ring) for long K
// and own_128x192_shortk (the same, loops not unrolled, launched with programmatic dependent
// launch) for short K in the table in gemm_sm90.cu; own_128x192_d2 (two output buffers, 3 stages,
// not unrolled), the table's short-K choice through run 13, is built and tested for exploration.
// Programmatic dependent launch (tuning log run 15b) gained 1-13 % at every short-K shape
// measured and nothing consistent at long K, where a call's set-up is a small part of it.
// Run numbers (run 15b, 25a-25c) cite the gemm tuning log: git show c631808:benchmarks/RESULTS.md
#include "gemm_sm90_own_launch.cuh"

GEMM_SM90_DEFINE_OWN_CONFIG(own_128x192, false, 192, 1, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_128x192_shortk, true, 192, 1, false)
GEMM_SM90_DEFINE_OWN_CONFIG(own_128x192_d2, false, 192, 2, false)
