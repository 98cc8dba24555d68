#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

// Whether gemm_cuda_run uses the tensor-core kernel on the current device (sm_89 and newer);
// that kernel takes b transposed (bt: N x K), the portable one b itself (K x N).
extern "C" int gemm_cuda_uses_tensor_cores();

// Launches gemm on `stream` for the current CUDA device; a and b are float8_e4m3fn. Pass bt when
// gemm_cuda_uses_tensor_cores(), else b.
extern "C" cudaError_t gemm_cuda_run(uint16_t* out, const uint8_t* a, const uint8_t* b_or_bt,
                                     const float* a_scale, const float* b_scale, int64_t m_size,
                                     int64_t n_size, int64_t k_size, cudaStream_t stream);

// bt (N x K, row-major) = b (K x N, row-major) transposed, one-byte elements; K and N multiples
// of 128, both pointers 16-byte aligned. The tensor-core paths read b as bt.
extern "C" cudaError_t gemm_cuda_transpose_b(uint8_t* bt, const uint8_t* b, int64_t k_size,
                                             int64_t n_size, cudaStream_t stream);
