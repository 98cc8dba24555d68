// HIP kernels of gemm: out (M x N, bf16) = sum over 128-wide K blocks of
// (a_block . b_block) * a_scale[kb, m] * b_scale[kb, n / 128], accumulated in float32.
//
// Both kernels compute a 64 x 64 output tile per 256-thread workgroup and handle any M (rows past
// M read as zero and are never written); N and K are multiples of 128 (checked by the binding).
#pragma once

#include <hip/hip_runtime.h>

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
  const int n_blocks = n_size / kScaleBlock;

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
        b_tile[r][c] = fp8_to_float<F>(b[int64_t(k0 + r) * n_size + n0 + c]);
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
    for (int j = 0; j < 4; ++j)
      out[int64_t(m) * n_size + n0 + tn + j] = float_to_bf16_bits(acc[i][j]);
  }
}

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
  const int n_blocks = n_size / kScaleBlock;

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
    {  // B: 128 k-rows x 64 bytes, 32 bytes per thread, stored transposed.
      const int kr = tid / 2, c = (tid % 2) * 32;
      const uint8_t* src = b + (k0 + kr) * n_size + n0 + c;
      for (int j = 0; j < 32; ++j) b_lds[c + j][kr] = src[j];
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
      for (int j = 0; j < 2; ++j)
        out[int64_t(m) * n_size + n0 + wn + j * 16 + lane % 16] = float_to_bf16_bits(acc[i][j][e]);
    }
  }
#endif
}

}  // namespace fp8gemm
