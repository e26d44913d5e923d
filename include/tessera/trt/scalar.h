/** \file
 * The tile runtime's portable part: what generated kernels call on every backend. The argument
 * slots, bit casts, narrow floats (float16, bfloat16, float8) and conversions with tessera's
 * rules, and the float32 math functions (our own polynomials), written in plain C++ so that the
 * CPU's compiler and NVRTC compile the same code: elementwise math agrees bit for bit across
 * backends (DESIGN D4). STL-free; `trt/cpu.h` and `trt/cuda.h` include it.
 *
 * Precision contract (float32, checked by tests/tl/test_trt_math.cpp against double references):
 * exp <= 2 ulp, log <= 2 ulp, sin/cos <= 2 ulp for |x| <= 1e4 (the reduction by pi/2 is done in
 * double precision; larger arguments lose accuracy), sqrt and division correctly rounded, rsqrt =
 * 1/sqrt. float16/bfloat16 values live in float registers and are rounded after every operation, so
 * results equal native half-precision arithmetic for + - * /.
 */
#pragma once

#include "tessera/trt/scalar_ops.h"

#if defined(__CUDACC__)
#define TRT_INLINE __device__ __forceinline__
#elif defined(__GNUC__)
#define TRT_INLINE inline __attribute__((always_inline))
#else
#define TRT_INLINE inline
#endif

// The few primitives the host and device spell differently; each is exact (correctly rounded or
// bit manipulation), so both give the same bits; erf is CUDA's on GPUs and a polynomial on the
// host (below; within the contract's ulps of each other, not bit for bit).
#if defined(__CUDACC__)
#define TRT_FMAF(a, b, c) __fmaf_rn((a), (b), (c))
#define TRT_INFF() __int_as_float(0x7f800000)
#define TRT_NANF() __int_as_float(0x7fc00000)
#define TRT_RINT(x) ::rint(x)
#define TRT_FLOORF(x) ::floorf(x)
#define TRT_CEILF(x) ::ceilf(x)
#define TRT_SQRTF(x) __fsqrt_rn(x)
#define TRT_ERFF(x) ::erff(x)
#define TRT_INF() __longlong_as_double(0x7ff0000000000000ll)
#define TRT_NAN() __longlong_as_double(0x7ff8000000000000ll)
#define TRT_FMOD(a, b) ::fmod((a), (b))
#define TRT_FMODF(a, b) ::fmodf((a), (b))
#else
#define TRT_FMAF(a, b, c) __builtin_fmaf((a), (b), (c))
#define TRT_INFF() __builtin_inff()
#define TRT_NANF() __builtin_nanf("")
#define TRT_RINT(x) __builtin_rint(x)
#define TRT_FLOORF(x) __builtin_floorf(x)
#define TRT_CEILF(x) __builtin_ceilf(x)
#define TRT_SQRTF(x) __builtin_sqrtf(x)
#define TRT_ERFF(x) __builtin_erff(x)
#define TRT_INF() __builtin_inf()
#define TRT_NAN() __builtin_nan("")
#define TRT_FMOD(a, b) __builtin_fmod((a), (b))
#define TRT_FMODF(a, b) __builtin_fmodf((a), (b))
#endif

