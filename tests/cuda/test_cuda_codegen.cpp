// The CUDA backend's code generation (issue 14): a catalog of kernels over the language's surface.
// Everywhere (label nvrtc): each kernel is traced on the CPU, its CUDA source generated and
// compiled by NVRTC for sm_90 (no GPU needed). With a GPU (label gpu): each kernel runs on CUDA
// tensors and on CPU tensors from the same fresh random inputs, outputs poisoned first, and the
// results agree (bit for bit for elementwise math, within stated tolerances for reduction order).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

#include "backend/cuda/cuda_backend.h"
#include "runtime/cuda/nvrtc.h"
#include "tessera/autotune.h"
#include "tessera/compile.h"
#include "tessera/tessera.h"
#include "tessera/testing.h"
#include "tessera/tl.h"
#include "testing.h"
#include "tl/jit.h"
#include "tl_testing.h"

using namespace tessera;
using namespace tessera::testing;
namespace tl = tessera::tl;

namespace {

// ---- the catalog -------------------------------------------------------------------------------

TL_JIT(cg_add, tl::Ptr x, tl::Ptr y, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto mask = offs < n;
  tl::store(out + offs, tl::load(x + offs, mask) + tl::load(y + offs, mask), mask);
}

TL_JIT(cg_softmax, tl::Ptr x, tl::Ptr out, tl::Int n_cols, tl::Int stride, tl::Const BLOCK) {
  auto row = tl::program_id(0);
  auto cols = tl::arange(0, BLOCK);
  auto mask = cols < n_cols;
  auto v = tl::load(x + row * stride + cols, mask, -INFINITY);
  auto e = tl::exp(v - tl::max(v, 0));
  tl::store(out + row * stride + cols, e / tl::sum(e, 0), mask);
}

// TF32: float32 operands at tf32 precision (tensor cores, mma.sync.m16n8k8), else ieee (CUDA
// cores; 16-bit operands take tensor cores either way).
TL_JIT(cg_matmul, tl::Ptr a, tl::Ptr b, tl::Ptr c, tl::Int M, tl::Int N, tl::Int K, tl::Const BM,
       tl::Const BN, tl::Const BK, tl::Const TF32) {
  auto rm = tl::program_id(0) * BM + tl::arange(0, BM);
  auto rn = tl::program_id(1) * BN + tl::arange(0, BN);
  auto rk = tl::arange(0, BK);
  tl::Var acc = tl::zeros({BM, BN}, tl::float32);
  tl::range(0, K, BK, [&](tl::Tile k0) {
    auto ka = k0 + rk;
    auto ta = tl::load(a + rm[{tl::_, tl::None}] * K + ka[{tl::None, tl::_}],
                       (rm[{tl::_, tl::None}] < M) & (ka[{tl::None, tl::_}] < K), 0.0f);
    auto tb = tl::load(b + ka[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}],
                       (ka[{tl::_, tl::None}] < K) & (rn[{tl::None, tl::_}] < N), 0.0f);
    acc = TF32.int_value() ? tl::dot(ta, tb, tl::Operand(acc))
                           : tl::dot(ta, tb, tl::Operand(acc), ieee());
  });
  tl::store(c + rm[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}], acc,
            (rm[{tl::_, tl::None}] < M) & (rn[{tl::None, tl::_}] < N));
}

// Triton's tutorial 03 addressing: row and column offsets wrapped with `% M` / `% N` (every
// block reads in bounds, the last one wraps), pointer tiles advanced with `+=`, the K tail masked.
// The CUDA backend versions the operand copies on the wrap (the B tile's 16-byte copies in every
// block that does not wrap; element by element with the remainder in the one that does).
TL_JIT(cg_mm_wrap, tl::Ptr a, tl::Ptr b, tl::Ptr c, tl::Int M, tl::Int N, tl::Int K, tl::Int LDC,
       tl::Const BM, tl::Const BN, tl::Const BK) {
  auto offs_am = (tl::program_id(0) * BM + tl::arange(0, BM)) % M;
  auto offs_bn = (tl::program_id(1) * BN + tl::arange(0, BN)) % N;
  auto rk = tl::arange(0, BK);
  tl::Var a_ptrs = a + (offs_am[{tl::_, tl::None}] * K + rk[{tl::None, tl::_}]);
  tl::Var b_ptrs = b + (rk[{tl::_, tl::None}] * N + offs_bn[{tl::None, tl::_}]);
  tl::Var acc = tl::zeros({BM, BN}, tl::float32);
  tl::range(0, tl::cdiv(K, BK), [&](tl::Tile k) {
    auto ta = tl::load(a_ptrs, rk[{tl::None, tl::_}] < K - k * BK, 0.0f);
    auto tb = tl::load(b_ptrs, rk[{tl::_, tl::None}] < K - k * BK, 0.0f);
    acc = tl::dot(ta, tb, tl::Operand(acc));
    a_ptrs += BK;
    b_ptrs += BK * N;
  });
  // Every column of the last block is kept (C is LDC >= the blocks' columns wide): its columns
  // past N are products with B's first columns, read through the wrap.
  auto rm = tl::program_id(0) * BM + tl::arange(0, BM);
  auto rn = tl::program_id(1) * BN + tl::arange(0, BN);
  tl::store(c + rm[{tl::_, tl::None}] * LDC + rn[{tl::None, tl::_}], acc,
            rm[{tl::_, tl::None}] < M);
}

// A K window that wraps: iteration k reads columns (k0 + rk) % K of A and rows of B, so the
// last window (K not a multiple of BK) reads the first columns again. The pointers' dependence on
// the iteration is not a uniform shift: the pipeline's copies keep their per-iteration addresses.
TL_JIT(cg_mm_kwrap, tl::Ptr a, tl::Ptr b, tl::Ptr c, tl::Int M, tl::Int N, tl::Int K, tl::Const BM,
       tl::Const BN, tl::Const BK) {
  auto rm = tl::program_id(0) * BM + tl::arange(0, BM);
  auto rn = tl::program_id(1) * BN + tl::arange(0, BN);
  auto rk = tl::arange(0, BK);
  tl::Var acc = tl::zeros({BM, BN}, tl::float32);
  tl::range(0, K, BK, [&](tl::Tile k0) {
    auto ka = (k0 + rk) % K;
    auto ta = tl::load(a + rm[{tl::_, tl::None}] * K + ka[{tl::None, tl::_}]);
    auto tb = tl::load(b + ka[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}]);
    acc = tl::dot(ta, tb, tl::Operand(acc));
  });
  tl::store(c + rm[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}], acc, rm[{tl::_, tl::None}] < M);
}

// x @ w.T (a linear layer's weight, stored [N, K]): B's tile read through its transposed
// strides, K contiguous in memory where the tile's rows are N.
TL_JIT(cg_mm_bt, tl::Ptr a, tl::Ptr w, tl::Ptr c, tl::Int M, tl::Int N, tl::Int K, tl::Const BM,
       tl::Const BN, tl::Const BK) {
  auto rm = tl::program_id(0) * BM + tl::arange(0, BM);
  auto rn = tl::program_id(1) * BN + tl::arange(0, BN);
  auto rk = tl::arange(0, BK);
  tl::Var acc = tl::zeros({BM, BN}, tl::float32);
  tl::range(0, K, BK, [&](tl::Tile k0) {
    auto ka = k0 + rk;
    auto ta = tl::load(a + rm[{tl::_, tl::None}] * K + ka[{tl::None, tl::_}],
                       (rm[{tl::_, tl::None}] < M) & (ka[{tl::None, tl::_}] < K), 0.0f);
    auto tb = tl::load(w + rn[{tl::None, tl::_}] * K + ka[{tl::_, tl::None}],
                       (ka[{tl::_, tl::None}] < K) & (rn[{tl::None, tl::_}] < N), 0.0f);
    acc = tl::dot(ta, tb, tl::Operand(acc));
  });
  tl::store(c + rm[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}], acc,
            (rm[{tl::_, tl::None}] < M) & (rn[{tl::None, tl::_}] < N));
}

// A wrapped gather into registers: out[i] = x[i % n] over whole blocks past n (a broadcast's
// index in a fused kernel): n = 1280 in blocks of 512, so blocks 2 and 7 straddle a multiple of n
// and the others read one period each (blocks 3-6: in the second and third).
TL_JIT(cg_gather_wrap, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  tl::store(out + offs, tl::load(x + offs % n) * 2.0f);
}

// Tensor cores with the accumulator in registers (the Mma layout): tiles of 64 x 64 x 32 over 4
// warps (2 x 2, each 2 x 4 mma tiles: the ldmatrix.x4.trans path), masked M/N/K tails, K runtime
// (a row stride known only as a multiple of 16: vector operand loads), and an epilogue that reads
// a bias at the accumulator's own elements.
TL_JIT(cg_mm_bias, tl::Ptr a, tl::Ptr b, tl::Ptr bias, tl::Ptr c, tl::Int M, tl::Int N, tl::Int K,
       tl::Const BM, tl::Const BN, tl::Const BK) {
  auto rm = tl::program_id(0) * BM + tl::arange(0, BM);
  auto rn = tl::program_id(1) * BN + tl::arange(0, BN);
  auto rk = tl::arange(0, BK);
  tl::Var acc = tl::zeros({BM, BN}, tl::float32);
  tl::range(0, K, BK, [&](tl::Tile k0) {
    auto ka = k0 + rk;
    auto ta = tl::load(a + rm[{tl::_, tl::None}] * K + ka[{tl::None, tl::_}],
                       (rm[{tl::_, tl::None}] < M) & (ka[{tl::None, tl::_}] < K), 0.0f);
    auto tb = tl::load(b + ka[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}],
                       (ka[{tl::_, tl::None}] < K) & (rn[{tl::None, tl::_}] < N), 0.0f);
    acc = tl::dot(ta, tb, tl::Operand(acc));
  });
  auto bv = tl::load(bias + rn, rn < N, 0.0f);
  auto out = tl::maximum(tl::Tile(acc) + bv[{tl::None, tl::_}], 0.0f);
  tl::store(c + rm[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}], out.to(tl::float16),
            (rm[{tl::_, tl::None}] < M) & (rn[{tl::None, tl::_}] < N));
}

// A dot whose result is reduced along its rows (attention's scores: in registers, folded by each
// thread, the quad's lanes and the warps across columns) or its columns (read at other elements:
// the accumulator in shared memory, trt::mma_dot).
TL_JIT(cg_dot_max, tl::Ptr q, tl::Ptr k, tl::Ptr out, tl::Const AXIS) {
  auto r = tl::arange(0, 32), cdim = tl::arange(0, 16);
  auto tq = tl::load(q + r[{tl::_, tl::None}] * 16 + cdim[{tl::None, tl::_}]);
  auto tk = tl::load(k + cdim[{tl::_, tl::None}] * 32 + r[{tl::None, tl::_}]);
  auto s = tl::dot(tq, tk);
  auto m = tl::max(s, static_cast<int>(AXIS.int_value()));
  auto d = AXIS.int_value() == 1 ? s - m[{tl::_, tl::None}] : s - m[{tl::None, tl::_}];
  tl::store(out + r[{tl::_, tl::None}] * 32 + r[{tl::None, tl::_}],
            d + tl::sum(s, 1)[{tl::_, tl::None}]);
}

