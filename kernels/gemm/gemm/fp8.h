// FP8 (E4M3) decoding and bfloat16 encoding shared by the CPU and GPU paths.
//
// Two E4M3 flavours exist: OCP "fn" (exponent bias 7, NaN = S.1111.111, max 448) and "fnuz"
// (exponent bias 8, NaN = 1.0000.000 i.e. 0x80, no negative zero, max 240), the format MI300's
// matrix cores use natively.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__HIPCC__) || defined(__CUDACC__)
#define GEMM_HOST_DEVICE __host__ __device__
#else
#define GEMM_HOST_DEVICE
#endif

namespace fp8gemm {

enum class Fp8Format : int { e4m3fn = 0, e4m3fnuz = 1 };

GEMM_HOST_DEVICE inline float bits_to_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

GEMM_HOST_DEVICE inline uint32_t float_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// The value of one E4M3 byte in the given format, exactly (every fp8 value is a float).
template <Fp8Format F>
GEMM_HOST_DEVICE inline float fp8_to_float(uint8_t byte) {
  constexpr int bias = F == Fp8Format::e4m3fn ? 7 : 8;
  const uint32_t sign = static_cast<uint32_t>(byte >> 7) << 31;
  const uint32_t exponent = (byte >> 3) & 0xF;
  const uint32_t mantissa = byte & 0x7;
  if (F == Fp8Format::e4m3fnuz && byte == 0x80) return bits_to_float(0x7FC00000u);
  if (F == Fp8Format::e4m3fn && exponent == 0xF && mantissa == 0x7)
    return bits_to_float(sign | 0x7FC00000u);
  if (exponent == 0) {
    // Subnormal: mantissa * 2^(1 - bias - 3).
    const float magnitude = static_cast<float>(mantissa) * bits_to_float((127u + 1 - bias - 3) << 23);
    return sign ? -magnitude : magnitude;
  }
  return bits_to_float(sign | ((exponent - bias + 127) << 23) | (mantissa << 20));
}

// Round a float to bfloat16 (round to nearest even, NaN stays NaN), as torch does.
GEMM_HOST_DEVICE inline uint16_t float_to_bf16_bits(float value) {
  const uint32_t bits = float_to_bits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

// Scaling works on blocks of 128 along K (and along N for b_scale): 1x128 / 128x128 blocks.
constexpr int kScaleBlock = 128;

// N need not be a multiple of the scale block: every kernel takes a multiple of kNMultiple (16
// bytes of an fp8 row of b; the rows TMA and the 16-byte loads address), and b_scale has one
// column per started block of 128, the last one covering the N % 128 columns left over
// (DeepSeek-V3's fused q_a/kv_a projection is N = 2112 = 16.5 blocks).
constexpr int kNMultiple = 16;
GEMM_HOST_DEVICE constexpr int64_t scale_columns(int64_t n) {
  return (n + kScaleBlock - 1) / kScaleBlock;
}

// The largest M the op takes, on every backend: the portable and ROCm kernels put their 64-row
// tiles in the grid's y dimension, which holds at most 65535 blocks. The binding and every
// launcher check against this one number.
constexpr int64_t kMaxM = int64_t{65535} * 64;

// Every data pointer the op gets must be aligned to this many bytes: the GPU kernels load a and b
// 16 bytes at a time (uint4, TMA), and the binding refuses a view at an unaligned offset on every
// backend alike, so a program that runs on the CPU build runs on the GPU builds.
constexpr int kPointerAlignment = 16;

}  // namespace fp8gemm
