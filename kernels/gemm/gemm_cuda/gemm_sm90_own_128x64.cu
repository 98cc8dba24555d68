// 128 x 64 and 128 x 32 tiles of our own kernel (gemm_sm90_own_kernel.cuh): for small M with long
// K, where 96-wide tiles are too few to occupy the SMs (128 x 4096: 43 tiles of 96 columns, 128 of
// 32). 8 pipeline stages; the k-block loops are not unrolled by turns, which spilled 148 bytes
// from the producer's 40 registers with 8 stages. 128 x 64's are pipelined (kPipe): 0-14 % ahead
// at 16 shapes, never more than 2 % behind (tuning log run 17b). The table's few-tiles rule took
// 128 x 64 where it tied with 64 x 128 until run 27, which measured 64 x 128 ahead at all 24 such
// shapes (+18 %): both are now built for comparison only, 128 x 32 since run 16 (64 x 64 tiles are
// never more and load fewer bytes).
// own_128x64_x2: two CTAs per SM (each with half the SM's shared memory, 3 stages of the ring; 80
// registers per thread at launch, 96 for the math warpgroups through setmaxnreg, enough for a
// 64 x 64 accumulator and one wgmma result, not two: k blocks not pipelined), launched with
// programmatic dependent launch. The table's choice at M <= 512 and short K where its waves are
// the fullest (256 x 7168, 224 x 8192, 96 and 128 x 32768, 480 x 3584; tuning log run 21): one
// row block per tile, where two CTAs of 64 x 64 load each b tile twice.
// Run numbers (run 15b, 25a-25c) cite the gemm tuning log: git show c631808:benchmarks/RESULTS.md
#include "gemm_sm90_own_launch.cuh"

GEMM_SM90_DEFINE_OWN_CONFIG(own_128x64, false, 64, 1, false, 64, 128, 8, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_128x32, false, 32, 1, false)
GEMM_SM90_DEFINE_OWN_CONFIG(own_128x64_x2, true, 64, 1, false, 64, 128, 8, false, 2)
