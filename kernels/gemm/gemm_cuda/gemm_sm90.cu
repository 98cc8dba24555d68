// The H100 (sm_90a) path: chooses one of the configurations of gemm_sm90_configs.h (CUTLASS's
// kernels and our own) per problem and launches it. The configurations live in gemm_sm90_<name>.cu.
#include "gemm_sm90.h"

#include <algorithm>
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
  const int64_t sms = sm_count;
  // Tiles of tile_m (128 unless named) rows and tile_n columns; waves of one tile per SM; "full":
  // the share of the waves' SM slots that hold a tile, tiles / (waves x SMs).
  auto count = [&](int64_t tile_n, int64_t tile_m = 128) {
    return (m + tile_m - 1) / tile_m * ((n + tile_n - 1) / tile_n);
  };
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
  // M <= 64 goes to the few-tiles rule's 64-row tiles instead, at short K too: ahead of the
  // 96-wide ones at 10 of 13 shapes measured, by up to 19 % (197 vs 187 at 64 x 32768 x 512,
  // 81 vs 69 at 32 x 16384 x 512, 110 vs 97 at 64 x 7168 x 512, 192 vs 161 at
  // 64 x 16384 x 768), equal at one, 3-4 % behind at two (RESULTS.md 18b, 18c).
  // Two CTAs per SM of 64-row tiles (own_64x64_x2 and own_64x96_x2, launched with programmatic
  // dependent launch) at M <= 256 (as far as measured) where 96-wide 128-row tiles make fewer
  // than two waves, or leave the second row block at most half full (128 < M <= 192) in up to
  // three. Likely why (not profiled): one CTA's epilogue and next tile's start overlap the other's
  // mainloop, where a 128-row tile's waits have nothing beside them. RESULTS.md 20a-20d, at
  // K <= 768, 64 x 64 against the 96-wide tiles: 175 vs 136 at 128 x 4096 x 512, 200 vs 175 at
  // 128 x 7168 x 512, 324 vs 283 at 128 x 16384 x 512, 146 vs 128 at 128 x 7168 x 256, 205 vs 186
  // at 128 x 16384 x 256, 241 vs 214 at 96 x 16384, 322 vs 285 at 256 x 7168, 265 vs 233 at
  // 256 x 4096. At 128 < M <= 192 the 64 x 96 ones: 277 vs 252
  // (64 x 64) vs 217 at 192 x 7168 x 512, 427 vs 408 vs 368 at 192 x 16384 (20b). In more waves
  // the 128-row tiles stay ahead or equal (20a, 20b): 554 vs 492 at 256 x 32768 x 512, 452 vs 430
  // at 512 x 7168 x 512, 419 vs 353 at 1024 x 7168 x 256, 317 vs 305 at 256 x 16384 x 256, 444 vs
  // 426 at 128 x 32768 x 768, 362 vs 362 at 128 x 32768 x 512 (the exception: 224 vs 250 at
  // 128 x 32768 x 256). At M <= 64 the 64 x 64 ones take over from the few-tiles rule's _pdl
  // tiles below where 64 x 64 tiles make more than one wave: 226 vs 216 at 64 x 32768 x 512, 62
  // vs 59 at 16 x 32768, 93 vs 90 at 32 x 16384, 234 vs 225 at 64 x 16384 x 768 (20d; in one
  // wave, at 16 and 32 x 7168 x 512, within 3 % either way, 20b).
  // The same from K = 896 to 1536 at M > 96 (RESULTS.md 20g, 20h; the table took 128-row tiles
  // of CUTLASS or ours there): 318 vs 290 at 128 x 7168 x 1024, 424 vs 379 at 128 x 16384 x 1024,
  // 465 vs 456 at 128 x 24576 x 1024, 386 vs 361 at 128 x 7168 x 1536, 517 vs 489 at
  // 128 x 24576 x 1536, 467 vs 466 at 256 x 7168 x 1024; 64 x 96 tiles: 413 vs 337 at
  // 192 x 7168 x 1024, 246 vs 210 at 160 x 4096 x 1024, 355 vs 313 at 192 x 4096 x 1536. Not at
  // M = 96, where the second 64-row block is half empty: 292 vs 329 at 96 x 16384 x 1536 (214 vs
  // 210 at 96 x 7168 x 1024).
  // Before them, from K = 896 to 2048: where 128 tiles of 128 x 112 are one full wave (M a
  // multiple of 128 from 256: 256 x 7168, 512 x 3584), those with programmatic dependent launch
  // (RESULTS.md 20i): 486 vs 455 (64 x 64, two CTAs) vs 461 (the same tiles without it) at
  // 256 x 7168 x 1024, 604 vs 529 vs 576 at K = 1536, 687 vs 565 vs 669 at K = 2048 (the
  // few-tiles rule's choice there before), 535 vs 489 vs 502 at 512 x 3584 x 1024.
  const int64_t tiles112 = count(112);
  if (k > 768 && k <= 2048 && m >= 256 && m % 128 == 0 && tiles112 <= sms && full(tiles112) >= 0.95)
    return index_of("own_128x112_pipe_pdl");
  if (k <= 1536 && m > 128 && m <= 192 && count(96) <= 3 * sms) return index_of("own_64x96_x2");
  if (m <= 64 ? k <= 768 && count(64, 64) > sms
              : m <= 256 && count(96) < 2 * sms && (k <= 768 || (k <= 1536 && m > 96)))
    return index_of("own_64x64_x2");
  if (k <= 768 && m > 64)
    return index_of(count(128) >= 4 * sms ? "own_128x192_shortk" : "own_128x96_shortk");
  // Few tiles: long K where some 128-row tile fits in one wave. Each tile streams (rows + columns)
  // x K bytes of A and B through L2 into its SM, and with few rows that traffic, not the math, sets
  // the time: 128 tiles of 128 x 32 took 1.7 times as long as 64 of them (192 x 2048 x 7168 against
  // 128 x 2048, both one wave, RESULTS.md run 16b). So a tile costs the larger of 64 x
  // (rows + columns), its L2 traffic, and rows x columns, its math (64: the L2's bytes per SM and
  // cycle, about 47, against the multiply-adds per SM and cycle our largest tiles run at, about
  // 2800), and the time goes as waves x that; the tile of least cost wins, on a tie the earlier in
  // the list (128 rows first: two math warpgroups). The L2 term is the cost DeepGEMM's heuristic
  // minimises. Candidates: our 128 x 96 and 128 x 112 tiles (pipelined), CUTLASS's 128 x 128, our
  // 128 x 160, 128 x 192, 128 x 256 and 128 x 64, and the 64-row ones (one math warpgroup);
  // 128 x 32 never costs less than 64 x 64. At M <= 64, 64-row tiles only: 128-row ones compute
  // and store half their rows for nothing, which the cost does not see.
  // The choice was the best measured, or within 3 %, at 51 of the 52 shapes of runs 16a-16k where
  // it was measured (graph replays, TFLOP/s). Against the table before (its choice as measured in
  // run 16): 257 vs 196 at 64 x 4096 x 7168 (64 x 32 against CUTLASS's 64 x 128
  // ping-pong), 308 vs 286 at 128 x 2048 (64 x 32 against 128 x 32), 438 vs 254 at 192 x 2048
  // (64 x 48), 131 vs 78 at 64 x 1536 (64 x 16), 242 vs 216 at 128 x 1536, 159 vs 144 at
  // 64 x 7168 x 1024 (64 x 64), 51 vs 46 at 16 x 7168 x 2048, 827 vs 808 at 256 x 4096 (128 x 64);
  // at K = 2048, 198 vs 136 at 128 x 2048 (64 x 32 against 128 x 96), 298 vs 252 at 128 x 4096, 529
  // vs 495 at 256 x 4096; 872 vs 803 at 512 x 2048 x 7168 and 754 vs 686 at 1024 x 1024 x 4096
  // (128 x 64 against 128 x 96); one wave of 128 x 160 or 128 x 192 where the 192-wide rule below
  // wants fuller ones, against CUTLASS's 128 x 128 in two: 1237 vs 818 at 512 x 5120 x 7168 (160;
  // 192: 1106), 1240 vs 817 at 640 x 4096, 1027 vs 652 at 448 x 4608, 1151 vs 738 at 768 x 3072,
  // 1162 vs 745 at 1536 x 1536, 950 vs 601 at 320 x 6144, 866 vs 615 at 512 x 5120 x 2048; 946 vs
  // 675 at 320 x 7168 x 7168 (192), 791 vs 632 at 384 x 7168 x 2048. Unchanged where it was right:
  // 128 x 96 in one wave at 1024 x 1536 and 384 x 4096, CUTLASS's 128 x 128 at 256 x 7168 and
  // 512 x 4096. The exception: 32 x 1536 x 7168, 53-55 for 64 x 16 against 59-61 for 64 x 32.
  // With the 64-row tiles and 128 x 64 pipelined (run 17: 1-40 % faster), the same choice was the
  // best or within 3 % at 15 of the 17 shapes measured; the exceptions, where fewer and wider
  // tiles won, 32 x 1536 x 7168 (64 x 16: 57 against 66 for 64 x 48) and 96 x 4096 x 7168
  // (64 x 64: 339 against 359 for 64 x 96).
  // Measured from K = 2048 (M <= 64: at every K; until run 20 not from 1024 to 1792 beyond one
  // wave, where the rules below took 128-row tiles, half empty: 302 vs 257 at 64 x 24576 x 1536,
  // 150 vs 131 at 32 x 24576 x 1536, 227 vs 189 at 64 x 16384 x 1024, 285 vs 245 at
  // 64 x 32768 x 1024, 270 vs 234 at 64 x 24576 x 1024, RESULTS.md 20g); where no 128-row tile
  // fits in one wave at M > 64, the rules below.
  // Also 64-row tiles alone at 128 < M <= 192, where the second 128-row block is at least half
  // empty: the 128-row tiles ran 65-75 % as fast per useful row as at M = 256, and 64-row ones
  // were ahead at five of six shapes, by up to 23 % (875 vs 713 at 192 x 16384 x 7168, 755 vs 687
  // at 192 x 7168 x 7168, 667 vs 568 at 192 x 6144 x 7168; 3 % behind at 192 x 6144 x 2048). At
  // M = 320 (a sixth of the rows empty) they were ahead at four of nine and up to 9 % behind
  // (RESULTS.md 18b, 18c): there the cost decides.
  // At M <= 64 the 64-row tiles launch with programmatic dependent launch (their _pdl
  // configurations): with the width the rule takes, ahead of the same kernel without it at 16 of
  // the 17 shapes measured, by 5-23 % (RESULTS.md 19b, 19c): 210 vs 197 at 64 x 32768 x 512
  // (64 x 128), 38 vs 32 at 64 x 1536 x 512 (64 x 16), 81 vs 68 at 64 x 7168 x 256 (64 x 64),
  // 279 vs 265 at 64 x 4096 x 7168 (64 x 32), 297 vs 283 at 64 x 16384 x 2048; 2 % behind at
  // 48 x 24576 x 512 (64 x 96, 141 vs 144).
  // Our 128 x 112 tiles (pipelined k blocks): 128 of them are one full wave at N = 7168 (M = 256)
  // and 3584 (M = 512), where CUTLASS's 128 x 128 makes 112: 991 vs 933 at 256 x 7168 x 7168,
  // 1149 vs 1041 at 512 x 3584, 1227 vs 1110 at 1024 x 3584 (two waves), 1130 vs 980 at
  // 640 x 5120 x 7168 (ahead at all 16 shapes measured where the table takes them, by 3-15 %;
  // RESULTS.md 18a-18d). Not at M <= 320 where the last 128-row block is at most half full:
  // 737-750 vs 843-848 (CUTLASS's 128 x 128) at 320 x 4608 x 7168, 693 vs 722 at K = 4096, 645 vs
  // 687 at 192 x 7168 x 7168 (at M = 448 they are ahead again: 807 vs 725 at 448 x 7168 x 2048).
  const int64_t tiles96 = count(96);
  const bool few_tiles = m <= 64 || (k >= 2048 && count(256) <= sms);
  if (few_tiles) {
    const bool rows64_only = m <= 64 || (m > 128 && m <= 192);
    const bool half_empty_block = m <= 320 && m % 128 != 0 && m % 128 <= 64;
    struct Tile {
      int64_t rows, cols;
      const char* name;
      bool half_empty_block_too = true;  // a candidate where the last 128-row block is half empty
      const char* at_small_m = nullptr;  // the configuration taken at M <= 64, if not `name`
    };
    // 128-row tiles first; M > 64 comes here from K = 2048 only (the 96-wide tiles' long-K
    // builds), M <= 64 and 128 < M <= 192 take the 64-row tiles alone.
    constexpr Tile kTiles[] = {{128, 96, "own_128x96_pipe"}, {128, 112, "own_128x112_pipe", false},
                               {128, 128, "coop_128x128_c1x1"},
                               {128, 160, "own_128x160"}, {128, 192, "own_128x192"},
                               {128, 256, "own_128x256"}, {128, 64, "own_128x64"},
                               {64, 16, "own_64x16", true, "own_64x16_pdl"},
                               {64, 32, "own_64x32", true, "own_64x32_pdl"},
                               {64, 48, "own_64x48", true, "own_64x48_pdl"},
                               {64, 64, "own_64x64", true, "own_64x64_pdl"},
                               {64, 96, "own_64x96", true, "own_64x96_pdl"},
                               {64, 128, "own_64x128", true, "own_64x128_pdl"}};
    const Tile* best = nullptr;
    int64_t best_cost = 0;
    for (const Tile& t : kTiles) {
      if ((rows64_only && t.rows > 64) || (half_empty_block && !t.half_empty_block_too)) continue;
      const int64_t per_tile = std::max<int64_t>(64 * (t.rows + t.cols), t.rows * t.cols);
      const int64_t cost = waves(count(t.cols, t.rows)) * per_tile;
      if (best == nullptr || cost < best_cost) {
        best = &t;
        best_cost = cost;
      }
    }
    return index_of(m <= 64 && best->at_small_m != nullptr ? best->at_small_m : best->name);
  }
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
  const int64_t tiles192 = count(192);
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
  //   (At long K where some 128-row tile fits in one wave, the few-tiles rule above comes first.)
  //   In up to three waves their k blocks pipelined (the few-tiles rule's 128 x 96 too, which
  //   never makes more): -1 % to +15 %, +2 % at the median, at the 22 such shapes of RESULTS.md
  //   17g and 17i (1116 vs 1083 at 1024 x 1536 x 7168, 1134 vs 983 at 1536 x 1024 x 7168);
  //   in four or more, unrolled by turns, ahead at six of nine shapes: 1096 vs 967 at
  //   1536 x 7168 x 7168, 1034 vs 915 at 6144 x 1024 x 7168, 1132 vs 1027 at 1536 x 5120 x 7168
  //   (behind at K = 2048 and 4096 at three: 1076 vs 996 at 1536 x 7168 x 2048, 1095 vs 911 at
  //   6144 x 1024 x 4096, 1053 vs 1018 at 1536 x 5120 x 2048).
  if (tiles96 <= sms || full(tiles96) >= 0.95) {
    if (k < 2048) return index_of("own_128x96_shortk");
    return index_of(waves(tiles96) <= 3 ? "own_128x96_pipe" : "own_128x96");
  }
  // - Otherwise the 128-row tiles whose waves hold the fewest columns (a wave of any of them
  //   takes about as long per column): CUTLASS's 128 x 128 (data-parallel; 1024 x 2048: 128
  //   tiles, where 96s and 192s are two-thirds full), our 128 x 112 (pipelined, in up to three
  //   waves) or our 128 x 160, on a tie the earlier. Against CUTLASS's 128 x 128, the table's
  //   choice at all of these through run 17 (RESULTS.md 18b, 18d): 128 x 160 963 vs 774 at
  //   640 x 7168 x 2048, 1110 vs 894 at K = 7168, 1135 vs 1025 at 1024 x 7168 x 7168 (3 waves
  //   against 4), 1060 vs 913 at 1536 x 4608 x 2048, 1204 vs 1019 at 1024 x 5120 x 4096; 128 x 112
  //   1180 vs 1050 at 768 x 7168 x 7168 (3 waves, 97 % full, against 3 of 85 %), 903 vs 810 at
  //   768 x 4608 x 2048. Stream-K, which splits K so that every SM gets the same work, lost at
  //   every shape measured that reaches this rule: 1057 vs 1101 at 512 x 7168 x 7168, 1009 vs 1105
  //   at 768 x 7168, 1070 vs 1085 at 1024 x 7168 (RESULTS.md run 12; 1079 vs 1135 for 128 x 160 in
  //   18d). It won only at 1024 x 4608 x 7168 (1056 vs 938, its last wave 18 % full), which the
  //   96-wide rule takes.
  //   Measured from K = 2048; below it, CUTLASS's 128 x 128 as through run 17.
  if (k < 2048) return index_of("coop_128x128_c1x1");
  const int64_t waves112 = waves(tiles112);
  const char* pick = "coop_128x128_c1x1";
  int64_t least = waves(count(128)) * 128;
  if (waves112 <= 3 && waves112 * 112 < least) {
    pick = "own_128x112_pipe";
    least = waves112 * 112;
  }
  if (waves(count(160)) * 160 < least) pick = "own_128x160";
  return index_of(pick);
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
