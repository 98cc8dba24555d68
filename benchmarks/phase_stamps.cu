// Where the time of one call of our own sm_90a kernel goes, phase by phase: %globaltimer at the
// phases FP8GEMM_OWN_STAMP marks in kernels/gemm/gemm_cuda/gemm_sm90_own_kernel.cuh, per CTA and
// call, over a CUDA graph of back-to-back calls on rotating inputs (as benchmarks/gemm_cuda.py
// times them), with and without programmatic dependent launch.
//
// Build and run on an H100 (device_cuda.sh's `stamps` stage does both):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr \
//     -I$CUTLASS/include -Ikernels/gemm/gemm_cuda -o /tmp/stamps benchmarks/phase_stamps.cu
//   /tmp/stamps 256,8192,2048 256,16384,1024 ...
// The configuration is own_128x128_pipe's (GEMM_SM90_OWN_128X128), built here with the stamps
// compiled in (they take 1 KB of static shared memory, beside the ring); the extension's own
// build has none (the hooks are empty there). -DPHASE_STAMPS_MAX_STAGES=n caps its ring;
// PHASE_STAMPS_SETS=1 in the environment makes every call read the same operands;
// PHASE_STAMPS_SCALE_ALIGN=n pads a_scale's rows (one per k block) to a multiple of n floats;
// PHASE_STAMPS_ZERO_FROM=r writes zeros into a's rows from r on; PHASE_STAMPS_SHIFT=0, 1 or 2
// places the last row block's tile as GEMM_SM90_SHIFT does (gemm_sm90.h's Sm90Order::shift).
//
// Per shape and launch it prints the time per call (CUDA events around the replays) and the
// median over calls (the first two and the last left out) of:
//   period         one call's first entry to the next call's
//   span           a call's first entry to its last exit (with PDL it includes the wait for
//                  the call before)
//   handoff        the previous call's last exit to this call's first CTA past the wait
//   entry spread   first to last entry of the call's CTAs; exit spread likewise
// and, per CTA (median over CTAs, then over calls), the time from one phase to the next. Where
// each CTA runs one tile (tiles <= SMs), also per row block of the tiles: its CTAs' phases and
// when its last CTA exits (tuning log 28: a nearly empty last row block slowed the whole call).
// Run numbers (run 15b, 25a-25c) cite the gemm tuning log: git show c631808:benchmarks/RESULTS.md
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

constexpr int kPhases = 7;
constexpr int kMaxSlots = 1 << 16;  // CTA launches recorded per measured replay

