// The CUTLASS configurations the H100 path is built with, one translation unit each
// (gemm_sm90_<name>.cu), and the problem description they share.
// Run numbers (run 15b, 25a-25c) cite the gemm tuning log: git show c631808:benchmarks/RESULTS.md
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace fp8gemm::sm90 {

// One call's operands (layouts in gemm_sm90_kernel.cuh) and the device it runs on.
struct Problem {
  uint16_t* out;
  const uint8_t* a;
  const uint8_t* bt;
  const float* a_scale;
  int64_t a_scale_ld;
  const float* b_scale;
  int m, n, k;
  int device, sm_count;
  // The tile scheduler's order: swizzle 1, 2, 4 or 8 tiles; raster 0 heuristic, 1 along M, 2
  // along N (cutlass::gemm::kernel::detail::RasterOrderOptions). Our own kernel's last row and
  // column blocks and A's boxes below one row block: Sm90Order::shift (gemm_sm90.h).
  int swizzle, raster, shift;
};

// X(name): every configuration built. The names say schedule, tile (M x N; K is always 128, the
// scale block), cluster (M x N) and, where not the persistent data-parallel one, the tile scheduler;
// "own" is our own kernel (gemm_sm90_own_kernel.cuh), the rest CUTLASS's; "own_swap_WxN" its
// swapped tiles (W rows of out by N columns, computed as out's transpose: gemm_sm90_own_swap.cu).
// Since run 21 of the tuning log the dispatch table (gemm_sm90.cu) chooses our own alone;
// CUTLASS's are built and tested as the baseline the configuration matrices measure ours against.
// Tried and left out: a CUTLASS 128 x 192 tile (b_scale expanded to 64 or 32 columns per scale):
// its blockwise mainloop compiles for neither ("Stride Divisibility Condition" in its scale-copy
// partitioning; for 32 also "Accumulator and scaleB must have same shape"), hence our own kernel;
// larger epilogue store tiles (64 x 128 ping-pong, 128 x 64 cooperative): no faster at any shape
// (the tuning log).
#define GEMM_SM90_CONFIGS(X)        \
  X(coop_128x128_c1x2)              \
  X(coop_128x128_c2x1)              \
  X(coop_128x128_c1x1)              \
  X(coop_128x128_c1x2_streamk)      \
  X(coop_128x128_c1x1_streamk)      \
  X(pingpong_64x128_c1x1)           \
  X(pingpong_64x128_c2x1)           \
  X(pingpong_64x128_c1x2)           \
  X(own_128x160)                    \
  X(own_128x192)                    \
  X(own_128x192_shortk)             \
  X(own_128x192_d2)                 \
  X(own_128x96)                     \
  X(own_128x96_pipe)                \
  X(own_128x96_pipe_pdl)            \
  X(own_128x96_shortk)              \
  X(own_128x256)                    \
  X(own_128x64)                     \
  X(own_128x32)                     \
  X(own_64x16)                      \
  X(own_64x32)                      \
  X(own_64x48)                      \
  X(own_64x64)                      \
  X(own_64x96)                      \
  X(own_64x128)                     \
  X(own_128x112_pipe)               \
  X(own_64x16_pdl)                  \
  X(own_64x32_pdl)                  \
  X(own_64x48_pdl)                  \
  X(own_64x64_pdl)                  \
  X(own_64x96_pdl)                  \
  X(own_64x128_pdl)                 \
  X(own_64x64_x2)                   \
  X(own_64x96_x2)                   \
  X(own_128x112_pipe_pdl)           \
  X(own_128x64_x2)                  \
  X(own_128x128_pipe)               \
  X(own_128x128_pipe_pdl)           \
  X(own_swap_80x128)                \
  X(own_swap_144x128)               \
  X(own_swap_160x128)               \
  X(own_swap_176x128)               \
  X(own_swap_192x128)

#define GEMM_SM90_DECLARE(NAME)                                       \
  size_t workspace_bytes_##NAME(const Problem& p);                    \
  cudaError_t run_##NAME(const Problem& p, void* workspace, cudaStream_t stream);
GEMM_SM90_CONFIGS(GEMM_SM90_DECLARE)
#undef GEMM_SM90_DECLARE

}  // namespace fp8gemm::sm90
