// 128 x 128 tiles of our own kernel (gemm_sm90_own_kernel.cuh), k blocks pipelined (kPipe): the
// tile of CUTLASS's blockwise kernel, which the dispatch table (gemm_sm90.cu) chose through run 20
// of the tuning log wherever 128 x 128 was the tile to take; ours was ahead of it there,
// by up to 16 % at 1024 x 7168 x 1024 and 11 % at 2048 x 4096 x 7168, level at 256 x 16384 (run
// 21). own_128x128_pipe_pdl: the same kernel launched with programmatic dependent launch, the
// table's choice below K = 2048, where M is one row block (M <= 128), and (since run 22) in one
// wave of full row blocks to K = 3072.
// Each math warpgroup stages its output one 64 x 64 box at a time (kStoreBoxes = 1: 8 KB, not
// the 16 KB of its whole 64 x 128 part), so that the ring has 6 stages where 5 fit before: 1-6 %
// faster at M = 256-1024 (748 vs 725 TFLOP/s at 256 x 8192 x 2048, 1033 vs 977 at
// 256 x 8192 x 7168), level at M <= 128, +1.5 % and +0.8 % (geometric mean) at 24 random shapes
// the table sends here, -2 % to +8 % (tuning log run 23). 4 stages lose 4-8 %: at one wave the ring's bytes in flight set the rate.
// Run numbers (run 15b, 25a-25c) cite the gemm tuning log: git show c631808:benchmarks/RESULTS.md
#include "gemm_sm90_own_launch.cuh"

// One kernel (the same TileConfig), launched without and with programmatic dependent launch.
#define GEMM_SM90_OWN_128X128 128, 1, false, 128, 128, 8, true, 1, 1
GEMM_SM90_DEFINE_OWN_CONFIG(own_128x128_pipe, false, GEMM_SM90_OWN_128X128)
GEMM_SM90_DEFINE_OWN_CONFIG(own_128x128_pipe_pdl, true, GEMM_SM90_OWN_128X128)
