// The matrix-core gemm kernel for MI300 (gfx94x) and float8_e4m3fnuz; same contract and tiling
// as portable_kernel.h.
#pragma once

#include <hip/hip_runtime.h>

#include <cstdint>

#include "fp8.h"
#include "portable_kernel.h"

namespace fp8gemm {

#if defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
#define GEMM_HAS_FP8_MFMA 1
#endif

using floatx4 = float __attribute__((ext_vector_type(4)));

// The matrix-core path for gfx94x (MI300) and e4m3fnuz, the format those matrix cores take.
// Each of the 4 waves computes a 32 x 32 quarter of the tile as 2 x 2 v_mfma_f32_16x16x32_fp8_fp8.
// Operand layout of that instruction (per lane l of 64): A row l % 16, bytes k = 8 (l / 16) ..+7;
// B column l % 16, same k; result column l % 16, rows 4 (l / 16) ..+3.
// Compiled for other archs the body is empty: the launcher never starts it there.
__global__ __launch_bounds__(kThreads) void gemm_mfma_fnuz_kernel(
    uint16_t* __restrict__ out, const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
    const float* __restrict__ a_scale, const float* __restrict__ b_scale, int m_size, int n_size,
    int k_size) {
#if defined(GEMM_HAS_FP8_MFMA)
  constexpr int kPitch = kScaleBlock + 16;  // bytes per LDS row: 16-byte aligned, fewer conflicts
  __shared__ __attribute__((aligned(16))) uint8_t a_lds[kTileM][kPitch];  // [m][k]
  __shared__ __attribute__((aligned(16))) uint8_t b_lds[kTileN][kPitch];  // [n][k], transposed
  const int tid = threadIdx.x;
  const int lane = tid % 64;
  const int wave = tid / 64;
  const int wm = (wave / 2) * 32;
  const int wn = (wave % 2) * 32;
  const int m0 = blockIdx.y * kTileM;
  const int n0 = blockIdx.x * kTileN;
  const int n_blocks = static_cast<int>(scale_columns(n_size));

  floatx4 acc[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) acc[i][j] = floatx4{0.0f, 0.0f, 0.0f, 0.0f};

  for (int kb = 0; kb < k_size / kScaleBlock; ++kb) {
    const int64_t k0 = int64_t(kb) * kScaleBlock;
    {  // A: 64 rows x 128 bytes, 32 bytes per thread.
      const int r = tid / 4, c = (tid % 4) * 32, m = m0 + r;
      uint4 lo = {0, 0, 0, 0}, hi = {0, 0, 0, 0};
      if (m < m_size) {
        const uint4* src = reinterpret_cast<const uint4*>(a + int64_t(m) * k_size + k0 + c);
        lo = src[0];
        hi = src[1];
      }
      *reinterpret_cast<uint4*>(&a_lds[r][c]) = lo;
      *reinterpret_cast<uint4*>(&a_lds[r][c + 16]) = hi;
    }
    {  // B: 128 k-rows x 64 bytes, 32 bytes per thread, stored transposed; columns past N zero.
      const int kr = tid / 2, c = (tid % 2) * 32;
      const uint8_t* src = b + (k0 + kr) * n_size + n0 + c;
      for (int j = 0; j < 32; ++j) b_lds[c + j][kr] = n0 + c + j < n_size ? src[j] : 0;
    }
    __syncthreads();
    floatx4 part[2][2];
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) part[i][j] = floatx4{0.0f, 0.0f, 0.0f, 0.0f};
    for (int ks = 0; ks < kScaleBlock; ks += 32) {
      const int k = ks + (lane / 16) * 8;
      long av[2], bv[2];
      for (int i = 0; i < 2; ++i)
        av[i] = *reinterpret_cast<const long*>(&a_lds[wm + i * 16 + lane % 16][k]);
      for (int j = 0; j < 2; ++j)
        bv[j] = *reinterpret_cast<const long*>(&b_lds[wn + j * 16 + lane % 16][k]);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
          part[i][j] = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(av[i], bv[j], part[i][j], 0, 0, 0);
    }
    __syncthreads();
    const float sb = b_scale[kb * n_blocks + n0 / kScaleBlock];
    for (int i = 0; i < 2; ++i) {
      for (int e = 0; e < 4; ++e) {
        const int m = m0 + wm + i * 16 + (lane / 16) * 4 + e;
        const float s = m < m_size ? a_scale[int64_t(kb) * m_size + m] * sb : 0.0f;
        for (int j = 0; j < 2; ++j) acc[i][j][e] = fmaf(part[i][j][e], s, acc[i][j][e]);
      }
    }
  }
  for (int i = 0; i < 2; ++i) {
    for (int e = 0; e < 4; ++e) {
      const int m = m0 + wm + i * 16 + (lane / 16) * 4 + e;
      if (m >= m_size) continue;
      for (int j = 0; j < 2; ++j) {
        const int n = n0 + wn + j * 16 + lane % 16;
        if (n < n_size) out[int64_t(m) * n_size + n] = float_to_bf16_bits(acc[i][j][e]);
      }
    }
  }
#endif
}

}  // namespace fp8gemm
