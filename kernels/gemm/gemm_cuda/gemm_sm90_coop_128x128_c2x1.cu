// Cooperative 128 x 128 tiles, two CTAs along M sharing the B tile.
#include "gemm_sm90_kernel.cuh"

GEMM_SM90_DEFINE_CONFIG(coop_128x128_c2x1, Shape<_128, _128, _128>, Shape<_2, _1, _1>, Cooperative, CooperativeEpilogue, Persistent)
