// 128 x 112 tiles of our own kernel (gemm_sm90_own_kernel.cuh), k blocks pipelined (kPipe): 128 of
// them make one full wave at 256 x 7168 and 512 x 3584, where CUTLASS's 128 x 128 tiles leave 20
// SMs idle (112 tiles), and three full waves at 768 x 7168 (384 tiles, against 336 of 128 x 128 in
// three waves). 6 pipeline stages fit beside the output buffers. Built as 128 x 96 is for long K
// in up to three waves (RESULTS.md 17g, 17i). Loops unrolled by turns instead, they were up to 21 %
// slower (501 vs 632 at 256 x 7168 x 2048) and ahead at one shape of 45, by 1 % (18a, 18b,
// 18d); not unrolled and with programmatic dependent launch, 5-8 % slower at short K than the
// 96-wide tiles (18a).
#include "gemm_sm90_own_launch.cuh"

GEMM_SM90_DEFINE_OWN_CONFIG(own_128x112_pipe, false, 112, 1, false, 112, 128, 8, true)
