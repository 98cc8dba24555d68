#pragma once

#include <torch/torch.h>

void gemm(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b,
          const torch::Tensor& a_scale, const torch::Tensor& b_scale);
