#pragma once

#include <atomic>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace fp8gemm {

// The current device's compute capability as major * 10 + minor (90 for an H100), 0 if unknown.
inline int current_compute_capability() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
    return 0;
  return major * 10 + minor;
}

// A kernel's dynamic shared memory above the 48 KB a launch gets by default is an opt-in per
// device that lasts for the process: made once per device (bit d of `done`), not before every
// launch (a driver call each time).
inline cudaError_t opt_in_shared_memory(const void* kernel, int bytes, int device,
                                        std::atomic<uint64_t>& done) {
  if (bytes < (48 << 10)) return cudaSuccess;
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t{1} << device : 0;
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0) return cudaSuccess;
  const cudaError_t status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (status == cudaSuccess) done.fetch_or(bit, std::memory_order_release);
  return status;
}

}  // namespace fp8gemm
