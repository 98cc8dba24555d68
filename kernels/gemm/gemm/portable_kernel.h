// The portable gemm kernel: any AMD or NVIDIA GPU, both fp8 formats. It computes
// out (M x N, bf16) = sum over 128-wide K blocks of (a_block . b_block) * a_scale[kb, m] *
// b_scale[kb, n / 128], accumulated in float32, one 64 x 64 output tile per 256-thread block.
// Any M works (rows past M read as zero and are never written); N is a multiple of 16 (columns
// past N likewise) and K of 128 (checked by the binding).
#pragma once

#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#endif

#include <cstdint>

#include "fp8.h"

namespace fp8gemm {

constexpr int kTileM = 64;
constexpr int kTileN = 64;
constexpr int kThreads = 256;

// The portable path: every arch, both fp8 formats. fp8 is decoded to float in shared memory and
// each thread accumulates a 4 x 4 block with FMAs.
template <Fp8Format F>
__global__ __launch_bounds__(kThreads) void gemm_portable_kernel(
    uint16_t* __restrict__ out, const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
    const float* __restrict__ a_scale, const float* __restrict__ b_scale, int m_size, int n_size,
    int k_size) {
  constexpr int kStep = 32;
  __shared__ float a_tile[kStep][kTileM + 1];
  __shared__ float b_tile[kStep][kTileN];
  const int tid = threadIdx.x;
  const int m0 = blockIdx.y * kTileM;
  const int n0 = blockIdx.x * kTileN;
  const int tm = (tid / 16) * 4;
  const int tn = (tid % 16) * 4;
  const int n_blocks = static_cast<int>(scale_columns(n_size));

  float acc[4][4] = {};
  for (int kb = 0; kb < k_size / kScaleBlock; ++kb) {
    float part[4][4] = {};
    for (int k0 = kb * kScaleBlock; k0 < (kb + 1) * kScaleBlock; k0 += kStep) {
      for (int i = tid; i < kTileM * kStep; i += kThreads) {
        const int r = i / kStep, c = i % kStep, m = m0 + r;
        a_tile[c][r] = m < m_size ? fp8_to_float<F>(a[int64_t(m) * k_size + k0 + c]) : 0.0f;
      }
      for (int i = tid; i < kStep * kTileN; i += kThreads) {
        const int r = i / kTileN, c = i % kTileN;
        b_tile[r][c] = n0 + c < n_size ? fp8_to_float<F>(b[int64_t(k0 + r) * n_size + n0 + c]) : 0.0f;
      }
      __syncthreads();
      for (int k = 0; k < kStep; ++k) {
        float av[4], bv[4];
        for (int i = 0; i < 4; ++i) av[i] = a_tile[k][tm + i];
        for (int j = 0; j < 4; ++j) bv[j] = b_tile[k][tn + j];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) part[i][j] = fmaf(av[i], bv[j], part[i][j]);
      }
      __syncthreads();
    }
    // A 64-wide N tile never straddles a 128-wide scale block.
    const float sb = b_scale[kb * n_blocks + n0 / kScaleBlock];
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + tm + i;
      const float sa = m < m_size ? a_scale[int64_t(kb) * m_size + m] : 0.0f;
      for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(part[i][j], sa * sb, acc[i][j]);
    }
  }
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + tm + i;
    if (m >= m_size) continue;
    // N is a multiple of 16, so a thread's 4 columns are all inside N or all past it.
    if (n0 + tn >= n_size) continue;
    for (int j = 0; j < 4; ++j)
      out[int64_t(m) * n_size + n0 + tn + j] = float_to_bf16_bits(acc[i][j]);
  }
}

}  // namespace fp8gemm
