// 128 x 192 tiles of our own kernel (gemm_sm90_own_kernel.cuh), as configurations own_128x192
// (one output buffer per math warpgroup, 4 pipeline stages) and own_128x192_d2 (two, 3 stages) of
// the table in gemm_sm90.cu.
#include "gemm_sm90_own_launch.cuh"

using fp8gemm::sm90_own::TileConfig;
using fp8gemm::sm90_own_launch::run;

namespace fp8gemm::sm90 {

size_t workspace_bytes_own_128x192(const Problem&) { return 0; }
cudaError_t run_own_128x192(const Problem& p, void*, cudaStream_t stream) {
  return run<TileConfig<192, 1>>(p, stream);
}

size_t workspace_bytes_own_128x192_d2(const Problem&) { return 0; }
cudaError_t run_own_128x192_d2(const Problem& p, void*, cudaStream_t stream) {
  return run<TileConfig<192, 2>>(p, stream);
}

}  // namespace fp8gemm::sm90
