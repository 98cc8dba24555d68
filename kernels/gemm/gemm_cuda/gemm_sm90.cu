// The H100 (sm_90a) path: chooses one of the configurations of gemm_sm90_configs.h (CUTLASS's
// kernels and our own) per problem and launches it. The configurations live in gemm_sm90_<name>.cu.
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


// The dispatch table, from the configuration matrices measured on the H100 (132 SMs; TFLOP/s of
// each configuration at each benchmark shape in benchmarks/RESULTS.md).
extern "C" int gemm_sm90_choose(int64_t m, int64_t n, int64_t k, Sm90Order* order) {
  int device = 0, sm_count = 132;
  if (cudaGetDevice(&device) == cudaSuccess)
    cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  *order = Sm90Order{1, 0};
  const int64_t m_blocks = (m + 127) / 128;
  const int64_t sms = sm_count;
  // Tiles of 128 rows and tile_n columns; waves of one tile per SM; "full": the share of the
  // waves' SM slots that hold a tile, tiles / (waves x SMs).
  auto count = [&](int64_t tile_n) { return m_blocks * ((n + tile_n - 1) / tile_n); };
  auto waves = [&](int64_t tiles_n) { return (tiles_n + sms - 1) / sms; };
  auto full = [&](int64_t tiles_n) {
    return static_cast<double>(tiles_n) / static_cast<double>(waves(tiles_n) * sms);
  };
  // Short K (1 to 6 k-blocks): each tile's epilogue (writing its bf16 rows) is as long as its
  // mainloop, and since our own kernel writes them with stmatrix it wins (RESULTS.md run 14;
  // graph replays, TFLOP/s). Four waves or more: its 192-wide tiles, one output buffer: 598 vs
  // 580 for the two-buffer ones with the old epilogue (the choice through run 13) at
  // 6144 x 7168 x 256, 936 vs 775 at K = 512; 803 vs 761 (two buffers) at 2048 x 7168 x 512.
  // Fewer: its 96-wide tiles, against CUTLASS's 64 x 128 ping-pong (the choice through run 13):
  // 395 vs 369 at 1024 x 7168 x 256, 588 vs 551 at K = 512, 278 vs 269 at 512 x 7168 x 256,
  // 122 vs 108 at 128 x 7168 x 256. The one shape measured where another was ahead:
  // 256 x 7168 x 512, 262 vs 287 for CUTLASS's 128 x 128 (ping-pong 264). The _shortk
  // configurations: k-block loops not unrolled, 3-15 % faster here than the long-K ones, and
  // launched with programmatic dependent launch, so that a call's set-up overlaps the end of the
  // kernel before it: 1-13 % more at each of these shapes (RESULTS.md run 15b; 426 vs 392 at
  // 1024 x 7168 x 256, 616 vs 580 at K = 512, 964 vs 925 at 6144 x 7168 x 512).
  if (k <= 768)
    return index_of(count(128) >= 4 * sms ? "own_128x192_shortk" : "own_128x96_shortk");
  // M up to 64 (decoding) with K from 2048 and N from 4096: CUTLASS's 64-row ping-pong tiles,
  // where our 128-row ones compute half their rows for nothing (RESULTS.md run 15i): 320 vs 251
  // at 64 x 7168 x 16384, 187 vs 171 at 64 x 4096 x 7168, 140 vs 105 at 32 x 7168 x 7168,
  // 47 vs 42 at 16 x 7168 x 2048. Not below: 75 vs 79 at 64 x 1536 x 7168 (12 tiles against
  // 16), 254 vs 277 at 64 x 24576 x 1536, 126 vs 140 at 64 x 7168 x 1024.
  if (m <= 64 && k >= 2048 && n >= 4096) return index_of("pingpong_64x128_c1x1");
  // Long K: the mainloop dominates; what is left to choose is how the tiles fill the SMs' waves.
  // Graph replays, TFLOP/s (RESULTS.md run 11; our own tiles have gained 3-8 % since, run 14).
  // Our own kernel's loops unrolled by turns of the ring: 3-8 % from K = 2048 (16 k blocks).
  // Below it (RESULTS.md run 15a, K = 1024 to 1792): 192-wide tiles with them from K = 1280,
  // 1140 vs 1103 at 6144 x 4608 x 1280, 1174 vs 1101 at 6144 x 7168 x 1536, 1170 vs 1078 at
  // K = 1792 (at K = 1024, 1046 vs 1061, and equal at 6144 x 1536); 96-wide ones without them
  // below 2048, within 5.5 % either way (859 vs 824 at 6144 x 1536 x 1024, 821 vs 850 at
  // 2048 x 1536 x 1792).
  // - Our 128 x 192 tiles where their waves are full or many: the most math per operand byte.
  //   1222 vs 1079 (own 128 x 96) vs 960 (stream-K) at 2048 x 1536 x 7168 (128 tiles, 97 % full);
  //   1219 at 6144 x 1536, 1100-1173 at 6144 x 4608 vs 960-1005 for the rest.
  const int64_t tiles192 = count(192), tiles96 = count(96);
  // - Among those, our 128 x 256 tiles (K > 1024) where their waves hold no more columns than the
  //   192-wide ones': a wave of either takes as long per column, so fewer or fuller waves win
  //   (RESULTS.md run 15f). 1258 vs 1154 at 4096 x 4096 x 7168 (4 waves of 256 against 6 of
  //   192), 1198 vs 1119 at 4096 x 7168 x 7168 (7 against 10), 1245 vs 1112 at K = 16384,
  //   1084 vs 1026 at 4096 x 24576 x 1536 (equal), 1194 vs 1122 at 8192 x 7168 x 7168; 192-wide
  //   where theirs hold fewer: 1251 vs 1142 at 2048 x 7168 x 7168, 1205 vs 1084 at
  //   6144 x 7168 x 2048, 1309 vs 938 at 6144 x 1536 x 7168, equal at 6144 x 4608 x 7168.
  if (tiles192 >= 4 * sms || full(tiles192) >= 0.9) {
    if (k <= 1024) return index_of("own_128x192_shortk");
    return index_of(waves(count(256)) * 256 <= waves(tiles192) * 192 ? "own_128x256"
                                                                      : "own_128x192");
  }
  // - Our 128 x 96 tiles where they fit in one wave, or fill their last one: 993-1021 vs 928-953
  //   (CUTLASS cooperative 128 x 128) at 1024 x 1536 x 7168 (128 tiles), 138 vs 125 at 128 x 1536
  //   (16 tiles), 1073-1097 vs 957-966 (1075 stream-K) at 1024 x 4608 (384 tiles, 97 % full).
  //   Narrower ones where even 96-wide tiles leave SMs idle (M > 64, K >= 4096): the narrowest of
  //   32 and 64 columns whose tiles still fit in one wave (RESULTS.md run 15l): 462 vs 359 at
  //   128 x 4096 x 7168 (32 wide: 128 tiles against 43), 284 vs 207 at 128 x 2048, 218 vs 158 at
  //   128 x 1536, 570 vs 552 at 128 x 7168 (64 wide: 112 tiles), 810 vs 765 at 256 x 4096.
  if (tiles96 <= sms || full(tiles96) >= 0.95) {
    if (tiles96 <= sms && m > 64 && k >= 4096) {
      if (count(32) <= sms) return index_of("own_128x32");
      if (count(64) <= sms) return index_of("own_128x64");
    }
    return index_of(k >= 2048 ? "own_128x96" : "own_128x96_shortk");
  }
  // - Otherwise CUTLASS's 128 x 128 tiles, data-parallel (1024 x 2048: 128 tiles, where 96s and
  //   192s are two-thirds full). Stream-K, which splits K so that every SM gets the same work,
  //   lost at every shape measured that reaches this rule: 1057 vs 1101 at 512 x 7168 x 7168,
  //   1009 vs 1105 at 768 x 7168, 1070 vs 1085 at 1024 x 7168 (RESULTS.md run 12). It won only at
  //   1024 x 4608 x 7168 (1056 vs 938, its last wave 18 % full), which the 96-wide rule takes.
  return index_of("coop_128x128_c1x1");
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
