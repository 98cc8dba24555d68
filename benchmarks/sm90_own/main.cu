// Test and benchmark harness of our own sm_90a FP8 block-scaled GEMM.
//   ./t            correctness at many shapes (all tile configurations), then the benchmark
//   ./t --small    correctness at small shapes only (for compute-sanitizer)
//   ./t --bench    benchmark only (every configuration)
//   ./t --final    benchmark gemm_sm90_own_run against the old path only, order-balanced
// Correctness: relative Frobenius error against an fp32 CUDA reference with the same
// block-scale semantics, on fresh random data; rows past M of the output must stay untouched.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "gemm_sm90_own.h"
#ifdef WITH_OLD
#include "gemm_sm90.h"  // kernels/gemm's CUTLASS path, the baseline ("old ours")
#endif

#define CHECK_CUDA(call)                                                                 \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,          \
                   cudaGetErrorString(e_));                                              \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

using fp8gemm::sm90_own::LaunchOptions;

__device__ __forceinline__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
  return static_cast<uint32_t>(x);
}
__device__ __forceinline__ float uniform(uint64_t seed, uint64_t i) {  // [-1, 1)
  return hash32(seed * 0x9E3779B97F4A7C15ULL + i) * (2.0f / 4294967296.0f) - 1.0f;
}

__device__ __forceinline__ float normal(uint64_t seed, uint64_t i) {  // Box-Muller
  const float u1 = (hash32(seed * 0x9E3779B97F4A7C15ULL + 2 * i) + 1.0f) * (1.0f / 4294967296.0f);
  const float u2 = hash32(seed * 0x9E3779B97F4A7C15ULL + 2 * i + 1) * (1.0f / 4294967296.0f);
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

// Same distributions as benchmarks/gemm_cuda.py: operands randn * 4 in e4m3 (the value
// distribution moves the tensor cores' power draw and so the clocks), scales exp(randn).
__global__ void fill_fp8(uint8_t* p, int64_t count, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    __nv_fp8_e4m3 v(normal(seed, i) * scale);
    p[i] = *reinterpret_cast<uint8_t*>(&v);
  }
}
__global__ void fill_scale(float* p, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = expf(normal(seed, i));
}
__global__ void fill_u16(uint16_t* p, int64_t count, uint16_t v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = v;
}

__device__ __forceinline__ float fp8_to_float(uint8_t b) {
  __nv_fp8_e4m3 v;
  *reinterpret_cast<uint8_t*>(&v) = b;
  return static_cast<float>(v);
}

// out[m][n] = sum_kb a_scale[kb][m] * b_scale[kb][n/128] * sum_k a[m][k] bt[n][k], in fp32.
constexpr int kRefTile = 16;
__global__ void reference_gemm(float* out, const uint8_t* a, const uint8_t* bt,
                               const float* a_scale, int64_t a_scale_ld, const float* b_scale,
                               int m, int n, int k) {
  __shared__ float as[kRefTile][129], bs[kRefTile][129];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kRefTile + ty, col = blockIdx.x * kRefTile + tx;
  float acc = 0.f;
  for (int kb = 0; kb < k / 128; ++kb) {
    for (int i = tx; i < 128; i += kRefTile) {
      const int ar = blockIdx.y * kRefTile + ty, br = blockIdx.x * kRefTile + ty;
      as[ty][i] = ar < m ? fp8_to_float(a[int64_t(ar) * k + kb * 128 + i]) : 0.f;
      bs[ty][i] = br < n ? fp8_to_float(bt[int64_t(br) * k + kb * 128 + i]) : 0.f;
    }
    __syncthreads();
    float part = 0.f;
    for (int i = 0; i < 128; ++i) part += as[ty][i] * bs[tx][i];
    if (row < m && col < n)
      acc += part * a_scale[int64_t(kb) * a_scale_ld + row] * b_scale[int64_t(kb) * (n / 128) + col / 128];
    __syncthreads();
  }
  if (row < m && col < n) out[int64_t(row) * n + col] = acc;
}