// Flash attention's loop (FlashAttention-2, as Triton's tutorial 06): q loaded once outside the
// loop (its 16-bit tile copied once), scores on tensor cores with their row max and sum in
// registers, p.to(bf16) @ v into a rescaled accumulator, k and v through the cp.async ring.
TL_JIT(cg_attn, tl::Ptr q, tl::Ptr k, tl::Ptr v, tl::Ptr out, tl::Int n, tl::Const BM, tl::Const BN,
       tl::Const D) {
  auto rm = tl::program_id(0) * BM + tl::arange(0, BM);
  auto rd = tl::arange(0, D);
  // (scaled as the tutorial scales q, exactly: the loop-invariant operand converted straight
  // from global memory into its tile)
  auto tq =
      (tl::load(q + rm[{tl::_, tl::None}] * D + rd[{tl::None, tl::_}]) * 0.5f).to(tl::bfloat16);
  tl::Var acc = tl::zeros({BM, D}, tl::float32);
  tl::Var mi = tl::full({BM}, -INFINITY, tl::float32);
  tl::Var li = tl::zeros({BM}, tl::float32);
  tl::range(0, n, BN, [&](tl::Tile j) {
    auto rn = j + tl::arange(0, BN);
    auto tk = tl::load(k + rd[{tl::_, tl::None}] + rn[{tl::None, tl::_}] * D);  // k^T
    auto sc = tl::dot(tq, tk);
    auto mnew = tl::maximum(tl::Tile(mi), tl::max(sc, 1));
    auto p = tl::exp(sc - mnew[{tl::_, tl::None}]);
    auto alpha = tl::exp(tl::Tile(mi) - mnew);
    li = tl::Tile(li) * alpha + tl::sum(p, 1);
    auto tv = tl::load(v + rn[{tl::_, tl::None}] * D + rd[{tl::None, tl::_}]);
    acc = tl::dot(p.to(tl::bfloat16), tv, tl::Operand(tl::Tile(acc) * alpha[{tl::_, tl::None}]));
    mi = mnew;
  });
  tl::store(out + rm[{tl::_, tl::None}] * D + rd[{tl::None, tl::_}],
            tl::Tile(acc) / tl::Tile(li)[{tl::_, tl::None}]);
}

// Small integers (normal x 1.5, truncated) in bfloat16: products and sums exact in float32.
Tensor small_ints(std::initializer_list<int64_t> shape) {
  return (random_tensor(shape, DType::Float32) * 1.5).to(DType::Int32).to(DType::BFloat16);
}

TL_JIT(cg_math, tl::Ptr x, tl::Ptr h, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  auto v = tl::load(x + offs, m, 1.0f);
  auto hv = tl::load(h + offs, m, 0.0f).to(tl::float32);  // float16 in
  // tessera's own polynomials (trt/scalar.h), the same code on both backends: bit for bit.
  auto r = tl::log(tl::abs(v) + 1.0f) + tl::sin(v) * tl::cos(hv) + tl::tanh(hv) +
           tl::sqrt(tl::abs(v)) + tl::floor(v * 3.0f) + tl::log2(tl::abs(v) + 2.0f) +
           tl::rsqrt(tl::abs(v) + 1.0f) + tl::ceil(v) / v;
  tl::store(out + offs, r, m);
  tl::store(h + offs, (r * 0.25f).to(tl::float16), m);  // float16 out
}

// e^x: the polynomial on the CPU (1 ulp), CUDA's expf on the GPU (2 ulp): within 3 ulp of each
// other; sigmoid through it, 1 / (1 + e^-x), adds two roundings on each side: within 5 ulp
// (an H100 run found 4 at 5.4e-8). 2^x: the polynomial (2 ulp) against CUDA's exp2f (2 ulp).
// Overflow, underflow and subnormal results included.
TL_JIT(cg_math_exp, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  auto v = tl::load(x + offs, m, 1.0f);
  tl::store(out + offs, tl::exp(v), m);
  tl::store(out + n + offs, tl::exp(v * 40.0f), m);
  tl::store(out + 2 * n + offs, tl::sigmoid(v * 8.0f), m);
  tl::store(out + 3 * n + offs, tl::exp2(v * 60.0f), m);
}

// Narrow floats: every float16 bit pattern to float, and float bit patterns (edge cases: NaN
// payloads, infinities, subnormals, halfway points, float16's overflow edge) to float16 and
// bfloat16, directly and through arithmetic. The GPU converts with `cvt` (trt/scalar.h): its bits
// must be the CPU's for every input.
TL_JIT(cg_narrow, tl::Ptr bits, tl::Ptr hbits, tl::Ptr h_out, tl::Ptr b_out, tl::Ptr f_out,
       tl::Ptr r_out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  auto f = tl::bitcast(tl::load(bits + offs, m, 0), tl::float32);
  tl::store(h_out + offs, f.to(tl::float16), m);
  tl::store(b_out + offs, f.to(tl::bfloat16), m);
  tl::store(f_out + offs, tl::bitcast(tl::load(hbits + offs, m, 0), tl::float16).to(tl::float32),
            m);
  // Arithmetic in the narrow types on finite inputs (a NaN's payload after float arithmetic is
  // the hardware's: canonical on the GPU, propagated on the CPU).
  auto finite = tl::where((f == f) & (tl::abs(f) < 6e4f), f, 0.0f);
  auto hb = finite.to(tl::bfloat16), hh = finite.to(tl::float16);
  tl::store(r_out + offs, (hb * hb + hb).to(tl::float32) + (hh * 3.0f).to(tl::float32), m);
}

TL_JIT(cg_erf, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  tl::store(out + offs, tl::erf(tl::load(x + offs, m)), m);  // libm's erf on the CPU, CUDA's here
}

TL_JIT(cg_libm, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  auto v = tl::load(x + offs, m, 0.5f);
  auto s = tl::tanh(v);  // in (-1, 1)
  auto r = tl::asin(s) + tl::acos(s) + tl::atan(v) + tl::sinh(s) + tl::cosh(s) + tl::asinh(v) +
           tl::acosh(tl::abs(v) + 1.0f) + tl::atanh(s * 0.9f) + tl::expm1(s) +
           tl::log1p(tl::abs(v)) + tl::log10(tl::abs(v) + 1.0f) + tl::cbrt(v) + tl::erfc(v) +
           tl::trunc(v * 3.0f) + tl::round(v * 3.0f) + tl::rint(v * 3.0f) +
           tl::pow(tl::abs(v) + 1.0f, s) + tl::atan2(v, s + 2.0f) + tl::hypot(v, s) +
           tl::copysign(v, s) + tl::fmod(v, 0.75f) + tl::fdim(v, s) +
           tl::where(tl::isfinite(v) & ~tl::isnan(v) & ~tl::isinf(v), 1.0f, 0.0f) +
           tl::where(tl::signbit(s), 1.0f, 0.0f);
  tl::store(out + offs, r, m);  // the platform math libraries: within their ulps, not bit for bit
}

TL_JIT(cg_libm2, tl::Ptr x, tl::Ptr out, tl::Ptr big, tl::Ptr ints, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  auto v = tl::load(x + offs, m, 0.5f);
  auto s = tl::tanh(v);  // in (-1, 1)
  auto [fm, fe] = tl::frexp(v);
  auto r = tl::tan(s) + tl::lgamma(tl::abs(v) + 0.5f) + tl::tgamma(s + 2.0f) +
           tl::nearbyint(v * 3.0f) + tl::exp10(s) + tl::erfinv(s * 0.99f) + tl::remainder(v, 0.7f) +
           tl::nextafter(v, s) + tl::ldexp(v, tl::ilogb(s + 3.0f)) + fm +
           fe.to(tl::float32) * 0.125f + tl::fast_exp(s) + tl::fast_exp10(s) + tl::fast_exp2(s) +
           tl::fast_log(tl::abs(v) + 1.0f) + tl::fast_log2(tl::abs(v) + 1.0f) +
           tl::fast_log10(tl::abs(v) + 1.0f) + tl::fast_sin(s) + tl::fast_cos(s) + tl::fast_tan(s) +
           tl::fast_pow(tl::abs(v) + 1.0f, s) + tl::fast_dividef(v, s + 2.0f);
  tl::store(out + offs, r, m);  // the platform math libraries and CUDA's fast intrinsics
  // sin and cos of large arguments: Payne-Hanek, tessera's own code, the same bits everywhere.
  auto w = v * 123457.0f + tl::where(v > 0.0f, 3e37f, 0.0f);
  tl::store(big + offs, tl::sin(w) + tl::cos(w) * 2.0f, m);
  tl::store(ints + offs, tl::ilogb(v), m);
}

TL_JIT(cg_ints, tl::Ptr a, tl::Ptr b, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  auto x = tl::load(a + offs, m, 0);
  auto y = tl::load(b + offs, m, 1);
  auto r = x / y + x % y * 7 + (x << (y & 7)) - (x >> 2) + tl::umulhi(x, y) + (x ^ y) +
           tl::maximum(x, y);
  tl::store(out + offs, r, m);
}

TL_JIT(cg_reduce, tl::Ptr x, tl::Ptr sums, tl::Ptr maxes, tl::Ptr args, tl::Ptr cums, tl::Ptr prods,
       tl::Const R, tl::Const C) {
  auto rr = tl::arange(0, R), cc = tl::arange(0, C);
  auto v = tl::load(x + rr[{tl::_, tl::None}] * C + cc[{tl::None, tl::_}]);
  tl::store(sums + cc, tl::sum(v, 0));   // across rows: a thread per output
  tl::store(maxes + rr, tl::max(v, 1));  // along rows
  tl::store(args + rr, tl::argmax(v, 1));
  tl::store(cums + rr[{tl::_, tl::None}] * C + cc[{tl::None, tl::_}], tl::cumsum(v, 1));
  tl::store(prods + rr,
            tl::reduce(v, 1, [](tl::Tile p, tl::Tile q) { return tl::maximum(p, q) * 0.5f + q; }));
  tl::store(sums + C, tl::sum(v));  // a scalar: one slot for the block
}

// Integer and boolean warp reductions: their combines are conditional expressions (`b > a ? b :
// a`, `a || b`), so a shuffle inside one would run on some lanes only and hang the warp.
TL_JIT(cg_int_reduce, tl::Ptr x, tl::Ptr out, tl::Ptr flags, tl::Int n, tl::Const R, tl::Const C) {
  auto c = tl::arange(0, R * C);
  auto v = tl::load(x + c, c < n, -7);
  tl::store(out + 0, tl::max(v, 0));  // one output: the block's warps, then their partials
  tl::store(out + 1, tl::min(v, 0));
  tl::store(out + 2, tl::xor_sum(v, 0));
  auto w = tl::reshape(v, {R, C});  // a warp per output
  auto rr = tl::arange(0, R);
  tl::store(out + 3 + rr, tl::max(w, 1));
  tl::store(out + 3 + R + rr, tl::min(w, 1));
  tl::store(flags + rr, tl::max(w > 1000, 1));
  tl::store(flags + R + rr, tl::min(w > -1000, 1));
}

TL_JIT(cg_shapes, tl::Ptr x, tl::Ptr out, tl::Const B) {
  auto r = tl::arange(0, B);
  auto t = tl::load(x + r[{tl::_, tl::None}] * B + r[{tl::None, tl::_}]);  // [B, B]
  auto tt = tl::trans(t);
  auto [lo, hi] = tl::split(tl::join(t, tt));
  auto g = tl::gather(hi, (r[{tl::_, tl::None}] + r[{tl::None, tl::_}]) % B, 1);  // rotations
  auto c = tl::cat(tl::flip(lo, 0), tl::flip(g));                                 // [2B, B]
  auto flat = tl::reshape(c, {2 * B * B});
  tl::store(out + tl::arange(0, 2 * B * B), flat * 2.0f);
}

TL_JIT(cg_atomics, tl::Ptr x, tl::Ptr total, tl::Ptr hi, tl::Ptr counts, tl::Int n,
       tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  auto v = tl::load(x + offs, m, 0);
  tl::atomic_add(total, tl::sum(v));       // a scalar atomic: once per program
  tl::atomic_max(hi + (offs % 4), v, m);   // a tile of atomics
  tl::atomic_add(counts + (v & 7), 1, m);  // a histogram
}

TL_JIT(cg_random, tl::Ptr u, tl::Ptr z, tl::Int seed, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  tl::store(u + offs, tl::rand(seed, offs), m);
  tl::store(z + offs, tl::randint(seed, offs), m);
}

TL_JIT(cg_control, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::arange(0, BLOCK);
  tl::Var acc = tl::zeros({BLOCK}, tl::float32);
  tl::Var i = tl::full({}, 0, tl::int32);
  tl::while_([&] { return tl::Tile(i) * BLOCK < n; },
             [&] {
               auto o = tl::Tile(i) * BLOCK + offs;
               acc = tl::Tile(acc) + tl::load(x + o, o < n, 0.0f);
               i = tl::Tile(i) + 1;
             });
  tl::if_(
      n > 100, [&] { tl::store(out + offs, tl::Tile(acc)); },
      [&] { tl::store(out + offs, -tl::Tile(acc)); });
}

