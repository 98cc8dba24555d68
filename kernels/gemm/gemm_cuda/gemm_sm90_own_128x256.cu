// 128 x 256 tiles of our own kernel (gemm_sm90_own_kernel.cuh), computed as two waves of 128
// columns per k block: as much math per operand byte as DeepGEMM's 256 x 128 tiles, and fewer
// tiles than 128 x 192 ones where those leave the last wave nearly empty or overhang N
// (4096 x 7168: 896 tiles, 6.8 waves, against 1216, 9.2). 3 pipeline stages fit beside the
// output buffers. k-block loops unrolled by turns of the ring: the table takes these tiles for
// K > 1024 only (at K = 512 they were behind 192-wide ones, tuning log run 15f).
// Run numbers (run 15b, 25a-25c) cite the gemm tuning log: git show c631808:benchmarks/RESULTS.md
#include "gemm_sm90_own_launch.cuh"

GEMM_SM90_DEFINE_OWN_CONFIG(own_128x256, false, 256, 1, true, 128)
