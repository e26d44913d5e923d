// Contiguous float32 (and float16 / bfloat16, through float rows) transcendental pointwise ops
// through the tile runtime's math (trt::exp, trt::tanh, ...: the functions compiled kernels call,
// each with its ulp contract in trt/scalar.h) in loops cloned for AVX-512, AVX2 and baseline
// x86-64, instead of one libm call per element. The formulas are the functors'
// (pointwise_functors.h) with trt's math, so an eager op and the same op in a generated kernel
// agree.
#include <algorithm>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)  // as TS_ROW_CLONES
#include <immintrin.h>
#endif

#include "ops/cpu_loops.h"
#include "ops/cpu_rows.h"
#include "ops/pointwise.h"
#include "ops/pointwise_functors.h"
#include "runtime/thread_pool.h"
#include "tessera/trt/scalar.h"

namespace tessera::ops_detail {
namespace {

// One op over [0, n): a switch outside the loop, a branch-free body inside.
TS_ROW_CLONES void unary_f32(PwOp op, const float* x, float* o, int64_t n) {
  switch (op) {
    case PwOp::Exp:
      for (int64_t i = 0; i < n; ++i) o[i] = trt::exp(x[i]);
      return;
    case PwOp::Exp2:
      for (int64_t i = 0; i < n; ++i) o[i] = trt::exp2(x[i]);
      return;
    case PwOp::Log:
      for (int64_t i = 0; i < n; ++i) o[i] = trt::log(x[i]);
      return;
    case PwOp::Log2:
      for (int64_t i = 0; i < n; ++i) o[i] = trt::log2(x[i]);
      return;
    case PwOp::Sin:
      for (int64_t i = 0; i < n; ++i) o[i] = trt::sin(x[i]);
      return;
    case PwOp::Cos:
      for (int64_t i = 0; i < n; ++i) o[i] = trt::cos(x[i]);
      return;
    case PwOp::Tanh:
      for (int64_t i = 0; i < n; ++i) o[i] = trt::tanh(x[i]);
      return;
    case PwOp::Sigmoid:
      for (int64_t i = 0; i < n; ++i) o[i] = 1.0f / (1.0f + trt::exp(-x[i]));
      return;
    case PwOp::Silu:
      for (int64_t i = 0; i < n; ++i) o[i] = x[i] / (1.0f + trt::exp(-x[i]));
      return;
    case PwOp::Erf:
      for (int64_t i = 0; i < n; ++i) o[i] = trt::erf(x[i]);
      return;
    case PwOp::Gelu:
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        o[i] = 0.5f * v * (1.0f + trt::erf(v * 0.70710678118654752440f));
      }
      return;
    case PwOp::GeluTanh:  // (pw::GeluTanh's form)
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        o[i] = v / (1.0f + trt::exp(v * (-1.5957691216057308f + -0.07135481627260025f * v * v)));
      }
      return;
    default:
      return;
  }
}

// gelu_backward over [0, n): o = g * GELU'(x), the functors' formulas with trt's math.
TS_ROW_CLONES void gelu_backward_f32(bool tanh_form, const float* g, const float* x, float* o,
                                     int64_t n) {
  if (tanh_form) {  // (pw::GeluTanhBackward's form)
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[i], v2 = v * v;
      const float e = trt::exp(v * (-1.5957691216057308f + -0.07135481627260025f * v2));
      const float s = 1.0f / (1.0f + e), q = e < 3.0e38f ? e * s : 1.0f;
      o[i] = g[i] * (s + v * (s * q) * (1.5957691216057308f + 0.21406444881780076f * v2));
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float cdf = 0.5f * (1.0f + trt::erf(v * 0.70710678118654752440f));
    const float pdf = trt::exp(-0.5f * v * v) * 0.39894228040143267794f;
    o[i] = g[i] * (cdf + v * pdf);
  }
}

}  // namespace

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
namespace {
// float16 rows by F16C's vcvtph2ps / vcvtps2ph (x86-64-v3; 8 lanes; AVX-512's 16-lane forms
// below where the machine has them), with every NaN given the library's bits: to float the
// hardware quiets a signalling NaN where the library keeps the payload as it is; to float16 it
// keeps the payload where the library makes every NaN 0x7e00 with its sign. Everything else
// (rounding to nearest even, subnormals, overflow to infinity) is the same conversion
// (SpecialValues.NarrowFloatConversionsOfContiguousTensorsMatchTheScalarOnes checks every
// pattern). The software forms took a dozen integer operations an element.
bool have_f16c() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return ok;
}
__attribute__((target("avx2,f16c"))) void half_row_to_float_f16c(const uint16_t* in, float* out,
                                                                 int64_t n) {
  const __m256i mag_mask = _mm256_set1_epi32(0x7fff), inf = _mm256_set1_epi32(0x7c00);
  const __m256i sign_mask = _mm256_set1_epi32(0x8000), man_mask = _mm256_set1_epi32(0x3ff);
  const __m256i exp_all = _mm256_set1_epi32(0x7f800000);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m256 f = _mm256_cvtph_ps(h);
    const __m256i w = _mm256_cvtepu16_epi32(h);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(w, mag_mask), inf);
    const __m256i special = _mm256_or_si256(
        _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(w, sign_mask), 16), exp_all),
        _mm256_slli_epi32(_mm256_and_si256(w, man_mask), 13));
    _mm256_storeu_ps(out + i,
                     _mm256_blendv_ps(f, _mm256_castsi256_ps(special), _mm256_castsi256_ps(nan)));
  }
  for (; i < n; ++i) out[i] = trt::half_to_float(in[i]);
}
__attribute__((target("avx2,f16c"))) void float_row_to_half_f16c(const float* in, uint16_t* out,
                                                                 int64_t n) {
  const __m128i mag_mask = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
  const __m128i sign_mask = _mm_set1_epi16(static_cast<int16_t>(0x8000));
  const __m128i qnan = _mm_set1_epi16(0x7e00);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, mag_mask), inf);
    const __m128i canon = _mm_or_si128(_mm_and_si128(h, sign_mask), qnan);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_blendv_epi8(h, canon, nan));
  }
  for (; i < n; ++i) out[i] = trt::float_to_half(in[i]);
}

