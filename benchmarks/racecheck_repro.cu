// Minimal reproduction of what `compute-sanitizer --tool racecheck` reports on the CUTLASS sm_90a
// path of kernels/gemm: the block scales travel through a shared-memory ring of stages, written
// by a producer warp with cp.async and read by consumer warps; a stage is handed back through an
// mbarrier ("empty") that ONE lane of the consumer warp arrives on, in the cluster-scope form
// CUTLASS uses (mapa + mbarrier.arrive.shared::cluster), after all 32 lanes have read it.
//
// One producer warp and one consumer warp, kStages stages, kIters > kStages iterations so the
// ring wraps (racecheck reported the CUTLASS kernel only when its pipeline wrapped). The mode
// (argv[1]) changes one thing at a time:
//   0  CUTLASS's pattern: producer cp.async + cp.async.mbarrier.arrive.noinc; lane 0 of the
//      consumer arrives on "empty" (cluster form) with no __syncwarp after the reads
//   1  as 0, with __syncwarp() between the lanes' reads and lane 0's arrive
//   2  as 0, every consumer lane arrives ("empty" expects 32 arrivals)
//   3  as 0, lane 0 arrives with the CTA-scope mbarrier.arrive.shared::cta
//   4  as 0, the producer writes with st.shared + mbarrier.arrive instead of cp.async
// What it showed on the H100 (2026-11-23): modes 0, 1, 3 and 4 report 1488 hazards each, mode 2
// none, and every mode computes the right sums. Mode 1 is race-free by the CUDA memory model
// (__syncwarp orders the lanes' reads before lane 0's release-arrive, which the producer's wait
// acquires), yet racecheck flags it as it flags CUTLASS: it counts an mbarrier arrive as ordering
// only the arriving thread's own accesses. So its report on CUTLASS's cluster 1 x 2 pipeline (one
// lane arrives for its warp) is a false positive; with a cluster of 1 it disappears.
// Build: nvcc -gencode arch=compute_90a,code=sm_90a -o repro racecheck_repro.cu
// Run:   compute-sanitizer --tool racecheck ./repro MODE   (exit 0 and "sum ok" when correct)
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr int kStages = 4;
constexpr int kIters = 16;

__device__ uint32_t smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem(bar)), "r"(count));
}

__device__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n\t.reg .pred p;\n"
      "WAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
      "@p bra.uni DONE;\n\t"
      "bra.uni WAIT;\n"
      "DONE:\n\t}" ::"r"(smem(bar)),
      "r"(parity));
}

// What cutlass::arch::ClusterBarrier::arrive(cta_id, pred) emits.
__device__ void mbar_arrive_cluster(uint64_t* bar) {
  asm volatile(
      "{\n\t.reg .b32 remote;\n\t"
      "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}" ::"r"(smem(bar)),
      "r"(0));
}

__device__ void mbar_arrive_cta(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem(bar)));
}

__device__ void cp_async4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem(dst)), "l"(src));
}

__device__ void cp_async_arrive_noinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem(bar)));
}

__global__ void ring(const float* src, float* out, int mode) {
  __shared__ float buf[kStages][32];
  __shared__ __align__(8) uint64_t full[kStages], empty[kStages];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 32);
      mbar_init(&empty[s], mode == 2 ? 32 : 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  __syncthreads();
  if (warp == 0) {  // producer
    for (int i = 0; i < kIters; ++i) {
      const int s = i % kStages;
      if (i >= kStages) mbar_wait(&empty[s], ((i / kStages) - 1) & 1);
      if (mode == 4) {
        buf[s][lane] = src[i * 32 + lane];
        mbar_arrive_cta(&full[s]);
      } else {
        cp_async4(&buf[s][lane], &src[i * 32 + lane]);
        cp_async_arrive_noinc(&full[s]);
      }
    }
  } else {  // consumer
    float acc = 0;
    for (int i = 0; i < kIters; ++i) {
      const int s = i % kStages;
      mbar_wait(&full[s], (i / kStages) & 1);
      acc += buf[s][lane];
      if (mode == 1) __syncwarp();
      if (mode == 2) {
        mbar_arrive_cluster(&empty[s]);
      } else if (lane == 0) {
        if (mode == 3)
          mbar_arrive_cta(&empty[s]);
        else
          mbar_arrive_cluster(&empty[s]);
      }
    }
    out[lane] = acc;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int mode = argc > 1 ? std::atoi(argv[1]) : 0;
  float host[kIters * 32], expected[32] = {}, result[32];
  for (int i = 0; i < kIters * 32; ++i) {
    host[i] = static_cast<float>((i * 37) % 101);
    expected[i % 32] += host[i];
  }
  float *src = nullptr, *out = nullptr;
  if (cudaMalloc(&src, sizeof host) != cudaSuccess || cudaMalloc(&out, sizeof result) != cudaSuccess)
    return 2;
  cudaMemcpy(src, host, sizeof host, cudaMemcpyHostToDevice);
  ring<<<1, 64>>>(src, out, mode);
  const cudaError_t status = cudaDeviceSynchronize();
  if (status != cudaSuccess) {
    std::printf("mode %d: %s\n", mode, cudaGetErrorString(status));
    return 2;
  }
  cudaMemcpy(result, out, sizeof result, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 32; ++i)
    if (result[i] != expected[i]) {
      std::printf("mode %d: wrong sum in lane %d: %g != %g\n", mode, i, result[i], expected[i]);
      return 1;
    }
  std::printf("mode %d: sum ok\n", mode);
  return 0;
}
