#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "../gemm/fp8.h"
#include "registration.h"
#include "torch_binding.h"

#if defined(CPU_KERNEL)
#include "../cpu/gemm_cpu.h"
#elif defined(ROCM_KERNEL)
#include <hip/hip_runtime_api.h>

#include "../gemm/gemm_launcher.h"
// torch's current stream when torch is a ROCm build; a CPU torch (compile-only builds) cannot
// hold GPU tensors anyway.
#if defined(BUILD2CMAKE_TORCH_MATCHES_BACKEND)
#include <c10/hip/HIPStream.h>
#endif
#elif defined(CUDA_KERNEL)
#include <cuda_runtime_api.h>

#include "../gemm_cuda/gemm_cuda.h"
#include "../gemm_cuda/gemm_sm90.h"
#if defined(BUILD2CMAKE_TORCH_MATCHES_BACKEND)
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif
#endif

namespace {

using fp8gemm::Fp8Format;

void check_matrix(const char* name, const at::Tensor& t, at::IntArrayRef shape,
                  const char* shape_text, const at::Tensor& a) {
  TORCH_CHECK(t.dim() == 2 && t.sizes() == shape, "gemm: ", name, " must have shape ", shape_text,
              " = ", shape, ", got ", t.sizes());
  TORCH_CHECK(t.device() == a.device(), "gemm: ", name, " must be on a's device ", a.device(),
              ", got ", t.device());
  TORCH_CHECK(t.is_contiguous(), "gemm: ", name, " must be contiguous (row-major), got strides ",
              t.strides());
}

void check_aligned(const char* name, const at::Tensor& t) {
  const auto address = reinterpret_cast<std::uintptr_t>(t.data_ptr());
  TORCH_CHECK(address % fp8gemm::kPointerAlignment == 0, "gemm: ", name,
              "'s data must start at a 16-byte aligned address, got one ",
              address % fp8gemm::kPointerAlignment,
              " bytes past it (a view at storage offset ", t.storage_offset(),
              "); pass ", name, ".clone()");
}

// The operands as the kernels take them.
struct Arguments {
  Fp8Format format;
  // b is (K, N) either row-major (N contiguous) or column-major (K contiguous: b = w.t() for a
  // weight w stored (N, K), the layout cuBLAS and DeepGEMM take). The tensor-core kernels read
  // the column-major form as it is and transpose a row-major b on every call.
  bool b_column_major;
};

// Checks every argument before anything runs.
Arguments check_arguments(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
                          const at::Tensor& a_scale, const at::Tensor& b_scale) {
  TORCH_CHECK(a.scalar_type() == at::kFloat8_e4m3fnuz ||
                  a.scalar_type() == at::kFloat8_e4m3fn,
              "gemm: a must be float8_e4m3fnuz or float8_e4m3fn, got ", a.scalar_type());
  TORCH_CHECK(b.scalar_type() == a.scalar_type(), "gemm: b must have a's dtype ", a.scalar_type(),
              ", got ", b.scalar_type());
  TORCH_CHECK(a_scale.scalar_type() == at::kFloat, "gemm: a_scale must be float32, got ",
              a_scale.scalar_type());
  TORCH_CHECK(b_scale.scalar_type() == at::kFloat, "gemm: b_scale must be float32, got ",
              b_scale.scalar_type());
  TORCH_CHECK(out.scalar_type() == at::kBFloat16, "gemm: out must be bfloat16, got ",
              out.scalar_type());
  TORCH_CHECK(a.dim() == 2, "gemm: a must be 2-D (M, K), got shape ", a.sizes());
  TORCH_CHECK(b.dim() == 2, "gemm: b must be 2-D (K, N), got shape ", b.sizes());
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  TORCH_CHECK(m >= 1, "gemm: a must have at least one row (M >= 1), got shape ", a.sizes());
  TORCH_CHECK(k > 0 && k % fp8gemm::kScaleBlock == 0,
              "gemm: K = a.size(1) must be a positive multiple of 128, got ", k);
  TORCH_CHECK(n > 0 && n % fp8gemm::kNMultiple == 0,
              "gemm: N = b.size(1) must be a positive multiple of 16 (16-byte rows of fp8), got ", n);
  TORCH_CHECK(m <= fp8gemm::kMaxM, "gemm: M = a.size(0) must be at most ", fp8gemm::kMaxM,
              " (65535 tiles of 64 rows), got ", m);
  TORCH_CHECK(k <= (int64_t{1} << 24) && n <= (int64_t{1} << 22),
              "gemm: shape M x N x K = ", m, " x ", n, " x ", k, " is larger than supported");
  TORCH_CHECK(a.is_contiguous(), "gemm: a must be contiguous (row-major), got strides ",
              a.strides());
  TORCH_CHECK(b.dim() == 2 && b.size(0) == k, "gemm: b must have shape (K, N) = (", k, ", N), got ",
              b.sizes());
  TORCH_CHECK(b.device() == a.device(), "gemm: b must be on a's device ", a.device(), ", got ",
              b.device());
  const bool b_column_major = !b.is_contiguous() && b.t().is_contiguous();
  TORCH_CHECK(b.is_contiguous() || b_column_major,
              "gemm: b must be contiguous (row-major, strides (N, 1)) or column-major (strides "
              "(1, K), e.g. w.t() for w of shape (N, K)), got strides ",
              b.strides());
  check_matrix("a_scale", a_scale, {k / 128, m}, "(K/128, M)", a);
  check_matrix("b_scale", b_scale, {k / 128, fp8gemm::scale_columns(n)}, "(K/128, ceil(N/128))",
               a);
  check_matrix("out", out, {m, n}, "(M, N)", a);
  check_aligned("a", a);
  check_aligned("b", b);
  check_aligned("a_scale", a_scale);
  check_aligned("b_scale", b_scale);
  check_aligned("out", out);
  return Arguments{
      a.scalar_type() == at::kFloat8_e4m3fnuz ? Fp8Format::e4m3fnuz : Fp8Format::e4m3fn,
      b_column_major};
}

template <typename T>
T* data(const at::Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

#if defined(CUDA_KERNEL)
// Which of the CUDA build's kernels runs: the sm_90a ones on compute capability 9.0, the mma.sync
// tensor-core kernel elsewhere from sm_89 on, the portable one before; GEMM_CUDA_KERNEL=mma or
// =portable names one of the latter two instead (the benchmark and the GPU tests compare them;
// "portable" is also the kernel ROCm builds run off MI300, so an NVIDIA GPU tests its code).
enum class CudaKernel { sm90, mma, portable };

CudaKernel cuda_kernel() {
  const bool mma_here = gemm_cuda_uses_tensor_cores();
  const char* text = std::getenv("GEMM_CUDA_KERNEL");
  const std::string choice = text != nullptr ? text : "";
  if (choice.empty()) {
    if (gemm_sm90_available()) return CudaKernel::sm90;
    return mma_here ? CudaKernel::mma : CudaKernel::portable;
  }
  TORCH_CHECK(choice == "mma" || choice == "portable", "gemm: GEMM_CUDA_KERNEL='", choice,
              "' names no kernel; valid: mma, portable (or unset: the best one here)");
  TORCH_CHECK(choice == "portable" || mma_here,
              "gemm: GEMM_CUDA_KERNEL=mma needs compute capability 8.9 or newer");
  return choice == "mma" ? CudaKernel::mma : CudaKernel::portable;
}

int env_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::atoi(text) : fallback;
}

// The sm_90a configuration and tile order for this problem: the dispatch table's choice, or what
// GEMM_SM90_CONFIG / GEMM_SM90_SWIZZLE / GEMM_SM90_RASTER / GEMM_SM90_SHIFT name (the benchmark
// times each).
int sm90_config(int64_t m, int64_t n, int64_t k, Sm90Order* order) {
  int config = gemm_sm90_choose(m, n, k, order);
  order->swizzle = env_int("GEMM_SM90_SWIZZLE", order->swizzle);
  order->raster = env_int("GEMM_SM90_RASTER", order->raster);
  order->shift = env_int("GEMM_SM90_SHIFT", order->shift);
  TORCH_CHECK((order->swizzle == 1 || order->swizzle == 2 || order->swizzle == 4 ||
               order->swizzle == 8) &&
                  order->raster >= 0 && order->raster <= 2,
              "gemm: GEMM_SM90_SWIZZLE must be 1, 2, 4 or 8 and GEMM_SM90_RASTER 0, 1 or 2, got ",
              order->swizzle, " and ", order->raster);
  TORCH_CHECK(order->shift >= 0 && order->shift <= 2,
              "gemm: GEMM_SM90_SHIFT must be 0, 1 or 2, got ", order->shift);
  const char* name = std::getenv("GEMM_SM90_CONFIG");
  if (name == nullptr || *name == '\0') return config;
  std::string valid;
  for (int i = 0; i < gemm_sm90_config_count(); ++i) {
    if (std::string(name) == gemm_sm90_config_name(i)) {
      TORCH_CHECK(gemm_sm90_config_takes_n(i, n), "gemm: GEMM_SM90_CONFIG=", name,
                  " is one of CUTLASS's configurations, which take N a multiple of 128; got N = ",
                  n, " (our own, own_*, take any multiple of 16)");
      return i;
    }
    valid += (i ? ", " : "") + std::string(gemm_sm90_config_name(i));
  }
  TORCH_CHECK(false, "gemm: GEMM_SM90_CONFIG='", name, "' is not a configuration; valid: ", valid);
}
#endif

}  // namespace

