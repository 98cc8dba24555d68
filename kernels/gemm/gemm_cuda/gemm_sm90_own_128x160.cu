// 128 x 160 tiles of our own kernel (gemm_sm90_own_kernel.cuh): DeepGEMM's choice where 128 of
// them make one full wave and 192-wide ones leave a fifth of the SMs idle (512 x 5120: 128 tiles
// against 108; 640 x 4096: 130 against 110). 5 pipeline stages fit beside the output buffers;
// k-block loops unrolled by turns of the ring. The table takes these tiles from K = 896 (since run
// 22 of the tuning log also below K = 2048, and in place of the 96-wide tiles wherever
// their waves hold no more columns: 6-66 % ahead of those at 60 random shapes).
// Run numbers (run 15b, 25a-25c) cite the gemm tuning log: git show c631808:benchmarks/RESULTS.md
#include "gemm_sm90_own_launch.cuh"

GEMM_SM90_DEFINE_OWN_CONFIG(own_128x160, false, 160, 1, true)
