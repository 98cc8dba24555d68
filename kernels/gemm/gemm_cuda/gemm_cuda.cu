#include <cuda_runtime.h>

#include "../gemm/portable_kernel.h"
#include "device.h"
#include "gemm_cuda.h"
#include "tensor_core_kernel.cuh"

extern "C" int gemm_cuda_uses_tensor_cores() {
  // fp8 mma.sync exists from sm_89 (Ada) on.
  return fp8gemm::current_compute_capability() >= 89;
}

extern "C" cudaError_t gemm_cuda_run(uint16_t* out, const uint8_t* a, const uint8_t* b_or_bt,
                                     const float* a_scale, const float* b_scale, int64_t m_size,
                                     int64_t n_size, int64_t k_size, cudaStream_t stream) {
  using fp8gemm::Fp8Format;
  if (m_size < 1 || m_size > (int64_t{1} << 22) || n_size % 128 != 0 || k_size % 128 != 0)
    return cudaErrorInvalidValue;
  const int m = static_cast<int>(m_size), n = static_cast<int>(n_size), k = static_cast<int>(k_size);
  if (gemm_cuda_uses_tensor_cores()) {
    // Two stages of 128 x 144-byte A and B tiles: more than the 48 KB a kernel gets by default.
    cudaError_t status = cudaFuncSetAttribute(fp8gemm::gemm_tensor_core_kernel,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              fp8gemm::kTcSharedBytes);
    if (status != cudaSuccess) return status;
    const dim3 grid(static_cast<unsigned>(n / fp8gemm::kTcTile),
                    static_cast<unsigned>((m + fp8gemm::kTcTile - 1) / fp8gemm::kTcTile));
    fp8gemm::gemm_tensor_core_kernel<<<grid, fp8gemm::kTcThreads, fp8gemm::kTcSharedBytes,
                                       stream>>>(out, a, b_or_bt, a_scale, b_scale, m, n, k);
  } else {
    const dim3 grid(static_cast<unsigned>(n / fp8gemm::kTileN),
                    static_cast<unsigned>((m + fp8gemm::kTileM - 1) / fp8gemm::kTileM));
    fp8gemm::gemm_portable_kernel<Fp8Format::e4m3fn>
        <<<grid, fp8gemm::kThreads, 0, stream>>>(out, a, b_or_bt, a_scale, b_scale, m, n, k);
  }
  return cudaGetLastError();
}
