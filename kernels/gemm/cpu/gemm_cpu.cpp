// The CPU path of gemm: dequantise both operands with their block scales into float32, then a
// cache-blocked float32 matrix product with a register-tiled, vectorised inner loop, threaded over
// output tiles with at::parallel_for.
//
// The op's definition (the GPU kernels' order): scales multiply each 128-wide block's partial sum,
//   out[m,n] = sum_kb (sa[kb,m] sb[kb,n/128]) * sum_{k in kb} a[m,k] b[k,n].
// Folding the scales into the operands is the same algebra while the scales are finite:
//   = sum_k (a[m,k] sa[k/128,m]) (b[k,n] sb[k/128,n/128])
// and each product of an fp8 value (4 significant bits) with a float32 scale rounds only once.
// With an infinite or NaN scale the two differ (inf times a zero element is NaN in the folded
// form, a finite block sum times inf is +-inf), so the outputs such a scale reaches are computed
// again in the block-sum form (recompute_nonfinite_scales).
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../gemm/fp8.h"
#include "gemm_cpu.h"

namespace {

using fp8gemm::Fp8Format;

template <Fp8Format F>
std::array<float, 256> decode_table() {
  std::array<float, 256> table{};
  for (int i = 0; i < 256; ++i) table[i] = fp8gemm::fp8_to_float<F>(static_cast<uint8_t>(i));
  return table;
}

const std::array<float, 256>& table_for(Fp8Format format) {
  static const auto fn = decode_table<Fp8Format::e4m3fn>();
  static const auto fnuz = decode_table<Fp8Format::e4m3fnuz>();
  return format == Fp8Format::e4m3fn ? fn : fnuz;
}

constexpr int64_t kMr = 4;     // rows per register tile
constexpr int64_t kNr = 16;    // columns per register tile (two AVX2 vectors)
constexpr int64_t kMc = 64;    // rows per task
constexpr int64_t kNc = 256;   // columns per task
constexpr int64_t kKc = 256;   // K per cache block: a 16 KB panel of B stays in L1

// Operands are dequantised into panels so the inner loop reads both contiguously:
//   A: [M/kMr][K][kMr]   (kMr rows of one k next to each other)
//   B: [N/kNr][K][kNr]   (kNr columns of one k next to each other)
// c[kMr x kNr] (row stride ldc) += A panel rows x B panel columns over `depth` k values.
// Written with GCC/Clang vector types so the accumulators stay in 8 registers of 8 floats (two
// 128-bit halves each on machines without AVX).
typedef float Vec8 __attribute__((vector_size(32)));
// GCC notes that passing Vec8 by value changes the ABI without AVX; these helpers are always
// inlined, so no call with that ABI exists.
#pragma GCC diagnostic ignored "-Wpsabi"

inline __attribute__((always_inline)) Vec8 load8(const float* p) {
  Vec8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline __attribute__((always_inline)) void store8(float* p, Vec8 v) { std::memcpy(p, &v, sizeof v); }

inline __attribute__((always_inline)) void micro_kernel(float* __restrict c, int64_t ldc,
                                                        const float* __restrict a,
                                                        const float* __restrict b, int64_t depth) {
  static_assert(kNr == 16 && kMr == 4, "the register tile below is written out for 4 x 16");
  Vec8 acc[kMr][2];
  for (int64_t i = 0; i < kMr; ++i) {
    acc[i][0] = load8(c + i * ldc);
    acc[i][1] = load8(c + i * ldc + 8);
  }
  for (int64_t k = 0; k < depth; ++k) {
    const Vec8 b0 = load8(b + k * kNr);
    const Vec8 b1 = load8(b + k * kNr + 8);
    for (int64_t i = 0; i < kMr; ++i) {
      const Vec8 av = Vec8{} + a[k * kMr + i];  // broadcast
      acc[i][0] += av * b0;
      acc[i][1] += av * b1;
    }
  }
  for (int64_t i = 0; i < kMr; ++i) {
    store8(c + i * ldc, acc[i][0]);
    store8(c + i * ldc + 8, acc[i][1]);
  }
}

// One output tile (rows m0.., columns n0..) of C = A B, written as bfloat16. Compiled twice: for
// AVX2+FMA machines and for any x86-64, picked at load time.
__attribute__((target_clones("arch=x86-64-v3", "default"))) void compute_tile(
    uint16_t* out, const float* a_panels, const float* b_panels, int64_t m0, int64_t rows,
    int64_t m_size, int64_t n0, int64_t cols, int64_t n_size, int64_t k_size, float* c) {
  std::fill(c, c + kMc * kNc, 0.0f);
  for (int64_t k0 = 0; k0 < k_size; k0 += kKc) {
    const int64_t depth = std::min(kKc, k_size - k0);
    for (int64_t j = 0; j < cols; j += kNr) {
      const float* b = b_panels + ((n0 + j) / kNr) * k_size * kNr + k0 * kNr;
      for (int64_t i = 0; i < rows; i += kMr) {
        const float* a = a_panels + ((m0 + i) / kMr) * k_size * kMr + k0 * kMr;
        micro_kernel(c + i * kNc + j, kNc, a, b, depth);
      }
    }
  }
  for (int64_t i = 0; i < rows && m0 + i < m_size; ++i)
    for (int64_t j = 0; j < cols; ++j)
      out[(m0 + i) * n_size + n0 + j] = fp8gemm::float_to_bf16_bits(c[i * kNc + j]);
}

// Recomputes, in the block-sum form, every output whose row has a non-finite a_scale or whose
// 128-column block has a non-finite b_scale. A scan of the K/128 x (M + ceil(N/128)) scales when
// none is.
void recompute_nonfinite_scales(uint16_t* out, const uint8_t* a, const uint8_t* b,
                                const float* a_scale, const float* b_scale, int64_t m_size,
                                int64_t n_size, int64_t k_size, const std::array<float, 256>& table) {
  const int64_t k_blocks = k_size / fp8gemm::kScaleBlock, n_blocks = fp8gemm::scale_columns(n_size);
  std::vector<char> row_hit(static_cast<size_t>(m_size), 0), block_hit(static_cast<size_t>(n_blocks), 0);
  bool any = false;
  for (int64_t kb = 0; kb < k_blocks; ++kb) {
    for (int64_t m = 0; m < m_size; ++m)
      if (!std::isfinite(a_scale[kb * m_size + m])) any = row_hit[m] = 1;
    for (int64_t nb = 0; nb < n_blocks; ++nb)
      if (!std::isfinite(b_scale[kb * n_blocks + nb])) any = block_hit[nb] = 1;
  }
  if (!any) return;
  at::parallel_for(0, m_size, 1, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      for (int64_t n = 0; n < n_size; ++n) {
        const int64_t nb = n / fp8gemm::kScaleBlock;
        if (!row_hit[m] && !block_hit[nb]) continue;
        float acc = 0.0f;
        for (int64_t kb = 0; kb < k_blocks; ++kb) {
          float sum = 0.0f;
          for (int64_t k = kb * fp8gemm::kScaleBlock; k < (kb + 1) * fp8gemm::kScaleBlock; ++k)
            sum += table[a[m * k_size + k]] * table[b[k * n_size + n]];
          acc += (a_scale[kb * m_size + m] * b_scale[kb * n_blocks + nb]) * sum;
        }
        out[m * n_size + n] = fp8gemm::float_to_bf16_bits(acc);
      }
    }
  });
}

}  // namespace

