#include <hip/hip_runtime.h>

#include <cstring>

#include "mfma_kernel.h"
#include "gemm_launcher.h"

extern "C" hipError_t gemm_rocm_run(uint16_t* out, const uint8_t* a, const uint8_t* b,
                                    const float* a_scale, const float* b_scale, int64_t m_size,
                                    int64_t n_size, int64_t k_size, int format,
                                    hipStream_t stream, int* used_matrix_cores) {
  using fp8gemm::Fp8Format;
  // The grid's y dimension holds the row tiles: kMaxM is 65535 of them (the binding's limit too).
  static_assert(fp8gemm::kMaxM == int64_t{65535} * fp8gemm::kTileM, "M limit and tile disagree");
  if (m_size < 1 || m_size > fp8gemm::kMaxM || n_size < 1 || n_size % fp8gemm::kNMultiple != 0 || k_size % 128 != 0)
    return hipErrorInvalidValue;
  int device = 0;
  hipError_t status = hipGetDevice(&device);
  if (status != hipSuccess) return status;
  hipDeviceProp_t properties;
  status = hipGetDeviceProperties(&properties, device);
  if (status != hipSuccess) return status;
  const bool mi300 = std::strncmp(properties.gcnArchName, "gfx94", 5) == 0;
  const bool matrix_cores = mi300 && format == static_cast<int>(Fp8Format::e4m3fnuz);
  if (used_matrix_cores != nullptr) *used_matrix_cores = matrix_cores;

  const dim3 grid(static_cast<unsigned>((n_size + fp8gemm::kTileN - 1) / fp8gemm::kTileN),
                  static_cast<unsigned>((m_size + fp8gemm::kTileM - 1) / fp8gemm::kTileM));
  const dim3 block(fp8gemm::kThreads);
  const int m = static_cast<int>(m_size), n = static_cast<int>(n_size), k = static_cast<int>(k_size);
  if (matrix_cores) {
    hipLaunchKernelGGL(fp8gemm::gemm_mfma_fnuz_kernel, grid, block, 0, stream, out, a, b, a_scale,
                       b_scale, m, n, k);
  } else if (format == static_cast<int>(Fp8Format::e4m3fnuz)) {
    hipLaunchKernelGGL(fp8gemm::gemm_portable_kernel<Fp8Format::e4m3fnuz>, grid, block, 0, stream,
                       out, a, b, a_scale, b_scale, m, n, k);
  } else {
    hipLaunchKernelGGL(fp8gemm::gemm_portable_kernel<Fp8Format::e4m3fn>, grid, block, 0, stream, out,
                       a, b, a_scale, b_scale, m, n, k);
  }
  return hipGetLastError();
}