TL_JIT(cg_print, tl::Ptr x, tl::Ptr out) {
  auto r = tl::arange(0, 2);
  auto v = tl::load(x + r);
  tl::device_print("v = ", {v, r});  // printf on both backends (the same format)
  tl::store(out + r, v);
}

TL_JIT(cg_pointer_table, tl::Ptr table, tl::Ptr out, tl::Const B) {
  auto g = tl::program_id(0);
  auto src = tl::load(table + g).to(tl::pointer_type(tl::float32));  // an address as a pointer
  auto offs = tl::arange(0, B);
  tl::store(out + g * B + offs,
            tl::load(src + offs) + (src + offs).to(tl::int64).to(tl::float32) * 0.0f);
}

// One catalog entry: runs its kernel on `device` and returns the outputs (on the CPU).
struct Case {
  const char* name;
  const tl::JITFunction* kernel;
  std::function<std::vector<Tensor>(Device)> run;
  double rtol = 0, atol = 0;  ///< 0: bit for bit
};

Tensor on(const Tensor& t, Device d) {
  return d.is_cpu() ? t.clone() : t.to(d);
}
Tensor poisoned(std::initializer_list<int64_t> shape, DType dt, Device d) {
  SymDimVector s;
  for (int64_t v : shape) s.push_back(v);
  Tensor t = empty(s, TensorOptions().dtype(dt));
  poison(t);
  return on(t, d);
}
std::vector<Tensor> to_cpu(std::vector<Tensor> ts) {
  for (auto& t : ts) t = t.cpu();
  return ts;
}

// Where two tensors of one dtype first differ, as bits (a failure message).
std::string first_bit_difference(const Tensor& got, const Tensor& want) {
  const Tensor g = got.contiguous(), w = want.contiguous();
  if (g.numel() != w.numel() || g.dtype() != w.dtype()) return "shapes or dtypes differ";
  const size_t n = static_cast<size_t>(g.numel()), size = g.itemsize();
  const auto* a = static_cast<const unsigned char*>(g.data_ptr());
  const auto* b = static_cast<const unsigned char*>(w.data_ptr());
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(a + i * size, b + i * size, size) == 0) continue;
    uint64_t x = 0, y = 0;
    std::memcpy(&x, a + i * size, size);
    std::memcpy(&y, b + i * size, size);
    char buf[96];
    std::snprintf(buf, sizeof buf, "element %zu: 0x%llx on the GPU, 0x%llx on the CPU", i,
                  static_cast<unsigned long long>(x), static_cast<unsigned long long>(y));
    return buf;
  }
  return "no element differs";
}

