#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

// Whether the current device has the tensor-core kernel (sm_89 and newer); that kernel takes b
// transposed (bt: N x K), the portable one b itself (K x N).
extern "C" int gemm_cuda_uses_tensor_cores();

// Launches gemm on `stream` for the current CUDA device; a and b are float8_e4m3fn. With
// tensor_cores (only where gemm_cuda_uses_tensor_cores()) the tensor-core kernel, given bt; else
// the portable kernel every GPU runs (the one ROCm builds take off MI300), given b.
extern "C" cudaError_t gemm_cuda_run(uint16_t* out, const uint8_t* a, const uint8_t* b_or_bt,
                                     const float* a_scale, const float* b_scale, int64_t m_size,
                                     int64_t n_size, int64_t k_size, int tensor_cores,
                                     cudaStream_t stream);

// bt (N x K, row-major) = b (K x N, row-major) transposed, one-byte elements; K a multiple of
// 128 and N of 16, both pointers 16-byte aligned. The tensor-core paths read b as bt.
extern "C" cudaError_t gemm_cuda_transpose_b(uint8_t* bt, const uint8_t* b, int64_t k_size,
                                             int64_t n_size, cudaStream_t stream);
