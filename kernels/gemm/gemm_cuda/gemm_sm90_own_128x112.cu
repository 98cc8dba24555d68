// 128 x 112 tiles of our own kernel (gemm_sm90_own_kernel.cuh), k blocks pipelined (kPipe): 128 of
// them make one full wave at 256 x 7168 and 512 x 3584, where CUTLASS's 128 x 128 tiles leave 20
// SMs idle (112 tiles), and three full waves at 768 x 7168 (384 tiles, against 336 of 128 x 128 in
// three waves). 6 pipeline stages fit beside the output buffers. Built as 128 x 96 is for long K
// in up to three waves (tuning log 17g, 17i). Loops unrolled by turns instead, they were up to 21 %
// slower (501 vs 632 at 256 x 7168 x 2048) and ahead at one shape of 45, by 1 % (18a, 18b,
// 18d); not unrolled and with programmatic dependent launch, 5-8 % slower at short K than the
// 96-wide tiles (18a). own_128x112_pipe_pdl: the same kernel launched with programmatic dependent
// launch, the table's choice where 128 of these tiles are one full wave at K = 896 to 2048: 3-7 %
// ahead of the same tiles without it, 7-14 % of two CTAs per SM of 64 x 64 up to K = 1536
// (tuning log 20i); at longer K, -20 % to +3 % (19c).
// Run numbers (run 15b, 25a-25c) cite the gemm tuning log: git show c631808:benchmarks/RESULTS.md
#include "gemm_sm90_own_launch.cuh"

// One kernel (the same TileConfig), launched without and with programmatic dependent launch.
#define GEMM_SM90_OWN_128X112 112, 1, false, 112, 128, 8, true
GEMM_SM90_DEFINE_OWN_CONFIG(own_128x112_pipe, false, GEMM_SM90_OWN_128X112)
GEMM_SM90_DEFINE_OWN_CONFIG(own_128x112_pipe_pdl, true, GEMM_SM90_OWN_128X112)