std::vector<Case> catalog() {
  // Inputs fixed per catalog (fresh per process: the test seed), shared by both devices.
  static const Tensor xa = random_tensor({3000}, DType::Float32),
                      ya = random_tensor({3000}, DType::Float32),
                      xs = random_tensor({5, 1500}, DType::Float32),
                      ma = random_tensor({70, 100}, DType::Float32),
                      mb = random_tensor({100, 45}, DType::Float32),
                      hh = random_tensor({3000}, DType::Float16),
                      ia = random_tensor({3000}, DType::Int32),
                      ib = random_tensor({3000}, DType::Int32, Domain::NonZero),
                      rx = random_tensor({8, 64}, DType::Float32),
                      sq = random_tensor({16, 16}, DType::Float32),
                      ci = random_tensor({3000}, DType::Int32, Domain::Positive);
  std::vector<Case> c;
  c.push_back({"add", &cg_add, [](Device d) {
                 Tensor out = poisoned({3000}, DType::Float32, d);
                 cg_add[{tl::cdiv(3000, 1024)}](on(xa, d), on(ya, d), out, 3000,
                                                tl::meta("BLOCK", 1024));
                 return to_cpu({out});
               }});
  c.push_back({"softmax", &cg_softmax,
               [](Device d) {
                 Tensor out = poisoned({5, 1500}, DType::Float32, d);
                 cg_softmax[{5}](on(xs, d), out, 1500, 1500, tl::meta("BLOCK", 2048));
                 return to_cpu({out});
               },
               1e-6, 1e-7});
  c.push_back({"matmul", &cg_matmul, [](Device d) {
                 Tensor out = poisoned({70, 45}, DType::Float32, d);
                 cg_matmul[{tl::cdiv(70, 32), tl::cdiv(45, 32)}](
                     on(ma, d), on(mb, d), out, 70, 45, 100, tl::meta("BM", 32), tl::meta("BN", 32),
                     tl::meta("TF32", 0), tl::meta("BK", 16));
                 return to_cpu({out});
               }});
  // float32 operands at tf32 precision: tensor cores (m16n8k8) on tf32-rounded values, with a
  // masked K tail, and the benchmark's tiles with 16-byte cp.async copies through 3 stages.
  c.push_back({"matmul f32 tf32", &cg_matmul,
               [](Device d) {
                 Tensor out = poisoned({70, 45}, DType::Float32, d);
                 cg_matmul[{tl::cdiv(70, 32), tl::cdiv(45, 32)}](
                     on(ma, d), on(mb, d), out, 70, 45, 100, tl::meta("BM", 32), tl::meta("BN", 32),
                     tl::meta("BK", 16), tl::meta("TF32", 1));
                 return to_cpu({out});
               },
               1e-5, 1e-4});
  c.push_back({"matmul f32 tf32 128x128x32, 8 warps", &cg_matmul,
               [](Device d) {
                 static const Tensor a = random_tensor({256, 160}, DType::Float32),
                                     b = random_tensor({160, 128}, DType::Float32);
                 Tensor out = poisoned({256, 128}, DType::Float32, d);
                 cg_matmul[{2, 1}](on(a, d), on(b, d), out, 256, 128, 160, tl::meta("BM", 128),
                                   tl::meta("BN", 128), tl::meta("BK", 32), tl::meta("TF32", 1),
                                   tl::num_warps(8));
                 return to_cpu({out});
               },
               1e-5, 1e-4});
  // bfloat16 operands: the dot runs on tensor cores on the GPU (products exact, float32 sums in
  // the tensor core's order), so it agrees with the CPU within rounding, not bit for bit.
  c.push_back({"matmul bf16", &cg_matmul,
               [](Device d) {
                 static const Tensor a16 = ma.to(DType::BFloat16), b16 = mb.to(DType::BFloat16);
                 Tensor out = poisoned({70, 45}, DType::Float32, d);
                 cg_matmul[{tl::cdiv(70, 32), tl::cdiv(45, 16)}](
                     on(a16, d), on(b16, d), out, 70, 45, 100, tl::meta("BM", 32),
                     tl::meta("BN", 16), tl::meta("TF32", 0), tl::meta("BK", 32));
                 return to_cpu({out});
               },
               1e-5, 1e-4});
  // num_stages 3 (cp.async rings) and 1 (copies in the loop body), K = 80 in 32s: a masked tail.
  for (const int64_t stages : {3, 1}) {
    c.push_back({stages == 3 ? "matmul f16 bias relu" : "matmul f16 bias relu, 1 stage",
                 &cg_mm_bias,
                 [stages](Device d) {
                   static const Tensor a = random_tensor({100, 80}, DType::Float16),
                                       b = random_tensor({80, 72}, DType::Float16),
                                       bias = random_tensor({72}, DType::Float32);
                   Tensor out = poisoned({100, 72}, DType::Float16, d);
                   cg_mm_bias[{tl::cdiv(100, 64), tl::cdiv(72, 64)}](
                       on(a, d), on(b, d), on(bias, d), out, 100, 72, 80, tl::meta("BM", 64),
                       tl::meta("BN", 64), tl::meta("BK", 32), tl::num_stages(stages));
                   return to_cpu({out});
                 },
                 2e-3, 2e-3});  // float16 out: the sums' order may move a rounding by one ulp
  }
  // Tutorial 03's wrapped offsets: N = 80 in blocks of 32 (the third column of blocks wraps),
  // M = 96, K = 80 in 64s (a masked tail); 3 stages.
  c.push_back({"matmul f16 offsets % M, % N", &cg_mm_wrap,
               [](Device d) {
                 static const Tensor a = random_tensor({96, 80}, DType::Float16),
                                     b = random_tensor({80, 80}, DType::Float16);
                 Tensor out = poisoned({96, 96}, DType::Float32, d);
                 cg_mm_wrap[{3, 3}](on(a, d), on(b, d), out, 96, 80, 80, 96, tl::meta("BM", 32),
                                    tl::meta("BN", 32), tl::meta("BK", 64));
                 return to_cpu({out});
               },
               1e-5, 1e-4});
  c.push_back({"matmul bf16 K window % K, 4 warps", &cg_mm_kwrap,
               [](Device d) {
                 static const Tensor a = random_tensor({64, 112}, DType::BFloat16),
                                     b = random_tensor({112, 64}, DType::BFloat16);
                 Tensor out = poisoned({64, 64}, DType::Float32, d);
                 cg_mm_kwrap[{1, 1}](on(a, d), on(b, d), out, 64, 64, 112, tl::meta("BM", 64),
                                     tl::meta("BN", 64), tl::meta("BK", 32), tl::num_warps(4),
                                     tl::num_stages(3));
                 return to_cpu({out});
               },
               1e-5, 1e-4});
  // x @ w.T with M, N and K tails (masks on both operands), 4 warps of one warpgroup
  c.push_back({"matmul bf16 x @ w.T, tails, 4 warps", &cg_mm_bt,
               [](Device d) {
                 static const Tensor a = random_tensor({100, 72}, DType::BFloat16),
                                     w = random_tensor({90, 72}, DType::BFloat16);
                 Tensor out = poisoned({100, 90}, DType::Float32, d);
                 cg_mm_bt[{2, 2}](on(a, d), on(w, d), out, 100, 90, 72, tl::meta("BM", 64),
                                  tl::meta("BN", 64), tl::meta("BK", 32), tl::num_warps(4),
                                  tl::num_stages(3));
                 return to_cpu({out});
               },
               1e-5, 1e-4});
  // x @ w.T aligned (K by 16): w's tile copied down its columns in 16-byte runs into a K-major
  // tile, on wgmma (64 x 64 x 64, 4 warps) and on mma.sync with one 8-column tile per warp
  // (ldmatrix.x2 without .trans; 32 x 16 x 32 over 2 x 2 warps).
  for (const bool wide : {true, false}) {
    c.push_back(
        {wide ? "matmul f16 x @ w.T 64x64x64, 4 warps" : "matmul f16 x @ w.T 32x16x32, 4 warps",
         &cg_mm_bt,
         [wide](Device d) {
           static const Tensor a = random_tensor({128, 192}, DType::Float16),
                               w = random_tensor({136, 192}, DType::Float16);
           Tensor out = poisoned({128, 136}, DType::Float32, d);
           const int64_t bm = wide ? 64 : 32, bn = wide ? 64 : 16;
           cg_mm_bt[{128 / bm, tl::cdiv(136, bn)}](
               on(a, d), on(w, d), out, 128, 136, 192, tl::meta("BM", bm), tl::meta("BN", bn),
               tl::meta("BK", wide ? 64 : 32), tl::num_warps(4), tl::num_stages(3));
           return to_cpu({out});
         },
         1e-5, 1e-4});
  }
  c.push_back({"gather offsets % n", &cg_gather_wrap, [](Device d) {
                 static const Tensor x = random_tensor({1280}, DType::Float32);
                 Tensor out = poisoned({4096}, DType::Float32, d);
                 cg_gather_wrap[{8}](on(x, d), out, 1280, tl::meta("BLOCK", 512));
                 return to_cpu({out});
               }});
  // The benchmark's tiles (128 x 128 x 32 over 8 warps: 2 x 4 warps of 4 x 4 mma tiles, the
  // ldmatrix.x4.trans path, 16-byte cp.async of both operands, 3 stages).
  c.push_back({"matmul bf16 128x128x32, 8 warps", &cg_matmul,
               [](Device d) {
                 static const Tensor a = random_tensor({256, 160}, DType::BFloat16),
                                     b = random_tensor({160, 128}, DType::BFloat16);
                 Tensor out = poisoned({256, 128}, DType::Float32, d);
                 cg_matmul[{2, 1}](on(a, d), on(b, d), out, 256, 128, 160, tl::meta("BM", 128),
                                   tl::meta("BN", 128), tl::meta("TF32", 0), tl::meta("BK", 32),
                                   tl::num_warps(8));
                 return to_cpu({out});
               },
               1e-5, 1e-4});
  // Hopper's wgmma layouts (DotsOnSm90RunOnWgmmaWhereTheirShapesAllow): 4 warps over 128 rows
  // (each warp two row tiles: A's rows stored in warpgroup order), A's rows of 128 bytes; and N =
  // 16, B's rows in the 32-byte swizzle.
  c.push_back({"matmul bf16 128x128x64, 4 warps", &cg_matmul,
               [](Device d) {
                 static const Tensor a = random_tensor({256, 192}, DType::BFloat16),
                                     b = random_tensor({192, 128}, DType::BFloat16);
                 Tensor out = poisoned({256, 128}, DType::Float32, d);
                 cg_matmul[{2, 1}](on(a, d), on(b, d), out, 256, 128, 192, tl::meta("BM", 128),
                                   tl::meta("BN", 128), tl::meta("TF32", 0), tl::meta("BK", 64),
                                   tl::num_warps(4));
                 return to_cpu({out});
               },
               1e-5, 1e-4});
  c.push_back({"matmul f16 128x16x32, 4 warps", &cg_matmul,
               [](Device d) {
                 static const Tensor a = random_tensor({128, 96}, DType::Float16),
                                     b = random_tensor({96, 96}, DType::Float16);
                 Tensor out = poisoned({128, 96}, DType::Float32, d);
                 cg_matmul[{1, 6}](on(a, d), on(b, d), out, 128, 96, 96, tl::meta("BM", 128),
                                   tl::meta("BN", 16), tl::meta("TF32", 0), tl::meta("BK", 32),
                                   tl::num_warps(4));
                 return to_cpu({out});
               },
               1e-5, 1e-4});
  // Small integers in bfloat16 (small_ints): every score and product is exact in float32, so both
  // backends compute the same p bit for bit and the outputs agree to float32 rounding.
  c.push_back({"flash attention bf16", &cg_attn,
               [](Device d) {
                 static const Tensor q = small_ints({64, 32}), k = small_ints({96, 32}),
                                     v = small_ints({96, 32});
                 Tensor out = poisoned({64, 32}, DType::Float32, d);
                 cg_attn[{2}](on(q, d), on(k, d), on(v, d), out, 96, tl::meta("BM", 32),
                              tl::meta("BN", 32), tl::meta("D", 32));
                 return to_cpu({out});
               },
               1e-5, 1e-5});
  // The same on wgmma (64 rows, 4 warps: one warp column), so the row vectors (the running max
  // and sum, the rescale factor) take the row-slice layout: each thread's rows in registers.
  c.push_back({"flash attention bf16, 64 rows", &cg_attn,
               [](Device d) {
                 static const Tensor q = small_ints({128, 32}), k = small_ints({160, 32}),
                                     v = small_ints({160, 32});
                 Tensor out = poisoned({128, 32}, DType::Float32, d);
                 cg_attn[{2}](on(q, d), on(k, d), on(v, d), out, 160, tl::meta("BM", 64),
                              tl::meta("BN", 32), tl::meta("D", 32));
                 return to_cpu({out});
               },
               1e-5, 1e-5});
  // Two row tiles per warp and four steps of K in `p @ v` (p's A fragments from registers at
  // both strides).
  c.push_back({"flash attention bf16, 128 rows x 64, 4 warps", &cg_attn,
               [](Device d) {
                 static const Tensor q = small_ints({256, 32}), k = small_ints({192, 32}),
                                     v = small_ints({192, 32});
                 Tensor out = poisoned({256, 32}, DType::Float32, d);
                 cg_attn[{2}](on(q, d), on(k, d), on(v, d), out, 192, tl::meta("BM", 128),
                              tl::meta("BN", 64), tl::meta("D", 32), tl::num_warps(4));
                 return to_cpu({out});
               },
               1e-5, 1e-5});
  // Two warpgroups (8 warps) over 128 rows, five iterations: p @ v left in flight into the next
  // iteration by default, its ring of 3 stages with 4 slots wrapping around.
  c.push_back({"flash attention bf16, 128 rows x 64, 8 warps", &cg_attn,
               [](Device d) {
                 static const Tensor q = small_ints({256, 32}), k = small_ints({320, 32}),
                                     v = small_ints({320, 32});
                 Tensor out = poisoned({256, 32}, DType::Float32, d);
                 cg_attn[{2}](on(q, d), on(k, d), on(v, d), out, 320, tl::meta("BM", 128),
                              tl::meta("BN", 64), tl::meta("D", 32), tl::num_warps(8));
                 return to_cpu({out});
               },
               1e-5, 1e-5});
  for (const int64_t axis : {1, 0}) {
    c.push_back({axis == 1 ? "dot rowmax bf16" : "dot colmax bf16", &cg_dot_max,
                 [axis](Device d) {
                   static const Tensor q = random_tensor({32, 16}, DType::BFloat16),
                                       k = random_tensor({16, 32}, DType::BFloat16);
                   Tensor out = poisoned({32, 32}, DType::Float32, d);
                   cg_dot_max[{1}](on(q, d), on(k, d), out, tl::meta("AXIS", axis));
                   return to_cpu({out});
                 },
                 1e-5, 1e-4});
  }
  c.push_back({"math", &cg_math, [](Device d) {
                 Tensor out = poisoned({3000}, DType::Float32, d);
                 Tensor h = on(hh, d);
                 cg_math[{tl::cdiv(3000, 512)}](on(xa, d), h, out, 3000, tl::meta("BLOCK", 512));
                 return to_cpu({out, h});
               }});
  c.push_back({"exp, sigmoid", &cg_math_exp,
               [](Device d) {
                 Tensor out = poisoned({12000}, DType::Float32, d);
                 cg_math_exp[{tl::cdiv(3000, 512)}](on(xa, d), out, 3000, tl::meta("BLOCK", 512));
                 return to_cpu({out});
               },
               6e-7, 1e-44});  // 5 ulp (2^-23 each, relative, at worst)
  c.push_back(
      {"narrow floats", &cg_narrow, [](Device d) {
         static const Tensor bits = [] {
           std::vector<int32_t> v;
           const uint32_t edges[] = {
               0x00000000u, 0x80000000u, 0x00000001u, 0x007fffffu, 0x00800000u, 0x33000000u,
               0x33000001u, 0x337fffffu, 0x38800000u, 0x387fe000u, 0x387ff000u, 0x477fe000u,
               0x477fefffu, 0x477ff000u, 0x477fffffu, 0x47800000u, 0x7f7fffffu, 0x7f800000u,
               0xff800000u, 0x7f800001u, 0x7fc00000u, 0xffc00000u, 0x7fbfffffu, 0x7fffffffu,
               0xff812345u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x3f7f8000u, 0x7f7f8000u,
               0x7f7f7fffu, 0xc0018000u, 0x3f801000u, 0x3f803000u, 0x3f802000u};
           for (uint32_t e : edges) v.push_back(static_cast<int32_t>(e));
           uint32_t s = 0x9e3779b9u;  // and a spread of patterns of every exponent
           while (v.size() < 65536) {
             s = s * 1664525u + 1013904223u;
             v.push_back(static_cast<int32_t>(s));
           }
           return from_vector(v).view({65536});
         }();
         static const Tensor hbits = [] {
           std::vector<int16_t> v(65536);
           for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int16_t>(i);
           return from_vector(v);
         }();
         Tensor h = poisoned({65536}, DType::Float16, d), b = poisoned({65536}, DType::BFloat16, d),
                f = poisoned({65536}, DType::Float32, d), r = poisoned({65536}, DType::Float32, d);
         cg_narrow[{64}](on(bits, d), on(hbits, d), h, b, f, r, 65536, tl::meta("BLOCK", 1024));
         return to_cpu({h, b, f, r});
       }});
  c.push_back({"erf", &cg_erf,
               [](Device d) {
                 Tensor out = poisoned({3000}, DType::Float32, d);
                 cg_erf[{3}](on(xa, d), out, 3000, tl::meta("BLOCK", 1024));
                 return to_cpu({out});
               },
               4e-7, 1e-7});
  c.push_back({"libm", &cg_libm,
               [](Device d) {
                 Tensor out = poisoned({3000}, DType::Float32, d);
                 cg_libm[{3}](on(xa, d), out, 3000, tl::meta("BLOCK", 1024));
                 return to_cpu({out});
               },
               2e-6, 2e-6});
  c.push_back({"libm2", &cg_libm2,
               [](Device d) {
                 Tensor out = poisoned({3000}, DType::Float32, d),
                        big = poisoned({3000}, DType::Float32, d),
                        ints = poisoned({3000}, DType::Int32, d);
                 cg_libm2[{3}](on(xa, d), out, big, ints, 3000, tl::meta("BLOCK", 1024));
                 return to_cpu({out, big, ints});
               },
               2e-5, 2e-5});
  c.push_back({"ints", &cg_ints, [](Device d) {
                 Tensor out = poisoned({3000}, DType::Int32, d);
                 cg_ints[{tl::cdiv(3000, 256)}](on(ia, d), on(ib, d), out, 3000,
                                                tl::meta("BLOCK", 256));
                 return to_cpu({out});
               }});
  c.push_back({"reduce", &cg_reduce,
               [](Device d) {
                 Tensor sums = poisoned({65}, DType::Float32, d),
                        maxes = poisoned({8}, DType::Float32, d),
                        args = poisoned({8}, DType::Int32, d),
                        cums = poisoned({8, 64}, DType::Float32, d),
                        prods = poisoned({8}, DType::Float32, d);
                 cg_reduce[{1}](on(rx, d), sums, maxes, args, cums, prods, tl::meta("R", 8),
                                tl::meta("C", 64));
                 return to_cpu({sums, maxes, args, cums, prods});
               },
               1e-5, 1e-5});
  c.push_back({"integer reductions", &cg_int_reduce, [](Device d) {
                 Tensor out = poisoned({3 + 2 * 8}, DType::Int32, d),
                        flags = poisoned({2 * 8}, DType::Bool, d);
                 cg_int_reduce[{1}](on(ia, d), out, flags, 500, tl::meta("R", 8),
                                    tl::meta("C", 64));
                 return to_cpu({out, flags});
               }});
  c.push_back({"shapes", &cg_shapes, [](Device d) {
                 Tensor out = poisoned({512}, DType::Float32, d);
                 cg_shapes[{1}](on(sq, d), out, tl::meta("B", 16));
                 return to_cpu({out});
               }});
  c.push_back({"atomics", &cg_atomics, [](Device d) {
                 Tensor total = on(zeros({1}, TensorOptions().dtype(DType::Int32)), d),
                        hi = on(full({4}, -1000, TensorOptions().dtype(DType::Int32)), d),
                        counts = on(zeros({8}, TensorOptions().dtype(DType::Int32)), d);
                 cg_atomics[{tl::cdiv(3000, 256)}](on(ci, d), total, hi, counts, 3000,
                                                   tl::meta("BLOCK", 256));
                 return to_cpu({total, hi, counts});
               }});
  c.push_back({"random", &cg_random, [](Device d) {
                 Tensor u = poisoned({3000}, DType::Float32, d),
                        z = poisoned({3000}, DType::UInt32, d);
                 cg_random[{tl::cdiv(3000, 1024)}](u, z, int64_t{0x12345678abcdll}, 3000,
                                                   tl::meta("BLOCK", 1024));
                 return to_cpu({u, z});
               }});
  c.push_back({"print", &cg_print, [](Device d) {
                 Tensor out = poisoned({2}, DType::Float32, d);
                 cg_print[{1}](on(xa, d), out);
                 return to_cpu({out});
               }});
  c.push_back({"pointer table", &cg_pointer_table, [](Device d) {
                 Tensor a = on(xa, d), b = on(ya, d);
                 std::vector<int64_t> addrs = {
                     static_cast<int64_t>(reinterpret_cast<uintptr_t>(a.data_ptr())),
                     static_cast<int64_t>(reinterpret_cast<uintptr_t>(b.data_ptr()) + 64)};
                 Tensor table = on(from_vector(addrs, {2}), d);
                 Tensor out = poisoned({64}, DType::Float32, d);
                 cg_pointer_table[{2}](table, out, tl::meta("B", 32));
                 return to_cpu({out});
               }});
  c.push_back({"control", &cg_control,
               [](Device d) {
                 Tensor out = poisoned({256}, DType::Float32, d);
                 cg_control[{1}](on(xa, d), out, 3000, tl::meta("BLOCK", 256));
                 return to_cpu({out});
               },
               1e-6, 1e-6});
  return c;
}

