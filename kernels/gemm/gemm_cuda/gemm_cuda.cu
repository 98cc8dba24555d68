#include <cuda_runtime.h>

#include "../gemm/portable_kernel.h"
#include "gemm_cuda.h"
#include "tensor_core_kernel.cuh"

extern "C" cudaError_t gemm_cuda_run(uint16_t* out, const uint8_t* a, const uint8_t* b,
                                     const float* a_scale, const float* b_scale, int64_t m_size,
                                     int64_t n_size, int64_t k_size, cudaStream_t stream,
                                     int* used_tensor_cores) {
  using fp8gemm::Fp8Format;
  if (m_size < 1 || m_size > (int64_t{1} << 22) || n_size % 128 != 0 || k_size % 128 != 0)
    return cudaErrorInvalidValue;
  int device = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess) return status;
  int major = 0, minor = 0;
  if ((status = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device)) !=
          cudaSuccess ||
      (status = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device)) !=
          cudaSuccess)
    return status;
  // fp8 mma.sync exists from sm_89 (Ada) on.
  const bool tensor_cores = major * 10 + minor >= 89;
  if (used_tensor_cores != nullptr) *used_tensor_cores = tensor_cores;
  const int m = static_cast<int>(m_size), n = static_cast<int>(n_size), k = static_cast<int>(k_size);
  if (tensor_cores) {
    const dim3 grid(static_cast<unsigned>(n / fp8gemm::kTcTile),
                    static_cast<unsigned>((m + fp8gemm::kTcTile - 1) / fp8gemm::kTcTile));
    fp8gemm::gemm_tensor_core_kernel<<<grid, fp8gemm::kTcThreads, 0, stream>>>(
        out, a, b, a_scale, b_scale, m, n, k);
  } else {
    const dim3 grid(static_cast<unsigned>(n / fp8gemm::kTileN),
                    static_cast<unsigned>((m + fp8gemm::kTileM - 1) / fp8gemm::kTileM));
    fp8gemm::gemm_portable_kernel<Fp8Format::e4m3fn>
        <<<grid, fp8gemm::kThreads, 0, stream>>>(out, a, b, a_scale, b_scale, m, n, k);
  }
  return cudaGetLastError();
}

// For tests and benchmarks: run the portable kernel regardless of the GPU.
extern "C" cudaError_t gemm_cuda_run_portable(uint16_t* out, const uint8_t* a, const uint8_t* b,
                                              const float* a_scale, const float* b_scale,
                                              int64_t m_size, int64_t n_size, int64_t k_size,
                                              cudaStream_t stream) {
  const int m = static_cast<int>(m_size), n = static_cast<int>(n_size), k = static_cast<int>(k_size);
  const dim3 grid(static_cast<unsigned>(n / fp8gemm::kTileN),
                  static_cast<unsigned>((m + fp8gemm::kTileM - 1) / fp8gemm::kTileM));
  fp8gemm::gemm_portable_kernel<fp8gemm::Fp8Format::e4m3fn>
      <<<grid, fp8gemm::kThreads, 0, stream>>>(out, a, b, a_scale, b_scale, m, n, k);
  return cudaGetLastError();
}
