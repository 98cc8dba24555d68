// The H100 (sm_90a) path: chooses one of the configurations of gemm_sm90_configs.h per problem and
// launches it (the table below picks our own kernel's; CUTLASS's are there to be chosen by name,
// GEMM_SM90_CONFIG). The configurations live in gemm_sm90_<name>.cu.
// Run numbers (run 15b, 25a-25c) cite the gemm tuning log: git show c631808:benchmarks/RESULTS.md
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
                 order.raster,
                 order.shift};
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

extern "C" int gemm_sm90_config_takes_n(int config, int64_t n) {
  if (config < 0 || config >= kConfigCount || n < 1 || n % fp8gemm::kNMultiple != 0) return 0;
  return std::strncmp(kConfigs[config].name, "own_", 4) == 0 || n % fp8gemm::kScaleBlock == 0;
}

namespace {
int choose_unswapped(int64_t m, int64_t n, int64_t k, int64_t sms);
}  // namespace

// The dispatch table, from the configuration matrices measured on the H100 (132 SMs; TFLOP/s of
// each configuration at each benchmark shape in the tuning log): choose_unswapped below,
// then swapped tiles in its place where they leave far fewer rows idle.
extern "C" int gemm_sm90_choose(int64_t m, int64_t n, int64_t k, Sm90Order* order) {
  int device = 0, sm_count = 132;
  if (cudaGetDevice(&device) == cudaSuccess)
    cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  *order = Sm90Order{1, 0, 1};
  const int64_t sms = sm_count;
  const int plain = choose_unswapped(m, n, k, sms);
  // Swapped tiles (gemm_sm90_own_swap.cu: W output rows x 128 output columns, M the tile's wide
  // side): where the last row block of the unswapped choice is part empty, its tiles compute and
  // store up to 127 empty rows (63 for 64-row tiles); a swapped tile's last block at most 15. But
  // the swapped kernel is slower where both are full (per column a scale read and a multiply more
  // in each k block's promotion): it topped out at 920-940 TFLOP/s at large M where the unswapped
  // tiles ran 1000-1160 (tuning log 25b). So they are taken only where they fill at least three
  // quarters of a wave and either
  // - "cheaper": the few-tiles rule's cost (in choose_unswapped: waves x the larger of a tile's L2
  //   traffic and its math) of the cheapest swapped width is less than 5/6 of the cheapest
  //   unswapped 128-row width's, and the unswapped choice uses less than 0.85 of the rows the
  //   swapped tiles use; or
  // - "emptier": that cost is at most 1/1.1 of it, and the unswapped choice uses less than 0.7.
  // Measured at 138 shapes (tuning log 25a-25c), where these hold at 28: +17 % (geometric mean)
  // over the unswapped choice, the least 0.98; 656 (144 wide) vs 398 (our 128 x 128) at
  // 136 x 31744 x 4608, 939 vs 701 at 524 x 5632 x 6656, 609 (80 wide, emptier) vs 414 at
  // 156 x 21376 x 4608 (cuBLAS 542). Out of sample, at random shapes where the choice changed:
  // cheaper, +14 % at 45 (25d), the least 0.93, behind cuBLAS at none of them instead of 12;
  // emptier, +15 % at 16 (25e), the least 0.97. What each bound keeps out (25a-25c): a cost ratio
  // of exactly 6/5 lost 4-10 % at M = 296-320 (897 vs 999 at 316 x 24576 x 8192, against our
  // 128 x 192); where 64-row tiles were nearly full, 2-6 % (658 vs 702 at 192 x 16384 x 2048).
  // Fewer tiles lost up to 54 % (256 vs 351 at 160 x 2432 x 4096, 76 tiles of 48-wide ones);
  // with the widths built now the wave bound decides at about 1 in 1000 random shapes, not
  // measured. 48- and 64-wide swapped tiles lost up to 39 % where the cost took them, and 96- to
  // 128-wide ones were hardly ever its choice: not built. Only from K = 2048 and at M > 64, where
  // they were measured.
  if (m <= 64 || k < 2048 || m % 128 == 0) return plain;
  auto waves = [&](int64_t tiles) { return (tiles + sms - 1) / sms; };
  auto cost = [&](int64_t cols, int64_t tiles) {
    return waves(tiles) * std::max<int64_t>(64 * (128 + cols), 128 * cols);
  };
  int64_t unswapped = 0;
  for (int64_t cols : {96, 112, 128, 160, 192, 256}) {
    const int64_t c = cost(cols, (m + 127) / 128 * ((n + cols - 1) / cols));
    if (unswapped == 0 || c < unswapped) unswapped = c;
  }
  struct Swapped {
    int64_t rows;
    const char* name;
  };
  constexpr Swapped kSwapped[] = {{80, "own_swap_80x128"},   {144, "own_swap_144x128"},
                                  {160, "own_swap_160x128"}, {176, "own_swap_176x128"},
                                  {192, "own_swap_192x128"}};
  const Swapped* best = nullptr;
  int64_t best_cost = 0;
  for (const Swapped& t : kSwapped) {
    const int64_t c = cost(t.rows, fp8gemm::scale_columns(n) * ((m + t.rows - 1) / t.rows));
    if (best == nullptr || c < best_cost) {
      best = &t;
      best_cost = c;
    }
  }
  const int64_t swapped_tiles = fp8gemm::scale_columns(n) * ((m + best->rows - 1) / best->rows);
  const int64_t plain_rows = std::strncmp(kConfigs[plain].name, "own_64x", 7) == 0 ? 64 : 128;
  const double used_plain =
      static_cast<double>(m) / ((m + plain_rows - 1) / plain_rows * plain_rows);
  const double used_swapped =
      static_cast<double>(m) / ((m + best->rows - 1) / best->rows * best->rows);
  const bool cheaper = 5 * unswapped > 6 * best_cost && 0.85 * used_swapped > used_plain;
  const bool emptier = 10 * unswapped >= 11 * best_cost && 0.7 * used_swapped > used_plain;
  if ((cheaper || emptier) && 4 * swapped_tiles >= 3 * sms) return index_of(best->name);
  return plain;
}