__device__ __forceinline__ float bf16_bits_to_float(uint16_t h) {
  return __uint_as_float(uint32_t(h) << 16);
}
// sums[0] += (out - ref)^2, sums[1] += ref^2, sums[2] += non-finite count,
// sums[3] += guard values (rows m..m+7) that changed.
__global__ void compare(const uint16_t* out, const float* ref, int64_t count, int64_t guard_count,
                        uint16_t sentinel, double* sums) {
  double d2 = 0, r2 = 0, bad = 0, guard = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count + guard_count;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (i < count) {
      const float o = bf16_bits_to_float(out[i]), r = ref[i];
      if (!isfinite(o)) bad += 1;
      d2 += double(o - r) * (o - r);
      r2 += double(r) * r;
    } else if (out[i] != sentinel) {
      guard += 1;
    }
  }
  atomicAdd(&sums[0], d2);
  atomicAdd(&sums[1], r2);
  atomicAdd(&sums[2], bad);
  atomicAdd(&sums[3], guard);
}

struct Problem {
  int64_t m, n, k, ld;
  uint8_t *a = nullptr, *bt = nullptr;
  float *sa = nullptr, *sb = nullptr;
  void alloc(uint64_t seed) {
    CHECK_CUDA(cudaMalloc(&a, m * k));
    CHECK_CUDA(cudaMalloc(&bt, n * k));
    CHECK_CUDA(cudaMalloc(&sa, (k / 128) * ld * 4));
    CHECK_CUDA(cudaMalloc(&sb, (k / 128) * (n / 128) * 4));
    fill_fp8<<<1024, 256>>>(a, m * k, seed * 4 + 0, 4.0f);
    fill_fp8<<<1024, 256>>>(bt, n * k, seed * 4 + 1, 4.0f);
    fill_scale<<<256, 256>>>(sa, (k / 128) * ld, seed * 4 + 2);
    fill_scale<<<256, 256>>>(sb, (k / 128) * (n / 128), seed * 4 + 3);
    CHECK_CUDA(cudaGetLastError());
  }
  void release() {
    cudaFree(a); cudaFree(bt); cudaFree(sa); cudaFree(sb);
  }
};

static std::string name_of(const LaunchOptions& o) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%dx%d g%d%s s%d", o.block_m, o.block_n, o.group,
                o.group_along_n ? "n" : "m", o.splits);
  return buf;
}

static const LaunchOptions kConfigs[] = {
    {128, 192, 8, false}, {128, 160, 8, false}, {128, 128, 8, false}, {256, 128, 8, false}};

