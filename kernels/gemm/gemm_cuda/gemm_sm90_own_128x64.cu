// 128 x 64 and 128 x 32 tiles of our own kernel (gemm_sm90_own_kernel.cuh): for small M with long
// K, where 96-wide tiles are too few to occupy the SMs (128 x 4096: 43 tiles of 96 columns, 128 of
// 32). 8 pipeline stages; the k-block loops are not unrolled by turns, which spilled 148 bytes
// from the producer's 40 registers with 8 stages. 128 x 64's are pipelined (kPipe): 0-14 % ahead
// at 16 shapes, never more than 2 % behind (RESULTS.md run 17b). The table's few-tiles rule takes 128 x 64 where
// it ties with 64 x 128; 128 x 32 was its choice in run 15 and is now built for comparison only:
// 64 x 64 tiles are never more and load fewer bytes (RESULTS.md run 16).
#include "gemm_sm90_own_launch.cuh"

GEMM_SM90_DEFINE_OWN_CONFIG(own_128x64, false, 64, 1, false, 64, 128, 8, true)
GEMM_SM90_DEFINE_OWN_CONFIG(own_128x32, false, 32, 1, false)
