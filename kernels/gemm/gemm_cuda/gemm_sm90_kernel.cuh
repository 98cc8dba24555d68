// One CUTLASS configuration of the H100 (sm_90a) path: the warp-specialised TMA + wgmma FP8 GEMM
// with block-wise scale promotion, for this op's layouts, so that nothing is copied before the
// launch:
//   a        (M, K) row-major e4m3                          -> A, K-major
//   bt       (N, K) row-major e4m3 (b column-major)          -> B, K-major
//   a_scale  (K/128, a_scale_ld): one scale per row and 128-wide K block, M contiguous -> SFA
//   b_scale  (K/128, N/128), N/128 contiguous                -> SFB
//   out      (M, N) row-major bf16                           -> D (no C operand)
// fp8 wgmma reads both operands K-major from shared memory, so b must arrive as bt.
//
// Each configuration (tile, cluster, schedule, tile scheduler) is instantiated in its own
// translation unit (gemm_sm90_<name>.cu) with GEMM_SM90_DEFINE_CONFIG, so they compile in
// parallel; gemm_sm90.cu holds the table that chooses one per problem.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "cute/tensor.hpp"
#include "cutlass/detail/blockwise_scale_layout.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "device.h"
#include "gemm_sm90_configs.h"

namespace fp8gemm::sm90 {

template <class TileShape, class ClusterShape, class MainloopSchedule, class EpilogueSchedule,
          class TileScheduler>
struct Config {
  using ElementA = cutlass::float_e4m3_t;
  using ElementB = cutlass::float_e4m3_t;
  using ElementD = cutlass::bfloat16_t;
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlignmentAB = 16;  // elements per 16-byte TMA access
  static constexpr int kAlignmentD = 8;

  // 1 x 128 scales for a, 128 x 128 for b, both stored M/N-contiguous.
  using ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<1, 128, 128, cute::GMMA::Major::MN,
                                                                cute::GMMA::Major::MN>;
  using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
  using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlignmentD,
      ElementD, LayoutD, kAlignmentD, EpilogueSchedule>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA,
      cute::tuple<LayoutA, LayoutSFA>, kAlignmentAB, ElementB, cute::tuple<LayoutB, LayoutSFB>,
      kAlignmentAB, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;

  using GemmKernel =
      cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                           CollectiveEpilogue, TileScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

  static typename Gemm::Arguments arguments(const Problem& p) {
    using cute::make_shape;
    using StrideA = typename GemmKernel::StrideA;
    using StrideB = typename GemmKernel::StrideB;
    using StrideD = typename GemmKernel::StrideD;
    const StrideA stride_a = cutlass::make_cute_packed_stride(StrideA{}, make_shape(p.m, p.k, 1));
    const StrideB stride_b = cutlass::make_cute_packed_stride(StrideB{}, make_shape(p.n, p.k, 1));
    const StrideD stride_d = cutlass::make_cute_packed_stride(StrideD{}, make_shape(p.m, p.n, 1));
    // a_scale's rows may be padded past M (TMA wants 16-byte aligned rows): describe it as an
    // (a_scale_ld x K) problem; the rows past M only ever meet A's out-of-bounds zeros.
    const LayoutSFA layout_sfa = ScaleConfig::tile_atom_to_shape_SFA(
        make_shape(static_cast<int>(p.a_scale_ld), p.n, p.k, 1));
    const LayoutSFB layout_sfb = ScaleConfig::tile_atom_to_shape_SFB(make_shape(p.m, p.n, p.k, 1));

    cutlass::KernelHardwareInfo hw_info;
    hw_info.device_id = p.device;
    hw_info.sm_count = p.sm_count;
    typename Gemm::Arguments arguments{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {p.m, p.n, p.k, 1},
        {reinterpret_cast<const ElementA*>(p.a), stride_a,
         reinterpret_cast<const ElementB*>(p.bt), stride_b, p.a_scale, layout_sfa, p.b_scale,
         layout_sfb},
        {{}, nullptr, stride_d, reinterpret_cast<ElementD*>(p.out), stride_d},
        hw_info};
    arguments.epilogue.thread.alpha = 1.0f;
    arguments.epilogue.thread.beta = 0.0f;
    // Tile order: runs of 2^k tiles along the raster direction share operands in L2.
    arguments.scheduler.max_swizzle_size = p.swizzle;
    arguments.scheduler.raster_order =
        static_cast<decltype(arguments.scheduler.raster_order)>(p.raster);
    return arguments;
  }

  static size_t workspace_bytes(const Problem& p) { return Gemm::get_workspace_size(arguments(p)); }

  // Made once per device (device.h), where CUTLASS's GemmUniversalAdapter::initialize repeats
  // the opt-in (a driver call) before every launch.
  static cudaError_t opt_in_shared_memory(int device) {
    static std::atomic<uint64_t> done{0};
    return fp8gemm::opt_in_shared_memory(
        reinterpret_cast<const void*>(cutlass::device_kernel<GemmKernel>),
        GemmKernel::SharedStorageSize, device, done);
  }

  // What GemmUniversalAdapter's initialize + run do, with the opt-in above made once.
  static cudaError_t run(const Problem& p, void* workspace, cudaStream_t stream) {
    const typename Gemm::Arguments args = arguments(p);
    if (Gemm::can_implement(args) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
    if (GemmKernel::initialize_workspace(args, workspace, stream) != cutlass::Status::kSuccess)
      return cudaErrorLaunchFailure;
    if (const cudaError_t status = opt_in_shared_memory(p.device); status != cudaSuccess)
      return status;
    typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(args, workspace);
    if (Gemm::run(params, stream) != cutlass::Status::kSuccess) {
      const cudaError_t error = cudaGetLastError();
      return error != cudaSuccess ? error : cudaErrorLaunchFailure;
    }
    return cudaGetLastError();
  }
};

using cute::_1;
using cute::_128;
using cute::_2;
using cute::_64;
using cute::Shape;
using Cooperative = cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8Blockwise;
using CooperativeEpilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
using Pingpong = cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8Blockwise;
using PingpongEpilogue = cutlass::epilogue::TmaWarpSpecialized;
using Persistent = cutlass::gemm::PersistentScheduler;
using StreamK = cutlass::gemm::StreamKScheduler;

}  // namespace fp8gemm::sm90

// Defines the two entry points gemm_sm90_configs.h declares for configuration NAME.
#define GEMM_SM90_DEFINE_CONFIG(NAME, ...)                                                    \
  namespace fp8gemm::sm90 {                                                                   \
  size_t workspace_bytes_##NAME(const Problem& p) {                                           \
    return Config<__VA_ARGS__>::workspace_bytes(p);                                           \
  }                                                                                           \
  cudaError_t run_##NAME(const Problem& p, void* workspace, cudaStream_t stream) {            \
    return Config<__VA_ARGS__>::run(p, workspace, stream);                                    \
  }                                                                                           \
  }