__device__ unsigned long long g_stamps[kMaxSlots][kPhases];
__device__ unsigned long long g_clocks[kMaxSlots][kPhases];  // the SM's clock64 beside each
__device__ unsigned g_block[kMaxSlots];  // the CTA (blockIdx.x) of each slot
__device__ unsigned g_next_slot;

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Phase 0 (thread 0, before the kernel's first __syncthreads) takes the next slot for this CTA
// and call and leaves it in shared memory, where the later phases' threads read it. Slots follow
// the CTAs' entries; a call's CTAs all enter before the next call's first one can (PDL launches
// dependents only once every CTA has passed griddepcontrol.launch_dependents).
__device__ __forceinline__ void stamp(int phase) {
  __shared__ unsigned slot;
  const unsigned long long now = global_ns();
  const unsigned long long cycles = clock64();
  if (phase == 0) {
    slot = atomicAdd(&g_next_slot, 1u);
    if (slot < kMaxSlots) g_block[slot] = blockIdx.x;
  }
  if (slot < kMaxSlots) {
    g_stamps[slot][phase] = now;
    g_clocks[slot][phase] = cycles;
  }
}
#define FP8GEMM_OWN_STAMP(phase) stamp(phase)

#include "gemm_sm90_own_launch.cuh"

namespace {

// own_128x128_pipe's TileConfig (GEMM_SM90_OWN_128X128), its ring capped at
// PHASE_STAMPS_MAX_STAGES (-D; default 8, as there: as many as fit).
#ifndef PHASE_STAMPS_MAX_STAGES
#define PHASE_STAMPS_MAX_STAGES 8
#endif
using Cfg = fp8gemm::sm90_own::TileConfig<128, 1, false, 128, 128, PHASE_STAMPS_MAX_STAGES, true,
                                          1, 1>;
constexpr int kCalls = 40;  // per graph, as in kernel_times.py
// Rotating input sets: 8 (more bytes than the 50 MB L2 holds at the shapes of interest), or
// $PHASE_STAMPS_SETS (1: every call reads the same operands, from L2 where they fit).
int input_sets() {
  const char* text = std::getenv("PHASE_STAMPS_SETS");
  const int sets = text ? std::atoi(text) : 8;
  return sets >= 1 && sets <= 64 ? sets : 8;
}

// a_scale's rows (one per k block) padded to a multiple of $PHASE_STAMPS_SCALE_ALIGN floats
// (rounded down to a multiple of 4, at least 4), else 4, TMA's least.
int scale_align() {
  const char* text = std::getenv("PHASE_STAMPS_SCALE_ALIGN");
  return text ? std::max(4, std::atoi(text)) / 4 * 4 : 4;
}

// Where the last row block's tile goes (Sm90Order::shift): $PHASE_STAMPS_SHIFT, else 1, the
// dispatch table's.
int shift_setting() {
  const char* text = std::getenv("PHASE_STAMPS_SHIFT");
  return text ? std::atoi(text) : 1;
}

#define CHECK(x)                                                                     \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,                 \
                   cudaGetErrorString(e_));                                          \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// Finite e4m3 bytes (the exponent's top bit clear: |x| < 2) and scales near 1, from a hash.
__global__ void fill_bytes(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = static_cast<uint8_t>(h & 0xbf);
  }
}
__global__ void fill_scales(float* p, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    p[i] = 1.0f + 0.001f * static_cast<float>(i % 7);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The granularity of %globaltimer: the smallest step seen between successive reads.
__global__ void timer_step(unsigned long long* out) {
  unsigned long long last = global_ns(), best = ~0ull;
  for (int i = 0; i < 100000; ++i) {
    const unsigned long long t = global_ns();
    if (t != last) best = t - last < best ? t - last : best;
    last = t;
  }
  *out = best;
}

void run_shape(int m, int n, int k, int sms) {
  const int num_sets = input_sets();
  std::vector<fp8gemm::sm90::Problem> sets(num_sets);  // one input set each
  const int a_ld = (m + scale_align() - 1) / scale_align() * scale_align();
  for (int s = 0; s < num_sets; ++s) {
    fp8gemm::sm90::Problem& p = sets[s];
    uint8_t *a, *bt;
    float *sa, *sb;
    uint16_t* out;
    CHECK(cudaMalloc(&a, size_t(m) * k));
    CHECK(cudaMalloc(&bt, size_t(n) * k));
    CHECK(cudaMalloc(&sa, size_t(k / 128) * a_ld * 4));
    CHECK(cudaMalloc(&sb, size_t(k / 128) * (n / 128) * 4));
    CHECK(cudaMalloc(&out, size_t(m) * n * 2));
    fill_bytes<<<264, 256>>>(a, size_t(m) * k, 17u * s + 1);
    // $PHASE_STAMPS_ZERO_FROM=r: a's rows from r on hold zeros (in bounds, unlike the rows past M
    // that the TMA fills with zeros).
    if (const char* zero_from = std::getenv("PHASE_STAMPS_ZERO_FROM")) {
      const int r = std::atoi(zero_from);
      if (r >= 0 && r < m) CHECK(cudaMemset(a + size_t(r) * k, 0, size_t(m - r) * k));
    }
    fill_bytes<<<264, 256>>>(bt, size_t(n) * k, 31u * s + 2);
    fill_scales<<<64, 256>>>(sa, size_t(k / 128) * a_ld);
    fill_scales<<<64, 256>>>(sb, size_t(k / 128) * (n / 128));
    p = {};
    p.out = out;
    p.a = a;
    p.bt = bt;
    p.a_scale = sa;
    p.a_scale_ld = a_ld;
    p.b_scale = sb;
    p.m = m;
    p.n = n;
    p.k = k;
    p.device = 0;
    p.sm_count = sms;
    p.shift = shift_setting();
  }
  CHECK(cudaDeviceSynchronize());
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double flop = 2.0 * m * n * k;

  for (int pdl = 0; pdl < 2; ++pdl) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int c = 0; c < kCalls; ++c)
      CHECK(fp8gemm::sm90_own_launch::run<Cfg>(sets[c % num_sets], stream, pdl != 0));
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int r = 0; r < 20; ++r) CHECK(cudaGraphLaunch(exec, stream));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    CHECK(cudaEventRecord(e0, stream));
    for (int r = 0; r < 20; ++r) CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaEventRecord(e1, stream));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    const double per_call = ms * 1000.0 / (20 * kCalls);

    // One replay with the slots counted from 0.
    const unsigned zero = 0;
    CHECK(cudaMemcpyToSymbol(g_next_slot, &zero, sizeof zero));
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    unsigned used = 0;
    CHECK(cudaMemcpyFromSymbol(&used, g_next_slot, sizeof used));
    const int tiles = ((m + 127) / 128) * ((n + 127) / 128);
    const int grid = std::min(tiles, sms);
    if (used != unsigned(grid) * kCalls || used > kMaxSlots) {
      std::fprintf(stderr, "%d x %d x %d: %u slots, expected %d\n", m, n, k, used, grid * kCalls);
      std::exit(1);
    }
    std::vector<unsigned long long> st(size_t(used) * kPhases);
    CHECK(cudaMemcpyFromSymbol(st.data(), g_stamps, st.size() * sizeof(st[0])));
    auto at = [&](int call, int cta, int phase) {
      return static_cast<double>(st[(size_t(call) * grid + cta) * kPhases + phase]);
    };
    // Per call (the first two and the last left out: a replay's edges), in microseconds.
    std::vector<double> span, handoff, entry_spread, exit_spread, period;
    std::vector<std::vector<double>> steps(kPhases);
    double prev_exit = 0, prev_entry = 0;
    for (int c = 0; c < kCalls; ++c) {
      double first_entry = 1e300, first_wait = 1e300, last_entry = 0, first_exit = 1e300,
             last_exit = 0;
      std::vector<std::vector<double>> cta_steps(kPhases);
      for (int b = 0; b < grid; ++b) {
        first_entry = std::min(first_entry, at(c, b, 0));
        last_entry = std::max(last_entry, at(c, b, 0));
        first_wait = std::min(first_wait, at(c, b, 1));
        first_exit = std::min(first_exit, at(c, b, 6));
        last_exit = std::max(last_exit, at(c, b, 6));
        // 0 -> 1 wait, 1 -> 2 producer's loads, 1 -> 3 first data, 3 -> 4 mainloop,
        // 4 -> 5 epilogue, 5 -> 6 stores' reads
        cta_steps[1].push_back(at(c, b, 1) - at(c, b, 0));
        cta_steps[2].push_back(at(c, b, 2) - at(c, b, 1));
        cta_steps[3].push_back(at(c, b, 3) - at(c, b, 1));
        cta_steps[4].push_back(at(c, b, 4) - at(c, b, 3));
        cta_steps[5].push_back(at(c, b, 5) - at(c, b, 4));
        cta_steps[6].push_back(at(c, b, 6) - at(c, b, 5));
      }
      if (c >= 2 && c < kCalls - 1) {
        span.push_back((last_exit - first_entry) / 1000);
        handoff.push_back((first_wait - prev_exit) / 1000);
        entry_spread.push_back((last_entry - first_entry) / 1000);
        exit_spread.push_back((last_exit - first_exit) / 1000);
        period.push_back((first_entry - prev_entry) / 1000);
        for (int ph = 1; ph < kPhases; ++ph) steps[ph].push_back(median(cta_steps[ph]) / 1000);
      }
      prev_exit = last_exit;
      prev_entry = first_entry;
    }
    std::printf(
        "| %d x %d x %d | %s | %.2f (%.0f TFLOP/s) | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | "
        "%.2f | %.2f | %.2f | %.2f | %.2f |\n",
        m, n, k, pdl ? "PDL" : "plain", per_call, flop / per_call / 1e6, median(period),
        median(span), median(handoff), median(entry_spread), median(steps[1]), median(steps[2]),
        median(steps[3]),
        median(steps[4]), median(steps[5]), median(steps[6]), median(exit_spread));
    // One tile per CTA (tiles <= SMs): the same phases per row block of the tiles, as the
    // kernel's tile_coords assigns them (groups of kGroupM row blocks), and when the row block's
    // last CTA exits after the call's first entry.
    if (tiles <= sms) {
      std::vector<unsigned> blocks(used);
      CHECK(cudaMemcpyFromSymbol(blocks.data(), g_block, used * sizeof(blocks[0])));
      std::vector<unsigned long long> clocks(size_t(used) * kPhases);
      CHECK(cudaMemcpyFromSymbol(clocks.data(), g_clocks, clocks.size() * sizeof(clocks[0])));
      auto cycles_at = [&](int call, int cta, int phase) {
        return static_cast<double>(clocks[(size_t(call) * grid + cta) * kPhases + phase]);
      };
      fp8gemm::sm90_own::Params tiling{};
      tiling.num_m_blocks = (m + Cfg::kBlockM - 1) / Cfg::kBlockM;
      tiling.num_n_blocks = (n + Cfg::kBlockN - 1) / Cfg::kBlockN;
      struct RowBlock {
        std::vector<double> first_data, mainloop, epilogue, last_exit, mhz;
      };
      std::vector<RowBlock> row_blocks(tiling.num_m_blocks);
      for (int c = 2; c < kCalls - 1; ++c) {
        double entry = 1e300;
        for (int b = 0; b < grid; ++b) entry = std::min(entry, at(c, b, 0));
        std::vector<double> exit(tiling.num_m_blocks, 0);
        for (int b = 0; b < grid; ++b) {
          int mb, nb;
          fp8gemm::sm90_own::tile_coords(tiling, int(blocks[size_t(c) * grid + b]), mb, nb);
          RowBlock& r = row_blocks[mb];
          r.first_data.push_back((at(c, b, 3) - at(c, b, 1)) / 1000);
          r.mainloop.push_back((at(c, b, 4) - at(c, b, 3)) / 1000);
          // The SM's clock over the mainloop: its cycles over the nanoseconds.
          r.mhz.push_back((cycles_at(c, b, 4) - cycles_at(c, b, 3)) / (at(c, b, 4) - at(c, b, 3)) *
                          1000);
          r.epilogue.push_back((at(c, b, 5) - at(c, b, 4)) / 1000);
          exit[mb] = std::max(exit[mb], at(c, b, 6));
        }
        for (int mb = 0; mb < tiling.num_m_blocks; ++mb)
          row_blocks[mb].last_exit.push_back((exit[mb] - entry) / 1000);
      }
      for (int mb = 0; mb < tiling.num_m_blocks; ++mb) {
        RowBlock& r = row_blocks[mb];
        std::sort(r.mainloop.begin(), r.mainloop.end());
        std::sort(r.mhz.begin(), r.mhz.end());
        std::printf("|   row block %d (%d rows) | %s | %zu CTAs x calls | waited -> first data %.2f | "
                    "mainloop %.2f (slowest tenth from %.2f) at %.0f MHz (from %.0f to %.0f) | "
                    "epilogue %.2f | last exit %.2f after the call's entry |\n",
                    mb, std::min(Cfg::kBlockM, m - Cfg::kBlockM * mb), pdl ? "PDL" : "plain",
                    r.first_data.size(), median(r.first_data), median(r.mainloop),
                    r.mainloop[r.mainloop.size() * 9 / 10], median(r.mhz), r.mhz.front(),
                    r.mhz.back(), median(r.epilogue), median(r.last_exit));
      }
    }
    std::fflush(stdout);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
  }
  CHECK(cudaStreamDestroy(stream));
  for (const fp8gemm::sm90::Problem& p : sets) {
    CHECK(cudaFree(const_cast<uint8_t*>(p.a)));
    CHECK(cudaFree(const_cast<uint8_t*>(p.bt)));
    CHECK(cudaFree(const_cast<float*>(p.a_scale)));
    CHECK(cudaFree(const_cast<float*>(p.b_scale)));
    CHECK(cudaFree(p.out));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  unsigned long long* step;
  CHECK(cudaMalloc(&step, sizeof *step));
  timer_step<<<1, 1>>>(step);
  unsigned long long ns = 0;
  CHECK(cudaMemcpy(&ns, step, sizeof ns, cudaMemcpyDeviceToHost));
  std::printf("%d SMs; %%globaltimer steps by %llu ns; %d input sets; %d ring stages; a_scale "
              "rows padded to %d floats; shift %d\n\n", sms, ns, input_sets(), Cfg::kStages,
              scale_align(), shift_setting());
  std::printf(
      "| M x N x K | launch | us per call | period | span | handoff | entry spread | "
      "entry -> waited | waited -> last load issued | waited -> first data | mainloop | "
      "epilogue | stores' reads | exit spread |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 1; i < argc; ++i) {
    int m, n, k;
    if (std::sscanf(argv[i], "%d,%d,%d", &m, &n, &k) != 3 || m < 1 || n % 128 || k % 128) {
      std::fprintf(stderr, "bad shape %s (M,N,K with N and K multiples of 128)\n", argv[i]);
      return 2;
    }
    run_shape(m, n, k, sms);
  }
  return 0;
}
