// The tensor-core gemm kernel for NVIDIA sm_89 / sm_90 and float8_e4m3fn, using
// mma.sync.m16n8k32 with e4m3 inputs and float32 accumulation. Same contract as
// gemm/portable_kernel.h: out = sum over 128-wide K blocks of (a_block . b_block) *
// a_scale[kb, m] * b_scale[kb, n / 128], accumulated in float32, written as bfloat16.
//
// A 256-thread block computes a 128 x 128 tile of out; its 8 warps are laid out 2 (M) x 4 (N),
// each computing 64 x 32 as 4 x 4 mma tiles. One main-loop step covers one 128-wide K block,
// i.e. one scale block: the step's products accumulate in `part`, which is then scaled and added
// to `acc`. While a step computes from shared memory, the next step's tile is already being read
// from global memory into registers.
#pragma once

#include <cstdint>

#include "../gemm/fp8.h"

namespace fp8gemm {

constexpr int kTcTile = 128;
constexpr int kTcThreads = 256;
constexpr int kTcPitch = kScaleBlock + 16;  // bytes per shared row: 16-byte aligned, no conflicts

// Bytes of the A tile (128 rows x 128 k) and the B tile (128 k x 128 n) one thread moves.
struct TileChunks {
  uint4 a[4];
  uint4 b[4];
};

__device__ inline void load_tile(TileChunks& chunks, const uint8_t* __restrict__ a,
                                 const uint8_t* __restrict__ b, int m0, int n0, int64_t k0,
                                 int m_size, int n_size, int k_size) {
  const int tid = threadIdx.x;
  for (int i = 0; i < 4; ++i) {
    const int chunk = tid + i * kTcThreads;  // 1024 chunks of 16 bytes per operand
    const int r = chunk / 8, c = (chunk % 8) * 16;
    const int m = m0 + r;
    chunks.a[i] = m < m_size ? *reinterpret_cast<const uint4*>(a + int64_t(m) * k_size + k0 + c)
                             : make_uint4(0, 0, 0, 0);
    chunks.b[i] = *reinterpret_cast<const uint4*>(b + (k0 + r) * n_size + n0 + c);
  }
}

// A as [m][k]; B transposed to [n][k] so that a fragment's 4 consecutive k are one 32-bit word.
__device__ inline void store_tile(const TileChunks& chunks, uint8_t (*a_s)[kTcPitch],
                                  uint8_t (*b_s)[kTcPitch]) {
  const int tid = threadIdx.x;
  for (int i = 0; i < 4; ++i) {
    const int chunk = tid + i * kTcThreads;
    const int r = chunk / 8, c = (chunk % 8) * 16;
    *reinterpret_cast<uint4*>(&a_s[r][c]) = chunks.a[i];
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(&chunks.b[i]);
    for (int j = 0; j < 16; ++j) b_s[c + j][r] = bytes[j];
  }
}

__global__ __launch_bounds__(kTcThreads) void gemm_tensor_core_kernel(
    uint16_t* __restrict__ out, const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
    const float* __restrict__ a_scale, const float* __restrict__ b_scale, int m_size, int n_size,
    int k_size) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  __shared__ __align__(16) uint8_t a_s[kTcTile][kTcPitch];
  __shared__ __align__(16) uint8_t b_s[kTcTile][kTcPitch];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int group = lane / 4;       // mma "groupID"
  const int in_group = lane % 4;    // mma "threadID_in_group"
  const int wm = (warp / 4) * 64;   // warp's rows within the tile
  const int wn = (warp % 4) * 32;   // warp's columns within the tile
  const int m0 = blockIdx.y * kTcTile;
  const int n0 = blockIdx.x * kTcTile;
  const int k_blocks = k_size / kScaleBlock;
  const int n_blocks = n_size / kScaleBlock;

  float acc[4][4][4] = {};
  TileChunks chunks;
  load_tile(chunks, a, b, m0, n0, 0, m_size, n_size, k_size);
  for (int kb = 0; kb < k_blocks; ++kb) {
    __syncthreads();  // the previous step is done reading shared memory
    store_tile(chunks, a_s, b_s);
    __syncthreads();
    if (kb + 1 < k_blocks)
      load_tile(chunks, a, b, m0, n0, int64_t(kb + 1) * kScaleBlock, m_size, n_size, k_size);

    float part[4][4][4] = {};
    for (int ks = 0; ks < kScaleBlock; ks += 32) {
      uint32_t af[4][4], bf[4][2];
      for (int i = 0; i < 4; ++i) {
        const int row = wm + i * 16 + group;
        const int k = ks + in_group * 4;
        af[i][0] = *reinterpret_cast<const uint32_t*>(&a_s[row][k]);
        af[i][1] = *reinterpret_cast<const uint32_t*>(&a_s[row + 8][k]);
        af[i][2] = *reinterpret_cast<const uint32_t*>(&a_s[row][k + 16]);
        af[i][3] = *reinterpret_cast<const uint32_t*>(&a_s[row + 8][k + 16]);
      }
      for (int j = 0; j < 4; ++j) {
        const int col = wn + j * 8 + group;
        const int k = ks + in_group * 4;
        bf[j][0] = *reinterpret_cast<const uint32_t*>(&b_s[col][k]);
        bf[j][1] = *reinterpret_cast<const uint32_t*>(&b_s[col][k + 16]);
      }
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
          asm volatile(
              "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
              "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
              : "+f"(part[i][j][0]), "+f"(part[i][j][1]), "+f"(part[i][j][2]),
                "+f"(part[i][j][3])
              : "r"(af[i][0]), "r"(af[i][1]), "r"(af[i][2]), "r"(af[i][3]), "r"(bf[j][0]),
                "r"(bf[j][1]));
    }
    // The whole 128-wide N tile lies in one scale block; a_scale varies by row.
    const float sb = b_scale[kb * n_blocks + n0 / kScaleBlock];
    for (int i = 0; i < 4; ++i) {
      for (int half = 0; half < 2; ++half) {
        const int m = m0 + wm + i * 16 + group + half * 8;
        const float s = m < m_size ? a_scale[int64_t(kb) * m_size + m] * sb : 0.0f;
        for (int j = 0; j < 4; ++j) {
          acc[i][j][2 * half] = fmaf(part[i][j][2 * half], s, acc[i][j][2 * half]);
          acc[i][j][2 * half + 1] = fmaf(part[i][j][2 * half + 1], s, acc[i][j][2 * half + 1]);
        }
      }
    }
  }
  for (int i = 0; i < 4; ++i) {
    for (int half = 0; half < 2; ++half) {
      const int m = m0 + wm + i * 16 + group + half * 8;
      if (m >= m_size) continue;
      for (int j = 0; j < 4; ++j) {
        const int n = n0 + wn + j * 8 + in_group * 2;
        const uint32_t pair = uint32_t(float_to_bf16_bits(acc[i][j][2 * half])) |
                              (uint32_t(float_to_bf16_bits(acc[i][j][2 * half + 1])) << 16);
        *reinterpret_cast<uint32_t*>(out + int64_t(m) * n_size + n) = pair;
      }
    }
  }
#endif
}

}  // namespace fp8gemm
