// Host entry points of our own sm_90a FP8 block-scaled GEMM (see gemm_sm90_own_kernel.cuh for
// the layouts). All pointers are device pointers; every call is asynchronous on `stream`.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

// Picks a tile configuration for the shape and launches it.
cudaError_t gemm_sm90_own_run(uint16_t* out, const uint8_t* a, const uint8_t* bt,
                              const float* a_scale, int64_t a_scale_ld, const float* b_scale,
                              int64_t m, int64_t n, int64_t k, cudaStream_t stream);

namespace fp8gemm::sm90_own {

// One tile configuration and rasterisation, for benchmarks and tests that pin them.
struct LaunchOptions {
  int block_m = 128;
  int block_n = 192;
  int group = 8;           // blocks per rasterisation group
  bool group_along_n = false;
  int splits = 1;          // split-K factor (fills the GPU when there are few tiles)
};

cudaError_t run_with(const LaunchOptions& opt, uint16_t* out, const uint8_t* a,
                     const uint8_t* bt, const float* a_scale, int64_t a_scale_ld,
                     const float* b_scale, int64_t m, int64_t n, int64_t k, cudaStream_t stream);

// The configuration gemm_sm90_own_run picks for a shape on a GPU with num_sms SMs.
LaunchOptions choose(int64_t m, int64_t n, int64_t k, int num_sms);

// Split-K scratch: a process-wide buffer per device that only grows. The flags must be zero
// between launches (each launch leaves them zero), so they are cleared once when allocated.
// Growing it calls cudaMalloc, so it cannot happen during CUDA graph capture: warm it up first.
cudaError_t split_k_workspace(size_t ws_bytes, size_t flag_bytes, float** ws, int** flags);

// The launcher of one compiled tile shape (defined in gemm_sm90_own_<BM>x<BN>.cu).
template <int BM, int BN>
cudaError_t launch(const LaunchOptions& opt, uint16_t* out, const uint8_t* a, const uint8_t* bt,
                   const float* a_scale, int64_t a_scale_ld, const float* b_scale, int64_t m,
                   int64_t n, int64_t k, cudaStream_t stream);

}  // namespace fp8gemm::sm90_own
