// The H100 (sm_90a) path: CUTLASS's warp-specialised TMA + wgmma FP8 GEMM with block-wise scale
// promotion, configured for this op's layouts so that nothing is copied before the launch:
//   a        (M, K) row-major e4m3            -> A, K-major
//   bt       (N, K) row-major e4m3 (b^T)      -> B, K-major ("column-major B")
//   a_scale  (K/128, M) : one scale per row and 128-wide K block, M contiguous -> SFA, MN-major
//   b_scale  (K/128, N/128), N/128 contiguous                                  -> SFB, MN-major
//   out      (M, N) row-major bf16            -> D (no C operand)
#include "gemm_sm90.h"

#include "device.h"

#include "cute/tensor.hpp"
#include "cutlass/detail/blockwise_scale_layout.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

namespace {

using namespace cute;

using ElementA = cutlass::float_e4m3_t;
using ElementB = cutlass::float_e4m3_t;
using ElementD = cutlass::bfloat16_t;
using ElementAccumulator = float;
using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutD = cutlass::layout::RowMajor;
constexpr int kAlignmentA = 16;  // elements per 16-byte TMA access
constexpr int kAlignmentB = 16;
constexpr int kAlignmentD = 8;

using TileShape = Shape<_128, _128, _128>;
// Two CTAs along N share (multicast) the A tile.
using ClusterShape = Shape<_1, _2, _1>;

using ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<1, 128, 128, cute::GMMA::Major::MN,
                                                              cute::GMMA::Major::MN>;
using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, ElementAccumulator, float, void, LayoutD,
    kAlignmentD, ElementD, LayoutD, kAlignmentD,
    cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA,
    cute::tuple<LayoutA, LayoutSFA>, kAlignmentA, ElementB, cute::tuple<LayoutB, LayoutSFB>,
    kAlignmentB, ElementAccumulator, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename CollectiveEpilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8Blockwise>::CollectiveOp;

// The persistent data-parallel scheduler (each CTA walks whole output tiles). Measured on the
// H100 against stream-K at the seven benchmark shapes: 1.1-1.3x faster at K = 256, within 5% at
// the other shapes; see benchmarks/RESULTS.md.
using GemmKernel =
    cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                         CollectiveEpilogue, cutlass::gemm::PersistentScheduler>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

int sm_count(int device) {
  int count = 0;
  cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
  return count;
}

typename Gemm::Arguments make_arguments(uint16_t* out, const uint8_t* a, const uint8_t* bt,
                                        const float* a_scale, int64_t a_scale_ld,
                                        const float* b_scale, int m, int n, int k) {
  using StrideA = typename Gemm::GemmKernel::StrideA;
  using StrideB = typename Gemm::GemmKernel::StrideB;
  using StrideD = typename Gemm::GemmKernel::StrideD;
  const StrideA stride_a = cutlass::make_cute_packed_stride(StrideA{}, make_shape(m, k, 1));
  const StrideB stride_b = cutlass::make_cute_packed_stride(StrideB{}, make_shape(n, k, 1));
  const StrideD stride_d = cutlass::make_cute_packed_stride(StrideD{}, make_shape(m, n, 1));
  // a_scale's rows may be padded past M (TMA wants 16-byte aligned rows): describe it as an
  // (a_scale_ld x K) problem; the rows past M only ever meet A's out-of-bounds zeros.
  const LayoutSFA layout_sfa = ScaleConfig::tile_atom_to_shape_SFA(
      make_shape(static_cast<int>(a_scale_ld), n, k, 1));
  const LayoutSFB layout_sfb = ScaleConfig::tile_atom_to_shape_SFB(make_shape(m, n, k, 1));

  int device = 0;
  cudaGetDevice(&device);
  cutlass::KernelHardwareInfo hw_info;
  hw_info.device_id = device;
  hw_info.sm_count = sm_count(device);

  typename Gemm::Arguments arguments{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {m, n, k, 1},
      {reinterpret_cast<const ElementA*>(a), stride_a, reinterpret_cast<const ElementB*>(bt),
       stride_b, a_scale, layout_sfa, b_scale, layout_sfb},
      {{}, nullptr, stride_d, reinterpret_cast<ElementD*>(out), stride_d},
      hw_info};
  arguments.epilogue.thread.alpha = 1.0f;
  arguments.epilogue.thread.beta = 0.0f;
  return arguments;
}

}  // namespace

extern "C" int gemm_sm90_available() {
  // sm_90a code runs on compute capability 9.0 and nothing else.
  return fp8gemm::current_compute_capability() == 90;
}

extern "C" size_t gemm_sm90_workspace_bytes(int64_t m, int64_t n, int64_t k,
                                            int64_t a_scale_ld) {
  const typename Gemm::Arguments arguments =
      make_arguments(nullptr, nullptr, nullptr, nullptr, a_scale_ld, nullptr,
                     static_cast<int>(m), static_cast<int>(n), static_cast<int>(k));
  return Gemm::get_workspace_size(arguments);
}

extern "C" cudaError_t gemm_sm90_run(uint16_t* out, const uint8_t* a, const uint8_t* bt,
                                     const float* a_scale, int64_t a_scale_ld,
                                     const float* b_scale, int64_t m, int64_t n, int64_t k,
                                     void* workspace, cudaStream_t stream) {
  if (m < 1 || m > (int64_t{1} << 22) || n % 128 != 0 || k % 128 != 0 || a_scale_ld < m ||
      a_scale_ld % 4 != 0)
    return cudaErrorInvalidValue;
  const typename Gemm::Arguments arguments =
      make_arguments(out, a, bt, a_scale, a_scale_ld, b_scale, static_cast<int>(m),
                     static_cast<int>(n), static_cast<int>(k));
  Gemm gemm;
  if (gemm.can_implement(arguments) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
  if (gemm.initialize(arguments, workspace, stream) != cutlass::Status::kSuccess)
    return cudaErrorLaunchFailure;
  if (gemm.run(stream) != cutlass::Status::kSuccess) {
    const cudaError_t error = cudaGetLastError();
    return error != cudaSuccess ? error : cudaErrorLaunchFailure;
  }
  return cudaGetLastError();
}