// ---- everywhere: every catalog kernel's CUDA compiles
// ---------------------------------------------

TEST(CudaCodegen, EveryCatalogKernelCompilesWithNvrtcForHopper) {
  if (!runtime::cuda::nvrtc())
    GTEST_SKIP() << "no NVRTC on this machine (install the CUDA toolkit)";
  for (const Case& c : catalog()) {
    SCOPED_TRACE(c.name);
    (void)c.run(kCPU);  // traces (and runs) the kernel on the CPU
    const auto& last = c.kernel->state().last;
    ASSERT_TRUE(last) << c.name;
    const backend::cuda::Emitted e = backend::cuda::emit(*last->function, 227 * 1024);
    // The kernel is named after itself (profilers show it), in namespace tessera.
    EXPECT_NE(e.source.find(") " + backend::cuda::entry_name(last->function->name) + "("),
              std::string::npos);
    // Tensor cores: the accumulator in registers, 2 x 2 warps of one 16 x 8 tile each, operand
    // rows padded to K + 8 and N + 8; ...
    const std::string name = c.name;
    if (name == "matmul bf16") {
      EXPECT_NE(e.source.find("trt::mma_tile<32, 16, 32, 2, 2, true, 40, 24>("), std::string::npos)
          << e.source;
    }
    // ... 2 x 2 warps of 2 x 4 tiles, with 16-byte copies of A (K divisible by 16 as an
    // argument; N is not: B's elements one by one), through a ring of 3 stages with cp.async, or
    // in the loop with one stage ...
    if (name.rfind("matmul f16 bias relu", 0) == 0) {
      EXPECT_NE(e.source.find("trt::mma_tile<64, 64, 32, 2, 2, false, 40, 72>("), std::string::npos)
          << e.source;
      if (name == "matmul f16 bias relu") {
        EXPECT_NE(e.source.find("trt::cp_async<16>(&_slot"), std::string::npos) << e.source;
        // (each iteration: its tiles awaited with one group in flight, one barrier, then the
        // request into the slot the last iteration read; no barrier after the products)
        const std::string wait = "trt::cp_async_wait<1>();\n    __syncthreads();\n    {";
        const size_t loop = e.source.find("for (int32_t v");
        const size_t top = e.source.find(wait, loop);
        EXPECT_NE(top, std::string::npos) << e.source;
        const size_t end = e.source.find("trt::cp_async_wait<0>();", loop);
        EXPECT_EQ(e.source.find("__syncthreads();", top + wait.size()),
                  e.source.find("__syncthreads();", end))
            << e.source;
      } else {
        EXPECT_NE(e.source.find("*(trt::Vec<uint16_t, 8>*)&_op"), std::string::npos) << e.source;
        EXPECT_EQ(e.source.find("cp_async"), std::string::npos) << e.source;
      }
    }
    // ... and where the offsets wrap with `% N`, B's 16-byte copies under the guard that they do
    // not (no remainder in the address), the remainder element by element otherwise.
    if (name == "matmul f16 offsets % M, % N") {
      bool fast = false;
      std::istringstream lines(e.source);
      for (std::string l; std::getline(lines, l);) {
        fast = fast || (l.find("trt::cp_async<16>(&_slot") != std::string::npos &&
                        l.find("irem") == std::string::npos);
      }
      EXPECT_TRUE(fast) << e.source;
      EXPECT_NE(e.source.find("trt::irem<int32_t>"), std::string::npos) << e.source;
    }
    // (a block past the first period reads with vectors too: the guard and the address take the
    // block's start modulo n)
    if (name == "gather offsets % n") {
      bool fast = false;
      std::istringstream lines(e.source);
      for (std::string l; std::getline(lines, l);) {
        fast = fast || (l.find("*(const trt::Vec<float, 4>*)((v0 + ") != std::string::npos &&
                        l.find("trt::irem<int64_t>(") != std::string::npos);
      }
      EXPECT_TRUE(fast) << e.source;
      EXPECT_NE(e.source.find("(trt::irem<int64_t>(((int64_t)v"), std::string::npos) << e.source;
    }
    // ... a dot reduced along its rows keeps its result in registers (each row's quad combines
    // by shuffles), one reduced along its columns in shared memory.
    if (name == "dot rowmax bf16") {
      EXPECT_NE(e.source.find("trt::mma_tile<32, 32, 16, 2, 2, true, 24, 40>("), std::string::npos)
          << e.source;
      EXPECT_NE(e.source.find("trt::shfl_xor(_acc"), std::string::npos) << e.source;
    }
    if (name == "flash attention bf16") {  // both dots in registers, q copied before the loop
      EXPECT_EQ(e.source.find("trt::mma_dot"), std::string::npos) << e.source;
      const size_t loop = e.source.find("for (int32_t v");
      const size_t q_tile = e.source.find("uint16_t* const _op");
      EXPECT_LT(q_tile, loop) << e.source;
      EXPECT_NE(e.source.find("trt::cp_async_wait<1>();"), std::string::npos) << e.source;
    }
    if (name == "dot colmax bf16") {
      EXPECT_NE(e.source.find("trt::mma_dot<32, 32, 16, true>("), std::string::npos) << e.source;
    }
    if (name == "matmul") {  // float32 (ieee): the CUDA-core path
      EXPECT_EQ(e.source.find("trt::mma_"), std::string::npos) << e.source;
    }
    if (name == "matmul f32 tf32") {  // rows of K + 4 and N + 8 floats
      EXPECT_NE(e.source.find("trt::mma_tile_tf32<32, 32, 16, 2, 2, 20, 40>("), std::string::npos)
          << e.source;
    }
    if (name == "matmul f32 tf32 128x128x32, 8 warps") {
      EXPECT_NE(e.source.find("trt::mma_tile_tf32<128, 128, 32, 2, 4, 36, 136>("),
                std::string::npos)
          << e.source;
      EXPECT_NE(e.source.find("trt::cp_async<16>(&_slot"), std::string::npos) << e.source;
    }
    std::string cubin;
    try {
      cubin = backend::cuda::compile_for_arch(e.source, c.name, 90);
    } catch (const Error& err) {
      ADD_FAILURE() << err.what() << "\n" << e.source;
      continue;
    }
    EXPECT_GT(cubin.size(), 100u) << c.name;
  }
}

