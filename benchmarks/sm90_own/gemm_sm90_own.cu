// Configuration choice of our own sm_90a FP8 block-scaled GEMM.
#include "gemm_sm90_own.h"

#include <algorithm>
#include <mutex>

#include <cuda_runtime_api.h>

namespace fp8gemm::sm90_own {

cudaError_t run_with(const LaunchOptions& opt, uint16_t* out, const uint8_t* a,
                     const uint8_t* bt, const float* a_scale, int64_t a_scale_ld,
                     const float* b_scale, int64_t m, int64_t n, int64_t k,
                     cudaStream_t stream) {
#define FP8GEMM_TRY(BM, BN)                                                                    \
  if (opt.block_m == BM && opt.block_n == BN)                                                  \
    return launch<BM, BN>(opt, out, a, bt, a_scale, a_scale_ld, b_scale, m, n, k, stream);
  FP8GEMM_TRY(128, 192)
  FP8GEMM_TRY(128, 160)
  FP8GEMM_TRY(128, 128)
  FP8GEMM_TRY(256, 128)
#undef FP8GEMM_TRY
  return cudaErrorInvalidValue;
}

cudaError_t split_k_workspace(size_t ws_bytes, size_t flag_bytes, float** ws, int** flags) {
  struct Scratch {
    void* ws = nullptr;
    void* flags = nullptr;
    size_t ws_bytes = 0, flag_bytes = 0;
  };
  static Scratch per_device[64];
  static std::mutex mutex;
  int device = 0;
  cudaError_t err;
  if ((err = cudaGetDevice(&device)) != cudaSuccess) return err;
  if (device >= 64) return cudaErrorInvalidDevice;
  std::lock_guard<std::mutex> lock(mutex);
  Scratch& s = per_device[device];
  if (s.ws_bytes < ws_bytes) {
    cudaFree(s.ws);
    s.ws = nullptr;
    s.ws_bytes = 0;
    if ((err = cudaMalloc(&s.ws, ws_bytes)) != cudaSuccess) return err;
    s.ws_bytes = ws_bytes;
  }
  if (s.flag_bytes < flag_bytes) {
    cudaFree(s.flags);
    s.flags = nullptr;
    s.flag_bytes = 0;
    if ((err = cudaMalloc(&s.flags, flag_bytes)) != cudaSuccess ||
        (err = cudaMemset(s.flags, 0, flag_bytes)) != cudaSuccess)
      return err;
    s.flag_bytes = flag_bytes;
  }
  *ws = static_cast<float*>(s.ws);
  *flags = static_cast<int*>(s.flags);
  return cudaSuccess;
}

namespace {

// Relative throughput of an SM busy on one tile shape, from the H100 sweep (harness in main.cu,
// full tiles, no split): 128x192 is best at every shape measured; 256x128 and 128x160 lose
// 5-15 %, 128x128 15-25 %.
struct Candidate {
  int block_m, block_n;
  double rate;
};
constexpr Candidate kCandidates[] = {
    {128, 192, 1.00}, {256, 128, 0.90}, {128, 160, 0.88}, {128, 128, 0.80}};

}  // namespace

LaunchOptions choose(int64_t m, int64_t n, int64_t k, int num_sms) {
  LaunchOptions best;
  double best_cost = 0;
  const int64_t k_blocks = k / 128;
  for (const Candidate& c : kCandidates) {
    const int64_t tiles = ((m + c.block_m - 1) / c.block_m) * ((n + c.block_n - 1) / c.block_n);
    for (int splits = 1; splits <= 4; ++splits) {
      if (splits > 1 && k_blocks / splits < 8) break;  // too short to amortise the fix-up
      const int64_t grid = std::min<int64_t>(num_sms, tiles * splits) / splits * splits;
      const int64_t rounds = (tiles * splits + grid - 1) / grid;
      // Every round costs as long as one unit (a 1/splits share of a tile) on the busiest SM;
      // a split costs the partials' round trip on top.
      const double cost = static_cast<double>(rounds) / splits * c.block_m * c.block_n / c.rate *
                          (splits > 1 ? 1.05 : 1.0);
      if (best_cost == 0 || cost < best_cost) {
        best_cost = cost;
        best.block_m = c.block_m;
        best.block_n = c.block_n;
        best.splits = splits;
      }
    }
  }
  best.group = 8;
  best.group_along_n = false;
  return best;
}

}  // namespace fp8gemm::sm90_own

cudaError_t gemm_sm90_own_run(uint16_t* out, const uint8_t* a, const uint8_t* bt,
                              const float* a_scale, int64_t a_scale_ld, const float* b_scale,
                              int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  int device = 0, num_sms = 0;
  cudaError_t err;
  if ((err = cudaGetDevice(&device)) != cudaSuccess ||
      (err = cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device)) !=
          cudaSuccess)
    return err;
  const auto opt = fp8gemm::sm90_own::choose(m, n, k, num_sms);
  return fp8gemm::sm90_own::run_with(opt, out, a, bt, a_scale, a_scale_ld, b_scale, m, n, k,
                                     stream);
}
