/** \file
 * Storage types for the 16- and 8-bit floating-point dtypes: float16, bfloat16, float8_e4m3fn and
 * float8_e5m2. Arithmetic happens in float (their "opmath" type); these types only store bits and
 * convert.
 *
 * Conversions from float round to nearest, ties to even, with PyTorch's special-value rules:
 * - float16 and float8_e5m2 overflow to infinity and keep NaN;
 * - bfloat16 keeps infinity and turns every NaN into 0x7FC0;
 * - float8_e4m3fn has no infinity: a value whose rounded magnitude passes 448 (the largest finite
 *   value), infinity included, becomes NaN (0x7F with the sign bit);
 * - conversions from double first round to float (double rounding), as PyTorch's do.
 */
#pragma once

#include <bit>
#include <cstdint>
#include <iosfwd>

namespace tessera {
namespace detail {

inline uint32_t f32_bits(float f) {
  return std::bit_cast<uint32_t>(f);
}
inline float f32_from_bits(uint32_t u) {
  return std::bit_cast<float>(u);
}

/**
 * Rounds a finite, non-negative float (as bits) to a narrower format with `Man` mantissa bits,
 * exponent bias `Bias`, returning the format's magnitude code (exponent and mantissa fields).
 * The caller handles NaN, infinity and overflow (a code past the largest finite value).
 */
template <int Man, int Bias>
inline uint32_t round_float_magnitude(uint32_t ax) {
  constexpr int kShift = 23 - Man;
  // Smallest normal of the target: 2^(1 - Bias).
  constexpr uint32_t kMinNormalBits = uint32_t(127 + 1 - Bias) << 23;
  if (ax < kMinNormalBits) {
    // Subnormal (or zero) in the target. Adding 2^(23 + 1 - Bias - Man) makes float's own
    // round-to-nearest-even quantize to the target's subnormal spacing 2^(1 - Bias - Man).
    constexpr uint32_t kMagicBits = uint32_t(127 + 23 + 1 - Bias - Man) << 23;
    float t = f32_from_bits(ax) + f32_from_bits(kMagicBits);
    return f32_bits(t) - kMagicBits;
  }
  const uint32_t odd = (ax >> kShift) & 1u;
  ax += (uint32_t(Bias - 127) << 23) + ((1u << (kShift - 1)) - 1u) + odd;
  return ax >> kShift;
}

inline uint16_t float_to_half_bits(float f) {
  const uint32_t x = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
  return sign | static_cast<uint16_t>(round_float_magnitude<10, 15>(ax));
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    const float v = static_cast<float>(man) * f32_from_bits(0x33800000u);  // man * 2^-24
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

inline uint16_t float_to_bfloat16_bits(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;  // NaN, as PyTorch: no sign, quiet
  const uint32_t bias = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + bias) >> 16);
}

inline float bfloat16_bits_to_float(uint16_t b) {
  return f32_from_bits(uint32_t(b) << 16);
}

inline uint8_t float_to_e4m3fn_bits(float f) {
  const uint32_t x = f32_bits(f);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x43f00000u) return sign | 0x7fu;  // >= 480, infinity and NaN: NaN
  uint32_t code = round_float_magnitude<3, 7>(ax);
  if (code > 0x7eu) code = 0x7fu;  // rounded past 448: NaN (no infinity in this format)
  return sign | static_cast<uint8_t>(code);
}

inline float e4m3fn_bits_to_float(uint8_t c) {
  const uint32_t sign = uint32_t(c & 0x80u) << 24;
  const uint32_t exp = (c >> 3) & 0xfu;
  const uint32_t man = c & 0x7u;
  if (exp == 0xf && man == 0x7) return f32_from_bits(sign | 0x7fc00000u);
  if (exp == 0) {
    const float v = static_cast<float>(man) * f32_from_bits(0x3b000000u);  // man * 2^-9
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 120u) << 23) | (man << 20));
}

inline uint8_t float_to_e5m2_bits(float f) {
  const uint32_t x = f32_bits(f);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7fu;   // NaN
  if (ax >= 0x47800000u) return sign | 0x7cu;  // >= 65536 and infinity: infinity
  uint32_t code = round_float_magnitude<2, 15>(ax);
  if (code > 0x7cu) code = 0x7cu;
  return sign | static_cast<uint8_t>(code);
}

inline float e5m2_bits_to_float(uint8_t c) {
  return half_bits_to_float(uint16_t(c) << 8);
}

}  // namespace detail

/** Tag for constructing a narrow float from raw bits. */
struct FromBits {};
inline constexpr FromBits from_bits{};

#define TS_NARROW_FLOAT(Name, Bits, to_bits, to_float)                     \
  struct Name {                                                            \
    Bits x;                                                                \
    Name() = default;                                                      \
    constexpr Name(Bits bits, FromBits) : x(bits) {}                       \
    Name(float f) : x(detail::to_bits(f)) {}                               \
    explicit Name(double d) : x(detail::to_bits(static_cast<float>(d))) {} \
    operator float() const { return detail::to_float(x); }                 \
    Name& operator=(float f) {                                             \
      x = detail::to_bits(f);                                              \
      return *this;                                                        \
    }                                                                      \
  };

/** IEEE binary16. */
TS_NARROW_FLOAT(Half, uint16_t, float_to_half_bits, half_bits_to_float)
/** bfloat16: float32's exponent, 7 mantissa bits. */
TS_NARROW_FLOAT(BFloat16, uint16_t, float_to_bfloat16_bits, bfloat16_bits_to_float)
/** float8 e4m3 "fn": finite and NaN only, largest value 448. */
TS_NARROW_FLOAT(Float8_e4m3fn, uint8_t, float_to_e4m3fn_bits, e4m3fn_bits_to_float)
/** float8 e5m2: binary16's top byte, with infinities. */
TS_NARROW_FLOAT(Float8_e5m2, uint8_t, float_to_e5m2_bits, e5m2_bits_to_float)

#undef TS_NARROW_FLOAT

std::ostream& operator<<(std::ostream& os, Half v);
std::ostream& operator<<(std::ostream& os, BFloat16 v);
std::ostream& operator<<(std::ostream& os, Float8_e4m3fn v);
std::ostream& operator<<(std::ostream& os, Float8_e5m2 v);

}  // namespace tessera
