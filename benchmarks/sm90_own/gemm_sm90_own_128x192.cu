// Tile 128x192 of our own sm_90a FP8 block-scaled GEMM (one configuration per translation unit).
#include "gemm_sm90_own_launch.cuh"

FP8GEMM_SM90_OWN_INSTANTIATE(128, 192)
