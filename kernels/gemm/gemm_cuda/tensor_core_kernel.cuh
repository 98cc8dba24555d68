// The tensor-core gemm kernel for NVIDIA sm_89 / sm_90 and float8_e4m3fn, using
// mma.sync.m16n8k32 with e4m3 inputs and float32 accumulation. Same contract as
// gemm/portable_kernel.h: out = sum over 128-wide K blocks of (a_block . b_block) *
// a_scale[kb, m] * b_scale[kb, n / 128], accumulated in float32, written as bfloat16 — except
// that B arrives transposed, as bt (N x K, K contiguous), so both operands are K-contiguous.
//
// A 512-thread block computes a 128 x 128 tile of out; its 16 warps are laid out 4 (M) x 4 (N),
// each computing 32 x 32 as 2 x 4 mma tiles (few enough registers for 16 warps per SM). One main-loop step covers one 128-wide K block,
// i.e. one scale block: its products accumulate in `part`, which is then scaled and added to
// `acc`. Tiles move global -> shared with cp.async into two stages (the next block loads while
// this one computes), and shared -> registers with ldmatrix, whose 8 x 16-byte matrices are
// exactly the m16n8k32 fragments of K-contiguous 8-bit data.
#pragma once

#include <cstdint>

#include "../gemm/fp8.h"

namespace fp8gemm {

constexpr int kTcTile = 128;
constexpr int kTcThreads = 512;
constexpr int kTcWarpTilesM = 2;  // m16 tiles per warp (its 32 rows); n8 tiles per warp: 4
constexpr int kTcStages = 2;
constexpr int kTcPitch = kScaleBlock + 16;  // bytes per shared row: 16-byte aligned, conflict-free
constexpr int kTcStageBytes = 2 * kTcTile * kTcPitch;  // A and B tiles of one stage
constexpr int kTcSharedBytes = kTcStages * kTcStageBytes;

__device__ inline uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// 16 bytes global -> shared, asynchronously; with `valid` false the 16 bytes are zero-filled.
__device__ inline void copy_async_16(void* shared, const void* global, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(shared)),
               "l"(global), "r"(valid ? 16 : 0));
}

__device__ inline void load_stage(uint8_t* stage, const uint8_t* __restrict__ a,
                                  const uint8_t* __restrict__ bt, int m0, int n0, int64_t k0,
                                  int m_size, int n_size, int k_size) {
  uint8_t* a_s = stage;
  uint8_t* b_s = stage + kTcTile * kTcPitch;
  for (int i = 0; i < kTcTile * kScaleBlock / 16 / kTcThreads; ++i) {
    const int chunk = threadIdx.x + i * kTcThreads;  // 1024 chunks of 16 bytes per operand
    const int r = chunk / 8, c = (chunk % 8) * 16;
    const int m = m0 + r;
    // Rows past M read row 0 (any valid address) and are zero-filled.
    copy_async_16(a_s + r * kTcPitch + c, a + int64_t(m < m_size ? m : 0) * k_size + k0 + c,
                  m < m_size);
    // Likewise columns past N (the last column tile's, N a multiple of 16).
    const int n = n0 + r;
    copy_async_16(b_s + r * kTcPitch + c, bt + int64_t(n < n_size ? n : 0) * k_size + k0 + c,
                  n < n_size);
  }
  asm volatile("cp.async.commit_group;\n" ::);
}

__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const uint8_t* shared) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(shared)));
}

