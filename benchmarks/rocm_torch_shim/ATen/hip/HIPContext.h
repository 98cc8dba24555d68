#pragma once
// A stand-in for the ROCm torch header of this name; see c10/hip/HIPStream.h.
#include <c10/hip/HIPStream.h>

namespace at::cuda {
using c10::cuda::CUDAStream;
using c10::cuda::getCurrentCUDAStream;
}  // namespace at::cuda
