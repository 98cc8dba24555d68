#pragma once

// ATen's Tensor alone, not <torch/torch.h> (the C++ frontend: nn, optim, data): every source that
// includes this compiles in ~2 s instead of ~20 s.
#include <ATen/core/Tensor.h>

void gemm(at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
          const at::Tensor& a_scale, const at::Tensor& b_scale);