// Returns the number of failures.
static int test_shape(int64_t m, int64_t n, int64_t k, int64_t ld_pad, uint64_t seed) {
  Problem p{m, n, k, (m + 3) / 4 * 4 + ld_pad};
  p.alloc(seed);
  float* ref;
  uint16_t* out;
  double* sums;
  const int64_t guard = 8 * n;
  const uint16_t sentinel = 0x7fc1;  // a NaN pattern the kernel never writes
  CHECK_CUDA(cudaMalloc(&ref, m * n * 4));
  CHECK_CUDA(cudaMalloc(&out, (m * n + guard) * 2));
  CHECK_CUDA(cudaMalloc(&sums, 4 * sizeof(double)));
  dim3 rb(kRefTile, kRefTile), rg((n + kRefTile - 1) / kRefTile, (m + kRefTile - 1) / kRefTile);
  reference_gemm<<<rg, rb>>>(ref, p.a, p.bt, p.sa, p.ld, p.sb, m, n, k);
  CHECK_CUDA(cudaGetLastError());

  int failures = 0;
  std::vector<LaunchOptions> configs(std::begin(kConfigs), std::end(kConfigs));
  configs.push_back({128, 192, 3, true});
  if (k >= 256) {
    configs.push_back({128, 192, 8, false, 2});
    configs.push_back({256, 128, 8, false, 2});
    configs.push_back({128, 160, 4, true, 2});
  }
  if (k >= 384) configs.push_back({128, 192, 8, false, 3});
  configs.push_back({-1, -1, 0, false});  // gemm_sm90_own_run's own choice
  for (const LaunchOptions& o : configs) {
    fill_u16<<<1024, 256>>>(out, m * n + guard, sentinel);
    cudaError_t err = o.block_m < 0
                          ? gemm_sm90_own_run(out, p.a, p.bt, p.sa, p.ld, p.sb, m, n, k, 0)
                          : fp8gemm::sm90_own::run_with(o, out, p.a, p.bt, p.sa, p.ld, p.sb, m, n, k, 0);
    CHECK_CUDA(err);
    CHECK_CUDA(cudaMemset(sums, 0, 4 * sizeof(double)));
    compare<<<512, 256>>>(out, ref, m * n, guard, sentinel, sums);
    CHECK_CUDA(cudaDeviceSynchronize());
    double h[4];
    CHECK_CUDA(cudaMemcpy(h, sums, sizeof h, cudaMemcpyDeviceToHost));
    const double rel = std::sqrt(h[0] / h[1]);
    const bool ok = rel < 1e-2 && h[1] > 0 && h[2] == 0 && h[3] == 0;
    failures += !ok;
    std::printf("  %s m=%ld n=%ld k=%ld ld=%ld %-16s rel_err=%.3e nonfinite=%.0f guard=%.0f\n",
                ok ? "ok  " : "FAIL", long(m), long(n), long(k), long(p.ld),
                o.block_m < 0 ? "auto" : name_of(o).c_str(), rel, h[2], h[3]);
  }
  cudaFree(ref); cudaFree(out); cudaFree(sums);
  p.release();
  return failures;
}

// o == nullptr: gemm_sm90_own_run's choice; o->block_m == 0: the old CUTLASS path's choice.
static double bench_one(const LaunchOptions* o, std::vector<Problem>& sets, uint16_t* out) {
  const int64_t m = sets[0].m, n = sets[0].n, k = sets[0].k;
#ifdef WITH_OLD
  Sm90Order order{};
  const int old_config = gemm_sm90_choose(m, n, k, &order);
  static void* old_ws = nullptr;
  static size_t old_ws_bytes = 0;
  const size_t need = gemm_sm90_workspace_bytes(old_config, order, m, n, k, sets[0].ld);
  if (need > old_ws_bytes) {
    cudaFree(old_ws);
    CHECK_CUDA(cudaMalloc(&old_ws, need));
    old_ws_bytes = need;
  }
#endif
  auto call = [&](int i) {
    Problem& p = sets[i % sets.size()];
#ifdef WITH_OLD
    if (o && o->block_m == 0)
      return gemm_sm90_run(old_config, order, out, p.a, p.bt, p.sa, p.ld, p.sb, m, n, k, old_ws, 0);
#endif
    return o ? fp8gemm::sm90_own::run_with(*o, out, p.a, p.bt, p.sa, p.ld, p.sb, m, n, k, 0)
             : gemm_sm90_own_run(out, p.a, p.bt, p.sa, p.ld, p.sb, m, n, k, 0);
  };
  // Warm up (also grows the split-K workspace before capture), then capture one batch of 10
  // calls over the cycled input sets as a CUDA graph, so that host-side launch costs (which
  // differ a lot between paths) drop out, as in the lead's CUDA-graph measurements.
  for (int i = 0; i < 5; ++i) CHECK_CUDA(call(i));
  CHECK_CUDA(cudaDeviceSynchronize());
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < 10; ++i) {
    Problem& p = sets[i % sets.size()];
    cudaError_t err;
#ifdef WITH_OLD
    if (o && o->block_m == 0)
      err = gemm_sm90_run(old_config, order, out, p.a, p.bt, p.sa, p.ld, p.sb, m, n, k, old_ws, stream);
    else
#endif
      err = o ? fp8gemm::sm90_own::run_with(*o, out, p.a, p.bt, p.sa, p.ld, p.sb, m, n, k, stream)
              : gemm_sm90_own_run(out, p.a, p.bt, p.sa, p.ld, p.sb, m, n, k, stream);
    CHECK_CUDA(err);
  }
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaGraphLaunch(exec, stream));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int b = 0; b < 15; ++b) {
    CHECK_CUDA(cudaEventRecord(e0, stream));
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaEventRecord(e1, stream));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float t;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t / 10);
  }
  cudaEventDestroy(e0); cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec); cudaGraphDestroy(graph); cudaStreamDestroy(stream);
  std::sort(ms.begin(), ms.end());
  return 2.0 * m * n * k / (ms[ms.size() / 2] * 1e-3) / 1e12;
}

