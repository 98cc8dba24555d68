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
                     int64_t a_scale_ld, const float* b_scale, int64_t m, int64_t n, int64_t k) {
  int device = 0, sm_count = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  return Problem{out,  a, bt, a_scale, a_scale_ld, b_scale, static_cast<int>(m),
                 static_cast<int>(n), static_cast<int>(k), device, sm_count};
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

extern "C" int gemm_sm90_choose(int64_t m, int64_t n, int64_t k) {
  (void)m;
  (void)n;
  (void)k;
  return index_of("coop_128x128_c1x2");
}

extern "C" size_t gemm_sm90_workspace_bytes(int config, int64_t m, int64_t n, int64_t k,
                                            int64_t a_scale_ld) {
  if (config < 0 || config >= kConfigCount) return 0;
  return kConfigs[config].workspace_bytes(
      make_problem(nullptr, nullptr, nullptr, nullptr, a_scale_ld, nullptr, m, n, k));
}

extern "C" cudaError_t gemm_sm90_run(int config, uint16_t* out, const uint8_t* a,
                                     const uint8_t* bt, const float* a_scale, int64_t a_scale_ld,
                                     const float* b_scale, int64_t m, int64_t n, int64_t k,
                                     void* workspace, cudaStream_t stream) {
  if (config < 0 || config >= kConfigCount || m < 1 || m > fp8gemm::kMaxM || n % 128 != 0 ||
      k % 128 != 0 || a_scale_ld < m || a_scale_ld % 4 != 0)
    return cudaErrorInvalidValue;
  return kConfigs[config].run(
      make_problem(out, a, bt, a_scale, a_scale_ld, b_scale, m, n, k), workspace, stream);
}