// For sm_90 the dots whose shapes allow it run on Hopper's wgmma: A and B in swizzled tiles, the
// kernel compiled for sm_90a (ptxas checks the instructions and their operands); in a pipelined
// loop the products overlap the next iteration (the last products awaited after the loop); the
// others keep mma.sync, and TESSERA_CUDA_WGMMA=0 turns it off.
TEST(CudaCodegen, DotsOnSm90RunOnWgmmaWhereTheirShapesAllow) {
  if (!runtime::cuda::nvrtc())
    GTEST_SKIP() << "no NVRTC on this machine (install the CUDA toolkit)";
  int wgmma = 0;
  for (const Case& c : catalog()) {
    SCOPED_TRACE(c.name);
    (void)c.run(kCPU);
    const ir::Function& f = *c.kernel->state().last->function;
    const backend::cuda::Emitted e = backend::cuda::emit(f, 227 * 1024, false, 90);
    const std::string name = c.name;
    auto has = [&](const std::string& text) { return e.source.find(text) != std::string::npos; };
    const bool uses = has("trt::wgmma_tile") || has("trt::wgmma_now");
    EXPECT_EQ(uses, backend::cuda::needs_sm90a(e.source)) << e.source;
    wgmma += uses;
    // 128 x 128 x 32 with 8 warps: two warpgroups of 64 rows, A's rows of 64 bytes (64-byte
    // swizzle), B's of 256 (two slabs of 128); 3 stages: one tile ahead, overlapped products.
    if (name == "matmul bf16 128x128x32, 8 warps") {
      EXPECT_TRUE(has("trt::wgmma_tile_async<128, 128, 32, 8, true, 64, 128>(")) << e.source;
      EXPECT_TRUE(has("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"));
      EXPECT_TRUE(has("trt::cp_async<16>(&_slot")) << e.source;
      // (each copy's address: its run's, computed once before the loop, plus the iteration's
      // offset)
      const size_t bases = e.source.find("uint16_t const* _rb");
      EXPECT_LT(bases, e.source.find("for (int32_t v")) << e.source;
      EXPECT_TRUE(has("], (_rb")) << e.source;
      // (the default, two tiles ahead: one group pending at the wait, the next request after a
      // barrier that follows the products)
      EXPECT_TRUE(
          has("trt::cp_async_wait<1>();\n    trt::fence_async_shared();\n    "
              "__syncthreads();"))
          << e.source;
      const size_t products = e.source.find("trt::wgmma_tile_async<");
      const size_t barrier = e.source.find("__syncthreads();", products);
      const size_t request = e.source.find("trt::cp_async<16>", products);
      EXPECT_LT(barrier, request) << e.source;
      EXPECT_TRUE(has("}\n  trt::wgmma_wait<0>();")) << e.source;
      // TESSERA_CUDA_WGMMA_ASYNC=1: one tile ahead, this iteration's waited for with none
      // pending, the next requested right after the barrier
      ScopedEnv one("TESSERA_CUDA_WGMMA_ASYNC", "1");
      const std::string early = backend::cuda::emit(f, 227 * 1024, false, 90).source;
      EXPECT_NE(early.find("trt::cp_async_wait<0>();\n    trt::fence_async_shared();\n    "
                           "__syncthreads();\n    {"),
                std::string::npos)
          << early;
    }
    // 64 x 64 x 32 with 4 warps: one warpgroup; in the loop with one stage, each iteration's
    // products awaited in it.
    if (name == "matmul f16 bias relu") {
      EXPECT_TRUE(has("trt::wgmma_tile_async<64, 64, 32, 4, false, 64, 128>(")) << e.source;
    }
    if (name == "matmul f16 bias relu, 1 stage") {
      EXPECT_TRUE(has("trt::wgmma_tile<64, 64, 32, 4, false, 64, 128>(")) << e.source;
      EXPECT_FALSE(has("wgmma_tile_async") || has("cp_async")) << e.source;
    }
    if (name == "matmul bf16 128x128x64, 4 warps") {
      EXPECT_TRUE(has("trt::wgmma_tile_async<128, 128, 64, 4, true, 128, 128>(")) << e.source;
      EXPECT_TRUE(has("], (_rb")) << e.source;
    }
    // x @ w.T: w's tile K-major (wgmma's B without imm-trans-b), copied down its columns; with
    // K = 72 (no 16-byte rows) an element at a time, else in 16-byte runs.
    if (name == "matmul bf16 x @ w.T, tails, 4 warps") {
      EXPECT_TRUE(has("trt::wgmma_tile_async<64, 64, 32, 4, true, 64, 64, true>(")) << e.source;
      EXPECT_TRUE(has("p, 1, 1, 0, 0;")) << e.source;
      EXPECT_TRUE(has("[trt::wgmma_bk_index<64, 64>(")) << e.source;
    }
    if (name == "matmul f16 x @ w.T 64x64x64, 4 warps") {
      EXPECT_TRUE(has("trt::wgmma_tile_async<64, 64, 64, 4, false, 128, 128, true>(")) << e.source;
      EXPECT_TRUE(has("trt::cp_async<16>(&_slot")) << e.source;
      EXPECT_FALSE(has("Vec<uint16_t, 1>")) << e.source;
    }
    if (name == "flash attention bf16") {  // (32 rows: mma.sync; k^T K-major, v N-major)
      EXPECT_FALSE(uses) << e.source;
      EXPECT_TRUE(has("trt::mma_tile<32, 32, 32, 2, 2, true, 40, 40, true>(")) << e.source;
      EXPECT_TRUE(has("trt::mma_tile<32, 32, 32, 2, 2, true, 40, 40>(")) << e.source;
    }
    // The row vectors in registers: the row reductions leave their totals in every lane of the
    // quad (no shared slot); p is `p @ v`'s A from registers; q (hoisted) and the ring's tiles
    // are fenced for wgmma once, so the loop keeps only the ring's barrier (the landed tiles,
    // and the slot read last before it is requested again).
    if (name == "flash attention bf16, 64 rows") {
      EXPECT_TRUE(uses) << e.source;
      EXPECT_FALSE(has("if ((_tid & 3) == 0) {")) << e.source;
      EXPECT_TRUE(has("trt::wgmma_now<64, 32, 32, 4, true, 64, 64, true>(_op")) << e.source;
      EXPECT_TRUE(has("trt::wgmma_now_rs<64, 32, 32, 4, true, 64>(_ra")) << e.source;
      EXPECT_TRUE(has("}, {%16, %17, %18, %19}, %20, p, 1, 1, 1;")) << e.source;
      {
        ScopedEnv smem("TESSERA_CUDA_WGMMA_RS", "0");
        const std::string off = backend::cuda::emit(f, 227 * 1024, false, 90).source;
        EXPECT_EQ(off.find("wgmma_now_rs"), std::string::npos) << off;
        EXPECT_NE(off.find("trt::wgmma_tile<64, 32, 32, 4, true, 64, 64>(_op"), std::string::npos)
            << off;
      }
      auto loop_barriers = [](const std::string& src) {
        const size_t loop = src.find("for (int32_t v");
        const size_t end = src.find("trt::cp_async_wait<0>();", loop);
        int barriers = 0;
        for (size_t at = src.find("__syncthreads();", loop); at < end;
             at = src.find("__syncthreads();", at + 1))
          ++barriers;
        return barriers;
      };
      // (one: the ring's, before the next request; 15 with the row vectors in shared memory, 4
      // with p's tile in it, 2 with the request before the wait: the previous order, kept for
      // A/B measurements)
      EXPECT_EQ(loop_barriers(e.source), 1) << e.source;
      ScopedEnv first("TESSERA_CUDA_RING_REQUEST_FIRST", "1");
      const std::string two = backend::cuda::emit(f, 227 * 1024, false, 90).source;
      EXPECT_EQ(loop_barriers(two), 2) << two;
      EXPECT_NE(two.find("trt::cp_async_wait<2>();"), std::string::npos) << two;
    }
    if (name == "flash attention bf16, 128 rows x 64, 4 warps") {
      EXPECT_TRUE(has("trt::wgmma_now_rs<128, 32, 64, 4, true, 64>(_ra")) << e.source;
    }
    if (name == "matmul f16 x @ w.T 32x16x32, 4 warps") {
      EXPECT_FALSE(uses) << e.source;
      EXPECT_TRUE(has("trt::mma_tile<32, 16, 32, 2, 2, false, 40, 40, true>(")) << e.source;
      EXPECT_TRUE(has("trt::cp_async<16>(&_slot")) << e.source;
    }
    if (name == "matmul bf16 K window % K, 4 warps") {  // pipelined, addresses per iteration
      EXPECT_TRUE(has("trt::wgmma_tile_async<64, 64, 32, 4, true, 64, 128>(")) << e.source;
      EXPECT_FALSE(has("_rb")) << e.source;
    }
    if (name == "matmul f16 128x16x32, 4 warps") {
      EXPECT_TRUE(has("trt::wgmma_tile_async<128, 16, 32, 4, false, 64, 32>(")) << e.source;
      EXPECT_TRUE(has("m64n16k16.f32.f16.f16"));
    }
    // Too few rows for a warpgroup's 64 per warp column: mma.sync.
    if (name == "matmul bf16" || name == "dot rowmax bf16") {
      EXPECT_FALSE(uses) << e.source;
    }
    if (!uses) continue;
    // A pipelined loop requests each later iteration's tiles once per iteration, on every path
    // (the mma.sync path had taken both wgmma orders' requests: twice the copies, 0.63-0.81x
    // the speed on an H100).
    auto requests_in_loop = [](const std::string& src) {
      const size_t ring = src.find("_ring");
      const size_t loop = src.find("for (int32_t v", ring == std::string::npos ? 0 : ring);
      const size_t end = src.find("trt::cp_async_wait<0>();", loop);
      int n = 0;
      for (size_t at = src.find("trt::cp_async_commit();", loop); at < end;
           at = src.find("trt::cp_async_commit();", at + 1))
        ++n;
      return ring == std::string::npos || loop == std::string::npos || end == std::string::npos ? -1
                                                                                                : n;
    };
    if (e.source.find("trt::cp_async_commit();") != std::string::npos)
      EXPECT_EQ(requests_in_loop(e.source), 1) << e.source;
    {
      ScopedEnv off("TESSERA_CUDA_WGMMA", "0");
      const std::string mma = backend::cuda::emit(f, 227 * 1024, false, 90).source;
      EXPECT_EQ(mma.find("wgmma"), std::string::npos);
      EXPECT_NE(mma.find("trt::mma_tile<"), std::string::npos);
      if (name.find("x @ w.T") != std::string::npos)  // (B K-major: ldmatrix without .trans)
        EXPECT_NE(mma.find(", true>((_ring"), std::string::npos) << mma;
      if (mma.find("trt::cp_async_commit();") != std::string::npos)
        EXPECT_EQ(requests_in_loop(mma), 1) << mma;
    }
    {
      const std::string sm80 = backend::cuda::emit(f, 227 * 1024, false, 80).source;
      if (sm80.find("trt::cp_async_commit();") != std::string::npos)
        EXPECT_EQ(requests_in_loop(sm80), 1) << sm80;
    }
    {
      ScopedEnv sync("TESSERA_CUDA_WGMMA_ASYNC", "0");
      const std::string each = backend::cuda::emit(f, 227 * 1024, false, 90).source;
      EXPECT_EQ(each.find("wgmma_tile_async"), std::string::npos);
      EXPECT_TRUE(each.find("trt::wgmma_tile<") != std::string::npos ||
                  each.find("trt::wgmma_now<") != std::string::npos)
          << each;
    }
    EXPECT_EQ(backend::cuda::emit(f, 227 * 1024, false, 80).source.find("wgmma"),
              std::string::npos);
    try {
      (void)backend::cuda::compile_for_arch(e.source, c.name, 90, nullptr);
    } catch (const Error& err) {
      ADD_FAILURE() << err.what() << "\n" << e.source;
      continue;
    }
    // A package for another architecture is a clear error naming the kernel.
    const std::string msg = error_of<CompileError>(
        [&] { (void)backend::cuda::compile_for_arch(e.source, c.name, 80, nullptr); });
    EXPECT_NE(msg.find("sm_90a"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.name), std::string::npos) << msg;
  }
  EXPECT_GE(wgmma, 5);
}

// A full-mask warp shuffle must be reached by every lane: the generated code only ever shuffles
// in a statement of its own, never inside a conditional expression or a short-circuit.
TEST(CudaCodegen, WarpShufflesAreNeverConditional) {
  std::string all;
  for (const Case& c : catalog()) {
    (void)c.run(kCPU);
    all += backend::cuda::emit(*c.kernel->state().last->function, 227 * 1024).source;
  }
  size_t shuffles = 0;
  std::istringstream lines(all);
  for (std::string l; std::getline(lines, l);) {
    const size_t at = l.find("trt::shfl_xor(");
    if (at == std::string::npos) continue;
    ++shuffles;
    const std::string before = l.substr(0, at);
    EXPECT_TRUE(before.find('?') == std::string::npos && before.find("||") == std::string::npos &&
                before.find("&&") == std::string::npos && l.find('?', at) == std::string::npos)
        << l;
  }
  EXPECT_GE(shuffles, 4u);  // the catalog's block and warp reductions shuffle
}

// num_stages: rings of operand tiles (128 x 40 and 32 x 136 bfloat16 values per stage: 18944
// bytes) take fewer stages where three would not fit the device's shared memory, none below two.
TEST(CudaCodegen, PipelinesTakeFewerStagesWhereTheirRingsWouldNotFit) {
  for (const Case& c : catalog()) {
    if (std::string(c.name) != "matmul bf16 128x128x32, 8 warps") continue;
    (void)c.run(kCPU);
    const auto& f = *c.kernel->state().last->function;
    const std::string three = backend::cuda::emit(f, 227 * 1024).source;
    EXPECT_NE(three.find("trt::cp_async_wait<1>();"), std::string::npos) << three;
    const std::string two = backend::cuda::emit(f, 40000).source;
    EXPECT_NE(two.find("trt::cp_async_wait<0>();\n    __syncthreads();"), std::string::npos) << two;
    const backend::cuda::Emitted one = backend::cuda::emit(f, 20000);
    EXPECT_EQ(one.source.find("cp_async"), std::string::npos) << one.source;
    EXPECT_LE(one.shared_bytes, 20000);
    return;
  }
  FAIL() << "no such catalog case";
}

TEST(CudaCodegen, TilesAboveTheSharedMemoryLimitAreAClearError) {
  (void)catalog()[2].run(kCPU);  // the matmul: accumulators and operands in shared memory
  const auto& f = *cg_matmul.state().last->function;
  const std::string msg = error_of<CompileError>([&] { (void)backend::cuda::emit(f, 1024); });
  EXPECT_NE(msg.find("[kernel cg_matmul]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bytes of shared memory on the CUDA backend, above the device's 1024"),
            std::string::npos)
      << msg;
}

