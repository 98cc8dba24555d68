#pragma once

#include <cstdint>

#include "../gemm/fp8.h"

// out (M x N, bfloat16 bits) = block-scaled a (M x K, fp8) * b (K x N, fp8); see gemm_cpu.cpp.
void gemm_cpu_run(uint16_t* out, const uint8_t* a, const uint8_t* b, const float* a_scale,
                  const float* b_scale, int64_t m_size, int64_t n_size, int64_t k_size,
                  fp8gemm::Fp8Format format);