void gemm(at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
          const at::Tensor& a_scale, const at::Tensor& b_scale) {
  const Arguments args = check_arguments(out, a, b, a_scale, b_scale);
  const Fp8Format format = args.format;
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
#if defined(CPU_KERNEL) || defined(ROCM_KERNEL)
  // These kernels read b row-major: a column-major b costs one copy.
  const at::Tensor b_rows = args.b_column_major ? b.contiguous() : b;
#endif
#if defined(CPU_KERNEL)
  TORCH_CHECK(a.is_cpu(), "gemm: this is the CPU build of gemm; a is on ", a.device());
  gemm_cpu_run(data<uint16_t>(out), data<uint8_t>(a), data<uint8_t>(b_rows), data<float>(a_scale),
               data<float>(b_scale), m, n, k, format);
#elif defined(ROCM_KERNEL)
  int devices = 0;
  const hipError_t found = hipGetDeviceCount(&devices);
  TORCH_CHECK(found == hipSuccess && devices > 0,
              "gemm: no ROCm device is present (hipGetDeviceCount: ",
              found == hipSuccess ? "0 devices" : hipGetErrorString(found), ")");
  TORCH_CHECK(a.is_cuda(), "gemm: a must be on the ROCm device, got ", a.device());
  TORCH_CHECK(hipSetDevice(a.get_device()) == hipSuccess, "gemm: cannot select device ",
              a.device());
#if defined(BUILD2CMAKE_TORCH_MATCHES_BACKEND)
  const hipStream_t stream = c10::hip::getCurrentHIPStream(a.get_device()).stream();
#else
  const hipStream_t stream = nullptr;
#endif
  const hipError_t status = gemm_rocm_run(data<uint16_t>(out), data<uint8_t>(a),
                                          data<uint8_t>(b_rows), data<float>(a_scale),
                                          data<float>(b_scale), m, n, k, static_cast<int>(format),
                                          stream, nullptr);
  TORCH_CHECK(status == hipSuccess, "gemm: HIP launch failed: ", hipGetErrorString(status));
#elif defined(CUDA_KERNEL)
  TORCH_CHECK(format == Fp8Format::e4m3fn,
              "gemm: float8_e4m3fnuz is not supported on CUDA (NVIDIA GPUs take the OCP format); "
              "convert a and b to float8_e4m3fn");
  int devices = 0;
  const cudaError_t found = cudaGetDeviceCount(&devices);
  TORCH_CHECK(found == cudaSuccess && devices > 0,
              "gemm: no CUDA device is present (cudaGetDeviceCount: ",
              found == cudaSuccess ? "0 devices" : cudaGetErrorString(found), ")");
  TORCH_CHECK(a.is_cuda(), "gemm: a must be on the CUDA device, got ", a.device());
#if defined(BUILD2CMAKE_TORCH_MATCHES_BACKEND)
  const c10::cuda::CUDAGuard guard(a.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(a.get_device()).stream();
#else
  TORCH_CHECK(cudaSetDevice(a.get_device()) == cudaSuccess, "gemm: cannot select ", a.device());
  const cudaStream_t stream = nullptr;
#endif
  const CudaKernel kernel = cuda_kernel();
  if (kernel == CudaKernel::portable) {
    // The portable kernel reads b row-major.
    const at::Tensor b_rows = args.b_column_major ? b.contiguous() : b;
    const cudaError_t status =
        gemm_cuda_run(data<uint16_t>(out), data<uint8_t>(a), data<uint8_t>(b_rows),
                      data<float>(a_scale), data<float>(b_scale), m, n, k, 0, stream);
    TORCH_CHECK(status == cudaSuccess, "gemm: CUDA launch failed: ", cudaGetErrorString(status));
    return;
  }
  // The tensor-core kernels read b as bt (N x K, K contiguous): a column-major b is that already;
  // a row-major one is transposed into a temporary (2 |b| bytes of memory traffic).
  at::Tensor bt_storage;
  const uint8_t* bt = data<uint8_t>(b);
  if (!args.b_column_major) {
    bt_storage = at::empty({n, k}, b.options());
    const cudaError_t status =
        gemm_cuda_transpose_b(data<uint8_t>(bt_storage), data<uint8_t>(b), k, n, stream);
    TORCH_CHECK(status == cudaSuccess, "gemm: CUDA launch failed (transposing b): ",
                cudaGetErrorString(status));
    bt = data<uint8_t>(bt_storage);
  }
  if (kernel == CudaKernel::sm90) {
    Sm90Order order{};
    const int config = sm90_config(m, n, k, &order);
    // CUTLASS's TMA wants a_scale's rows 16-byte aligned: pad M to a multiple of 4 if needed.
    const int64_t a_scale_ld = (m + 3) / 4 * 4;
    at::Tensor a_scale_operand = a_scale;
    if (a_scale_ld != m) {
      a_scale_operand = at::zeros({k / 128, a_scale_ld}, a_scale.options());
      a_scale_operand.narrow(1, 0, m).copy_(a_scale);
    }
    const size_t workspace_bytes =
        gemm_sm90_workspace_bytes(config, order, m, n, k, a_scale_ld);
    at::Tensor workspace;
    if (workspace_bytes != 0)
      workspace = at::empty({static_cast<int64_t>(workspace_bytes)}, a.options().dtype(at::kByte));
    const cudaError_t status = gemm_sm90_run(
        config, order, data<uint16_t>(out), data<uint8_t>(a), bt, data<float>(a_scale_operand),
        a_scale_ld, data<float>(b_scale), m, n, k,
        workspace_bytes != 0 ? workspace.data_ptr() : nullptr, stream);
    TORCH_CHECK(status == cudaSuccess, "gemm: CUDA launch failed (", gemm_sm90_config_name(config),
                "): ", cudaGetErrorString(status));
    return;
  }
  const cudaError_t status = gemm_cuda_run(data<uint16_t>(out), data<uint8_t>(a), bt,
                                           data<float>(a_scale), data<float>(b_scale), m, n, k, 1,
                                           stream);
  TORCH_CHECK(status == cudaSuccess, "gemm: CUDA launch failed: ", cudaGetErrorString(status));
#endif
}

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("gemm(Tensor! out, Tensor a, Tensor b, Tensor a_scale, Tensor b_scale) -> ()");
#if defined(CPU_KERNEL)
  ops.impl("gemm", at::kCPU, &gemm);
#elif defined(ROCM_KERNEL) || defined(CUDA_KERNEL)
  // PyTorch on ROCm dispatches HIP tensors through the CUDA key.
  ops.impl("gemm", at::kCUDA, &gemm);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
