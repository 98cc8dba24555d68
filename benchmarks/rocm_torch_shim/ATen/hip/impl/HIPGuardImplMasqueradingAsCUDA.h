#pragma once
// A stand-in for the ROCm torch header of this name; see c10/hip/HIPStream.h. The HIP names a
// ROCm torch gives its CUDA-named guard and stream (aiter-flash-attn-ck uses them).
#include <c10/hip/HIPGuard.h>
#include <c10/hip/HIPStream.h>

namespace at::hip {
using OptionalHIPGuardMasqueradingAsCUDA = c10::cuda::OptionalCUDAGuard;
inline hipStream_t getCurrentHIPStream(c10::DeviceIndex device = -1) {
  return c10::cuda::getCurrentCUDAStream(device).stream();
}
}  // namespace at::hip