// --final: only gemm_sm90_own_run's choice against the old CUTLASS path (if built), 6 rounds
// with the two alternating who goes first (what ran just before moves the clocks of a
// power-capped H100 by up to ~10 %).
static bool g_final = false;

static void bench() {
  struct Shape { int64_t m, n, k; double deepgemm, ours_old; };
  const Shape shapes[] = {
      {1024, 1536, 7168, 1102, 962}, {1024, 4608, 7168, 0, 0},    {6144, 1536, 7168, 1319, 1014},
      {6144, 4608, 7168, 1144, 1035}, {6144, 7168, 2048, 1102, 987}, {6144, 7168, 2560, 1122, 1028},
      {6144, 7168, 2304, 0, 0},      {6144, 7168, 512, 0, 0},
  };
  const int kRounds = 3;  // configurations interleaved, so clock/thermal drift hits all alike
  std::printf("\nbenchmark (TFLOP/s; per configuration the median over %d interleaved rounds of the "
              "median of 15 CUDA-graph replays of 10 calls; inputs cycled over >100 MB)\n", kRounds);
  int dev = 0, sms = 0;
  CHECK_CUDA(cudaGetDevice(&dev));
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  for (const Shape& s : shapes) {
    const int64_t set_bytes = s.m * s.k + s.n * s.k;
    const int nsets = int(std::max<int64_t>(2, (int64_t(100) << 20) / set_bytes + 1));
    std::vector<Problem> sets;
    for (int i = 0; i < nsets; ++i) {
      sets.push_back(Problem{s.m, s.n, s.k, (s.m + 3) / 4 * 4});
      sets.back().alloc(100 + i);
    }
    uint16_t* out;
    CHECK_CUDA(cudaMalloc(&out, s.m * s.n * 2));
    const LaunchOptions pick = fp8gemm::sm90_own::choose(s.m, s.n, s.k, sms);
    std::vector<LaunchOptions> configs;
#ifdef WITH_OLD
    configs.push_back({0, 0});  // the old CUTLASS path, in the same rounds
#endif
    if (g_final) {
      std::vector<double> ours, old;
      for (int r = 0; r < 6; ++r) {
        for (int turn = 0; turn < 2; ++turn) {
          if ((turn == 0) == (r % 2 == 0)) ours.push_back(bench_one(nullptr, sets, out));
#ifdef WITH_OLD
          else old.push_back(bench_one(&configs[0], sets, out));
#endif
        }
      }
      auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v.empty() ? 0.0 : v[v.size() / 2]; };
      auto lo = [](std::vector<double> v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); };
      auto hi = [](std::vector<double> v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); };
      std::printf("%ldx%ldx%ld [%s]: ours %.0f (%.0f-%.0f) | old %.0f (%.0f-%.0f) | ours/old %.2f"
                  " | lead's table: old %.0f, DeepGEMM %.0f\n",
                  long(s.m), long(s.n), long(s.k), name_of(pick).c_str(), med(ours), lo(ours),
                  hi(ours), med(old), lo(old), hi(old), med(old) > 0 ? med(ours) / med(old) : 0.0,
                  s.ours_old, s.deepgemm);
      std::fflush(stdout);
      cudaFree(out);
      for (Problem& p : sets) p.release();
      continue;
    }
    for (const LaunchOptions& base : kConfigs) configs.push_back(base);
    configs.push_back({128, 192, 16, true});
    if (s.m <= 1024) {
      configs.push_back({128, 192, 8, false, 2});
      configs.push_back({128, 192, 8, false, 3});
      configs.push_back({128, 160, 8, false, 2});
      configs.push_back({128, 128, 8, false, 2});
    }
    std::vector<std::vector<double>> rates(configs.size() + 1);
    std::vector<Problem> hot(sets.begin(), sets.begin() + 1);  // one set: operands stay in L2
    std::vector<double> hot_rates;
    for (int r = 0; r < kRounds; ++r) {
      rates[0].push_back(bench_one(nullptr, sets, out));
      hot_rates.push_back(bench_one(nullptr, hot, out));
      for (size_t i = 0; i < configs.size(); ++i) rates[i + 1].push_back(bench_one(&configs[i], sets, out));
    }
    auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
    std::printf("%ldx%ldx%ld (old ours %.0f, DeepGEMM %.0f): auto[%s] %.0f (L2-hot %.0f) |",
                long(s.m), long(s.n), long(s.k), s.ours_old, s.deepgemm, name_of(pick).c_str(),
                med(rates[0]), med(hot_rates));
    for (size_t i = 0; i < configs.size(); ++i)
      std::printf(" [%s] %.0f", configs[i].block_m ? name_of(configs[i]).c_str() : "OLD", med(rates[i + 1]));
    std::printf("\n");
    std::fflush(stdout);
    cudaFree(out);
    for (Problem& p : sets) p.release();
  }
}

