#pragma once
// A stand-in for the ROCm torch header of this name; see c10/hip/HIPStream.h.
#include <optional>

#include <c10/hip/HIPStream.h>

namespace c10::cuda {
class OptionalCUDAGuard {
 public:
  explicit OptionalCUDAGuard(std::optional<c10::Device> device);
  explicit OptionalCUDAGuard(c10::Device device);
  ~OptionalCUDAGuard();
};
}  // namespace c10::cuda

namespace at::cuda {
using c10::cuda::OptionalCUDAGuard;
}  // namespace at::cuda
