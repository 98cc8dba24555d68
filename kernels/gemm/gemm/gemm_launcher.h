#pragma once

#include <cstdint>

#include <hip/hip_runtime_api.h>

// Launches gemm on `stream` for the current HIP device. format: 0 = e4m3fn, 1 = e4m3fnuz.
// Uses the matrix-core kernel on gfx94x for e4m3fnuz, the portable kernel otherwise.
// *used_matrix_cores (if not null) says which one ran.
extern "C" hipError_t gemm_rocm_run(uint16_t* out, const uint8_t* a, const uint8_t* b,
                                    const float* a_scale, const float* b_scale, int64_t m_size,
                                    int64_t n_size, int64_t k_size, int format,
                                    hipStream_t stream, int* used_matrix_cores);