// --one BM BN M N K: a few launches of one configuration (for a profiler).
static int profile_one(char** argv) {
  LaunchOptions o;
  o.block_m = std::atoi(argv[2]);
  o.block_n = std::atoi(argv[3]);
  Problem p{std::atoll(argv[4]), std::atoll(argv[5]), std::atoll(argv[6]), 0};
  p.ld = (p.m + 3) / 4 * 4;
  p.alloc(7);
  uint16_t* out;
  CHECK_CUDA(cudaMalloc(&out, p.m * p.n * 2));
  for (int i = 0; i < 3; ++i)
    CHECK_CUDA(fp8gemm::sm90_own::run_with(o, out, p.a, p.bt, p.sa, p.ld, p.sb, p.m, p.n, p.k, 0));
  CHECK_CUDA(cudaDeviceSynchronize());
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 7 && std::strcmp(argv[1], "--one") == 0) return profile_one(argv);
  const bool small = argc > 1 && std::strcmp(argv[1], "--small") == 0;
  g_final = argc > 1 && std::strcmp(argv[1], "--final") == 0;
  const bool bench_only = g_final || (argc > 1 && std::strcmp(argv[1], "--bench") == 0);
  int failures = 0;
  if (!bench_only) {
    struct T { int64_t m, n, k, pad; };
    std::vector<T> tests = {
        {1, 128, 128, 0},   {77, 384, 256, 12},  {128, 128, 128, 0}, {129, 640, 384, 0},
        {200, 1152, 1024, 4}, {255, 896, 512, 0}, {64, 2176, 640, 0},
    };
    if (!small) {
      const std::vector<T> big = {
          {1000, 1664, 2048, 0}, {1024, 1536, 7168, 0}, {333, 4608, 7168, 8},
          {6144, 1536, 7168, 0}, {6144, 7168, 2304, 0}, {4097, 7040, 512, 0},
      };
      tests.insert(tests.end(), big.begin(), big.end());
    }
    std::printf("correctness (relative Frobenius error vs fp32 reference, limit 1e-2)\n");
    for (size_t i = 0; i < tests.size(); ++i)
      failures += test_shape(tests[i].m, tests[i].n, tests[i].k, tests[i].pad, 1 + i);
    std::printf("%d failure(s)\n", failures);
  }
  if (!small) bench();
  return failures ? 1 : 0;
}