__global__ __launch_bounds__(kTcThreads, 1) void gemm_tensor_core_kernel(
    uint16_t* __restrict__ out, const uint8_t* __restrict__ a, const uint8_t* __restrict__ bt,
    const float* __restrict__ a_scale, const float* __restrict__ b_scale, int m_size, int n_size,
    int k_size) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  extern __shared__ __align__(16) uint8_t shared[];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int group = lane / 4;      // mma "groupID"
  const int in_group = lane % 4;   // mma "threadID_in_group"
  const int wm = (warp / 4) * 32;  // warp's rows within the tile
  const int wn = (warp % 4) * 32;  // warp's columns within the tile
  const int m0 = blockIdx.y * kTcTile;
  const int n0 = blockIdx.x * kTcTile;
  const int k_blocks = k_size / kScaleBlock;
  const int n_blocks = static_cast<int>(scale_columns(n_size));
  // ldmatrix: lane l gives the row address of matrix l / 8, row l % 8.
  const int ld_matrix = lane / 8, ld_row = lane % 8;

  float acc[kTcWarpTilesM][4][4] = {};
  load_stage(shared, a, bt, m0, n0, 0, m_size, n_size, k_size);
  for (int kb = 0; kb < k_blocks; ++kb) {
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads();  // this block's tile has landed; everyone is done with the other stage
    if (kb + 1 < k_blocks)
      load_stage(shared + ((kb + 1) % kTcStages) * kTcStageBytes, a, bt, m0, n0,
                 int64_t(kb + 1) * kScaleBlock, m_size, n_size, k_size);
    const uint8_t* a_s = shared + (kb % kTcStages) * kTcStageBytes;
    const uint8_t* b_s = a_s + kTcTile * kTcPitch;
    // This block's scales, read now so that their latency hides behind the MMAs.
    const float sb = b_scale[kb * n_blocks + n0 / kScaleBlock];
    float row_scale[kTcWarpTilesM][2];
    for (int i = 0; i < kTcWarpTilesM; ++i)
      for (int half = 0; half < 2; ++half) {
        const int m = m0 + wm + i * 16 + group + half * 8;
        row_scale[i][half] = m < m_size ? a_scale[int64_t(kb) * m_size + m] : 0.0f;
      }

    float part[kTcWarpTilesM][4][4] = {};
    for (int ks = 0; ks < kScaleBlock; ks += 32) {
      uint32_t af[kTcWarpTilesM][4], bf[4][2];
      for (int i = 0; i < kTcWarpTilesM; ++i) {
        // Matrices: rows 0-7 / 8-15 of the 16-row tile, k bytes 0-15 / 16-31.
        const int row = wm + i * 16 + ld_row + (ld_matrix % 2) * 8;
        ldmatrix_x4(af[i], a_s + row * kTcPitch + ks + (ld_matrix / 2) * 16);
      }
      for (int j = 0; j < 4; j += 2) {
        // Matrices: n 0-7 k 0-15, n 0-7 k 16-31, n 8-15 k 0-15, n 8-15 k 16-31.
        uint32_t r[4];
        const int col = wn + j * 8 + ld_row + (ld_matrix / 2) * 8;
        ldmatrix_x4(r, b_s + col * kTcPitch + ks + (ld_matrix % 2) * 16);
        bf[j][0] = r[0];
        bf[j][1] = r[1];
        bf[j + 1][0] = r[2];
        bf[j + 1][1] = r[3];
      }
      for (int i = 0; i < kTcWarpTilesM; ++i)
        for (int j = 0; j < 4; ++j)
          // Not volatile: a pure register operation the compiler may schedule freely.
          asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
              "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
              : "+f"(part[i][j][0]), "+f"(part[i][j][1]), "+f"(part[i][j][2]),
                "+f"(part[i][j][3])
              : "r"(af[i][0]), "r"(af[i][1]), "r"(af[i][2]), "r"(af[i][3]), "r"(bf[j][0]),
                "r"(bf[j][1]));
    }
    // The whole 128-wide N tile lies in one scale block; a_scale varies by row.
    for (int i = 0; i < kTcWarpTilesM; ++i) {
      for (int half = 0; half < 2; ++half) {
        const float s = row_scale[i][half] * sb;
        for (int j = 0; j < 4; ++j) {
          acc[i][j][2 * half] = fmaf(part[i][j][2 * half], s, acc[i][j][2 * half]);
          acc[i][j][2 * half + 1] = fmaf(part[i][j][2 * half + 1], s, acc[i][j][2 * half + 1]);
        }
      }
    }
  }
  for (int i = 0; i < kTcWarpTilesM; ++i) {
    for (int half = 0; half < 2; ++half) {
      const int m = m0 + wm + i * 16 + group + half * 8;
      if (m >= m_size) continue;
      for (int j = 0; j < 4; ++j) {
        const int n = n0 + wn + j * 8 + in_group * 2;
        if (n >= n_size) continue;  // N is even: both columns of a pair lie inside N or past it
        const uint32_t pair = uint32_t(float_to_bf16_bits(acc[i][j][2 * half])) |
                              (uint32_t(float_to_bf16_bits(acc[i][j][2 * half + 1])) << 16);
        *reinterpret_cast<uint32_t*>(out + int64_t(m) * n_size + n) = pair;
      }
    }
  }
#endif
}

}  // namespace fp8gemm
