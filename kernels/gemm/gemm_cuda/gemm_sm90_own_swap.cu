// Swapped tiles of our own kernel (gemm_sm90_own_kernel.cuh, kSwapAB): the kernel's rows are 128
// columns of the output (b's, one b-scale block) and its columns W rows of the output (a's, a
// scale each), stored transposed. Named as the output sees them, W x 128. For M not a multiple of
// 128: an unswapped tile's last row block computes and stores up to 127 empty rows, a swapped
// one's last column block at most 15.
#include "gemm_sm90_own_launch.cuh"

// W up to 80: k blocks pipelined (kPipe), as our 128 x 128; wider, loops unrolled by turns, as
// our 128 x 160 (two results in flight would not fit in the registers).
#define GEMM_SM90_OWN_SWAP_PIPE(W) W, 1, false, W, 128, 8, true, 1, 0, true
#define GEMM_SM90_OWN_SWAP_TURNS(W) W, 1, true, W, 128, 8, false, 1, 0, true
#define GEMM_SM90_DEFINE_OWN_SWAP(W, KIND) \
  GEMM_SM90_DEFINE_OWN_CONFIG(own_swap_##W##x128, false, GEMM_SM90_OWN_SWAP_##KIND(W))

GEMM_SM90_DEFINE_OWN_SWAP(80, PIPE)
GEMM_SM90_DEFINE_OWN_SWAP(144, TURNS)
GEMM_SM90_DEFINE_OWN_SWAP(160, TURNS)
GEMM_SM90_DEFINE_OWN_SWAP(176, TURNS)
GEMM_SM90_DEFINE_OWN_SWAP(192, TURNS)
