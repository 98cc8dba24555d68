#pragma once

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

}  // namespace fp8gemm
