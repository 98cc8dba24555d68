// Cooperative 128 x 128 tiles, cluster 1 x 2, stream-K: K split across CTAs to fill every SM.
#include "gemm_sm90_kernel.cuh"

GEMM_SM90_DEFINE_CONFIG(coop_128x128_c1x2_streamk, Shape<_128, _128, _128>, Shape<_1, _2, _1>, Cooperative, CooperativeEpilogue, StreamK)
