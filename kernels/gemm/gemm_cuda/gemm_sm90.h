#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

// Whether the current device can run the sm_90a (H100/H200) CUTLASS path.
extern "C" int gemm_sm90_available();

// The configurations built (gemm_sm90_configs.h), by index; nullptr past the end.
extern "C" int gemm_sm90_config_count();
extern "C" const char* gemm_sm90_config_name(int config);

// Whether configuration `config` takes N: our own kernels any multiple of 16, CUTLASS's multiples
// of 128 (their block-scaled mainloop reads whole 128-column scale blocks).
extern "C" int gemm_sm90_config_takes_n(int config, int64_t n);

// The order the persistent tile scheduler walks output tiles in: runs of `swizzle` (1, 2, 4, 8)
// tiles; raster 0 = CUTLASS's heuristic, 1 = along M, 2 = along N. And where our own kernel puts
// the tile of a last row block that runs past M: `shift` 0 = in its row block, 1 = moved back to
// end at row M where that block is less than half full (64-row tiles: part full), 2 = wherever
// it is part full (gemm_sm90_own_kernel.cuh, tile_row0); 1 and 2 also move the tile of a last
// column block that runs past N back to end at column N (tile_col0), and where M is less than one
// row block trim A's TMA boxes to M rows (gemm_sm90_own_launch.cuh); 0 does neither.
struct Sm90Order {
  int swizzle;
  int raster;
  int shift;
};

// The configuration (and tile order) the dispatch table (gemm_sm90.cu) picks for M x N x K.
extern "C" int gemm_sm90_choose(int64_t m, int64_t n, int64_t k, Sm90Order* order);

// Bytes of device workspace gemm_sm90_run needs for this configuration and shape.
extern "C" size_t gemm_sm90_workspace_bytes(int config, Sm90Order order, int64_t m, int64_t n,
                                            int64_t k, int64_t a_scale_ld);

// out (M, N) bf16 = a (M, K) e4m3 x bt (N, K) e4m3 ^T with block scales, with configuration
// `config`. a_scale is (K/128, a_scale_ld) with a_scale_ld >= M a multiple of 4 (TMA's 16-byte
// rows); b_scale is (K/128, ceil(N/128)). K is a multiple of 128, N one the configuration takes
// (gemm_sm90_config_takes_n), 1 <= M <= fp8gemm::kMaxM; every pointer is 16-byte aligned.
extern "C" cudaError_t gemm_sm90_run(int config, Sm90Order order, uint16_t* out, const uint8_t* a,
                                     const uint8_t* bt, const float* a_scale, int64_t a_scale_ld,
                                     const float* b_scale, int64_t m, int64_t n, int64_t k,
                                     void* workspace, cudaStream_t stream);
