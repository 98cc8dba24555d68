#pragma once
// A stand-in for the ROCm torch header of this name; see c10/hip/HIPStream.h. Declares what
// aiter-flash-attn-ck's dropout path uses: the GPU generator and its Philox state.
#include <ATen/core/Generator.h>
#include <ATen/cuda/detail/PhiloxCudaStateRaw.cuh>

namespace at {
// A ROCm torch keeps the CUDA names for its HIP generator, as for its streams.
struct CUDAGeneratorImpl : public c10::GeneratorImpl {
  static c10::DeviceType device_type();
  PhiloxCudaState philox_cuda_state(uint64_t increment);
};
namespace cuda::detail {
const Generator& getDefaultCUDAGenerator(c10::DeviceIndex device_index = -1);
}  // namespace cuda::detail
}  // namespace at
