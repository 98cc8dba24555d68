// 128 x 96 tiles of our own kernel (gemm_sm90_own_kernel.cuh): one wave at 1024 x 1536, the tile
// DeepGEMM chooses there; 7 pipeline stages fit beside the output buffers.
#include "gemm_sm90_own_launch.cuh"

using fp8gemm::sm90_own::TileConfig;
using fp8gemm::sm90_own_launch::run;

namespace fp8gemm::sm90 {

size_t workspace_bytes_own_128x96(const Problem&) { return 0; }
cudaError_t run_own_128x96(const Problem& p, void*, cudaStream_t stream) {
  return run<TileConfig<96, 1>>(p, stream);
}

}  // namespace fp8gemm::sm90
