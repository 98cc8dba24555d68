#pragma once
// A stand-in for the ROCm torch header of this name, which a CPU or CUDA torch does not ship: just
// the declarations the corpus kernels use, so benchmarks/hipify_corpus.py can check that their
// hipified sources compile past it. Nothing here is linked or run.
#include <c10/core/Device.h>
#include <hip/hip_runtime.h>

namespace c10::cuda {
// A ROCm torch keeps the CUDA names for its HIP stream ("masquerading as CUDA").
class CUDAStream {
 public:
  hipStream_t stream() const;
  operator hipStream_t() const;
};
CUDAStream getCurrentCUDAStream(c10::DeviceIndex device = -1);
}  // namespace c10::cuda