void gemm_cpu_run(uint16_t* out, const uint8_t* a, const uint8_t* b, const float* a_scale,
                  const float* b_scale, int64_t m_size, int64_t n_size, int64_t k_size,
                  Fp8Format format) {
  const auto& table = table_for(format);
  const int64_t n_blocks = fp8gemm::scale_columns(n_size);

  // A, dequantised into row panels, padded with zero rows to a multiple of kMr.
  const int64_t m_padded = (m_size + kMr - 1) / kMr * kMr;
  std::vector<float> a_panels(static_cast<size_t>(m_padded * k_size), 0.0f);
  at::parallel_for(0, m_size, 16, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      float* panel = a_panels.data() + (m / kMr) * k_size * kMr + m % kMr;
      const uint8_t* row = a + m * k_size;
      for (int64_t k = 0; k < k_size; ++k)
        panel[k * kMr] = table[row[k]] * a_scale[(k / fp8gemm::kScaleBlock) * m_size + m];
    }
  });
  // B, dequantised into column panels (N is a multiple of 16, kNr: a panel never overhangs N, and
  // never straddles a scale block).
  std::vector<float> b_panels(static_cast<size_t>(k_size * n_size));
  at::parallel_for(0, n_size / kNr, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      float* panel = b_panels.data() + p * k_size * kNr;
      const int64_t n0 = p * kNr;
      for (int64_t k = 0; k < k_size; ++k) {
        const float scale = b_scale[(k / fp8gemm::kScaleBlock) * n_blocks + n0 / fp8gemm::kScaleBlock];
        const uint8_t* row = b + k * n_size + n0;
        for (int64_t j = 0; j < kNr; ++j) panel[k * kNr + j] = table[row[j]] * scale;
      }
    }
  });

  const int64_t m_tasks = (m_padded + kMc - 1) / kMc;
  const int64_t n_tasks = (n_size + kNc - 1) / kNc;
  at::parallel_for(0, m_tasks * n_tasks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> c(static_cast<size_t>(kMc * kNc));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t m0 = (task / n_tasks) * kMc;
      const int64_t n0 = (task % n_tasks) * kNc;
      compute_tile(out, a_panels.data(), b_panels.data(), m0, std::min(kMc, m_padded - m0),
                   m_size, n0, std::min(kNc, n_size - n0), n_size, k_size, c.data());
    }
  });
  recompute_nonfinite_scales(out, a, b, a_scale, b_scale, m_size, n_size, k_size, table);
}
