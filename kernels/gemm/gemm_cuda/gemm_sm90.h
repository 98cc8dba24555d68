#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

// Whether the current device can run the sm_90a (H100/H200) CUTLASS path.
extern "C" int gemm_sm90_available();

// Bytes of device workspace gemm_sm90_run needs for this shape (the tile scheduler's).
extern "C" size_t gemm_sm90_workspace_bytes(int64_t m, int64_t n, int64_t k, int64_t a_scale_ld);

// out (M, N) bf16 = a (M, K) e4m3 x bt (N, K) e4m3 ^T with block scales. a_scale is
// (K/128, a_scale_ld) with a_scale_ld >= M a multiple of 4 (TMA's 16-byte rows); b_scale is
// (K/128, N/128). N and K are multiples of 128.
extern "C" cudaError_t gemm_sm90_run(uint16_t* out, const uint8_t* a, const uint8_t* bt,
                                     const float* a_scale, int64_t a_scale_ld,
                                     const float* b_scale, int64_t m, int64_t n, int64_t k,
                                     void* workspace, cudaStream_t stream);