// The same conversions 16 lanes at a time (AVX-512F's vcvtph2ps / vcvtps2ph on zmm): a block with
// a NaN (rare; found by one compare into a mask) takes the library's scalar conversion, so the
// bits are the library's without a fix-up per lane. (The 8-lane forms' fix-ups were most of
// float16 arithmetic's time: `x + x` at 0.4x PyTorch.)
bool have_avx512() {
  static const bool ok = __builtin_cpu_supports("avx512f");
  return ok;
}
__attribute__((target("avx512f"))) void half_row_to_float_avx512(const uint16_t* in, float* out,
                                                                 int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // (The zero-masked forms: the plain ones' undefined source trips GCC 12's
    // -Wmaybe-uninitialized.)
    const __m512 f =
        _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    if (__builtin_expect(_mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q) != 0, 0)) {
      for (int l = 0; l < 16; ++l) out[i + l] = trt::half_to_float(in[i + l]);
    } else {
      _mm512_storeu_ps(out + i, f);
    }
  }
  for (; i < n; ++i) out[i] = trt::half_to_float(in[i]);
}
__attribute__((target("avx512f"))) void float_row_to_half_avx512(const float* in, uint16_t* out,
                                                                 int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 f = _mm512_loadu_ps(in + i);
    if (__builtin_expect(_mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q) != 0, 0)) {
      for (int l = 0; l < 16; ++l) out[i + l] = trt::float_to_half(in[i + l]);
    } else {
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(out + i),
          _mm512_maskz_cvtps_ph(0xffff, f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  }
  for (; i < n; ++i) out[i] = trt::float_to_half(in[i]);
}
}  // namespace
#endif

TS_ROW_CLONES void narrow_row_to_float(const uint16_t* in, float* out, int64_t n, bool bf16) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if (!bf16 && have_avx512()) return half_row_to_float_avx512(in, out, n);
  if (!bf16 && have_f16c()) return half_row_to_float_f16c(in, out, n);
#endif
  if (bf16) {
    for (int64_t i = 0; i < n; ++i) out[i] = trt::bf16_to_float(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = trt::half_to_float(in[i]);
  }
}
TS_ROW_CLONES void float_row_to_narrow(const float* in, uint16_t* out, int64_t n, bool bf16) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if (!bf16 && have_avx512()) return float_row_to_half_avx512(in, out, n);
  if (!bf16 && have_f16c()) return float_row_to_half_f16c(in, out, n);
#endif
  if (bf16) {
    for (int64_t i = 0; i < n; ++i) out[i] = trt::float_to_bf16(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = trt::float_to_half(in[i]);
  }
}

namespace {
bool has_fast_unary(PwOp op) {
  switch (op) {
    case PwOp::Exp:
    case PwOp::Exp2:
    case PwOp::Log:
    case PwOp::Log2:
    case PwOp::Sin:
    case PwOp::Cos:
    case PwOp::Tanh:
    case PwOp::Sigmoid:
    case PwOp::Silu:
    case PwOp::Erf:
    case PwOp::Gelu:
    case PwOp::GeluTanh:
      return true;
    default:
      return false;
  }
}
}  // namespace

