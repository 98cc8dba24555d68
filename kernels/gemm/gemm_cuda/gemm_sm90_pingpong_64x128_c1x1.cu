// Ping-pong 64 x 128 tiles (one consumer warpgroup per tile, epilogues overlap the other's mainloop), no cluster.
#include "gemm_sm90_kernel.cuh"

GEMM_SM90_DEFINE_CONFIG(pingpong_64x128_c1x1, Shape<_64, _128, _128>, Shape<_1, _1, _1>, Pingpong, PingpongEpilogue, Persistent)
