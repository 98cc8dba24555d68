#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

// Launches gemm on `stream` for the current CUDA device; a and b are float8_e4m3fn.
// Uses the tensor-core kernel on sm_89 and newer, the portable kernel otherwise;
// *used_tensor_cores (if not null) says which one ran.
extern "C" cudaError_t gemm_cuda_run(uint16_t* out, const uint8_t* a, const uint8_t* b,
                                     const float* a_scale, const float* b_scale, int64_t m_size,
                                     int64_t n_size, int64_t k_size, cudaStream_t stream,
                                     int* used_tensor_cores);
