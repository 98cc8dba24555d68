// The H100 (sm_90a) path: chooses one of the CUTLASS configurations of gemm_sm90_configs.h per
// problem and launches it. The configurations themselves live in gemm_sm90_<name>.cu.
#include "gemm_sm90.h"

#include <cstring>

#include "../gemm/fp8.h"
#include "device.h"
#include "gemm_sm90_configs.h"

namespace {

using fp8gemm::sm90::Problem;

struct Entry {
  const char* name;
  size_t (*workspace_bytes)(const Problem&);
  cudaError_t (*run)(const Problem&, void*, cudaStream_t);
};

#define GEMM_SM90_ENTRY(NAME) \
  {#NAME, fp8gemm::sm90::workspace_bytes_##NAME, fp8gemm::sm90::run_##NAME},
constexpr Entry kConfigs[] = {GEMM_SM90_CONFIGS(GEMM_SM90_ENTRY)};
#undef GEMM_SM90_ENTRY
constexpr int kConfigCount = static_cast<int>(sizeof(kConfigs) / sizeof(kConfigs[0]));

int index_of(const char* name) {
  for (int i = 0; i < kConfigCount; ++i)
    if (std::strcmp(kConfigs[i].name, name) == 0) return i;
  return -1;
}

Problem make_problem(uint16_t* out, const uint8_t* a, const uint8_t* bt, const float* a_scale,
                     int64_t a_scale_ld, const float* b_scale, int64_t m, int64_t n, int64_t k,
                     Sm90Order order) {
  int device = 0, sm_count = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  return Problem{out,
                 a,
                 bt,
                 a_scale,
                 a_scale_ld,
                 b_scale,
                 static_cast<int>(m),
                 static_cast<int>(n),
                 static_cast<int>(k),
                 device,
                 sm_count,
                 order.swizzle,
                 order.raster};
}

}  // namespace

extern "C" int gemm_sm90_available() {
  // sm_90a code runs on compute capability 9.0 and nothing else.
  return fp8gemm::current_compute_capability() == 90;
}

extern "C" int gemm_sm90_config_count() { return kConfigCount; }

extern "C" const char* gemm_sm90_config_name(int config) {
  return config >= 0 && config < kConfigCount ? kConfigs[config].name : nullptr;
}


// The dispatch table, from the configuration matrix measured on the H100 (132 SMs; TFLOP/s of
// each configuration at each benchmark shape in benchmarks/RESULTS.md). "tiles" counts 128 x 128
// output tiles; a wave is one tile per SM.
extern "C" int gemm_sm90_choose(int64_t m, int64_t n, int64_t k, Sm90Order* order) {
  int device = 0, sm_count = 132;
  if (cudaGetDevice(&device) == cudaSuccess)
    cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  const int64_t tiles = (m + 127) / 128 * (n / 128);
  *order = Sm90Order{1, 0};
  // Short K (2 to 6 k-blocks): each tile's epilogue (writing 128 x 128 bf16) is as long as its
  // mainloop; ping-pong overlaps one warpgroup's epilogue with the other's mainloop. 237 vs 193
  // (1024 x 7168 x 256), 516 vs 449 (6144 x 7168 x 256), 458 vs 412 (1024 x 7168 x 512).
  if (k <= 768) return index_of("pingpong_64x128_c1x1");
  // At most one wave: every tile gets its own SM, a cluster only adds its rendezvous.
  // 877 vs 849 for 1 x 2 at 1024 x 1536 x 7168 (96 tiles); stream-K 821 (its fix-up costs more
  // than the idle SMs it fills).
  if (tiles <= sm_count) return index_of("coop_128x128_c1x1");
  // One to four waves: the last wave is mostly empty (1024 x 4608: 288 tiles = 2.2 waves);
  // stream-K splits K so every SM gets the same work. 1030 vs 887-915 there.
  if (tiles < 4 * int64_t{sm_count}) return index_of("coop_128x128_c1x1_streamk");
  // Many waves: two CTAs along N share A's tile through TMA multicast, halving A's L2 traffic.
  // 1142 vs 1003-1026 (6144 x 1536 x 7168), 1037 vs 998-1015 (6144 x 4608 x 7168).
  return index_of("coop_128x128_c1x2");
}

extern "C" size_t gemm_sm90_workspace_bytes(int config, Sm90Order order, int64_t m, int64_t n,
                                            int64_t k, int64_t a_scale_ld) {
  if (config < 0 || config >= kConfigCount) return 0;
  return kConfigs[config].workspace_bytes(
      make_problem(nullptr, nullptr, nullptr, nullptr, a_scale_ld, nullptr, m, n, k, order));
}

extern "C" cudaError_t gemm_sm90_run(int config, Sm90Order order, uint16_t* out, const uint8_t* a,
                                     const uint8_t* bt, const float* a_scale, int64_t a_scale_ld,
                                     const float* b_scale, int64_t m, int64_t n, int64_t k,
                                     void* workspace, cudaStream_t stream) {
  if (config < 0 || config >= kConfigCount || m < 1 || m > fp8gemm::kMaxM || n % 128 != 0 ||
      k % 128 != 0 || a_scale_ld < m || a_scale_ld % 4 != 0 || order.raster < 0 ||
      order.raster > 2 || order.swizzle < 1 || order.swizzle > 8)
    return cudaErrorInvalidValue;
  return kConfigs[config].run(
      make_problem(out, a, bt, a_scale, a_scale_ld, b_scale, m, n, k, order), workspace, stream);
}
