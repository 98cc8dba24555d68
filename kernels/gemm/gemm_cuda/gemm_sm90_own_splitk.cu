// Split K (gemm_sm90_own_kernel.cuh, kSplitK): each tile's K in two parts, each a work unit of
// its own, so that a problem of too few tiles for the SMs at long K runs twice as many units of
// half the length; the first part's fp32 sums go through the workspace to the second, which
// stores the tile. The tiles of the swapped configurations (gemm_sm90_own_swap.cu) and of our
// 128 x 128 (gemm_sm90_own_128x128.cu), as they are built there, with the suffix _k2.
#include "gemm_sm90_own_launch.cuh"

GEMM_SM90_DEFINE_OWN_CONFIG(own_swap_80x128_k2, false, 80, 1, false, 80, 128, 8, true, 1, 0, true, 2)
GEMM_SM90_DEFINE_OWN_CONFIG(own_swap_144x128_k2, false, 144, 1, true, 144, 128, 8, false, 1, 0,
                            true, 2)
GEMM_SM90_DEFINE_OWN_CONFIG(own_swap_192x128_k2, false, 192, 1, true, 192, 128, 8, false, 1, 0,
                            true, 2)
GEMM_SM90_DEFINE_OWN_CONFIG(own_128x128_pipe_k2, false, 128, 1, false, 128, 128, 8, true, 1, 1,
                            false, 2)
