// Host launcher of one tile configuration: builds the four TMA descriptors and launches the
// persistent kernel with one CTA per SM (or per tile, when there are fewer tiles).
#pragma once

#include <cstdint>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "gemm_sm90_own.h"
#include "gemm_sm90_own_kernel.cuh"

namespace fp8gemm::sm90_own {

// cuTensorMapEncodeTiled comes from the driver; fetch it through the runtime so that nothing
// links libcuda directly.
inline cudaError_t encode_tiled(CUtensorMap* map, CUtensorMapDataType dtype, const void* base,
                                uint64_t dim0, uint64_t dim1, uint64_t stride1_bytes,
                                uint32_t box0, uint32_t box1, CUtensorMapSwizzle swizzle) {
  using Encode = decltype(&cuTensorMapEncodeTiled);
  static Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<Encode>(fn);
  }();
  if (encode == nullptr) return cudaErrorNotSupported;
  const cuuint64_t dims[2] = {dim0, dim1};
  const cuuint64_t strides[1] = {stride1_bytes};
  const cuuint32_t box[2] = {box0, box1};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode(map, dtype, 2, const_cast<void*>(base), dims, strides, box,
                            elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // out-of-bounds reads give 0
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

inline CUtensorMapSwizzle swizzle_of(int bytes) {
  return bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
         : bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                       : CU_TENSOR_MAP_SWIZZLE_32B;
}

template <int BM, int BN>
cudaError_t launch(const LaunchOptions& opt, uint16_t* out, const uint8_t* a, const uint8_t* bt,
                   const float* a_scale, int64_t a_scale_ld, const float* b_scale, int64_t m,
                   int64_t n, int64_t k, cudaStream_t stream) {
  using Cfg = TileConfig<BM, BN>;
  if (m < 1 || n < kScaleBlockN || k < kBlockK || n % kScaleBlockN != 0 || k % kBlockK != 0 ||
      a_scale_ld < m || a_scale_ld % 4 != 0 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return cudaErrorInvalidValue;

  CUtensorMap tmap_a, tmap_b, tmap_sfa, tmap_d;
  cudaError_t err;
  if ((err = encode_tiled(&tmap_a, CU_TENSOR_MAP_DATA_TYPE_UINT8, a, k, m, k, kBlockK, BM,
                          CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess ||
      (err = encode_tiled(&tmap_b, CU_TENSOR_MAP_DATA_TYPE_UINT8, bt, k, n, k, kBlockK, BN,
                          CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess ||
      (err = encode_tiled(&tmap_sfa, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a_scale, a_scale_ld,
                          k / kBlockK, a_scale_ld * 4, BM, 1, CU_TENSOR_MAP_SWIZZLE_NONE)) !=
          cudaSuccess ||
      (err = encode_tiled(&tmap_d, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, out, n, m, n * 2,
                          Cfg::kStoreCols, Cfg::kWgRows, swizzle_of(Cfg::kStoreSwizzleBytes))) !=
          cudaSuccess)
    return err;

  Params p{};
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k = static_cast<int>(k);
  p.b_scale = b_scale;
  p.num_n_scales = static_cast<int>(n / kScaleBlockN);
  p.num_m_blocks = static_cast<int>((m + BM - 1) / BM);
  p.num_n_blocks = static_cast<int>((n + BN - 1) / BN);
  p.num_tiles = p.num_m_blocks * p.num_n_blocks;
  p.group = opt.group > 0 ? opt.group : 8;
  p.group_along_n = opt.group_along_n ? 1 : 0;
  p.splits = opt.splits;
  if (p.splits < 1 || p.splits > k / kBlockK) return cudaErrorInvalidValue;
  p.num_units = p.num_tiles * p.splits;
  if (p.splits > 1) {
    const size_t ws_bytes = size_t(p.num_tiles) * (p.splits - 1) * BM * BN * sizeof(float);
    if ((err = split_k_workspace(ws_bytes, size_t(p.num_tiles) * 2 * sizeof(int), &p.workspace,
                                 &p.flags)) != cudaSuccess)
      return err;
  }

  int device = 0, num_sms = 0;
  if ((err = cudaGetDevice(&device)) != cudaSuccess ||
      (err = cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device)) !=
          cudaSuccess)
    return err;
  // Once per process and instantiation (the attribute is per function, for all devices).
  static const cudaError_t attr_err = cudaFuncSetAttribute(
      gemm_kernel<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (attr_err != cudaSuccess) return attr_err;

  // Persistent: one CTA per SM (its smem allows no more). All splits of a tile must run in the
  // same round on co-resident CTAs (split 0 waits for the others), so the grid is a multiple of
  // the split count.
  const int grid = (p.num_units < num_sms ? p.num_units : num_sms) / p.splits * p.splits;
  if (grid == 0) return cudaErrorInvalidValue;
  gemm_kernel<Cfg><<<grid, kNumThreads, Cfg::kSmemBytes, stream>>>(tmap_a, tmap_b, tmap_sfa,
                                                                     tmap_d, p);
  return cudaGetLastError();
}

}  // namespace fp8gemm::sm90_own

// Explicit instantiation, one per translation unit so that configurations compile in parallel.
#define FP8GEMM_SM90_OWN_INSTANTIATE(BM, BN)                                                   \
  template cudaError_t fp8gemm::sm90_own::launch<BM, BN>(                                     \
      const fp8gemm::sm90_own::LaunchOptions&, uint16_t*, const uint8_t*, const uint8_t*,     \
      const float*, int64_t, const float*, int64_t, int64_t, int64_t, cudaStream_t);
