// Ping-pong 64 x 128 tiles, two CTAs along N sharing the A tile.
#include "gemm_sm90_kernel.cuh"

GEMM_SM90_DEFINE_CONFIG(pingpong_64x128_c1x2, Shape<_64, _128, _128>, Shape<_1, _2, _1>, Pingpong, PingpongEpilogue, Persistent)
