// Ping-pong 64 x 128 tiles, no cluster, the whole tile stored by one TMA store (short K: the
// epilogue's stores are most of the work).
#include "gemm_sm90_kernel.cuh"

GEMM_SM90_DEFINE_CONFIG(pingpong_64x128_c1x1_e64x128, Shape<_64, _128, _128>, Shape<_1, _1, _1>, Pingpong, PingpongEpilogue, Persistent, Shape<_64, _128>)
