// Cooperative 128 x 128 tiles, no cluster, stored in 128 x 64 pieces (twice CUTLASS's default).
#include "gemm_sm90_kernel.cuh"

GEMM_SM90_DEFINE_CONFIG(coop_128x128_c1x1_e128x64, Shape<_128, _128, _128>, Shape<_1, _1, _1>, Cooperative, CooperativeEpilogue, Persistent, Shape<_128, _64>)
