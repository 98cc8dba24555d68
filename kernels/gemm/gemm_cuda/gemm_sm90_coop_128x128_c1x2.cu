// Cooperative 128 x 128 tiles, two CTAs along N sharing (multicasting) the A tile.
#include "gemm_sm90_kernel.cuh"

GEMM_SM90_DEFINE_CONFIG(coop_128x128_c1x2, Shape<_128, _128, _128>, Shape<_1, _2, _1>, Cooperative, CooperativeEpilogue, Persistent)