namespace trt {

/** One kernel argument slot: a pointer, an integer or a floating value. */
union Arg {
  void* p;
  int64_t i;
  double f;
};

/** The launch grid (programs along x, y, z). */
struct Grid {
  int64_t x, y, z;
};

/** The checked mode's record buffer on a GPU (`TESSERA_DEBUG=1`), in device memory: the host
 * fills the bounds, the kernel counts and records the first violations of each kind, the host
 * reports them after the launch as the CPU does. The same layout on both sides. */
enum GpuCheckKind { kCheckOutOfBounds = 0, kCheckOverflow = 1, kCheckAssert = 2, kCheckHint = 3 };
struct GpuCheckRecord {
  int32_t site, param, pid0, pid1, pid2, pad;
  int64_t lane;
  int64_t value;  ///< the address (out of bounds) or the exact result (overflow)
};
struct GpuDebug {
  static constexpr int kRecords = 16;  ///< records kept per kind
  uint64_t lo[64], hi[64];             ///< each pointer parameter's bounds [lo, hi)
  unsigned long long count[4];         ///< violations per kind
  GpuCheckRecord rec[4][kRecords];
};

// ---- bit casts and narrow floats --------------------------------------------------------------

#if defined(__CUDACC__)
TRT_INLINE uint32_t f2u(float f) {
  return __float_as_uint(f);
}
TRT_INLINE float u2f(uint32_t u) {
  return __uint_as_float(u);
}
#else
TRT_INLINE uint32_t f2u(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  return u;
}
TRT_INLINE float u2f(uint32_t u) {
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
#endif

// On a GPU the conversions are the hardware's (one `cvt` each: the software forms cost a dozen
// integer instructions per element and, in a bf16 layer norm, 8 registers and a third of the
// bandwidth, bench/experiments/ln_run.sh); infinities and NaNs take the software's bits, so
// both backends give the same bits for every input.
#if defined(__CUDA_ARCH__)
TRT_INLINE float cvt_f16_f32(uint16_t h) {
  float r;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
  return r;
}
TRT_INLINE uint16_t cvt_f32_f16(float f) {
  unsigned short r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
#if __CUDA_ARCH__ >= 800
#define TRT_HW_BF16 1
TRT_INLINE uint16_t cvt_f32_bf16(float f) {
  unsigned short r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
#endif
#endif

/** float16 bits -> float. */
TRT_INLINE float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  const uint32_t special = sign | 0x7f800000u | (man << 13);
#if defined(__CUDA_ARCH__)
  return exp == 31 ? u2f(special) : cvt_f16_f32(h);
#else
  // The exponent and mantissa bits moved into a float's place, scaled by 2^112 (the difference of
  // the biases): exact for normals and subnormals alike; infinities and NaNs apart. Seven vector
  // operations where the cases took fifteen.
  const float scaled = u2f((uint32_t)(h & 0x7fffu) << 13) * 0x1p112f;
  return u2f(exp == 31 ? special : (f2u(scaled) | sign));
#endif
}

/** float -> float16 bits, round to nearest even, overflow to infinity. */
TRT_INLINE uint16_t float_to_half(float f) {
  const uint32_t x = f2u(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
#if defined(__CUDA_ARCH__)
  return ax > 0x7f800000u ? (uint16_t)(sign | 0x7e00u) : cvt_f32_f16(f);
#else
  // Subnormal: let float addition quantize to 2^-24.
  const uint32_t sub = f2u(u2f(ax) + 0.5f) - 0x3f000000u;
  const uint32_t odd = (ax >> 13) & 1u;
  const uint32_t nrm = (ax + 0xc8000fffu + odd) >> 13;  // rebias (15 - 127) << 23, round
  // Selects as bit masks: the vectorizer narrows `?:` chains into forms it cannot emit.
  const uint32_t is_sub = 0u - (uint32_t)(ax < 0x38800000u);
  const uint32_t is_inf = 0u - (uint32_t)(ax >= 0x477ff000u);
  const uint32_t is_nan = 0u - (uint32_t)(ax > 0x7f800000u);
  uint32_t r = (sub & is_sub) | (nrm & ~is_sub);
  r = (0x7c00u & is_inf) | (r & ~is_inf);
  r = (0x7e00u & is_nan) | (r & ~is_nan);
  return (uint16_t)(sign | r);
#endif
}

TRT_INLINE float bf16_to_float(uint16_t b) {
  return u2f((uint32_t)b << 16);
}
TRT_INLINE uint16_t float_to_bf16(float f) {
  const uint32_t x = f2u(f);
#if defined(TRT_HW_BF16)
  return (x & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fc0u : cvt_f32_bf16(f);
#else
  const uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return (x & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fc0u : (uint16_t)r;
#endif
}

/** Rounds a float to the nearest float16 / bfloat16 value (kept in a float register). On a GPU,
 * two conversions with no NaN case: a NaN stays a NaN (its payload, like any NaN's between
 * operations, is the hardware's; a store's conversion makes it the CPU's). A fused bf16 chain
 * rounds every step, so this is most of its instructions. */
TRT_INLINE float round_f16(float f) {
#if defined(__CUDA_ARCH__)
  return cvt_f16_f32(cvt_f32_f16(f));
#else
  return half_to_float(float_to_half(f));
#endif
}
TRT_INLINE float round_bf16(float f) {
#if defined(TRT_HW_BF16)
  return u2f((uint32_t)cvt_f32_bf16(f) << 16);
#else
  return bf16_to_float(float_to_bf16(f));
#endif
}

// float8 (storage and casts): e5m2 is the top byte of float16; e4m3fn has no infinity.
TRT_INLINE float e5m2_to_float(uint8_t c) {
  return half_to_float((uint16_t)((uint16_t)c << 8));
}
TRT_INLINE uint8_t float_to_e5m2(float f) {
  const uint32_t x = f2u(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t ax = x & 0x7fffffffu;
  const uint32_t sub = f2u(u2f(ax) + 128.0f) - 0x43000000u;
  const uint32_t odd = (ax >> 21) & 1u;
  const uint32_t nrm = (ax + 0xc80fffffu + odd) >> 21;
  uint32_t r = ax < 0x38800000u ? sub : nrm;
  r = r > 0x7cu ? 0x7cu : r;
  r = ax >= 0x47800000u ? 0x7cu : r;
  r = ax > 0x7f800000u ? 0x7fu : r;
  return (uint8_t)(sign | r);
}
TRT_INLINE float e4m3_to_float(uint8_t c) {
  const uint32_t sign = (uint32_t)(c & 0x80u) << 24;
  const uint32_t exp = (c >> 3) & 0xfu;
  const uint32_t man = c & 0x7u;
  const float sub = (float)man * 0.001953125f;  // man * 2^-9
  const float nrm = u2f(sign | ((exp + 120u) << 23) | (man << 20));
  const float r = exp == 0 ? (sign ? -sub : sub) : nrm;
  return (exp == 15 && man == 7) ? u2f(sign | 0x7fc00000u) : r;
}
TRT_INLINE uint8_t float_to_e4m3(float f) {
  const uint32_t x = f2u(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t ax = x & 0x7fffffffu;
  const uint32_t sub = f2u(u2f(ax) + 16384.0f) - 0x46800000u;
  const uint32_t odd = (ax >> 20) & 1u;
  const uint32_t nrm = (ax + 0xc407ffffu + odd) >> 20;
  uint32_t r = ax < 0x3c800000u ? sub : nrm;
  r = r > 0x7eu ? 0x7fu : r;
  r = ax >= 0x43f00000u ? 0x7fu : r;
  return (uint8_t)(sign | r);
}

// ---- conversions with tessera's rules (no undefined behaviour) ---------------------------------

/** Floating to integer: truncation; NaN and values outside int64 give INT64_MIN, then wrap. */
template <class To>
TRT_INLINE To f2i(double v) {
  const int64_t i = (v >= -9223372036854775808.0 && v < 9223372036854775808.0)
                        ? (int64_t)v
                        : (int64_t)(-9223372036854775807LL - 1);
  return (To)i;
}
template <class To>
TRT_INLINE To f2i(float v) {
  return f2i<To>((double)v);
}
template <>
TRT_INLINE uint64_t f2i<uint64_t>(double v) {
  if (v >= 9223372036854775808.0 && v < 18446744073709551616.0) return (uint64_t)v;
  const int64_t i = (v >= -9223372036854775808.0 && v < 9223372036854775808.0)
                        ? (int64_t)v
                        : (int64_t)(-9223372036854775807LL - 1);
  return (uint64_t)i;
}

#if defined(__CUDACC__)
TRT_INLINE double u2d(uint64_t u) {
  return __longlong_as_double((long long)u);
}
TRT_INLINE uint64_t d2u(double d) {
  return (uint64_t)__double_as_longlong(d);
}
#else
TRT_INLINE double u2d(uint64_t u) {
  double d;
  __builtin_memcpy(&d, &u, 8);
  return d;
}
TRT_INLINE uint64_t d2u(double d) {
  uint64_t u;
  __builtin_memcpy(&u, &d, 8);
  return u;
}
#endif

/** Whether 1/d is a normal float, so that x * (1/d) is within 1.5 ulp of x / d (the generated
 * code divides a tile by a scalar through its reciprocal when this holds). */
TRT_INLINE bool recip_ok(float d) {
  const float a = d < 0 ? -d : d;
  return a >= 0x1p-126f && a <= 0x1p126f;
}

/** Whether base + lo and base + hi (the extremes of an affine index expression over a loop nest)
 * are int32 values: then none of its 32-bit steps wraps. */
TRT_INLINE bool fits_i32(int64_t base, int64_t lo, int64_t hi) {
  return base + lo >= -2147483648LL && base + hi <= 2147483647LL;
}

// ---- math: float32
// -------------------------------------------------------------------------------

/** e^x given k = ki, the rounded x / ln2 (exp's polynomial, on every backend): Cody-Waite
 * reduction x = k ln2 + r, |r| <= ln2/2, then 1 + r + r^2 q(r) with q a degree-4 minimax fit
 * (approximation error 0.05 ulp), scaled by 2^k in two steps so that subnormal results round once
 * and 2^128 overflows only at the end. ki must lie in [-252, 128] (both steps normal). */
TRT_INLINE float exp_poly_scaled(float x, int32_t ki) {
  const float k = (float)ki;
  const float r = TRT_FMAF(-k, 1.42860682030941723212e-6f, TRT_FMAF(-k, 0.693145751953125f, x));
  float p = 1.381461275741458e-3f;
  p = TRT_FMAF(p, r, 8.368710055947304e-3f);
  p = TRT_FMAF(p, r, 4.166838899254799e-2f);
  p = TRT_FMAF(p, r, 1.666652113199234e-1f);
  p = TRT_FMAF(p, r, 4.999999403953552e-1f);
  p = TRT_FMAF(p * r, r, r) + 1.0f;
  const int32_t k1 = ki >> 1, k2 = ki - k1;
  const float s1 = u2f((uint32_t)(k1 + 127) << 23), s2 = u2f((uint32_t)(k2 + 127) << 23);
  return p * s1 * s2;
}
/** The rounded x / ln2 as an integer: the 1.5 * 2^23 trick, read from the float's bits (defined
 * for every input, a NaN included, unlike a float-to-int conversion). */
TRT_INLINE int32_t exp_poly_k(float x) {
  return (int32_t)(f2u(TRT_FMAF(x, 1.44269504088896341f, 12582912.0f)) - 0x4b400000u);
}
/** e^x (exp's polynomial, on every backend): k clamped as an integer to [-150, 128], where 2^k
 * alone underflows to 0 or overflows to inf; inputs beyond [-104, 89] take 0 or inf by selects,
 * and a NaN passes through the polynomial. (The selects' order and form are what GCC vectorizes
 * best: 20% faster than one nested select.) */
TRT_INLINE float exp_poly(float x) {
  int32_t ki = exp_poly_k(x);
  ki = ki < -150 ? -150 : ki;
  ki = ki > 128 ? 128 : ki;
  float res = exp_poly_scaled(x, ki);
  res = x > 89.0f ? TRT_INFF() : res;
  res = x < -104.0f ? 0.0f : res;
  return res;
}
/** e^x for x in [-170, 89], the bits of exp_poly, without its clamps and selects: for callers
 * that bound x themselves (softmax rows, where x - max lies in [-128, 0]). */
TRT_INLINE float exp_poly_bounded(float x) {
  return exp_poly_scaled(x, exp_poly_k(x));
}
/** e^x within 2 ulp: the polynomial above on the CPU (1 ulp); on GPUs CUDA's expf (2 ulp, as
 * PyTorch's CUDA kernels: 8 instructions around MUFU.EX2 where the polynomial takes 24, which
 * made bfloat16 GELU kernels compute-bound; docs/decisions.md). Functions built on e^x (tanh)
 * call exp_poly and keep their bits on every backend. */
TRT_INLINE float exp(float x) {
#if defined(__CUDA_ARCH__)
  return ::expf(x);
#else
  return exp_poly(x);
#endif
}

/** ln(x) and log2(x) share one reduction: x = (1 + f) 2^e with 1 + f in [sqrt(1/2), sqrt(2));
 * log(1 + f) = 2 atanh(s) with s = f / (2 + f), arranged as f - f^2/2 + s (f^2/2 + R) so that
 * the large terms are exact. */
struct LogParts {
  float f, s_terms, hfsq, e;  ///< log(1 + f) = s_terms - hfsq + f
};
TRT_INLINE LogParts log_parts(float x) {
  const bool subn = x < 1.17549435e-38f;
  const uint32_t u = subn ? f2u(x * 8388608.0f) : f2u(x);  // scale subnormals by 2^23
  int32_t e = (int32_t)((u >> 23) & 0xffu) - 127 - (subn ? 23 : 0);
  float m = u2f((u & 0x007fffffu) | 0x3f800000u);
  const bool big = m > 1.41421356f;
  m = big ? m * 0.5f : m;
  e = big ? e + 1 : e;
  const float f = m - 1.0f;
  const float s = f / (2.0f + f);
  const float z = s * s;
  float R = 0.22222222f;  // 2/9
  R = TRT_FMAF(R, z, 0.28571429f);
  R = TRT_FMAF(R, z, 0.4f);
  R = TRT_FMAF(R, z, 0.66666667f);
  R = R * z;
  const float hfsq = 0.5f * f * f;
  return LogParts{f, s * (hfsq + R), hfsq, (float)e};
}
// The special inputs of a logarithm: 0, negatives, +inf and NaN.
TRT_INLINE float log_special(float x, float res) {
  res = x == 0.0f ? -TRT_INFF() : res;
  res = x < 0.0f ? TRT_NANF() : res;
  res = f2u(x) == 0x7f800000u ? x : res;
  return x != x ? x : res;
}
TRT_INLINE float log(float x) {
  const LogParts p = log_parts(x);
  // ln 2 = 0.693145751953125 + 1.428606820309417e-06 (the first part times e is exact).
  return log_special(
      x, p.s_terms + p.e * 1.42860682030941723212e-6f - p.hfsq + p.f + p.e * 0.693145751953125f);
}
/** log2(x): the logarithm of the reduced argument times log2(e), plus the exponent (exact for
 * powers of two). */
TRT_INLINE float log2(float x) {
  const LogParts p = log_parts(x);
  return log_special(x, (p.s_terms - p.hfsq + p.f) * 1.44269504088896341f + p.e);
}

#if defined(__CUDACC__)
#define TRT_CONSTANT static __device__ const
#else
#define TRT_CONSTANT inline constexpr
#endif
/** The bits of 2/pi after the binary point, big-endian, behind one word of zeros (the bits "before"
 * the point that a small exponent reaches): enough for every float exponent. Computed with
 * Machin's formula in fixed point. */
TRT_CONSTANT uint32_t kTwoOverPi[11] = {0x00000000, 0xa2f9836e, 0x4e441529, 0xfc2757d1,
                                        0xf534ddc0, 0xdb629599, 0x3c439041, 0xfe5163ab,
                                        0xdebbc561, 0xb7246e3a, 0x424dd2e0};
/** 32 bits of a big-endian bit string starting s bits into word w. */
TRT_INLINE uint32_t bits32(uint32_t a, uint32_t b, int32_t s) {
  return (a << s) | ((b >> 1) >> (31 - s));  // s = 0 included, 32-bit shifts only
}
/** Payne-Hanek reduction of a float with |x| >= 2^-7 (any x gives some result): x = (q + f) pi/2
 * with q an integer (only q mod 4 matters) and |f| <= 1/2, from the 96 bits of 2/pi that reach x's
 * exponent: |x| = m 2^e with m a 24-bit integer, so bits of 2/pi worth 2^(e-i) >= 4 add multiples
 * of 4 and the ones past the 96th change f by less than 2^-70. Integer arithmetic only (24 x 32-bit
 * products), no branches. */
TRT_INLINE void sincos_reduce_large(float x, double& r, int32_t& q) {
  const uint32_t ux = f2u(x) & 0x7fffffffu;
  const int32_t e = (int32_t)(ux >> 23) - 150;  // |x| = m 2^e
  const uint64_t m = (ux & 0x7fffffu) | 0x800000u;
  // The bit of 2/pi worth 2^(1-e), counted from the zero word; clamped into the table for the
  // small x whose result sincos_reduce discards (so the loads need no branch).
  const int32_t p0 = e + 30 < 0 ? 0 : e + 30;
  const int32_t w = p0 >> 5, s = p0 & 31;
  // Words w..w+3 by selects over w's five values rather than indexed loads: vector gathers cost
  // more than the rest of the reduction together.
  uint32_t a = kTwoOverPi[0], b = kTwoOverPi[1], c = kTwoOverPi[2], d = kTwoOverPi[3];
  for (int32_t k = 1; k <= 4; ++k) {
    a = w == k ? kTwoOverPi[k] : a;
    b = w == k ? kTwoOverPi[k + 1] : b;
    c = w == k ? kTwoOverPi[k + 2] : c;
    d = w == k ? kTwoOverPi[k + 3] : d;
  }
  const uint64_t w0 = bits32(a, b, s), w1 = bits32(b, c, s), w2 = bits32(c, d, s);
  // m * (w0:w1:w2) = t2 2^64 + t1 2^32 + t0 (low words), worth 2^-94 per unit.
  const uint64_t t0 = m * w2;
  const uint64_t t1 = m * w1 + (t0 >> 32);
  const uint64_t t2 = m * w0 + (t1 >> 32);
  const uint64_t f = ((t2 & 0x3fffffffu) << 34) | ((t1 & 0xffffffffu) << 2) |
                     ((t0 & 0xffffffffu) >> 30);  // the fraction, 64 bits
  // Rounded to the nearest quadrant: a fraction of 1/2 or more counts as the next quadrant
  // minus the rest (the fraction as a signed integer).
  const int32_t qa = (int32_t)(((t2 >> 30) + (f >> 63)) & 3);
  // f as a signed fraction of 2^64 in two int32 halves (int64 -> double does not vectorize on
  // AVX2); both conversions are exact and the sum is rounded once.
  const double fr = (double)(int32_t)(uint32_t)(f >> 32) * 0x1p-32 +
                    (double)(int32_t)((uint32_t)f >> 1) * 0x1p-63;
  const double ra = fr * 1.5707963267948966;
  const bool neg = x < 0.0f;
  r = neg ? -ra : ra;
  q = neg ? -qa : qa;
}
/** sin/cos: x reduced by multiples of pi/2 to |r| <= pi/4 (+ rounding), minimax polynomials there.
 * |x| <= 1e4: in double, pi/2 in two parts; beyond: Payne-Hanek (sincos_reduce_large), the same
 * bits on every backend. On GPUs a branch (a warp pays for the long path only when one of its
 * lanes needs it); on the CPU both are computed and one selected, so vectorized loops stay
 * vectorized (measured: 0.39 -> 1.8 ns per float sin on one AVX-512 core, tl::sin only: the eager
 * CPU operators use the C library). */
TRT_INLINE void sincos_reduce(float x, float& r, int32_t& q) {
  const double xd = (double)x;
  const bool small = (f2u(x) & 0x7fffffffu) <= 0x461c4000u;  // |x| <= 1e4
#if defined(__CUDACC__)
  if (small) {
    const double k = TRT_RINT(xd * 0.63661977236758134308);
    q = (int32_t)k;
    r = (float)((xd - k * 1.5707963267948966) - k * 6.123233995736766e-17);
  } else {
    double rl;
    sincos_reduce_large(x, rl, q);
    r = (float)rl;
  }
#else
  const double k = TRT_RINT((small ? xd : 0.0) * 0.63661977236758134308);
  double rl;
  int32_t ql;
  sincos_reduce_large(x, rl, ql);
  q = small ? (int32_t)k : ql;
  r = (float)(small ? (xd - k * 1.5707963267948966) - k * 6.123233995736766e-17 : rl);
#endif
}
TRT_INLINE float sin_poly(float r) {
  const float r2 = r * r;
  float p = -1.9515295891e-4f;
  p = TRT_FMAF(p, r2, 8.3321608736e-3f);
  p = TRT_FMAF(p, r2, -1.6666654611e-1f);
  return r + r * r2 * p;
}
TRT_INLINE float cos_poly(float r) {
  const float r2 = r * r;
  float p = 2.443315711809948e-5f;
  p = TRT_FMAF(p, r2, -1.388731625493765e-3f);
  p = TRT_FMAF(p, r2, 4.166664568298827e-2f);
  return 1.0f - 0.5f * r2 + r2 * r2 * p;
}
TRT_INLINE float sin(float x) {
  float r;
  int32_t q;
  sincos_reduce(x, r, q);
  const float s = sin_poly(r), c = cos_poly(r);
  float v = (q & 1) ? c : s;
  v = (q & 2) ? -v : v;
  return (x != x || x - x != 0.0f) ? TRT_NANF() : v;
}
TRT_INLINE float cos(float x) {
  float r;
  int32_t q;
  sincos_reduce(x, r, q);
  const float s = sin_poly(r), c = cos_poly(r);
  float v = (q & 1) ? s : c;
  v = ((q + 1) & 2) ? -v : v;
  return (x != x || x - x != 0.0f) ? TRT_NANF() : v;
}

/** 2^x: x = k + r with k = rint(x) (exact), 2^r = e^(r ln2) by exp's polynomial; <= 2 ulp. */
TRT_INLINE float exp2_poly(float x) {
  const float kf = x + 12582912.0f;
  int32_t ki = (int32_t)(f2u(kf) - 0x4b400000u);
  ki = ki < -150 ? -150 : ki;
  ki = ki > 128 ? 128 : ki;
  const float r = (x - (float)ki) * 0.693147180559945309f;
  float p = 1.381461275741458e-3f;
  p = TRT_FMAF(p, r, 8.368710055947304e-3f);
  p = TRT_FMAF(p, r, 4.166838899254799e-2f);
  p = TRT_FMAF(p, r, 1.666652113199234e-1f);
  p = TRT_FMAF(p, r, 4.999999403953552e-1f);
  p = TRT_FMAF(p * r, r, r) + 1.0f;
  const int32_t k1 = ki >> 1, k2 = ki - k1;
  const float s1 = u2f((uint32_t)(k1 + 127) << 23), s2 = u2f((uint32_t)(k2 + 127) << 23);
  float res = p * s1 * s2;
  res = x >= 128.0f ? TRT_INFF() : res;
  res = x < -150.0f ? 0.0f : res;
  return x != x ? x : res;
}
/** 2^x within 2 ulp: the polynomial on the CPU; on GPUs CUDA's exp2f (2 ulp: MUFU.EX2 and a
 * scaling for subnormal results, where the polynomial takes about 20 instructions), as exp. */
TRT_INLINE float exp2(float x) {
#if defined(__CUDA_ARCH__)
  return ::exp2f(x);
#else
  return exp2_poly(x);
#endif
}

/** float32 -> tf32 (10 mantissa bits), rounding to nearest with ties away from zero, as NVIDIA's
 * cvt.rna.tf32.f32; infinities and NaNs pass through. */
TRT_INLINE float to_tf32(float x) {
  const uint32_t u = f2u(x);
  const uint32_t r = (u + 0x1000u) & 0xffffe000u;
  return (u & 0x7f800000u) == 0x7f800000u ? x : u2f(r);
}

TRT_INLINE float floor(float x) {
  return TRT_FLOORF(x);
}
TRT_INLINE float ceil(float x) {
  return TRT_CEILF(x);
}
/** tanh(x): |x| < 0.625: x + x^3 p(x^2), p a degree-4 fit (Cephes); else 1 - 2 / (e^(2|x|) + 1)
 * with this file's exp (past |x| ~ 44, e^(2|x|) is inf and the result 1). The sign is x's
 * (tanh(-0) = -0; a NaN stays a NaN). Selects only: vectorizes. */
TRT_INLINE float tanh(float x) {
  const float a = u2f(f2u(x) & 0x7fffffffu);
  const float s = x * x;
  float p = -5.70498872745e-3f;
  p = TRT_FMAF(p, s, 2.06390887954e-2f);
  p = TRT_FMAF(p, s, -5.37397155531e-2f);
  p = TRT_FMAF(p, s, 1.33314422036e-1f);
  p = TRT_FMAF(p, s, -3.33332819422e-1f);
  const float small = TRT_FMAF(p * s, a, a);
  const float big = 1.0f - 2.0f / (exp_poly(2.0f * a) + 1.0f);
  const float r = a < 0.625f ? small : big;
  return u2f(f2u(r) | (f2u(x) & 0x80000000u));
}
/** erf within 1.22 ulp of the exact value (every float checked against a double erf, on the host;
 * tests/tl/test_math.cpp), branch-free so that loops vectorize: |x| < 0.921875 as
 * x (2 / sqrt(pi) + x^2 P(x^2)) with 2 / sqrt(pi)'s low part carried; above, 1 - exp(-x^2 + R(x))
 * with R fitted to log(erfc(x)) + x^2 (no cancellation in the exponent), 1 from x = 4 on. On GPUs,
 * CUDA's erff (2 ulp). */
TRT_INLINE float erf(float x) {
#if defined(__CUDACC__)
  return TRT_ERFF(x);
#else
  const float a = u2f(f2u(x) & 0x7fffffffu), s = a * a;
  float p = 8.42981753423758e-05f;
  p = TRT_FMAF(p, s, -8.158957541245913e-04f);
  p = TRT_FMAF(p, s, 5.202723388429689e-03f);
  p = TRT_FMAF(p, s, -2.6860234162591104e-02f);
  p = TRT_FMAF(p, s, 1.1283715191287783e-01f);
  p = TRT_FMAF(p, s, -3.7612635639218545e-01f);
  const float corr = TRT_FMAF(s, p, -5.863538343753305e-08f);
  const float small = TRT_FMAF(a, 1.128379225730896f, a * corr);
  const float c = a < 4.0f ? a : 4.0f, t = c - 2.4609375f;
  float q = -5.14535125057491e-08f;
  q = TRT_FMAF(q, t, -3.9900686088088575e-08f);
  q = TRT_FMAF(q, t, 1.917797836731909e-06f);
  q = TRT_FMAF(q, t, -1.3600583662356656e-05f);
  q = TRT_FMAF(q, t, 8.047543989419734e-05f);
  q = TRT_FMAF(q, t, -4.3909572406874476e-04f);
  q = TRT_FMAF(q, t, 2.249547703765452e-03f);
  q = TRT_FMAF(q, t, -1.1203076619754433e-02f);
  q = TRT_FMAF(q, t, 5.739876219621038e-02f);
  q = TRT_FMAF(q, t, -3.571142626864488e-01f);
  q = TRT_FMAF(q, t, -1.5429524167934499f);
  q = TRT_FMAF(-c, c, q);
  const float big = 1.0f - exp_poly(q);
  const float r = u2f(f2u(a < 0.921875f ? small : big) | (f2u(x) & 0x80000000u));
  return x != x ? x : r;
#endif
}
/** One term of a tf32x3 dot (Triton's `input_precision="tf32x3"`): each input splits into a tf32
 * high part and a tf32 remainder, and three tf32 products are accumulated, small ones first:
 * `c + a_hi*b_lo + a_lo*b_hi + a_hi*b_hi` (the a_lo*b_lo term, ~2^-22 relative, is dropped). */
TRT_INLINE float fma_tf32x3(float a, float b, float c) {
  const float a_hi = to_tf32(a), b_hi = to_tf32(b);
  const float a_lo = to_tf32(a - a_hi), b_lo = to_tf32(b - b_hi);
  c = TRT_FMAF(a_hi, b_lo, c);
  c = TRT_FMAF(a_lo, b_hi, c);
  return TRT_FMAF(a_hi, b_hi, c);
}
TRT_INLINE float fma(float a, float b, float c) {
  return TRT_FMAF(a, b, c);
}

TRT_INLINE float sqrt(float x) {
  return TRT_SQRTF(x);
}
TRT_INLINE float rsqrt(float x) {
  return 1.0f / TRT_SQRTF(x);
}
TRT_INLINE float abs(float x) {
  return u2f(f2u(x) & 0x7fffffffu);
}

// ---- math: float64 (rarely on the hot path: libm through builtins; CUDA's math library on GPUs)
// ----------------------------------
#if defined(__CUDACC__)
#define TRT_F64(name, cuda)          \
  TRT_INLINE double name(double x) { \
    return ::cuda(x);                \
  }
TRT_F64(exp, exp)
TRT_F64(log, log)
TRT_F64(sin, sin)
TRT_F64(cos, cos)
TRT_F64(sqrt, sqrt)
TRT_F64(rsqrt, rsqrt)
TRT_F64(abs, fabs)
TRT_F64(exp2, exp2)
TRT_F64(log2, log2)
TRT_F64(floor, floor)
TRT_F64(ceil, ceil)
TRT_F64(erf, erf)
TRT_F64(tanh, tanh)
#undef TRT_F64
TRT_INLINE double fma(double a, double b, double c) {
  return ::fma(a, b, c);
}
#else
TRT_INLINE double exp(double x) {
  return __builtin_exp(x);
}
TRT_INLINE double log(double x) {
  return __builtin_log(x);
}
TRT_INLINE double sin(double x) {
  return __builtin_sin(x);
}
TRT_INLINE double cos(double x) {
  return __builtin_cos(x);
}
TRT_INLINE double sqrt(double x) {
  return __builtin_sqrt(x);
}
TRT_INLINE double rsqrt(double x) {
  return 1.0 / __builtin_sqrt(x);
}
TRT_INLINE double abs(double x) {
  return __builtin_fabs(x);
}
TRT_INLINE double exp2(double x) {
  return __builtin_exp2(x);
}
TRT_INLINE double log2(double x) {
  return __builtin_log2(x);
}
TRT_INLINE double floor(double x) {
  return __builtin_floor(x);
}
TRT_INLINE double ceil(double x) {
  return __builtin_ceil(x);
}
TRT_INLINE double erf(double x) {
  return __builtin_erf(x);
}
TRT_INLINE double tanh(double x) {
  return __builtin_tanh(x);
}
TRT_INLINE double fma(double a, double b, double c) {
  return __builtin_fma(a, b, c);
}

#endif  // __CUDACC__

// ---- math: the platform's math library (glibc on the CPU, CUDA's on GPUs), float and double:
// Triton's tl.math / libdevice functions without a polynomial of ours yet. Within the ulps
// docs/kernels.md lists; not bit-equal across backends, and not vectorized on the CPU.
#if defined(__CUDACC__)
#define TRT_LIBM(name)               \
  TRT_INLINE float name(float x) {   \
    return ::name##f(x);             \
  }                                  \
  TRT_INLINE double name(double x) { \
    return ::name(x);                \
  }
#else
#define TRT_LIBM(name)               \
  TRT_INLINE float name(float x) {   \
    return __builtin_##name##f(x);   \
  }                                  \
  TRT_INLINE double name(double x) { \
    return __builtin_##name(x);      \
  }
#endif
TRT_LIBM(asin)
TRT_LIBM(acos)
TRT_LIBM(atan)
TRT_LIBM(sinh)
TRT_LIBM(cosh)
TRT_LIBM(asinh)
TRT_LIBM(acosh)
TRT_LIBM(atanh)
TRT_LIBM(expm1)
TRT_LIBM(log1p)
TRT_LIBM(log10)
TRT_LIBM(cbrt)
TRT_LIBM(erfc)
TRT_LIBM(trunc)
TRT_LIBM(round)
TRT_LIBM(rint)
TRT_LIBM(tan)
TRT_LIBM(lgamma)
TRT_LIBM(tgamma)
TRT_LIBM(nearbyint)
#undef TRT_LIBM
#if defined(__CUDACC__)
#define TRT_LIBM2(name)                        \
  TRT_INLINE float name(float a, float b) {    \
    return ::name##f(a, b);                    \
  }                                            \
  TRT_INLINE double name(double a, double b) { \
    return ::name(a, b);                       \
  }
#else
#define TRT_LIBM2(name)                        \
  TRT_INLINE float name(float a, float b) {    \
    return __builtin_##name##f(a, b);          \
  }                                            \
  TRT_INLINE double name(double a, double b) { \
    return __builtin_##name(a, b);             \
  }
#endif
TRT_LIBM2(pow)
TRT_LIBM2(atan2)
TRT_LIBM2(hypot)
TRT_LIBM2(remainder)
TRT_LIBM2(nextafter)
#undef TRT_LIBM2

/** x * 2^n with one rounding; n arrives converted to x's float type (ir::BinaryKind::Ldexp), and
 * beyond +-400 (+-2200 for double) every finite x is already 0 or infinite. */
TRT_INLINE int ldexp_exponent(double n, double lim) {
  return n != n ? 0 : (int)(n < -lim ? -lim : (n > lim ? lim : n));
}
#if defined(__CUDACC__)
TRT_INLINE float ldexp(float x, float n) {
  return ::ldexpf(x, ldexp_exponent(n, 400.0));
}
TRT_INLINE double ldexp(double x, double n) {
  return ::ldexp(x, ldexp_exponent(n, 2200.0));
}
/** 10^x. */
TRT_INLINE float exp10(float x) {
  return ::exp10f(x);
}
TRT_INLINE double exp10(double x) {
  return ::exp10(x);
}
/** The inverse of erf on (-1, 1) (+-inf at +-1, NaN outside). */
TRT_INLINE float erfinv(float x) {
  return ::erfinvf(x);
}
TRT_INLINE double erfinv(double x) {
  return ::erfinv(x);
}
#else
TRT_INLINE float ldexp(float x, float n) {
  return __builtin_ldexpf(x, ldexp_exponent(n, 400.0));
}
TRT_INLINE double ldexp(double x, double n) {
  return __builtin_ldexp(x, ldexp_exponent(n, 2200.0));
}
/** 10^x: the C library's pow in double (within 1 ulp of double), rounded once for float. */
TRT_INLINE float exp10(float x) {
  return (float)__builtin_pow(10.0, (double)x);
}
TRT_INLINE double exp10(double x) {
  return __builtin_pow(10.0, x);
}
/** The inverse of erf on (-1, 1) (+-inf at +-1, NaN outside), in double: Giles's single-precision
 * approximation ("Approximating the erfinv function", 2010) as the first guess, then Newton steps
 * on erf(y) = |x| where |x| <= 1/2, and on log(erfc(y)) = log(1 - |x|) beyond (1 - |x| is exact
 * there, and the logarithm keeps the step well conditioned out to 1 - 2^-53). Measured: 1.3 ulp
 * of double over (-1, 1), so the float version is correctly rounded but for double rounding. */
TRT_INLINE double erfinv(double x) {
  const double a = __builtin_fabs(x);
  if (!(a < 1.0)) return a == 1.0 ? __builtin_copysign(TRT_INF(), x) : TRT_NAN();
  double w = -__builtin_log((1.0 - a) * (1.0 + a)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = __builtin_sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double y = p * a;
  const double lt = a > 0.5 ? __builtin_log(1.0 - a) : 0.0;
  for (int i = 0; i < 4; ++i) {
    const double d = 1.1283791670955126 * __builtin_exp(-y * y);  // erf'(y)
    double step;
    if (a <= 0.5) {
      step = (__builtin_erf(y) - a) / d;
    } else {
      const double c = __builtin_erfc(y);
      step = -(__builtin_log(c) - lt) * c / d;
    }
    y -= step;
    if (__builtin_fabs(step) <= 1e-17 * __builtin_fabs(y)) break;
  }
  return __builtin_copysign(y, x);
}
TRT_INLINE float erfinv(float x) {
  return (float)erfinv((double)x);
}
#endif

// Triton's libdevice fast variants: the name, the accurate function, CUDA's fast intrinsic. On
// GPUs float32 takes the intrinsic (its documented error bounds, larger than the accurate
// function's); the CPU, the interpreter and float64 take the accurate function.
#if defined(__CUDACC__)
/** 2^x by the hardware's approximation (`ex2.approx.f32`: what Triton's float32 `exp2` compiles
 * to; relative error about 2^-22, subnormal results kept). */
TRT_INLINE float ex2_approx(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#endif
#define TRT_FAST_FUNCTIONS(X)    \
  X(fast_exp, exp, __expf)       \
  X(fast_exp2, exp2, ex2_approx) \
  X(fast_exp10, exp10, __exp10f) \
  X(fast_log, log, __logf)       \
  X(fast_log2, log2, __log2f)    \
  X(fast_log10, log10, __log10f) \
  X(fast_sin, sin, __sinf)       \
  X(fast_cos, cos, __cosf)       \
  X(fast_tan, tan, __tanf)
#if defined(__CUDACC__)
#define TRT_FAST_FLOAT(name, accurate, intrinsic) \
  TRT_INLINE float name(float x) {                \
    return intrinsic(x);                          \
  }
#else
#define TRT_FAST_FLOAT(name, accurate, intrinsic) \
  TRT_INLINE float name(float x) {                \
    return accurate(x);                           \
  }
#endif
#define TRT_FAST_DOUBLE(name, accurate, intrinsic) \
  TRT_INLINE double name(double x) {               \
    return accurate(x);                            \
  }
TRT_FAST_FUNCTIONS(TRT_FAST_FLOAT)
TRT_FAST_FUNCTIONS(TRT_FAST_DOUBLE)
#undef TRT_FAST_FLOAT
#undef TRT_FAST_DOUBLE
#undef TRT_FAST_FUNCTIONS
TRT_INLINE float fast_pow(float a, float b) {
#if defined(__CUDACC__)
  return __powf(a, b);
#else
  return pow(a, b);
#endif
}
TRT_INLINE double fast_pow(double a, double b) {
  return pow(a, b);
}
TRT_INLINE float fast_dividef(float a, float b) {
#if defined(__CUDACC__)
  return __fdividef(a, b);
#else
  return a / b;
#endif
}
TRT_INLINE double fast_dividef(double a, double b) {
  return a / b;
}

/** A gather's index clamped into [0, n): an index out of range reads the nearest element instead
 * of memory outside the tile (Triton leaves it undefined; the interpreter reports it). */
TRT_INLINE int32_t gather_index(int64_t i, int64_t n) {
  return (int32_t)(i < 0 ? 0 : (i >= n ? n - 1 : i));
}

/** An atomic float update's new value (kind: 0 add, 1 max, 2 min, 6 xchg; ir::AtomicKind): max
 * and min as tl.maximum / tl.minimum (a NaN operand loses). Every backend's atomics use it. */
template <class T>
TRT_INLINE T rmw_value(int kind, T old, T v) {
  switch (kind) {
    case 0:
      return (T)(old + v);
    case 1:
      return fmax_num(old, v);
    case 2:
      return fmin_num(old, v);
    default:
      return v;  // xchg
  }
}

}  // namespace trt