// Stage 2: tiles read only at their own element live in registers. A softmax row of 16384 floats
// over 16 warps is 32 registers per thread per tile (not 128 KiB of shared memory), the vector
// add's loads are register arrays with no shared memory and no barrier, and neither kernel has
// a stack: a register array indexed by anything but a constant would be in local memory.
TEST(CudaCodegen, TilesReadAtTheirOwnElementLiveInRegisters) {
  if (!runtime::cuda::nvrtc())
    GTEST_SKIP() << "no NVRTC on this machine (install the CUDA toolkit)";
  const Tensor x = random_tensor({2, 16384}, DType::Float32);
  Tensor out = empty({2, 16384});
  cg_softmax[{2}](x, out, 16384, 16384, tl::meta("BLOCK", 16384), tl::num_warps(16));
  const backend::cuda::Emitted softmax =
      backend::cuda::emit(*cg_softmax.state().last->function, 227 * 1024);
  EXPECT_EQ(softmax.threads, 512);
  EXPECT_LE(softmax.shared_bytes, 2 * 16 * 4) << softmax.source;  // the warps' partials only
  runtime::cuda::PtxasReport r;
  (void)backend::cuda::compile_for_arch(softmax.source, "cg_softmax", 90, &r);
  EXPECT_EQ(r.stack_bytes, 0) << softmax.source;
  EXPECT_EQ(r.spill_stores, 0);
  EXPECT_GT(r.registers, 0);
  EXPECT_LE(r.registers, 128);  // 512 threads: at most 128 each

  // Attention's p = exp(s - m) feeds p @ v (converted into the dot's A tile by the loops of its
  // shape) and sum(p, 1) (read where it lies): both read p at the thread's own elements of the
  // scores' Mma layout, so p stays in registers (in shared memory it took 32 x 32 floats, a
  // store and a load each, and barriers around them).
  {
    const Tensor q = random_tensor({64, 32}, DType::BFloat16),
                 k = random_tensor({96, 32}, DType::BFloat16),
                 v = random_tensor({96, 32}, DType::BFloat16);
    Tensor o = empty({64, 32});
    cg_attn[{2}](q, k, v, o, 96, tl::meta("BM", 32), tl::meta("BN", 32), tl::meta("D", 32));
    const backend::cuda::Emitted attn =
        backend::cuda::emit(*cg_attn.state().last->function, 227 * 1024, false, 90);
    // (the operand tiles and rings, 21888 bytes; p in shared memory added 4096)
    EXPECT_LE(attn.shared_bytes, 21888) << attn.source;
  }
  // At the tutorial's size (128 x 64 tiles) the scaled q does not fit the registers beside the
  // loop's arrays: it goes from global memory straight into its wgmma tile (16 KB) with no copy
  // of the load in shared memory (32 KB more as floats).
  {
    const Tensor q = random_tensor({128, 64}, DType::BFloat16),
                 k = random_tensor({128, 64}, DType::BFloat16),
                 v = random_tensor({128, 64}, DType::BFloat16);
    Tensor o = empty({128, 64});
    cg_attn[{1}](q, k, v, o, 128, tl::meta("BM", 128), tl::meta("BN", 64), tl::meta("D", 64),
                 tl::num_warps(8));
    const backend::cuda::Emitted attn =
        backend::cuda::emit(*cg_attn.state().last->function, 227 * 1024, false, 90);
    // (q's tile 16384 bytes, the rings of k and v 4 x 2 x 8192: 3 stages and the slot p @ v
    // reads while it is in flight, as an 8-warp block defers its wait)
    EXPECT_LE(attn.shared_bytes, 16384 + 8 * 8192) << attn.source;
  }
  // The register budget counts the arrays live at once: with 128 keys a block, the scores (64
  // words a thread), p (64) and the accumulator (32) exceed it together, but the scores die
  // where p is made; all stay in registers (counted for the whole kernel, p went to shared memory).
  {
    const Tensor q = random_tensor({64, 64}, DType::BFloat16),
                 k = random_tensor({128, 64}, DType::BFloat16),
                 v = random_tensor({128, 64}, DType::BFloat16);
    Tensor o = empty({64, 64});
    cg_attn[{1}](q, k, v, o, 128, tl::meta("BM", 64), tl::meta("BN", 128), tl::meta("D", 64),
                 tl::num_warps(4));
    const backend::cuda::Emitted attn =
        backend::cuda::emit(*cg_attn.state().last->function, 227 * 1024, false, 90);
    // (q's tile 8192 bytes, the rings of k and v 3 x 2 x 16384)
    EXPECT_LE(attn.shared_bytes, 8192 + 6 * 16384) << attn.source;
  }

  const Tensor a = random_tensor({4096}, DType::Float32), b = random_tensor({4096}, DType::Float32);
  Tensor sum = empty({4096});
  cg_add[{4}](a, b, sum, 4096, tl::meta("BLOCK", 1024));
  const backend::cuda::Emitted add = backend::cuda::emit(*cg_add.state().last->function, 1024);
  EXPECT_EQ(add.shared_bytes, 0) << add.source;
  EXPECT_EQ(add.source.find("__syncthreads"), std::string::npos) << add.source;
  // Both loads are issued before either is read: two unrolled loops issue them (a predicated
  // 16-byte load per run), two move them into registers, one stores.
  size_t unrolled = 0;
  for (size_t at = 0; (at = add.source.find("#pragma unroll", at)) != std::string::npos; ++at)
    ++unrolled;
  EXPECT_EQ(unrolled, 5u) << add.source;
  const size_t last_issue = add.source.rfind("= *(const trt::Vec<float, 4>*)");
  const size_t first_read = add.source.find("]) {");
  ASSERT_NE(first_read, std::string::npos) << add.source;
  EXPECT_LT(last_issue, first_read) << add.source;
  (void)backend::cuda::compile_for_arch(add.source, "cg_add", 90, &r);
  EXPECT_EQ(r.stack_bytes, 0) << add.source;
  // PTX of the same kernel (what an AOT package ships for GPUs newer than its cubins): text for
  // the virtual architecture, NUL-terminated for the driver's JIT.
  const std::string ptx = backend::cuda::compile_ptx_for_arch(add.source, "cg_add", 80);
  ASSERT_FALSE(ptx.empty());
  EXPECT_EQ(ptx.back(), '\0');
  EXPECT_NE(ptx.find(".target sm_80"), std::string::npos) << ptx.substr(0, 400);
  // The module's entry: the kernel's own name, mangled as entry_symbol says (what the JIT asks
  // cuModuleGetFunction for); an AOT package's source renames it `tessera_kernel`.
  EXPECT_EQ(backend::cuda::entry_symbol("cg_add"), "_ZN7tessera6cg_addEN3trt4GridE6_Slots");
  EXPECT_NE(ptx.find(".entry " + backend::cuda::entry_symbol(cg_add.state().last->function->name)),
            std::string::npos)
      << ptx.substr(0, 1200);
  const std::string aot_ptx = backend::cuda::compile_ptx_for_arch(
      backend::cuda::with_extern_entry(add.source, cg_add.state().last->function->name,
                                       "tessera_kernel"),
      "cg_add", 80);
  EXPECT_NE(aot_ptx.find(".entry tessera_kernel("), std::string::npos) << aot_ptx.substr(0, 1200);
  // Names that are not C++ identifiers, or are keywords, still make one.
  EXPECT_EQ(backend::cuda::entry_name("add_kernel+relu"), "add_kernel_relu");
  EXPECT_EQ(backend::cuda::entry_name("new"), "new_kernel");
  EXPECT_EQ(backend::cuda::entry_name("_k"), "k_k");
  EXPECT_EQ(backend::cuda::entry_name("2d"), "k2d");
  EXPECT_EQ(r.spill_stores, 0);

  // Each thread keeps runs of 4 consecutive floats: its loads and stores are 16-byte vectors
  // (where a run's masks all hold), the softmax row's too; the checked mode keeps scalar accesses.
  EXPECT_NE(add.source.find("*(const trt::Vec<float, 4>*)"), std::string::npos) << add.source;
  EXPECT_NE(add.source.find("*(trt::Vec<float, 4>*)"), std::string::npos) << add.source;
  EXPECT_NE(softmax.source.find("*(const trt::Vec<float, 4>*)"), std::string::npos);
  EXPECT_NE(softmax.source.find("*(trt::Vec<float, 4>*)"), std::string::npos);
  const std::string checked =
      backend::cuda::emit(*cg_add.state().last->function, 1024, /*checked=*/true).source;
  EXPECT_EQ(checked.find("trt::Vec<"), std::string::npos);
  // n = 4096 (an argument divisible by 16): `offs < n` is equal on each run of 4, so a run is
  // loaded whole or not at all; with n = 4095 a run may be cut, and its lanes load one by one.
  EXPECT_EQ(add.source.find(" ? *("), std::string::npos) << add.source;
  Tensor part = empty({4095});
  cg_add[{4}](a.narrow(0, 0, 4095), b.narrow(0, 0, 4095), part, 4095, tl::meta("BLOCK", 1024));
  const std::string ragged = backend::cuda::emit(*cg_add.state().last->function, 1024).source;
  EXPECT_NE(ragged.find("*(const trt::Vec<float, 4>*)"), std::string::npos) << ragged;
  EXPECT_NE(ragged.find(" ? *("), std::string::npos) << ragged;
}

// A run of lanes is one vector access only where the pointer is contiguous along the run and its
// first address aligned: a row stride not a multiple of the run, or a gather, stays scalar.
TL_JIT(cg_strided, tl::Ptr x, tl::Ptr out, tl::Const stride, tl::Const R, tl::Const C) {
  auto rows = tl::arange(0, R), cols = tl::arange(0, C);
  auto v = tl::load(x + rows[{tl::_, tl::None}] * stride + cols[{tl::None, tl::_}]);
  tl::store(out + rows[{tl::_, tl::None}] * C + cols[{tl::None, tl::_}] * 2, v + 1.0f);
}

TEST(CudaCodegen, VectorAccessesOnlyWhereContiguousAndAligned) {
  const Tensor x = random_tensor({64, 33}, DType::Float32);
  Tensor out = empty({64 * 64});
  // stride 33: the loads' rows are not 16-byte aligned; the stores skip every other element.
  cg_strided[{1}](x, out, tl::meta("stride", 33), tl::meta("R", 64), tl::meta("C", 32));
  const std::string odd = backend::cuda::emit(*cg_strided.state().last->function, 1024).source;
  EXPECT_EQ(odd.find("trt::Vec<"), std::string::npos) << odd;
  // stride 32: aligned rows, vector loads; the stores stay scalar.
  const Tensor y = random_tensor({64, 32}, DType::Float32);
  cg_strided[{1}](y, out, tl::meta("stride", 32), tl::meta("R", 64), tl::meta("C", 32));
  const std::string even = backend::cuda::emit(*cg_strided.state().last->function, 1024).source;
  EXPECT_NE(even.find("*(const trt::Vec<float, 4>*)"), std::string::npos) << even;
  EXPECT_EQ(even.find("*(trt::Vec<"), std::string::npos) << even;
}

// ---- on a GPU: every catalog kernel agrees with the CPU backend
// -----------------------------------

TEST(CudaCodegen, EveryCatalogKernelAgreesWithTheCpuBackend) {
  if (!cuda_is_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
  for (const Case& c : catalog()) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> want, got;
    try {
      want = c.run(kCPU);
      got = c.run(Device("cuda"));
    } catch (const Error& e) {
      ADD_FAILURE() << c.name << ": " << e.what();
      continue;
    }
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      if (c.rtol == 0 && c.atol == 0) {
        EXPECT_TRUE(bitwise_equal(got[i], want[i]))
            << c.name << " output " << i << ": " << first_bit_difference(got[i], want[i]);
      } else {
        EXPECT_TRUE(
            all_close(got[i].to(DType::Float64), want[i].to(DType::Float64), c.rtol, c.atol))
            << c.name << " output " << i;
      }
    }
  }
}

// Any machine: every catalog kernel's CUDA code runs in the host simulator (TESSERA_CROSSCHECK=sim:
// host threads for CUDA threads, ldmatrix/mma.sync/cp.async computed from their PTX definitions)
// on copies of the CPU run's arguments, and what both wrote must agree (the cross-check compares
// every written tensor within its dtype's tolerance and throws at the first difference).
TEST(CudaCodegen, EveryCatalogKernelAgreesWithTheCpuInTheSimulator) {
  ScopedEnv sim("TESSERA_CROSSCHECK", "sim");
  int ran = 0;
  for (const Case& c : catalog()) {
    SCOPED_TRACE(c.name);
    try {
      (void)c.run(kCPU);
      ++ran;
    } catch (const Error& e) {
      ADD_FAILURE() << c.name << ": " << e.what();
    }
  }
  EXPECT_EQ(ran, static_cast<int>(catalog().size()));
}