bool fast_unary_f32(PwOp op, const float* x, float* o, int64_t n) {
  if (!has_fast_unary(op)) return false;
  runtime::parallel_for(0, n, cpu::kGrain,
                        [&](int64_t b, int64_t e) { unary_f32(op, x + b, o + b, e - b); });
  return true;
}

bool fast_unary_narrow(PwOp op, const uint16_t* x, uint16_t* o, int64_t n, bool bf16) {
  if (!has_fast_unary(op)) return false;
  runtime::parallel_for(0, n, cpu::kGrain, [&](int64_t b, int64_t e) {
    constexpr int64_t kStep = 2048;  // a float buffer in L1
    float buf[kStep];
    for (int64_t i = b; i < e; i += kStep) {
      const int64_t len = std::min(kStep, e - i);
      narrow_row_to_float(x + i, buf, len, bf16);
      unary_f32(op, buf, buf, len);
      float_row_to_narrow(buf, o + i, len, bf16);
    }
  });
  return true;
}

bool has_fast_binary(PwOp op) {
  return op == PwOp::GeluBackward || op == PwOp::GeluTanhBackward;
}

bool fast_binary_f32(PwOp op, const float* a, const float* b, float* o, int64_t n) {
  if (!has_fast_binary(op)) return false;
  const bool tanh_form = op == PwOp::GeluTanhBackward;
  runtime::parallel_for(0, n, cpu::kGrain, [&](int64_t s, int64_t e) {
    gelu_backward_f32(tanh_form, a + s, b + s, o + s, e - s);
  });
  return true;
}

namespace {
// `o = f(a, b)` on float16 / bfloat16 bits through float rows: blocks of 1024 converted, computed
// by `f(fa, fb, fo, len)` (fo may be fa), rounded back, over the thread pool.
template <class F>
void through_float_rows(const uint16_t* a, const uint16_t* b, uint16_t* o, int64_t n, bool bf16,
                        const F& f) {
  runtime::parallel_for(0, n, cpu::kGrain, [&](int64_t s, int64_t e) {
    constexpr int64_t kStep = 1024;  // two float buffers in L1
    float fa[kStep], fb[kStep];
    for (int64_t i = s; i < e; i += kStep) {
      const int64_t len = std::min(kStep, e - i);
      narrow_row_to_float(a + i, fa, len, bf16);
      narrow_row_to_float(b + i, fb, len, bf16);
      f(fa, fb, fa, len);
      float_row_to_narrow(fa, o + i, len, bf16);
    }
  });
}
}  // namespace

bool fast_binary_narrow(PwOp op, const uint16_t* a, const uint16_t* b, uint16_t* o, int64_t n,
                        bool bf16) {
  if (!has_fast_binary(op)) return false;
  const bool tanh_form = op == PwOp::GeluTanhBackward;
  through_float_rows(a, b, o, n, bf16,
                     [&](const float* fa, const float* fb, float* fo, int64_t len) {
                       gelu_backward_f32(tanh_form, fa, fb, fo, len);
                     });
  return true;
}

namespace {
// a op b on float rows with the functors' arithmetic (what the library's loops compute for
// float16 / bfloat16 in float), a switch outside the loop.
TS_ROW_CLONES void arith_f32(PwOp op, const float* a, const float* b, float* o, int64_t n) {
  switch (op) {
    case PwOp::Add:
      for (int64_t i = 0; i < n; ++i) o[i] = pw::Add()(a[i], b[i]);
      return;
    case PwOp::Sub:
      for (int64_t i = 0; i < n; ++i) o[i] = pw::Sub()(a[i], b[i]);
      return;
    case PwOp::Mul:
      for (int64_t i = 0; i < n; ++i) o[i] = pw::Mul()(a[i], b[i]);
      return;
    default:
      for (int64_t i = 0; i < n; ++i) o[i] = pw::Div()(a[i], b[i]);
      return;
  }
}
}  // namespace

bool fast_arith_narrow(PwOp op, const uint16_t* a, const uint16_t* b, uint16_t* o, int64_t n,
                       bool bf16) {
  if (op != PwOp::Add && op != PwOp::Sub && op != PwOp::Mul && op != PwOp::Div) return false;
  through_float_rows(a, b, o, n, bf16,
                     [&](const float* fa, const float* fb, float* fo, int64_t len) {
                       arith_f32(op, fa, fb, fo, len);
                     });
  return true;
}

}  // namespace tessera::ops_detail
