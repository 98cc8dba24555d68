#include <cuda_runtime.h>

#include "../gemm/portable_kernel.h"
#include "device.h"
#include "gemm_cuda.h"
#include "tensor_core_kernel.cuh"

extern "C" int gemm_cuda_uses_tensor_cores() {
  // fp8 mma.sync exists from sm_89 (Ada) on.
  return fp8gemm::current_compute_capability() >= 89;
}

namespace {

constexpr int kTransposeTile = 128;  // bytes of K and of N per block
constexpr int kTransposePitch = kTransposeTile + 4;

// bt (N x K) = b (K x N)^T for one-byte elements. Reads b in 16-byte pieces along its rows,
// writes bt in 32-byte pieces (a whole sector) along its rows; the tile in shared memory is
// padded by one bank so that the column reads of a warp fall in different banks. The last column
// of tiles may overhang N (a multiple of 16): its pieces past N are neither read nor written.
__global__ void __launch_bounds__(256) transpose_bytes_kernel(uint8_t* __restrict__ bt,
                                                              const uint8_t* __restrict__ b,
                                                              int k, int n) {
  __shared__ __align__(16) uint8_t tile[kTransposeTile][kTransposePitch];
  const int64_t k0 = int64_t(blockIdx.x) * kTransposeTile;
  const int64_t n0 = int64_t(blockIdx.y) * kTransposeTile;
  for (int j = threadIdx.x; j < kTransposeTile * kTransposeTile / 16; j += blockDim.x) {
    const int row = j / (kTransposeTile / 16), col = (j % (kTransposeTile / 16)) * 16;
    if (n0 + col >= n) continue;
    const uint4 v = *reinterpret_cast<const uint4*>(b + (k0 + row) * n + n0 + col);
    uint32_t* dst = reinterpret_cast<uint32_t*>(&tile[row][col]);  // 4-byte aligned rows
    dst[0] = v.x;
    dst[1] = v.y;
    dst[2] = v.z;
    dst[3] = v.w;
  }
  __syncthreads();
  for (int j = threadIdx.x; j < kTransposeTile * kTransposeTile / 32; j += blockDim.x) {
    const int col = j % kTransposeTile, row0 = (j / kTransposeTile) * 32;
    if (n0 + col >= n) continue;
    uint32_t words[8];
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      words[w] = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) words[w] |= uint32_t(tile[row0 + 4 * w + i][col]) << (8 * i);
    }
    uint4* dst = reinterpret_cast<uint4*>(bt + (n0 + col) * k + k0 + row0);
    dst[0] = make_uint4(words[0], words[1], words[2], words[3]);
    dst[1] = make_uint4(words[4], words[5], words[6], words[7]);
  }
}

}  // namespace

extern "C" cudaError_t gemm_cuda_transpose_b(uint8_t* bt, const uint8_t* b, int64_t k_size,
                                             int64_t n_size, cudaStream_t stream) {
  const int64_t n_tiles = (n_size + kTransposeTile - 1) / kTransposeTile;
  if (k_size % kTransposeTile != 0 || n_size % fp8gemm::kNMultiple != 0 || k_size < 1 ||
      n_size < 1 || k_size / kTransposeTile > 0x7fffffff || n_tiles > 65535)
    return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(k_size / kTransposeTile), static_cast<unsigned>(n_tiles));
  transpose_bytes_kernel<<<grid, 256, 0, stream>>>(bt, b, static_cast<int>(k_size),
                                                   static_cast<int>(n_size));
  return cudaGetLastError();
}

extern "C" cudaError_t gemm_cuda_run(uint16_t* out, const uint8_t* a, const uint8_t* b_or_bt,
                                     const float* a_scale, const float* b_scale, int64_t m_size,
                                     int64_t n_size, int64_t k_size, int tensor_cores,
                                     cudaStream_t stream) {
  using fp8gemm::Fp8Format;
  if (m_size < 1 || m_size > fp8gemm::kMaxM || n_size < 1 || n_size % fp8gemm::kNMultiple != 0 ||
      n_size > (int64_t{1} << 22) || k_size % 128 != 0 ||
      (tensor_cores && !gemm_cuda_uses_tensor_cores()))
    return cudaErrorInvalidValue;
  const int m = static_cast<int>(m_size), n = static_cast<int>(n_size), k = static_cast<int>(k_size);
  if (tensor_cores) {
    // Two stages of 128 x 144-byte A and B tiles: more than the 48 KB a kernel gets by default.
    cudaError_t status = cudaFuncSetAttribute(fp8gemm::gemm_tensor_core_kernel,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              fp8gemm::kTcSharedBytes);
    if (status != cudaSuccess) return status;
    const dim3 grid(static_cast<unsigned>((n + fp8gemm::kTcTile - 1) / fp8gemm::kTcTile),
                    static_cast<unsigned>((m + fp8gemm::kTcTile - 1) / fp8gemm::kTcTile));
    fp8gemm::gemm_tensor_core_kernel<<<grid, fp8gemm::kTcThreads, fp8gemm::kTcSharedBytes,
                                       stream>>>(out, a, b_or_bt, a_scale, b_scale, m, n, k);
  } else {
    const dim3 grid(static_cast<unsigned>((n + fp8gemm::kTileN - 1) / fp8gemm::kTileN),
                    static_cast<unsigned>((m + fp8gemm::kTileM - 1) / fp8gemm::kTileM));
    fp8gemm::gemm_portable_kernel<Fp8Format::e4m3fn>
        <<<grid, fp8gemm::kThreads, 0, stream>>>(out, a, b_or_bt, a_scale, b_scale, m, n, k);
  }
  return cudaGetLastError();
}
