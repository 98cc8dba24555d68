// 128 x 96 tiles of our own kernel (gemm_sm90_own_kernel.cuh): one wave at 1024 x 1536, the tile
// DeepGEMM chooses there; 7 pipeline stages fit beside the output buffers. own_128x96 (k-block
// loops unrolled by turns of the ring) for long K in four waves or more, own_128x96_pipe (k blocks
// pipelined, kPipe) for long K in up to three, own_128x96_shortk (not unrolled, launched with
// programmatic dependent launch, as own_128x192_shortk is) for short K.
#include "gemm_sm90_own_launch.cuh"

GEMM_SM90_DEFINE_OWN_CONFIG(own_128x96, false, 96, 1, true)
#define GEMM_SM90_OWN_128X96_PIPE 96, 1, false, 96, 128, 8, true
GEMM_SM90_DEFINE_OWN_CONFIG(own_128x96_pipe, false, GEMM_SM90_OWN_128X96_PIPE)
GEMM_SM90_DEFINE_OWN_CONFIG(own_128x96_pipe_pdl, true, GEMM_SM90_OWN_128X96_PIPE)
GEMM_SM90_DEFINE_OWN_CONFIG(own_128x96_shortk, true, 96, 1, false)