namespace {

// The unswapped tiles' table.
int choose_unswapped(int64_t m, int64_t n, int64_t k, int64_t sms) {
  // Tiles of tile_m (128 unless named) rows and tile_n columns; waves of one tile per SM; "full":
  // the share of the waves' SM slots that hold a tile, tiles / (waves x SMs).
  auto count = [&](int64_t tile_n, int64_t tile_m = 128) {
    return (m + tile_m - 1) / tile_m * ((n + tile_n - 1) / tile_n);
  };
  auto waves = [&](int64_t tiles_n) { return (tiles_n + sms - 1) / sms; };
  // The columns one SM computes in the waves of 128-row tiles tile_n wide: a wave of any width
  // takes about as long per column, so the rules below compare widths by it.
  auto wave_columns = [&](int64_t tile_n) { return waves(count(tile_n)) * tile_n; };
  // The share of the slots (one tile each) that `tiles` fill in their waves of `slots`.
  auto fill = [](int64_t tiles, int64_t slots) {
    return static_cast<double>(tiles) / static_cast<double>((tiles + slots - 1) / slots * slots);
  };
  auto full = [&](int64_t tiles_n) { return fill(tiles_n, sms); };
  // Short K (1 to 6 k-blocks): each tile's epilogue (writing its bf16 rows) is as long as its
  // mainloop, and since our own kernel writes them with stmatrix it wins (tuning log run 14;
  // graph replays, TFLOP/s). Four waves or more: its 192-wide tiles, one output buffer: 598 vs
  // 580 for the two-buffer ones with the old epilogue (the choice through run 13) at
  // 6144 x 7168 x 256, 936 vs 775 at K = 512; 803 vs 761 (two buffers) at 2048 x 7168 x 512.
  // Fewer: its 96-wide tiles, against CUTLASS's 64 x 128 ping-pong (the choice through run 13):
  // 395 vs 369 at 1024 x 7168 x 256, 588 vs 551 at K = 512, 278 vs 269 at 512 x 7168 x 256,
  // 122 vs 108 at 128 x 7168 x 256. The one shape measured where another was ahead:
  // 256 x 7168 x 512, 262 vs 287 for CUTLASS's 128 x 128 (ping-pong 264). The _shortk
  // configurations: k-block loops not unrolled, 3-15 % faster here than the long-K ones, and
  // launched with programmatic dependent launch, so that a call's set-up overlaps the end of the
  // kernel before it: 1-13 % more at each of these shapes (tuning log run 15b; 426 vs 392 at
  // 1024 x 7168 x 256, 616 vs 580 at K = 512, 964 vs 925 at 6144 x 7168 x 512).
  // Since run 22 the 192-wide tiles also in fewer waves (counted in 128 x 128 tiles) at M > 512:
  // where they make three or more and those hold no more columns than the 96-wide tiles' waves
  // (as full, with twice the math per byte of A loaded). Against the 96-wide tiles: +9 %
  // (geometric mean) at the 51 such shapes of 22c, from +2 % to +15 % (718 vs 624 at
  // 1664 x 5120 x 512, 463 vs 437 at 4096 x 2048 x 256), and +10 % at 24 random shapes of 22d,
  // the least +2.7 %. In one or two waves the 96-wide tiles stay ahead (216 vs 195 at
  // 1024 x 2048 x 256, 371 vs 361 at 768 x 7168 x 256), as where their waves hold fewer columns
  // (419 vs 411 at 1024 x 7168 x 256).
  // M <= 64 goes to the few-tiles rule's 64-row tiles instead, at short K too: ahead of the
  // 96-wide ones at 10 of 13 shapes measured, by up to 19 % (197 vs 187 at 64 x 32768 x 512,
  // 81 vs 69 at 32 x 16384 x 512, 110 vs 97 at 64 x 7168 x 512, 192 vs 161 at
  // 64 x 16384 x 768), equal at one, 3-4 % behind at two (tuning log 18b, 18c).
  // Two CTAs per SM (the _x2 configurations, launched with programmatic dependent launch) where
  // 128-row tiles would leave SMs or rows idle. Likely why they win (not profiled): one CTA's
  // epilogue and next tile's start overlap the other's mainloop, where a lone CTA's waits have
  // nothing beside them. At 128 < M <= 192, where the second 128-row block is at most half full,
  // 64 x 96 tiles: at short K (to 768) at every N measured, to K = 1536 in up to three waves of
  // 96-wide 128-row tiles (tuning log 20b, 20g, 21b): 277 vs 217 (the 96-wide tiles) at
  // 192 x 7168 x 512, 427 vs 368 at 192 x 16384, 446 vs 401 at 192 x 32768 x 512, 427 vs 350 at
  // 160 x 32768 x 768 (21b), 413 vs 337 at 192 x 7168 x 1024. At M <= 64, 64 x 64 tiles where they
  // make more than one wave (else the few-tiles rule's _pdl tiles below): 226 vs 216 at
  // 64 x 32768 x 512, 62 vs 59 at 16 x 32768, 93 vs 90 at 32 x 16384, 234 vs 225 at
  // 64 x 16384 x 768 (20d).
  // Elsewhere at M <= 256, at short K and where 96-wide tiles make fewer than two waves (to
  // K = 1536, M > 96), the tiles whose waves are fullest: a wave takes about as long whether its
  // slots (a CTA each) are all taken or not. Candidates, the earlier on a tie (within 0.02): our
  // 96-wide 128-row tiles (one CTA per SM), 128 x 64 in two CTAs per SM, 64 x 64 in two. Until
  // run 20 the table took 64 x 64 in two CTAs wherever 96-wide tiles made fewer than two waves;
  // against that (tuning log 21b-21d, graph replays, TFLOP/s): the 96-wide tiles where their
  // waves are full, 555 vs 489 at 256 x 12288 x 768, 469 vs 348 at 224 x 12288 x 768, 327 vs 292
  // at 224 x 10240 x 512, 645 vs 549 at 256 x 12288 x 1024, 480 vs 452 at 128 x 24576 x 1024;
  // 128 x 64 in two CTAs where theirs are (one row block per tile, where 64 x 64 tiles load b
  // twice): 423 vs 393 at 256 x 7168 x 768, 391 vs 338 at 224 x 8192 x 768, 423 vs 390 at
  // 112 x 16384 x 1536, and at 96 and 128 x 32768 against the 96-wide tiles (2.6 waves), 293 vs
  // 271 at 96 x 32768 x 512, 382 vs 364 at 128 x 32768 x 512 (21a; cuBLAS 383). All of run 21's
  // changes to this table together, at the 220 shapes of 21a-21e whose choice changed: +9.5 %
  // (geometric mean); 4 more than 3 % behind, by at most 8 % (224 x 5120 x 256: 125 vs 136).
  // At 128 < M <= 256 with two or more waves of 96-wide tiles, those (the short-K rule below):
  // 456 vs 436 (128 x 64 in two CTAs) at 256 x 16384 x 512, 553 vs 467 at K = 768.
  // At 256 < M <= 512 with short K, where 96-wide tiles make fewer than three waves, the fullest
  // waves again, among the 96-wide tiles, our 128 x 128 (with programmatic dependent launch),
  // 128 x 64 in two CTAs and 64 x 64 in two (in more waves the 96- or 192-wide tiles, below).
  // Against the 96-wide tiles, the choice before (tuning log 21i, 21j): 327 vs 274 at
  // 288 x 5120 x 768 (128 x 128), 429 vs 370 at 320 x 6144 x 768 (64 x 64), 428 vs 364 at
  // 448 x 4096 x 768, 308 vs 280 at 480 x 3584 x 512 (cuBLAS 326); at the 165 shapes measured,
  // +4 % (geometric mean), none more than 1 % behind. Other orders of the candidates did worse,
  // but for one: at K = 256, and at K = 512 where the 128 x 64 tiles make one wave of two CTAs
  // per SM, those before our 128 x 128, which they were ahead of at every such shape (1.01-1.14;
  // behind from K = 640): on 27 shapes of 21l, +5 %, one 4 % behind (400 x 4096 x 512).
  // At 64 < M <= 96 from K = 896 to 2047 the same among our 96-wide tiles, 64 x 128 with
  // programmatic dependent launch and our 128 x 128 with it (the rows are part empty in 64- and
  // 128-row tiles alike; two CTAs of 64 x 64 lost, 292 vs 329 at 96 x 16384 x 1536, 20g). Against
  // CUTLASS's 128 x 128 or 192-wide tiles, the choice before (21b, 21d): 191 vs 178 at
  // 80 x 7168 x 1024, 312 vs 280 at 96 x 16384 x 1024, 354 vs 329 at 96 x 16384 x 1536 (cuBLAS
  // 358), 363 vs 337 at 96 x 24576 x 1024, 308 vs 249 at 88 x 20480 x 1152.
  // Before them, from K = 896 to 2048: where 128 tiles of 128 x 112 are one full wave (M a
  // multiple of 128 from 256: 256 x 7168, 512 x 3584), those with programmatic dependent launch
  // (tuning log 20i): 486 vs 455 (64 x 64, two CTAs) vs 461 (the same tiles without it) at
  // 256 x 7168 x 1024, 604 vs 529 vs 576 at K = 1536, 687 vs 565 vs 669 at K = 2048 (the
  // few-tiles rule's choice there before), 535 vs 489 vs 502 at 512 x 3584 x 1024.
  const int64_t tiles112 = count(112);
  if (k > 768 && k <= 2048 && m >= 256 && m % 128 == 0 && tiles112 <= sms && full(tiles112) >= 0.95)
    return index_of("own_128x112_pipe_pdl");
  if (m > 128 && m <= 192 && (k <= 768 || (k <= 1536 && count(96) <= 3 * sms)))
    return index_of("own_64x96_x2");
  if (m <= 64 && k <= 768 && count(64, 64) > sms) return index_of("own_64x64_x2");
  struct Candidate {
    int64_t rows, cols, ctas_per_sm;
    const char* name;
  };
  constexpr Candidate kFewRows[] = {{128, 96, 1, "own_128x96_shortk"},
                                    {128, 64, 2, "own_128x64_x2"},
                                    {64, 64, 2, "own_64x64_x2"}};
  constexpr Candidate kMidRows[] = {{128, 96, 1, "own_128x96_shortk"},
                                    {128, 128, 1, "own_128x128_pipe_pdl"},
                                    {128, 64, 2, "own_128x64_x2"},
                                    {64, 64, 2, "own_64x64_x2"}};
  constexpr Candidate kMidRowsShorter[] = {{128, 96, 1, "own_128x96_shortk"},
                                           {128, 64, 2, "own_128x64_x2"},
                                           {128, 128, 1, "own_128x128_pipe_pdl"},
                                           {64, 64, 2, "own_64x64_x2"}};
  constexpr Candidate kRows96[] = {{128, 96, 1, "own_128x96_shortk"},
                                   {64, 128, 1, "own_64x128_pdl"},
                                   {128, 128, 1, "own_128x128_pipe_pdl"}};
  // The candidate whose waves are fullest; the earlier unless a later one fills more than 0.02
  // more of its slots.
  auto fullest = [&](const auto& candidates) {
    const Candidate* best = nullptr;
    double best_fill = 0.0;
    for (const Candidate& c : candidates) {
      const double f = fill(count(c.cols, c.rows), sms * c.ctas_per_sm);
      if (best == nullptr || f > best_fill + 0.02) {
        best = &c;
        best_fill = f;
      }
    }
    return index_of(best->name);
  };
  if (m > 64 && m <= 256 && !(m > 128 && count(96) >= 2 * sms) &&
      (k <= 768 || (k <= 1536 && m > 96 && count(96) < 2 * sms)))
    return fullest(kFewRows);
  if (m > 256 && m <= 512 && k <= 768 && count(96) < 3 * sms)
    return k <= 256 || (k <= 512 && count(64) <= 2 * sms) ? fullest(kMidRowsShorter)
                                                           : fullest(kMidRows);
  if (m > 64 && m <= 96 && k > 768 && k < 2048) return fullest(kRows96);
  if (k <= 768 && m > 64) {
    const bool wide = count(128) >= 4 * sms ||
                      (m > 512 && waves(count(192)) >= 3 && wave_columns(192) <= wave_columns(96));
    return index_of(wide ? "own_128x192_shortk" : "own_128x96_shortk");
  }
  // Few tiles: long K where some 128-row tile fits in one wave. Each tile streams (rows + columns)
  // x K bytes of A and B through L2 into its SM, and with few rows that traffic, not the math, sets
  // the time: 128 tiles of 128 x 32 took 1.7 times as long as 64 of them (192 x 2048 x 7168 against
  // 128 x 2048, both one wave, tuning log run 16b). So a tile costs the larger of 64 x
  // (rows + columns), its L2 traffic, and rows x columns, its math (64: the L2's bytes per SM and
  // cycle, about 47, against the multiply-adds per SM and cycle our largest tiles run at, about
  // 2800), and the time goes as waves x that; the tile of least cost wins, on a tie the earlier in
  // the list (128 rows first: two math warpgroups). The L2 term is the cost DeepGEMM's heuristic
  // minimises. Candidates: our 128 x 96, 128 x 112 and 128 x 128 tiles (pipelined), our
  // 128 x 160, 128 x 192 and 128 x 256, and the 64-row ones (one math warpgroup); 128 x 32 never
  // costs less than 64 x 64.
  // Nor does our 128 x 64 ever cost less than 64 x 128: the same cost per tile, and never more
  // 64-row tiles than 128-row ones (fewer where the last 128-row block is at most half full).
  // Until run 27 it came first on their ties; 64 x 128 instead (one math warpgroup with twice the
  // columns per wgmma), measured at 24 random shapes whose choice that changed (127 of 40 000
  // drawn; tuning log 27a, graph replays, TFLOP/s): +18 % (geometric mean), ahead at all 24, from
  // +1 % to +70 % (834 vs 491 at 424 x 2048 x 7168, 798 vs 501 at 316 x 2688 x 7168, 355 vs 297 at
  // 80 x 7296 x 5632); behind cuBLAS at none of them, not 6. At 96 < M <= 256 from K = 1664 to
  // 1920, where the 128-row choice went on to the rules below (mostly our 128 x 96 short-K
  // tiles), it takes 64 x 128 now: +6 % at 8 random such shapes (27b), 256 vs 230 at
  // 217 x 3584 x 1664, 2 % behind at two.
  // Our 128 x 112 not where N <= 2048: in one wave of each, a 128 x 112 tile took 7-12 % longer
  // than a 128 x 128 one, with an eighth less math (ncu, 27b: 26.8 vs 25.0 us at
  // 1096 x 1536 x 6144, 21.2 vs 18.9 us at 1024 x 1792 x 4096; not understood: one copy of its
  // math loop in place of eight, one per b-scale split column, was slower still, 27e), so the cost
  // above flatters it. Where the table took it at N <= 2048, our 128 x 128 (here or in the
  // fallback below, both through wide_enough_for_112) was +7 % at 16 random shapes (27a; +16 % at
  // 3068 x 1152 x 6144, 1074 vs 929), +2 % at 25 more out of sample (27b, from -7 % to +17 %;
  // behind cuBLAS at none, not 4), and with programmatic dependent launch at K < 2048, +2 % at 12
  // (27b). At N > 2048, -1 % (8 shapes of 27a): kept there.
  // Our 128 x 128 took the place of CUTLASS's in run 21, with programmatic dependent launch where
  // M is one row block (M <= 128): 340 vs 316 at 80 x 16384 x 2048, 463 vs 435 at
  // 96 x 16384 x 4096, 663 vs 630 at 128 x 16384 x 7168, 1208 vs 1170 at 1024 x 2048 x 7168,
  // 1282 vs 1229 at 1024 x 4096 x 7168; level at 256 x 16384 (992 vs 985 at K = 4096, 1037 vs
  // 1042 at 7168) (tuning log 21c, 21e). Since run 22 also with it where its tiles make one
  // wave of full row blocks (M a multiple of 128) to K = 3072, against the
  // same tiles without (22c, 22d): +4 % (geometric mean) at the 24 shapes measured, 0 to +7 %
  // (724 vs 692 at 256 x 8192 x 2048, 818 vs 775 at 384 x 5632 x 2048, 873 vs 814 at
  // 1024 x 2048 x 2048, 1006 vs 966 at K = 3072); at K = 4096 -1 % to +3 %, not taken. At
  // M = 200 (a part-empty row block) 1 % to 11 % behind (582 vs 624 at 200 x 8192 x 3072): not
  // taken either. At M <= 64, 64-row tiles only: 128-row ones compute and store half their rows
  // for nothing, which the cost does not see.
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
  // 64 x 32768 x 1024, 270 vs 234 at 64 x 24576 x 1024, tuning log 20g); where no 128-row tile
  // fits in one wave at M > 64, the rules below. Since run 22 also from K = 1664 at
  // 96 < M <= 256 where the rule takes 64-row tiles (its 128-row ones there lack the programmatic
  // dependent launch the rules below give them): until then the rules below took 128-row tiles,
  // 96-wide most often, and the 64-row ones were +19 % (geometric mean) at the 35 such shapes of
  // 22f and 22g, from +2.5 % to +45 % (84 vs 58 at 125 x 1280 x 1920, 551 vs 441 at
  // 168 x 14336 x 1792, 203 vs 160 at 251 x 2048 x 1792).
  // Also 64-row tiles alone at 128 < M <= 192, where the second 128-row block is at least half
  // empty: the 128-row tiles ran 65-75 % as fast per useful row as at M = 256, and 64-row ones
  // were ahead at five of six shapes, by up to 23 % (875 vs 713 at 192 x 16384 x 7168, 755 vs 687
  // at 192 x 7168 x 7168, 667 vs 568 at 192 x 6144 x 7168; 3 % behind at 192 x 6144 x 2048). At
  // M = 320 (a sixth of the rows empty) they were ahead at four of nine and up to 9 % behind
  // (tuning log 18b, 18c): there the cost decides.
  // At M <= 64 the 64-row tiles launch with programmatic dependent launch (their _pdl
  // configurations): with the width the rule takes, ahead of the same kernel without it at 16 of
  // the 17 shapes measured, by 5-23 % (tuning log 19b, 19c): 210 vs 197 at 64 x 32768 x 512
  // (64 x 128), 38 vs 32 at 64 x 1536 x 512 (64 x 16), 81 vs 68 at 64 x 7168 x 256 (64 x 64),
  // 279 vs 265 at 64 x 4096 x 7168 (64 x 32), 297 vs 283 at 64 x 16384 x 2048; 2 % behind at
  // 48 x 24576 x 512 (64 x 96, 141 vs 144). Since run 29 the 96- and 112-wide 128-row tiles at
  // 64 < M <= 128 too, as our 128 x 128 already was: +2.8 % (geometric mean) at the 25 random
  // shapes of 29a and 29d whose choice that changed, from -1 % to +7 % (329 vs 311 at
  // 92 x 10880 x 2048, where cuBLAS ran 316; 429 vs 402 at 116 x 12032 x 2048); at K = 1664 to
  // 1920, where the rules below took the 96-wide short-K tiles, equal (0.995-1.015, 7 shapes).
  // Our 128 x 112 tiles (pipelined k blocks): 128 of them are one full wave at N = 7168 (M = 256)
  // and 3584 (M = 512), where CUTLASS's 128 x 128 makes 112: 991 vs 933 at 256 x 7168 x 7168,
  // 1149 vs 1041 at 512 x 3584, 1227 vs 1110 at 1024 x 3584 (two waves), 1130 vs 980 at
  // 640 x 5120 x 7168 (ahead at all 16 shapes measured where the table takes them, by 3-15 %;
  // tuning log 18a-18d). Until run 29 not at M <= 320 where the last 128-row block is at most
  // half full (737-750 vs 843-848 for CUTLASS's 128 x 128 at 320 x 4608 x 7168, 18c), nor the
  // 96-wide tiles over any such block (below): see the end of the next paragraph.
  const int64_t tiles96 = count(96);
  // A last 128-row block at most half full (M % 128 from 1 to 64): there our 128 x 96 tiles fell
  // far behind the wider ones, the more the emptier that block, and behind cuBLAS at most such
  // shapes. Where the table took them (tuning log 24h, 40 shapes): 0.60-1.03 of the best
  // configuration measured, 0.83 at the median, behind cuBLAS at 27; at M % 128 from 65 to 124,
  // 0.82-0.98 (15 shapes), behind cuBLAS at 2. Not understood then: that row block's share of the
  // tiles is the same for every width. So they are not taken there; the few-tiles rule's cost
  // model chooses among the other tiles. Where the 96-wide rule would take them, four waves or
  // more went to the 192-wide rule's choice, fewer to the fallback's (our 128 x 160 where it
  // makes fewer waves). At 56 random shapes whose choice this changed (594 of 20 000 drawn; 24i):
  // +8 % (geometric mean), from -7 % to +74 % (880 vs 507 at 392 x 21632 x 3584, 948 vs 636 at
  // 788 x 5120 x 3072; 776 vs 838 at 6080 x 1024 x 1536); behind cuBLAS at 4, not 14.
  // Run 28 found the cause: TMA loads of A boxes mostly past M slowed every CTA of the call, and
  // our own kernel now moves such a tile back to end at M (gemm_sm90_own_kernel.cuh's
  // tile_row0). Since then four waves or more of 96-wide tiles go to the fallback too (our
  // 128 x 128 mostly), not to the 192-wide rule's choice (128 x 256 mostly), whose tiles never
  // gained from the move: +6.6 % at the 15 shapes of 28h where that changed, +3.3 % at 24 fresh
  // ones (28i; from -7 % to +29 %, 1115 vs 907 at 1808 x 3328 x 7680, 939 vs 730 at
  // 1852 x 3328 x 1536), behind cuBLAS at none of 20, not 4. Taking the 96-wide tiles there
  // again (28h) was -11 % to +16 %, mostly behind our 128 x 128: not done. The few-tiles rule
  // kept both tiles out over such a block until run 29; now only the 112-wide ones at M <= 320
  // where the kernel does not move the tile (the block exactly half full: 731 vs 766 for our
  // 128 x 128 at 320 x 4864 x 3584), and the 96-wide ones at N <= 640 (749 vs 870 at
  // 2212 x 640 x 5632, 603 vs 703 at 2732 x 512 x 3072, 872 vs 937 at 4400 x 640 x 7168: their
  // last column block two-thirds or a third full; since the kernel moves that tile too, level
  // there, 834 vs 827, 692 vs 676, 951 vs 922, 29h, so the rule stays as measured). At the 44
  // random shapes of 29a, 29c and 29d where the change took them (22 from our 128 x 128 to
  // 96-wide tiles, 13 from 112- to 96-wide, 9 from 128- to 112-wide): +8.4 % (geometric mean),
  // from -1 % to +16 % (932 vs 809 at 680 x 1920 x 7168, 875 vs 797 at 428 x 2944 x 8192,
  // 877 vs 808 at 308 x 8960 x 7168), ahead of cuBLAS at all 44. At 24 fresh shapes of this
  // change and of the programmatic dependent launch at M <= 128 above (29e): +3.6 %, ahead of
  // cuBLAS at all 24.
  const bool sparse_last_block = m % 128 != 0 && m % 128 <= 64;
  const bool wide_enough_for_112 = n > 2048;  // our 128 x 112 tiles (the few-tiles rule says why)
  const bool few_tiles =
      m <= 64 || ((k >= 2048 || (m > 96 && m <= 256 && k > 1536)) && count(256) <= sms);
  if (few_tiles) {
    const bool rows64_only = m <= 64 || (m > 128 && m <= 192);
    const bool unmoved_half_block = m % 128 == 64;  // the kernel moves emptier ones only
    struct Tile {
      int64_t rows, cols;
      const char* name;
      const char* at_small_m = nullptr;  // the configuration taken at M <= 64, if not `name`
      // The same tiles launched with programmatic dependent launch, taken at M <= 128 (where a
      // call is short), and in one wave of full row blocks to K = 3072 if `pdl_full_wave`.
      const char* pdl = nullptr;
      bool pdl_full_wave = false;
    };
    // 128-row tiles first; M > 64 comes here from K = 2048 (the 96-wide tiles' long-K builds),
    // 96 < M <= 256 from K = 1664; M <= 64 and 128 < M <= 192 take the 64-row tiles alone.
    constexpr Tile kTiles[] = {{128, 96, "own_128x96_pipe", nullptr, "own_128x96_pipe_pdl"},
                               {128, 112, "own_128x112_pipe", nullptr, "own_128x112_pipe_pdl"},
                               {128, 128, "own_128x128_pipe", nullptr, "own_128x128_pipe_pdl",
                                true},
                               {128, 160, "own_128x160"}, {128, 192, "own_128x192"},
                               {128, 256, "own_128x256"},
                               {64, 16, "own_64x16", "own_64x16_pdl"},
                               {64, 32, "own_64x32", "own_64x32_pdl"},
                               {64, 48, "own_64x48", "own_64x48_pdl"},
                               {64, 64, "own_64x64", "own_64x64_pdl"},
                               {64, 96, "own_64x96", "own_64x96_pdl"},
                               {64, 128, "own_64x128", "own_64x128_pdl"}};
    const Tile* best = nullptr;
    int64_t best_cost = 0;
    for (const Tile& t : kTiles) {
      if ((rows64_only && t.rows > 64) || (!wide_enough_for_112 && t.cols == 112) ||
          (unmoved_half_block && m <= 320 && t.cols == 112) ||
          (sparse_last_block && n <= 640 && t.rows == 128 && t.cols == 96))
        continue;
      const int64_t per_tile = std::max<int64_t>(64 * (t.rows + t.cols), t.rows * t.cols);
      const int64_t cost = waves(count(t.cols, t.rows)) * per_tile;
      if (best == nullptr || cost < best_cost) {
        best = &t;
        best_cost = cost;
      }
    }
    if (m <= 64 && best->at_small_m != nullptr) return index_of(best->at_small_m);
    const bool one_full_wave =
        m % 128 == 0 && k <= 3072 && count(best->cols, best->rows) <= sms;
    if (best->pdl != nullptr && (m <= 128 || (best->pdl_full_wave && one_full_wave)))
      return index_of(best->pdl);
    if (k >= 2048 || best->rows == 64) return index_of(best->name);
    // From K = 1664 to 1920 a 128-row choice goes to the rules below.
  }
  // Long K: the mainloop dominates; what is left to choose is how the tiles fill the SMs' waves.
  // Graph replays, TFLOP/s (tuning log run 11; our own tiles have gained 3-8 % since, run 14).
  // Our own kernel's loops unrolled by turns of the ring: 3-8 % from K = 2048 (16 k blocks).
  // Below it (tuning log run 15a, K = 1024 to 1792): 192-wide tiles with them from K = 1280,
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
  //   (tuning log run 15f). 1258 vs 1154 at 4096 x 4096 x 7168 (4 waves of 256 against 6 of
  //   192), 1198 vs 1119 at 4096 x 7168 x 7168 (7 against 10), 1245 vs 1112 at K = 16384,
  //   1084 vs 1026 at 4096 x 24576 x 1536 (equal), 1194 vs 1122 at 8192 x 7168 x 7168; 192-wide
  //   where theirs hold fewer: 1251 vs 1142 at 2048 x 7168 x 7168, 1205 vs 1084 at
  //   6144 x 7168 x 2048, 1309 vs 938 at 6144 x 1536 x 7168, equal at 6144 x 4608 x 7168.
  //   Since run 30 also wherever the 192-wide tiles make 20 waves or more from K = 2048 (the
  //   256-wide ones' then held at most 4.3 % more columns in the sample below): there a
  //   256-wide column cost less. Not understood; a guess, not measured: fewer operand bytes per
  //   multiply-add through L2 and shared memory, under the power cap. At 44 random shapes where
  //   the rule took 128 x 192 (tuning log 30a), 128 x 256 against it: from 20 waves +4.5 %
  //   (geometric mean) at 19, the least 0.976; 17-19 waves +1.4 % at 6; 13-16 -0.7 % at 9; up to
  //   12, -3.9 % at 10 (1030 vs 1083 at 6144 x 7168 x 2048, 14 waves). At 24 fresh shapes the
  //   change took (30b): +5.4 %, from 0.98 to 1.12 (1172 vs 1054 at 6400 x 32384 x 6144, 1167 vs
  //   1043 at 5452 x 30848 x 6656), behind cuBLAS at none of them, not 6. Below K = 2048, 1.4 %
  //   behind at 20 random such shapes (30g; 2-4 % at K = 1152 to 1408, 940 vs 1004 at
  //   4172 x 16512 x 1152), so not there.
  // - Our 128 x 160 tiles in their place (K > 1024) where its waves hold at most 0.9 of the
  //   columns of the better of the two (since run 29): +20 % (geometric mean) at 20 random such
  //   shapes (tuning log 29f), the least +15 %; 1176 vs 969 at 1292 x 9600 x 5632 (five waves of
  //   160 against five of 192, the last 4 % full), 1281 vs 1058 at 6984 x 1920 x 5120, 984 vs
  //   795 at 396 x 25856 x 6144, where the 192-wide tiles had led cuBLAS by 0-13 %. Where the
  //   columns differ by a few per cent, no width led at every shape (29e: 1117 vs 1100 for 192
  //   at 3552 x 14464 x 4608, 1112 vs 1149 for 256 at 5928 x 22656 x 3584).
  auto wide_pick = [&] {
    if (k <= 1024) return index_of("own_128x192_shortk");
    const int64_t wide = std::min(wave_columns(256), wave_columns(192));
    if (10 * wave_columns(160) <= 9 * wide) return index_of("own_128x160");
    const bool many_waves = waves(tiles192) >= 20 && k >= 2048;
    return index_of(wave_columns(256) <= wave_columns(192) || many_waves ? "own_128x256"
                                                                          : "own_128x192");
  };
  if (tiles192 >= 4 * sms || full(tiles192) >= 0.9) return wide_pick();
  // - Our 128 x 96 tiles where they fit in one wave, or fill their last one: 993-1021 vs 928-953
  //   (CUTLASS cooperative 128 x 128) at 1024 x 1536 x 7168 (128 tiles), 138 vs 125 at 128 x 1536
  //   (16 tiles), 1073-1097 vs 957-966 (1075 stream-K) at 1024 x 4608 (384 tiles, 97 % full).
  //   (At long K where some 128-row tile fits in one wave, the few-tiles rule above comes first.)
  //   In up to three waves their k blocks pipelined (the few-tiles rule's 128 x 96 too, which
  //   never makes more): -1 % to +15 %, +2 % at the median, at the 22 such shapes of the tuning
  //   17g and 17i (1116 vs 1083 at 1024 x 1536 x 7168, 1134 vs 983 at 1536 x 1024 x 7168);
  //   in four or more, unrolled by turns, ahead at six of nine shapes: 1096 vs 967 at
  //   1536 x 7168 x 7168, 1034 vs 915 at 6144 x 1024 x 7168, 1132 vs 1027 at 1536 x 5120 x 7168
  //   (behind at K = 2048 and 4096 at three: 1076 vs 996 at 1536 x 7168 x 2048, 1095 vs 911 at
  //   6144 x 1024 x 4096, 1053 vs 1018 at 1536 x 5120 x 2048).
  //   Since run 22, where our 128 x 160 tiles' waves hold no more columns than theirs, those
  //   instead (as full or fuller, with more math per byte loaded): at 30 random such shapes from
  //   K = 2048 (22h) +25 % (geometric mean), the least +9 % (1111 vs 823 at 813 x 8960 x 6784, 1171
  //   vs 950 at 2652 x 2816 x 6784), at 30 from K = 896 to 1920 (22i) +16 %, the least +6 % (1017
  //   vs 856 at 1477 x 7040 x 1792, 1020 vs 913 at 4068 x 1920 x 1408).
  if (tiles96 <= sms || full(tiles96) >= 0.95) {
    if (wave_columns(160) <= wave_columns(96)) return index_of("own_128x160");
    if (!sparse_last_block && (waves(tiles96) <= 3 || wave_columns(96) < wave_columns(128))) {
      if (k < 2048) return index_of("own_128x96_shortk");
      return index_of(waves(tiles96) <= 3 ? "own_128x96_pipe" : "own_128x96");
    }
    // Four waves or more where our 128 x 128 tiles' waves hold no more columns: the fallback's
    // choice, our 128 x 128 at every such shape measured (tuning log 24j): +17 % (geometric
    // mean) at 27 random shapes, from +9 % to +39 % (1191 vs 1023 at 868 x 7168 x 6144, 1156 vs
    // 833 at 6244 x 1664 x 7040, 974 vs 873 at 3836 x 2816 x 1024 with programmatic dependent
    // launch), where the 96-wide tiles had been behind cuBLAS at 12 of the 18 it ran (none now).
    // The comparisons above that kept them there were against CUTLASS's 128 x 128.
  }
  // - Otherwise the 128-row tiles whose waves hold the fewest columns (a wave of any of them
  //   takes about as long per column): our 128 x 128 (1024 x 2048: 128 tiles, where 96s and 192s
  //   are two-thirds full), our 128 x 112 (in up to three waves) or our 128 x 160, on a tie the
  //   earlier, all pipelined (128 x 112 only at N > 2048: see the few-tiles rule). Against
  //   CUTLASS's 128 x 128, the table's choice at all of these
  //   through run 17 (tuning log 18b, 18d): 128 x 160 963 vs 774 at 640 x 7168 x 2048, 1110 vs
  //   894 at K = 7168, 1135 vs 1025 at 1024 x 7168 x 7168 (3 waves against 4), 1060 vs 913 at
  //   1536 x 4608 x 2048, 1204 vs 1019 at 1024 x 5120 x 4096; 128 x 112 1180 vs 1050 at
  //   768 x 7168 x 7168 (3 waves, 97 % full, against 3 of 85 %), 903 vs 810 at 768 x 4608 x 2048.
  //   Stream-K, which splits K so that every SM gets the same work, lost at every shape measured
  //   that reaches this rule: 1057 vs 1101 at 512 x 7168 x 7168, 1009 vs 1105 at 768 x 7168, 1070
  //   vs 1085 at 1024 x 7168 (tuning log run 12; 1079 vs 1135 for 128 x 160 in 18d). It won only
  //   at 1024 x 4608 x 7168 (1056 vs 938, its last wave 18 % full), which the 96-wide rule takes.
  //   Our 128 x 128 in CUTLASS's place (run 21): 1253 vs 1133 at 2048 x 4096 x 7168, 1249 vs 1109
  //   at 2048 x 5120 x 7168, 1244 vs 1123 at 4096 x 2048 x 7168, 1019 vs 899 at 2048 x 2048 x 2048
  //   (tuning log 21e).
  //   Below K = 2048 (CUTLASS's 128 x 128 through run 20) the same with programmatic dependent
  //   launch, and our 192-wide short-K tiles in 128 x 160's place: against CUTLASS's 128 x 128,
  //   835 vs 729 at 1024 x 7168 x 1024 (128 x 128), 681 vs 604 at 512 x 7168 x 1024 (128 x 112),
  //   596 vs 463 at 384 x 7168 x 1024 (192 in one wave, 86 % full), 518 vs 385 at
  //   200 x 9216 x 1792; 62 shapes of 21e changed, +12 % (geometric mean), the least 0.98.
  //   Since run 22 our 128 x 160 among them below K = 2048 too, taken on a tie with 128 x 128
  //   there (2-6 % ahead at the 5 ties of 22f), not from K = 2048 (3-6 % behind at two of 22f's).
  //   Before, the fallback never took it below K = 2048: at the 71 shapes of 22f and 22g where
  //   it takes it now, +8 % (geometric mean), +13 % against 128 x 112
  //   (806 vs 688 at 806 x 5504 x 1536, 892 vs 789 at 2708 x 1792 x 1408), +6 % against
  //   128 x 128 and against the 192-wide short-K tiles (1087 vs 989 at 1396 x 5248 x 1920, 505 vs
  //   460 at 1203 x 1792 x 1664); one shape 14 % behind (457 vs 532 at 384 x 6144 x 1024, where the
  //   192-wide tiles make one wave).
  const bool short_k = k < 2048;
  const char* pick = short_k ? "own_128x128_pipe_pdl" : "own_128x128_pipe";
  int64_t least = wave_columns(128);
  if (wide_enough_for_112 && waves(tiles112) <= 3 && wave_columns(112) < least) {
    pick = short_k ? "own_128x112_pipe_pdl" : "own_128x112_pipe";
    least = wave_columns(112);
  }
  if (wave_columns(160) < least || (short_k && wave_columns(160) == least)) {
    pick = "own_128x160";
    least = wave_columns(160);
  }
  // Our 128 x 192 where its waves hold fewer columns still, at long K too since run 31 (before,
  // short K only): at the 9 of 40000 random shapes where that changed the choice (from our
  // 128 x 128) and 6 at N = 2112 or 1088 (DeepSeek-V3's fused q_a/kv_a projection, whose last
  // 128-wide tile is half empty), ahead at all 15, +15 % (geometric mean), the least +7 %
  // (1282 vs 954 at 3072 x 2112 x 7168, 1192 vs 994 at 4096 x 2112 x 7168; tuning log 31b).
  if (wave_columns(192) < least) pick = short_k ? "own_128x192_shortk" : "own_128x192";
  return index_of(pick);
}

}  // namespace

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
  if (!gemm_sm90_config_takes_n(config, n) || m < 1 || m > fp8gemm::kMaxM || k % 128 != 0 || a_scale_ld < m || a_scale_ld % 4 != 0 || order.raster < 0 ||
      order.raster > 2 || order.swizzle < 1 || order.swizzle > 8 || order.shift < 0 ||
      order.shift > 2)
    return cudaErrorInvalidValue;
  return kConfigs[config].run(
      make_problem(out, a, bt, a_scale, a_scale_ld, b_scale, m, n, k, order), workspace, stream);
}
