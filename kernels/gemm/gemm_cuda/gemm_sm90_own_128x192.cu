// 128 x 192 tiles of our own kernel (gemm_sm90_own_kernel.cuh), as configurations own_128x192
// (one output buffer per math warpgroup, 4 pipeline stages; in the table in gemm_sm90.cu) and
// own_128x192_d2 (two, 3 stages; built and tested for exploration, chosen by the table through
// run 13 at short K).
#include "gemm_sm90_own_launch.cuh"

GEMM_SM90_DEFINE_OWN_CONFIG(own_128x192, 192, 1)
GEMM_SM90_DEFINE_OWN_CONFIG(own_128x192_d2, 192, 2)