// TESSERA_CUDA_WGMMA_DEFER (auto: blocks of 8 warps): attention's `acc * alpha + p @ v` is issued
// without a wait, its
// products waited for where the next iteration first reads the accumulator (the multiply, in
// place in the carried registers, after the wait and a fence) and after the loop; its ring keeps
// a slot more, so that the slot those products read is refilled two iterations later. In the
// simulator (products at the wait, copies' destinations poisoned at the issue) the kernels agree
// with the CPU; with the ring's usual slots the refilled slot is caught in flight (checked by
// hand: `trt_sim::wgmma: shared memory a wgmma reads changed ...`).
TEST(CudaCodegen, AttentionsLastDotIsWaitedForInTheNextIterationWhenDeferred) {
  // By default only the blocks of two warpgroups defer (the 4-warp ones were slower so).
  for (const Case& c : catalog()) {
    const std::string name = c.name;
    if (name.rfind("flash attention bf16, ", 0) != 0) continue;
    SCOPED_TRACE(name);
    (void)c.run(kCPU);
    const std::string src =
        backend::cuda::emit(*c.kernel->state().last->function, 227 * 1024, false, 90).source;
    const bool eight = name.find("8 warps") != std::string::npos;
    EXPECT_EQ(src.find("trt::wgmma_issue_rs<") != std::string::npos, eight) << src;
  }
  ScopedEnv defer("TESSERA_CUDA_WGMMA_DEFER", "1");
  int deferred = 0;
  for (const Case& c : catalog()) {
    const std::string name = c.name;
    if (name.rfind("flash attention bf16, ", 0) != 0) continue;
    SCOPED_TRACE(name);
    (void)c.run(kCPU);
    const ir::Function& f = *c.kernel->state().last->function;
    const std::string src = backend::cuda::emit(f, 227 * 1024, false, 90).source;
    auto at = [&](const std::string& text, size_t from = 0) { return src.find(text, from); };
    const size_t loop = at("for (int32_t v"), issue = at("trt::wgmma_issue_rs<", loop);
    ASSERT_NE(issue, std::string::npos) << src;
    EXPECT_EQ(at("trt::wgmma_now_rs<"), std::string::npos) << src;
    // In the loop: the wait and the fence come before the multiply, which comes before the issue.
    const size_t wait = at("trt::wgmma_wait<0>();\n    trt::wgmma_fence_operands<", loop);
    EXPECT_LT(wait, issue) << src;
    EXPECT_LT(at("] * ", wait), issue) << src;
    // After the loop, the same before any read; the ring of 3 stages has 4 slots.
    EXPECT_NE(at("trt::wgmma_wait<0>();\n  trt::wgmma_fence_operands<", issue), std::string::npos)
        << src;
    EXPECT_NE(at("+ 1 == 4 ? 0 :", issue), std::string::npos) << src;
    ++deferred;
  }
  EXPECT_EQ(deferred, 3);
  // The same kernels' CUDA run in the simulator agree with the CPU (the cross-check throws at
  // the first difference; a wgmma reading a slot refilled in flight stops the run).
  ScopedEnv sim("TESSERA_CROSSCHECK", "sim");
  for (const Case& c : catalog()) {
    if (std::string(c.name).rfind("flash attention bf16, ", 0) != 0) continue;
    SCOPED_TRACE(c.name);
    EXPECT_NO_THROW((void)c.run(kCPU));
  }
}

TEST(CudaCodegen, TheSeedsAddRunsOnTheGpuWithItsTensorsOnOneDevice) {
  if (!cuda_is_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
  const int64_t n = (1 << 20) + 3;
  Tensor x = random_tensor({n}, DType::Float32), y = random_tensor({n}, DType::Float32);
  Tensor gx = x.to(Device("cuda")), gy = y.to(Device("cuda"));
  Tensor out = empty({n}, TensorOptions().device("cuda"));
  // (last_source is the last compile's: an earlier test may have launched this specialization)
  cg_add.clear_memory_cache();
  cg_add[{tl::cdiv(n, 1024)}](gx, gy, out, n, tl::meta("BLOCK", 1024));
  EXPECT_TRUE(bitwise_equal(out.cpu(), x + y));
  EXPECT_NE(cg_add.last_source().find("__global__"), std::string::npos);
  // Mixed devices are an error naming both.
  const std::string msg =
      error_of<CompileError>([&] { cg_add[{1}](gx, y, out, n, tl::meta("BLOCK", 1024)); });
  EXPECT_NE(msg.find("is a tensor on cpu but an earlier one is on cuda:0"), std::string::npos)
      << msg;
}

TEST(CudaCodegen, TheSeedsCompiledAddFnRunsOnTheGpu) {
  if (!cuda_is_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
  auto add_fn = [](const Tensor& a, const Tensor& b) {
    Tensor output = zeros_like(a);
    auto n = output.numel();
    auto g = [&](const tl::Meta& meta) { return tl::Grid{tl::cdiv(n, meta["BLOCK"])}; };
    cg_add[g](a, b, output, n, tl::meta("BLOCK", 4));
    return output;
  };
  auto compiled = tessera::compile(add_fn, {.fullgraph = true, .name = "add_fn"});
  for (int64_t n : {4, 5, 6, 4099}) {
    Tensor a = random_tensor({n}, DType::Float32), b = random_tensor({n}, DType::Float32);
    Tensor got = compiled(a.to(Device("cuda")), b.to(Device("cuda")));
    EXPECT_EQ(got.device(), Device("cuda:0"));
    EXPECT_TRUE(bitwise_equal(got.cpu(), a + b)) << n;
  }
  EXPECT_EQ(compiled.stats().graphs, 2);  // static at 4, dynamic from 5 on
}

TEST(CudaCodegen, AutotuningOnTheGpuTimesTheKernelsNotTheirLaunches) {
  if (!cuda_is_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
  // The seed's configs, on the GPU: every config is compiled by NVRTC in one batch and timed
  // between CUDA events after an L2 flush, so a 2^24-element add (about 60 us on an H200) cannot
  // be timed as its few-microsecond launch (a config that cannot win stops early).
  auto tuned = tl::autotune(cg_add,
                            {tl::Config({{"BLOCK", 128}}, 4), tl::Config({{"BLOCK", 1024}}, 4),
                             tl::Config({{"BLOCK", 1024}}, 8), tl::Config({{"BLOCK", 4096}}, 8)},
                            {"n"});
  const int64_t n = int64_t{1} << 24;
  Tensor x = random_tensor({n}, DType::Float32), y = random_tensor({n}, DType::Float32);
  Tensor gx = x.to(Device("cuda")), gy = y.to(Device("cuda"));
  Tensor out = empty({n}, TensorOptions().device("cuda"));
  tuned[([&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK"])}; })](gx, gy, out, n);
  EXPECT_TRUE(bitwise_equal(out.cpu(), x + y));
  const auto timings = tuned.last_timings();
  ASSERT_EQ(timings.size(), 4u);
  for (const auto& [cfg, ms] : timings) EXPECT_GT(ms, 0.02) << cfg.str();
}

// The GPU timing loop behind autotuning: CUDA events around each run, the L2 overwritten before
// it (an add of 3 x 64 MB, beyond any L2: at least 192 MB / 5 TB/s = 38 us each), and it stops
// once the median is known to 1% (a steady kernel: well before its 100 ms), or at the first
// check when the runs cannot come within 5% of a better time.
TEST(CudaCodegen, GpuTimingStopsOnceTheMedianIsKnownOrTheKernelCannotWin) {
  if (!cuda_is_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
  const int64_t n = int64_t{1} << 24;
  const TensorOptions on_gpu = TensorOptions().device("cuda");
  Tensor x = randn({n}, on_gpu), y = randn({n}, on_gpu), out = empty({n}, on_gpu);
  auto run = [&] { cg_add[{tl::cdiv(n, 1024)}](x, y, out, n, tl::meta("BLOCK", 1024)); };
  run();
  namespace td = tessera::testing::detail;
  const auto t0 = std::chrono::steady_clock::now();
  td::BenchStop why;
  const std::vector<double> runs = td::gpu_bench_runs(
      run, nullptr, nullptr, 25, 100, true, 0, std::numeric_limits<double>::infinity(), &why);
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const double median = tessera::testing::detail::quantile(runs, 0.5);
  std::printf("[ note ] %zu runs, median %.4f ms, %.1f ms wall\n", runs.size(), median, wall_ms);
  EXPECT_GE(runs.size(), 20u);
  EXPECT_GT(median, 0.038);
  EXPECT_LT(median, 1.0);
  EXPECT_LT(wall_ms, 100.0);  // stopped early: the warm-up's 25 ms and far fewer than 100 ms
  EXPECT_EQ(why.reason, td::BenchStopReason::MedianKnown);
  EXPECT_EQ(why.runs, runs.size());
  // Racing a time twice as fast: it stops at its first check (one batch of at most 200 runs,
  // sized from its own estimate of a run, so not necessarily the count above), cannot win.
  td::BenchStop raced_why;
  const std::vector<double> raced =
      td::gpu_bench_runs(run, nullptr, nullptr, 25, 100, true, 0, median / 2, &raced_why);
  EXPECT_EQ(raced_why.reason, td::BenchStopReason::CannotWin);
  EXPECT_LE(raced.size(), 200u);
  EXPECT_GT(td::quantile(raced, 0.5), 1.05 * median / 2);
}

// ---- the checked mode on the GPU (TESSERA_DEBUG=1)
// ----------------------------------------------

// An off-by-one mask: lane n of the last program reads and writes one element past the views.
constexpr int kGpuOffByOneLine = __LINE__ + 4;  // the load below
TL_JIT(cg_off_by_one, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs <= n;
  auto v = tl::load(x + offs, m) + 1.0f;
  tl::store(out + offs, v, m);
}

constexpr int kGpuAssertLine = __LINE__ + 4;  // the device_assert below
TL_JIT(cg_assert, tl::Ptr x, tl::Int n, tl::Const BLOCK) {
  auto o = tl::arange(0, BLOCK);
  auto v = tl::load(x + o, o < n);
  tl::device_assert(v >= 0, "x must be non-negative");
}

// TESSERA_DEBUG=1 for a scope.
struct CheckedScope : ScopedEnv {
  CheckedScope() : ScopedEnv("TESSERA_DEBUG", "1") {}
};

TEST(CudaCodegen, CheckedKernelsCompileWithNvrtcForHopper) {
  if (!runtime::cuda::nvrtc())
    GTEST_SKIP() << "no NVRTC on this machine (install the CUDA toolkit)";
  CheckedScope checked;
  for (const Case& c : catalog()) {
    SCOPED_TRACE(c.name);
    (void)c.run(kCPU);
    const auto& last = c.kernel->state().last;
    ASSERT_TRUE(last) << c.name;
    const backend::cuda::Emitted e = backend::cuda::emit(*last->function, 227 * 1024, true);
    EXPECT_NE(e.source.find("trt::GpuDebug* const _dbg"), std::string::npos) << c.name;
    try {
      EXPECT_GT(backend::cuda::compile_for_arch(e.source, c.name, 90).size(), 100u);
    } catch (const Error& err) {
      ADD_FAILURE() << err.what() << "\n" << e.source;
    }
  }
}

TEST(CudaCodegen, TheCheckedModeReportsBadAccessesOnTheGpuAsOnTheCpu) {
  if (!cuda_is_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
  CheckedScope checked;
  const Device gpu("cuda");
  const int64_t n = 40;
  // Views into larger buffers, so the bad lane would land on real memory.
  Tensor xbuf = random_tensor({n + 8}, DType::Float32).to(gpu), obuf = zeros({n + 8}).to(gpu);
  Tensor x = xbuf.slice(0, 0, n), out = obuf.slice(0, 0, n);
  ::testing::internal::CaptureStderr();
  cg_off_by_one[{tl::cdiv(n, 16)}](x, out, n, tl::meta("BLOCK", 16));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[kernel cg_off_by_one] out-of-bounds load at test_cuda_codegen.cpp:" +
                     std::to_string(kGpuOffByOneLine)),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("program (2, 0, 0), lane 8: element 40 of 'x' (valid: 0..39)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("element 40 of 'out'"), std::string::npos) << err;
  // In-bounds lanes ran; the bad store was skipped.
  EXPECT_TRUE(bitwise_equal(out.cpu(), x.cpu() + 1.0));
  EXPECT_EQ(obuf[n].item<float>(), 0.0f);

  // Many violations: the first ten in full, then the total.
  Tensor small = zeros({8}).to(gpu), small_out = zeros({8}).to(gpu);
  ::testing::internal::CaptureStderr();
  cg_off_by_one[{4}](small, small_out, 100, tl::meta("BLOCK", 32));
  err = ::testing::internal::GetCapturedStderr();
  size_t lines = 0;
  for (size_t p = err.find("out-of-bounds"); p != std::string::npos;
       p = err.find("out-of-bounds", p + 1))
    ++lines;
  EXPECT_EQ(lines, 11u) << err;
  EXPECT_NE(err.find("out-of-bounds accesses in this launch (the first 10 shown)"),
            std::string::npos)
      << err;

  // A failed device_assert is a RuntimeError at the user's line, after the kernel ran.
  Tensor neg = from_vector(std::vector<float>{1, 2, -3, 4}, {4}).to(gpu);
  ::testing::internal::CaptureStderr();
  const std::string msg =
      error_of<RuntimeError>([&] { cg_assert[{1}](neg, 4, tl::meta("BLOCK", 16)); });
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(msg.find("[kernel cg_assert] device_assert failed at test_cuda_codegen.cpp:" +
                     std::to_string(kGpuAssertLine)),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("program (0, 0, 0), lane 2: x must be non-negative"), std::string::npos)
      << msg;
}

}  // namespace
