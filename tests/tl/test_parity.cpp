// Triton parity (issue 13): kernels written as Triton's users write them. Each case runs compiled,
// checked (TESSERA_DEBUG=1) and interpreted, against a double-precision reference on fresh random
// inputs with poisoned outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "tessera/detail/philox.h"
#include "tessera/env.h"
#include "tessera/tessera.h"
#include "tessera/tl.h"
#include "testing.h"
#include "tl_testing.h"

using namespace tessera;
using namespace tessera::testing;
namespace tl = tessera::tl;

namespace {

// ---- a reduction of a dot result (attention's row max and row sum)

TL_JIT(dot_reduce_kernel, tl::Ptr q, tl::Ptr k, tl::Ptr row_max, tl::Ptr row_sum, tl::Ptr col_max,
       tl::Const M, tl::Const N, tl::Const D) {
  auto rm = tl::arange(0, M), rn = tl::arange(0, N), rd = tl::arange(0, D);
  auto tq = tl::load(q + rm[{tl::_, tl::None}] * D + rd[{tl::None, tl::_}]);
  auto tk = tl::load(k + rd[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}]);
  auto s = tl::dot(tq, tk, std::nullopt, ieee());
  tl::store(row_max + rm, tl::max(s, 1));
  tl::store(row_sum + rm, tl::sum(tl::exp(s - tl::max(s, 1)[{tl::_, tl::None}]), 1));
  tl::store(col_max + rn, tl::max(tl::dot(tq, tk, std::nullopt, ieee()), 0));
}

TEST(Parity, AReductionOfADotResult) {
  constexpr int64_t M = 16, N = 32, D = 16;
  Tensor q = random_tensor({M, D}, DType::Float32), k = random_tensor({D, N}, DType::Float32);
  const Tensor s = matmul(q.to(DType::Float64), k.to(DType::Float64));
  const Tensor want_max = s.amax({1}), want_col = s.amax({0});
  const Tensor want_sum = (s - want_max.unsqueeze(1)).exp().sum({1});
  every_mode([&](const char* mode) {
    Tensor mx = empty({M}), sm = empty({M}), cm = empty({N});
    poison(mx);
    poison(sm);
    poison(cm);
    dot_reduce_kernel[{1}](q, k, mx, sm, cm, tl::meta("M", M), tl::meta("N", N), tl::meta("D", D));
    EXPECT_TRUE(all_close(mx.to(DType::Float64), want_max, 1e-5, 1e-5)) << mode;
    EXPECT_TRUE(all_close(sm.to(DType::Float64), want_sum, 1e-5, 1e-5)) << mode;
    EXPECT_TRUE(all_close(cm.to(DType::Float64), want_col, 1e-5, 1e-5)) << mode;
  });
}

// ---- broadcasting between ranks (NumPy's rule: dimensions are prepended)

TL_JIT(rank_broadcast_kernel, tl::Ptr x, tl::Ptr bias, tl::Ptr out, tl::Const M, tl::Const N) {
  auto rm = tl::arange(0, M), rn = tl::arange(0, N);
  auto offs = rm[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}];  // [M, N]
  auto b = tl::load(bias + rn);                                   // [N]
  auto y = tl::load(x + offs) + b;                                // [M, N] + [N]
  auto z = tl::where(b > 0, y, 0.0f);                             // [N] condition
  tl::store(out + offs, z * 2.0f);
  tl::store(out + M * N + rn, tl::sum(b * tl::load(x + offs), 0));  // [N] * [M, N]
}

TEST(Parity, TilesOfDifferentRanksBroadcastAsInNumpy) {
  constexpr int64_t M = 8, N = 16;
  Tensor x = random_tensor({M, N}, DType::Float32), bias = random_tensor({N}, DType::Float32);
  const Tensor xd = x.to(DType::Float64), bd = bias.to(DType::Float64);
  const Tensor y = xd + bd;
  const Tensor want_z = where(bd > 0, y, zeros_like(y)) * 2.0;
  const Tensor want_s = (bd * xd).sum({0});
  every_mode([&](const char* mode) {
    Tensor out = empty({M * N + N});
    poison(out);
    rank_broadcast_kernel[{1}](x, bias, out, tl::meta("M", M), tl::meta("N", N));
    EXPECT_TRUE(all_close(out.slice(0, 0, M * N).view({M, N}).to(DType::Float64), want_z)) << mode;
    EXPECT_TRUE(all_close(out.slice(0, M * N, M * N + N).to(DType::Float64), want_s, 1e-5, 1e-5))
        << mode;
  });
  // Dimensions that differ and are not 1 remain an error naming both shapes.
}

// ---- hints mean what Triton means: per run of contiguous values, per dimension

TL_JIT(hinted_matmul_offsets_kernel, tl::Ptr x, tl::Ptr out, tl::Int M, tl::Const BM) {
  auto pid = tl::program_id(0);
  // Tutorial 03: offsets wrap at M; the hints say each run starts at a multiple of BM.
  auto offs = (pid * BM + tl::arange(0, BM)) % M;
  offs = tl::max_contiguous(tl::multiple_of(offs, BM), BM);
  tl::store(out + pid * BM + tl::arange(0, BM), tl::load(x + offs));
}

TL_JIT(false_multiple_kernel, tl::Ptr x, tl::Ptr out, tl::Int start, tl::Const B) {
  auto offs = tl::multiple_of(start + tl::arange(0, B), 8);
  tl::store(out + tl::arange(0, B), tl::load(x + offs));
}

TL_JIT(hint_2d_kernel, tl::Ptr x, tl::Ptr out, tl::Int stride, tl::Const R, tl::Const C) {
  auto offs = tl::arange(0, R)[{tl::_, tl::None}] * stride + tl::arange(0, C)[{tl::None, tl::_}];
  // Along dimension 1 each row is one run, starting at a multiple of `stride` (32); along
  // dimension 0 no run is longer than one element, so no claim is made there (1).
  auto hinted = tl::max_contiguous(tl::multiple_of(offs, {1, 32}), {1, C});
  tl::store(out + tl::arange(0, R)[{tl::_, tl::None}] * C + tl::arange(0, C)[{tl::None, tl::_}],
            tl::load(x + hinted));
}

// Each group of 4 lanes reads one element; the hint claims groups of G.
TL_JIT(constancy_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const B, tl::Const G) {
  auto offs = tl::arange(0, B);
  tl::assume(n > 0);
  auto rows = tl::max_constancy(offs / 4, G);
  tl::store(out + offs, tl::load(x + rows, rows < n));
}
TL_JIT(false_assumption_kernel, tl::Ptr x) {
  tl::assume(false);
  tl::store(x, 1.0f);
}

TEST(Parity, MaxConstancyAndAssumeAreCheckedHints) {
  Tensor x = random_tensor({4}, DType::Float32);
  Tensor want = empty({16});
  for (int64_t i = 0; i < 16; ++i) want[i].fill_(x[i / 4].item<float>());
  every_mode([&](const char* mode) {
    Tensor out = empty({16});
    poison(out);
    ::testing::internal::CaptureStderr();
    constancy_kernel[{1}](x, out, 4, tl::meta("B", 16), tl::meta("G", 4));
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(bitwise_equal(out, want)) << mode;
    EXPECT_EQ(err.find("does not hold"), std::string::npos) << mode << "\n" << err;  // true hints
  });
  // False ones are warnings where hints are evaluated; the results stay right.
  for (const char* knob : {"TESSERA_DEBUG", "TESSERA_INTERPRET"}) {
    ScopedEnv mode(knob, "1");
    Tensor out = empty({16});
    ::testing::internal::CaptureStderr();
    constancy_kernel[{1}](x, out, 4, tl::meta("B", 16), tl::meta("G", 8));
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("max_constancy(8) hint does not hold"), std::string::npos) << knob << err;
    EXPECT_TRUE(bitwise_equal(out, want)) << knob;
    ::testing::internal::CaptureStderr();
    constancy_kernel[{1}](x, out, 0, tl::meta("B", 16), tl::meta("G", 4));
    err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("tl::assume's condition does not hold"), std::string::npos) << knob << err;
    EXPECT_NE(err.find("test_parity.cpp:"), std::string::npos) << err;
  }
  const std::string msg = error_of<CompileError>([&] { false_assumption_kernel[{1}](x); });
  EXPECT_NE(msg.find("tl::assume of a condition that is false when traced"), std::string::npos)
      << msg;
}

TEST(Parity, HintsArePerRunOfContiguousValues) {
  constexpr int64_t BM = 16;
  const int64_t M = 48;
  Tensor x = random_tensor({M}, DType::Float32);
  every_mode([&](const char* mode) {
    Tensor out = empty({M});
    poison(out);
    hinted_matmul_offsets_kernel[{M / BM}](x, out, M, tl::meta("BM", BM));
    EXPECT_TRUE(equal(out, x)) << mode;
    // Where asserts are not evaluated, the hints' checks are not in the kernel at all.
    const std::string ir = hinted_matmul_offsets_kernel.last_ir();
    const bool checks = knobs().debug || knobs().interpret;
    EXPECT_EQ(ir.find("scan_fn") != std::string::npos, checks) << mode << "\n" << ir;
    EXPECT_EQ(ir.find("assert") != std::string::npos, checks) << mode << "\n" << ir;
    // Two dimensions, a list of hints.
    Tensor x2 = random_tensor({4 * 32}, DType::Float32), o2 = empty({4 * 8});
    poison(o2);
    hint_2d_kernel[{1}](x2, o2, 32, tl::meta("R", 4), tl::meta("C", 8));
    EXPECT_TRUE(equal(o2.view({4, 8}), x2.view({4, 32}).slice(1, 0, 8))) << mode;
  });
  // A run that starts off the multiple is reported where hints are checked: a warning naming the
  // kernel and line, once per launch; the kernel still runs (nothing relies on the hint).
  for (const char* knob : {"TESSERA_DEBUG", "TESSERA_INTERPRET"}) {
    ::setenv(knob, "1", 1);
    reload_knobs();
    Tensor out = empty({8});
    poison(out);
    ::testing::internal::CaptureStderr();
    false_multiple_kernel[{1}](x, out, 3, tl::meta("B", 8));
    const std::string e = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(e.find("warning: [kernel false_multiple_kernel] multiple_of(8) hint does not hold"),
              std::string::npos)
        << knob << ": " << e;
    EXPECT_NE(e.find("test_parity.cpp"), std::string::npos) << e;
    EXPECT_TRUE(equal(out, x.slice(0, 3, 11))) << knob;
    ::unsetenv(knob);
    reload_knobs();
  }
}

// ---- random numbers: Triton's conversion of Philox bits

TL_JIT(triton_random_kernel, tl::Ptr u, tl::Ptr z, tl::Int seed, tl::Const B) {
  auto off = tl::arange(0, B);
  tl::store(u + off, tl::rand(seed, off));
  tl::store(z + off, tl::randn(seed, off));
}

// Triton's uint32_to_uniform_float: the bits as int32, negatives folded to -x - 1, times
// 4.656613e-10 in float32.
float triton_uniform(uint32_t bits) {
  int32_t x;
  std::memcpy(&x, &bits, 4);
  const int32_t folded = x < 0 ? ~x : x;
  return static_cast<float>(folded) * 4.656613e-10f;
}

TEST(Parity, RandUsesTritonsConversion) {
  constexpr int64_t B = 1024;
  const uint64_t seed = 0x5eed1234abcdull;
  every_mode([&](const char* mode) {
    Tensor u = empty({B}), z = empty({B});
    poison(u);
    poison(z);
    triton_random_kernel[{1}](u, z, static_cast<int64_t>(seed), tl::meta("B", B));
    int64_t differ = 0;
    for (int64_t i = 0; i < B; ++i) {
      const auto r = philox::random4(seed, static_cast<uint64_t>(i));
      const float want = triton_uniform(r.v[0]);
      differ += u[i].item<float>() != want;
      // Box-Muller as Triton: u1 clamped to 1e-7, float32 throughout, the cosine branch.
      const double u1 = std::max(1e-7, static_cast<double>(triton_uniform(r.v[0]))),
                   u2 = triton_uniform(r.v[1]);
      const double want_z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      EXPECT_NEAR(z[i].item<float>(), want_z, 2e-5 * (1 + std::abs(want_z))) << mode << " " << i;
    }
    EXPECT_EQ(differ, 0) << mode << ": tl::rand differs from Triton's conversion";
  });
}

// ---- compound assignment, and tl::Var with the Tile interface (tutorial 03's loop)

TL_JIT(compound_matmul_kernel, tl::Ptr a, tl::Ptr b, tl::Ptr c, tl::Ptr bits, tl::Int M, tl::Int N,
       tl::Int K, tl::Const BM, tl::Const BN, tl::Const BK) {
  auto rm = tl::program_id(0) * BM + tl::arange(0, BM);
  auto rn = tl::program_id(1) * BN + tl::arange(0, BN);
  auto rk = tl::arange(0, BK);
  tl::Var a_ptrs = a + (rm[{tl::_, tl::None}] * K + rk[{tl::None, tl::_}]);
  tl::Var b_ptrs = b + (rk[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}]);
  tl::Var acc = tl::zeros({BM, BN}, tl::float32);
  tl::range(0, tl::cdiv(K, BK), [&](tl::Tile kb) {
    auto kmask = rk < K - kb * BK;
    auto ta = tl::load(a_ptrs, (rm[{tl::_, tl::None}] < M) & kmask[{tl::None, tl::_}], 0.0f);
    auto tb = tl::load(b_ptrs, kmask[{tl::_, tl::None}] & (rn[{tl::None, tl::_}] < N), 0.0f);
    acc += tl::dot(ta, tb, std::nullopt, ieee());
    a_ptrs += BK;
    b_ptrs += BK * N;
  });
  auto out = acc.to(tl::float16).to(tl::float32);  // Var.to, no tl::Tile(acc) wrapping
  auto offs = rm[{tl::_, tl::None}] * N;
  offs += rn[{tl::None, tl::_}];  // a local Tile rebinds
  tl::store(c + offs, out, (rm[{tl::_, tl::None}] < M) & (rn[{tl::None, tl::_}] < N));
  // Every integer compound operator on a scalar Var.
  tl::Var x = tl::full({}, 1000, tl::int32);
  x -= 7;
  x *= 3;
  x /= 2;
  x %= 1000;
  x <<= 2;
  x >>= 1;
  x &= 0xfff;
  x |= 0x10000;
  x ^= 0x5;
  tl::store(bits, x.get() + acc.rank() * 0);
}

TL_JIT(outer_tile_compound_kernel, tl::Ptr x) {
  auto offs = tl::arange(0, 8);
  tl::range(0, 2, [&](tl::Tile) { offs += 1; });
  tl::store(x + offs, 1.0f);
}

TEST(Parity, CompoundAssignmentAndVarsWithTheTileInterface) {
  const int64_t M = 40, N = 24, K = 50;
  Tensor a = random_tensor({M, K}, DType::Float32), b = random_tensor({K, N}, DType::Float32);
  const Tensor ref = matmul(a.to(DType::Float64), b.to(DType::Float64));
  int32_t want = 1000;
  want -= 7;
  want *= 3;
  want /= 2;
  want %= 1000;
  want <<= 2;
  want >>= 1;
  want &= 0xfff;
  want |= 0x10000;
  want ^= 0x5;
  every_mode([&](const char* mode) {
    Tensor c = empty({M, N}), bits = empty({1}, TensorOptions().dtype(DType::Int32));
    poison(c);
    poison(bits);
    compound_matmul_kernel[{tl::cdiv(M, 16), tl::cdiv(N, 16)}](
        a, b, c, bits, M, N, K, tl::meta("BM", 16), tl::meta("BN", 16), tl::meta("BK", 16));
    EXPECT_TRUE(all_close(c.to(DType::Float64), ref, 2e-3, 2e-3)) << mode;  // via float16
    EXPECT_EQ(bits[0].item<int32_t>(), want) << mode;
    // The pointers advanced by `+=` are induction variables, not loop-carried tiles (the loop
    // carries the accumulator only): ir::pointer_induction, after hoisting `BK * N`.
    const std::string ir = compound_matmul_kernel.last_ir();
    const size_t at = ir.find(" = for ");
    ASSERT_NE(at, std::string::npos) << ir;
    const std::string loop = ir.substr(at, ir.find('\n', at) - at);
    EXPECT_EQ(loop.find("*fp32"), std::string::npos) << mode << ": " << loop;
    EXPECT_NE(loop.find("iter_args("), std::string::npos) << loop;
  });
  Tensor x = empty({16});
  const std::string e = error_of<CompileError>([&] { outer_tile_compound_kernel[{1}](x); });
  EXPECT_NE(e.find("declared outside this tl::range / tl::if_ region is assigned inside"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("test_parity.cpp"), std::string::npos) << e;
}

// ---- the rest of triton.language: ravel, interleave, softmax, swizzle2d, histogram, static_range

TL_JIT(language_rest_kernel, tl::Ptr x, tl::Ptr y, tl::Ptr ints, tl::Ptr out, tl::Ptr iout,
       tl::Const R, tl::Const C) {
  auto rr = tl::arange(0, R), cc = tl::arange(0, C);
  auto offs = rr[{tl::_, tl::None}] * C + cc[{tl::None, tl::_}];
  auto a = tl::load(x + offs), b = tl::load(y + offs);
  tl::store(out + tl::arange(0, R * C), tl::ravel(a * 2.0f));  // [R*C]
  tl::store(out + R * C + tl::arange(0, 2 * R * C), tl::ravel(tl::interleave(a, b)));
  tl::store(out + 3 * R * C + offs, tl::softmax(a));     // rows
  tl::store(out + 4 * R * C + offs, tl::softmax(a, 0));  // columns
  // swizzle2d over an R x C grid in groups of 3 rows (the last group has fewer).
  auto [si, sj] = tl::swizzle2d(rr[{tl::_, tl::None}], cc[{tl::None, tl::_}], R, C, 3);
  tl::store(iout + offs, si * 1000 + sj);
  auto v = tl::load(ints + tl::arange(0, 64));
  tl::store(iout + R * C + tl::arange(0, 8), tl::histogram(v, 8));
  tl::store(iout + R * C + 8 + tl::arange(0, 8), tl::histogram(v, 8, tl::arange(0, 64) < 32));
  tl::Var acc = tl::zeros({C}, tl::float32);
  tl::static_range(0, R, 2, [&](tl::Tile r) { acc += tl::load(x + r * C + cc); });
  tl::store(out + 5 * R * C + cc, acc);
}

TEST(Parity, TheRestOfTritonLanguage) {
  constexpr int64_t R = 8, C = 16;
  Tensor x = random_tensor({R, C}, DType::Float32), y = random_tensor({R, C}, DType::Float32);
  Tensor ints = random_tensor({64}, DType::Int32, Domain::Any);  // -8 .. 8: some out of range
  const Tensor xd = x.to(DType::Float64);
  every_mode([&](const char* mode) {
    Tensor out = empty({5 * R * C + C}),
           iout = empty({R * C + 16}, TensorOptions().dtype(DType::Int32));
    poison(out);
    poison(iout);
    language_rest_kernel[{1}](x, y, ints, out, iout, tl::meta("R", R), tl::meta("C", C));
    for (int64_t i = 0; i < R * C; ++i) {
      EXPECT_EQ(out[i].item<float>(), x.view({R * C})[i].item<float>() * 2.0f) << mode;
      EXPECT_EQ(out[R * C + 2 * i].item<float>(), x.view({R * C})[i].item<float>()) << mode;
      EXPECT_EQ(out[R * C + 2 * i + 1].item<float>(), y.view({R * C})[i].item<float>()) << mode;
    }
    const Tensor rows = (xd - xd.amax({1}).unsqueeze(1)).exp();
    const Tensor cols = (xd - xd.amax({0}).unsqueeze(0)).exp();
    EXPECT_TRUE(all_close(out.slice(0, 3 * R * C, 4 * R * C).view({R, C}).to(DType::Float64),
                          rows / rows.sum({1}).unsqueeze(1), 1e-5, 1e-6))
        << mode;
    EXPECT_TRUE(all_close(out.slice(0, 4 * R * C, 5 * R * C).view({R, C}).to(DType::Float64),
                          cols / cols.sum({0}).unsqueeze(0), 1e-5, 1e-6))
        << mode;
    for (int64_t i = 0; i < R; ++i) {
      for (int64_t j = 0; j < C; ++j) {
        // Triton's formula, on the host.
        const int64_t ij = i * C + j, gj = 3 * C, gid = ij / gj, off = gid * 3;
        const int64_t rows_g = std::min<int64_t>(R - off, 3), in = ij % gj;
        EXPECT_EQ(iout[i * C + j].item<int32_t>(), (off + in % rows_g) * 1000 + in / rows_g)
            << mode << " (" << i << ", " << j << ")";
      }
    }
    for (int64_t b = 0; b < 8; ++b) {
      int64_t all = 0, first = 0;
      for (int64_t k = 0; k < 64; ++k) {
        const int32_t v = ints[k].item<int32_t>();
        all += v == b;
        first += v == b && k < 32;
      }
      EXPECT_EQ(iout[R * C + b].item<int32_t>(), all) << mode << " bin " << b;
      EXPECT_EQ(iout[R * C + 8 + b].item<int32_t>(), first) << mode << " masked bin " << b;
    }
    for (int64_t j = 0; j < C; ++j) {
      float want = 0;
      for (int64_t r = 0; r < R; r += 2) want += x[r][j].item<float>();
      EXPECT_EQ(out[5 * R * C + j].item<float>(), want) << mode;
    }
  });
}

TL_JIT(flip_kernel, tl::Ptr x, tl::Ptr out, tl::Const R, tl::Const C) {
  auto rr = tl::arange(0, R), cc = tl::arange(0, C);
  auto offs = rr[{tl::_, tl::None}] * C + cc[{tl::None, tl::_}];
  auto a = tl::load(x + offs);
  tl::store(out + offs, tl::flip(a));                                  // the last dimension
  tl::store(out + R * C + offs, tl::flip(a, 0));                       // rows
  tl::store(out + 2 * R * C + offs, tl::load(tl::flip(x + offs, 0)));  // a pointer tile
  tl::store(out + 3 * R * C + tl::arange(0, C), tl::flip(tl::sum(a, 0)) * 1.0f);
}

TEST(Parity, FlipReversesAlongADimension) {
  constexpr int64_t R = 4, C = 8;
  Tensor x = random_tensor({R, C}, DType::Float32);
  every_mode([&](const char* mode) {
    Tensor out = empty({3 * R * C + C});
    poison(out);
    flip_kernel[{1}](x, out, tl::meta("R", R), tl::meta("C", C));
    for (int64_t i = 0; i < R; ++i) {
      for (int64_t j = 0; j < C; ++j) {
        EXPECT_EQ(out[i * C + j].item<float>(), x[i][C - 1 - j].item<float>()) << mode;
        EXPECT_EQ(out[R * C + i * C + j].item<float>(), x[R - 1 - i][j].item<float>()) << mode;
        EXPECT_EQ(out[2 * R * C + i * C + j].item<float>(), x[R - 1 - i][j].item<float>()) << mode;
      }
    }
    const Tensor colsum = x.sum({0});
    for (int64_t j = 0; j < C; ++j)
      EXPECT_NEAR(out[3 * R * C + j].item<float>(), colsum[C - 1 - j].item<float>(), 1e-5) << mode;
  });
}

TL_JIT(wrapped_offsets_kernel, tl::Ptr x, tl::Ptr out, tl::Int M, tl::Const B) {
  auto pid = tl::program_id(0);
  auto offs = (pid * B + tl::arange(0, B)) % M;  // the identity in every block but the last
  tl::store(out + pid * B + tl::arange(0, B), tl::load(x + offs) + offs.to(tl::float32) * 1000.0f);
}

TEST(Parity, RemaindersThatWrapOnlyInTheBlocksThatStraddleAMultiple) {
  // The CPU emitter writes `x % M` as x - (B - B % M) (B the block's start) under a guard that
  // the block does not straddle a multiple of M (every block of a broadcast row past the first,
  // tutorial 03's offsets); the blocks that do keep the remainder. Three periods and a block.
  for (int64_t M : {int64_t{64}, int64_t{100}, int64_t{7}}) {
    Tensor x = random_tensor({M}, DType::Float32);
    const int64_t blocks = 3 * tl::cdiv(M, 32) + 1;
    every_mode([&](const char* mode) {
      Tensor out = empty({blocks * 32});
      poison(out);
      wrapped_offsets_kernel.clear_memory_cache();  // (last_source: this launch's)
      wrapped_offsets_kernel[{blocks}](x, out, M, tl::meta("B", 32));
      for (int64_t i = 0; i < blocks * 32; ++i) {
        const int64_t r = i % M;
        EXPECT_EQ(out[i].item<float>(), x[r].item<float>() + static_cast<float>(r) * 1000.0f)
            << mode << " M = " << M << ", element " << i;
      }
      if (std::string(mode) == "compiled" && !knobs().interpret) {  // (interpreted pass: no C++)
        EXPECT_NE(wrapped_offsets_kernel.last_source().find(" - trt::irem<int64_t>("),
                  std::string::npos)
            << wrapped_offsets_kernel.last_source();
      }
    });
  }
}

// ---- pointer tables: int64 addresses as pointers (tutorial 08's grouped GEMM idiom)

TL_JIT(pointer_table_kernel, tl::Ptr table, tl::Ptr sizes, tl::Ptr out_table, tl::Const B) {
  auto g = tl::program_id(0);
  auto n = tl::load(sizes + g);
  auto src = tl::load(table + g).to(tl::pointer_type(tl::float32));  // an address -> a pointer
  auto dst = tl::load(out_table + g).to(tl::pointer_type(tl::float32));
  auto offs = tl::arange(0, B);
  tl::store(dst + offs, tl::load(src + offs, offs < n) * 2.0f, offs < n);
  // A pointer's address and back: the same pointer.
  auto again = (dst + offs).to(tl::int64).to(tl::pointer_type(tl::float32));
  tl::store(again + B, (offs + g * 100).to(tl::float32), offs < n);
}

TEST(Parity, PointerTablesFromInt64Addresses) {
  constexpr int64_t B = 16;
  const std::vector<int64_t> ns = {5, 16, 9};
  std::vector<Tensor> ins, outs;
  std::vector<int64_t> in_addr, out_addr;
  for (int64_t n : ns) {
    ins.push_back(random_tensor({n}, DType::Float32));
    outs.push_back(empty({2 * B}));
    in_addr.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(ins.back().data_ptr())));
    out_addr.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(outs.back().data_ptr())));
  }
  Tensor table = from_vector(in_addr, {3}), out_table = from_vector(out_addr, {3});
  Tensor sizes = from_vector(std::vector<int32_t>{5, 16, 9}, {3});
  every_mode([&](const char* mode) {
    for (auto& o : outs) poison(o);
    pointer_table_kernel[{3}](table, sizes, out_table, tl::meta("B", B));
    for (size_t g = 0; g < ns.size(); ++g) {
      for (int64_t i = 0; i < ns[g]; ++i) {
        EXPECT_EQ(outs[g][i].item<float>(), ins[g][i].item<float>() * 2.0f) << mode;
        EXPECT_EQ(outs[g][B + i].item<float>(),
                  static_cast<float>(i + 100 * static_cast<int64_t>(g)))
            << mode;
      }
    }
  });
  // The kernel's access summary: a pointer made from an integer may reach every argument.
  const std::string ir = pointer_table_kernel.last_ir();
  EXPECT_NE(ir.find("bitcast"), std::string::npos) << ir;
}

// ---- tl::range's options

TL_JIT(range_options_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const B) {
  auto offs = tl::arange(0, B);
  tl::Var acc = tl::zeros({B}, tl::float32);
  tl::RangeOptions o;
  o.num_stages = 3;
  o.loop_unroll_factor = 4;
  o.flatten = true;
  tl::range(
      0, n, B, [&](tl::Tile k) { acc += tl::load(x + k + offs, k + offs < n, 0.0f); }, o);
  tl::store(out + offs, acc);
}

TL_JIT(range_bad_kernel, tl::Ptr x, tl::Int n) {
  tl::RangeOptions o;
  o.loop_unroll_factor = -1;
  tl::range(
      0, n, 1, [&](tl::Tile) { tl::store(x, 1.0f); }, o);
}

TEST(Parity, RangeOptionsAreKeptAndUnrollIsHonoured) {
  constexpr int64_t B = 16;
  const int64_t n = 200;
  Tensor x = random_tensor({n}, DType::Float32);
  Tensor want = zeros({B});
  for (int64_t k = 0; k < n; k += B) {
    for (int64_t j = 0; j < B && k + j < n; ++j)
      want[j].fill_(want[j].item<float>() + x[k + j].item<float>());
  }
  every_mode([&](const char* mode) {
    Tensor out = empty({B});
    poison(out);
    range_options_kernel[{1}](x, out, n, tl::meta("B", B));
    EXPECT_TRUE(all_close(out, want, 1e-6, 1e-6)) << mode;
    const std::string ir = range_options_kernel.last_ir();
    EXPECT_NE(ir.find("attributes {num_stages = 3, loop_unroll_factor = 4, flatten = 1}"),
              std::string::npos)
        << mode << "\n"
        << ir;
    if (std::string(mode) != "interpreted") {
      EXPECT_NE(range_options_kernel.last_source().find("#pragma GCC unroll 4"), std::string::npos)
          << mode;
    }
  });
  const std::string e = error_of<CompileError>([&] { range_bad_kernel[{1}](x, n); });
  EXPECT_NE(e.find("tl::range's num_stages and loop_unroll_factor must be in 0..65535"),
            std::string::npos)
      << e;
}

// ---- tl.gather

TL_JIT(gather_kernel, tl::Ptr x, tl::Ptr idx, tl::Ptr out, tl::Const R, tl::Const C) {
  auto rr = tl::arange(0, R), cc = tl::arange(0, C);
  auto offs = rr[{tl::_, tl::None}] * C + cc[{tl::None, tl::_}];
  auto src = tl::load(x + offs);                           // [R, C]
  auto index = tl::load(idx + offs);                       // [R, C], values in [0, C)
  tl::store(out + offs, tl::gather(src, index, 1));        // a permutation within each row
  auto rows = tl::load(idx + R * C + cc);                  // [C], values in [0, R)
  auto col = tl::gather(src, rows[{tl::None, tl::_}], 0);  // [1, C]: src[rows[j], j]
  tl::store(out + R * C + cc[{tl::None, tl::_}], col);
}

TEST(Parity, GatherAlongEitherAxis) {
  constexpr int64_t R = 4, C = 8;
  Tensor x = random_tensor({R, C}, DType::Float32);
  std::vector<int32_t> iv(R * C + C);
  for (int64_t i = 0; i < R * C; ++i)
    iv[static_cast<size_t>(i)] = static_cast<int32_t>((i * 5 + 3) % C);
  for (int64_t j = 0; j < C; ++j)
    iv[static_cast<size_t>(R * C + j)] = static_cast<int32_t>((j * 3) % R);
  Tensor idx = from_vector(iv, {R * C + C});
  every_mode([&](const char* mode) {
    Tensor out = empty({R * C + C});
    poison(out);
    gather_kernel[{1}](x, idx, out, tl::meta("R", R), tl::meta("C", C));
    for (int64_t i = 0; i < R; ++i) {
      for (int64_t j = 0; j < C; ++j)
        EXPECT_EQ(out[i * C + j].item<float>(),
                  x[i][iv[static_cast<size_t>(i * C + j)]].item<float>())
            << mode;
    }
    for (int64_t j = 0; j < C; ++j)
      EXPECT_EQ(out[R * C + j].item<float>(),
                x[iv[static_cast<size_t>(R * C + j)]][j].item<float>())
          << mode;
  });
  // An index out of range: the interpreter says so; compiled code reads the nearest element.
  iv[0] = 100;
  Tensor bad = from_vector(iv, {R * C + C}), out = empty({R * C + C});
  gather_kernel[{1}](x, bad, out, tl::meta("R", R), tl::meta("C", C));
  EXPECT_EQ(out[0].item<float>(), x[0][C - 1].item<float>());
  std::string e;
  {
    ScopedEnv interpret("TESSERA_INTERPRET", "1");
    e = error_of<RuntimeError>(
        [&] { gather_kernel[{1}](x, bad, out, tl::meta("R", R), tl::meta("C", C)); });
  }
  EXPECT_NE(e.find("tl::gather index 100 is outside [0, 8)"), std::string::npos) << e;
  EXPECT_NE(e.find("test_parity.cpp"), std::string::npos) << e;
}

TL_JIT(sort_kernel, tl::Ptr x, tl::Ptr asc, tl::Ptr desc, tl::Ptr top, tl::Const R, tl::Const C,
       tl::Const K) {
  auto rr = tl::arange(0, R), cc = tl::arange(0, C), kk = tl::arange(0, K);
  auto offs = rr[{tl::_, tl::None}] * C + cc[{tl::None, tl::_}];
  auto a = tl::load(x + offs);
  tl::store(asc + offs, tl::sort(a));
  tl::store(desc + offs, tl::sort(a, 1, true));
  tl::store(top + rr[{tl::_, tl::None}] * K + kk[{tl::None, tl::_}], tl::topk(a, K.int_value()));
}

TL_JIT(sort_bad_kernel, tl::Ptr x, tl::Const WHICH) {
  auto a =
      tl::load(x + tl::arange(0, 8)[{tl::_, tl::None}] * 4 + tl::arange(0, 4)[{tl::None, tl::_}]);
  if (WHICH.int_value() == 0) tl::store(x, tl::sum(tl::sort(a, 0)));
  if (WHICH.int_value() == 1) tl::store(x, tl::sum(tl::topk(a, 3)));
  if (WHICH.int_value() == 2) tl::store(x, tl::sum(tl::topk(a, 8)));
}

// tl.sort and tl.topk along the last dimension, against std::sort on every row, for floats with
// ties, signed zeros and infinities (bits compared: nothing is recomputed) and for integers.
TEST(Parity, SortAndTopkAlongTheLastDimension) {
  constexpr int64_t R = 4, C = 32, K = 8;
  for (DType d : {DType::Float32, DType::Int32, DType::Float16}) {
    Tensor x = random_tensor({R, C}, d);
    if (d == DType::Float32) {
      x[0][3].fill_(-0.0);
      x[0][9].fill_(0.0);
      x[1][0].fill_(INFINITY);
      x[1][5].fill_(-INFINITY);
      x[2][7].fill_(x[2][8].item<float>());  // a tie
    }
    Tensor xd = x.to(DType::Float64);
    every_mode([&](const char* mode) {
      Tensor asc = empty({R, C}, TensorOptions().dtype(d)), desc = empty_like(asc),
             top = empty({R, K}, TensorOptions().dtype(d));
      poison(asc);
      poison(desc);
      poison(top);
      sort_kernel[{1}](x, asc, desc, top, tl::meta("R", R), tl::meta("C", C), tl::meta("K", K));
      Tensor a64 = asc.to(DType::Float64), d64 = desc.to(DType::Float64),
             t64 = top.to(DType::Float64);
      for (int64_t i = 0; i < R; ++i) {
        std::vector<double> row(C);
        for (int64_t j = 0; j < C; ++j) row[static_cast<size_t>(j)] = xd[i][j].item<double>();
        std::vector<double> up = row;
        std::sort(up.begin(), up.end());
        for (int64_t j = 0; j < C; ++j) {
          EXPECT_EQ(a64[i][j].item<double>(), up[static_cast<size_t>(j)])
              << mode << " " << dtype_name(d) << " ascending row " << i << " at " << j;
          EXPECT_EQ(d64[i][j].item<double>(), up[static_cast<size_t>(C - 1 - j)])
              << mode << " " << dtype_name(d) << " descending row " << i << " at " << j;
        }
        for (int64_t j = 0; j < K; ++j) {
          EXPECT_EQ(t64[i][j].item<double>(), up[static_cast<size_t>(C - 1 - j)])
              << mode << " " << dtype_name(d) << " topk row " << i << " at " << j;
        }
      }
      if (d == DType::Float32) {
        // Values are moved, not recomputed: the sorted row holds -0.0 and 0.0 both, bit for bit.
        int neg_zeros = 0;
        for (int64_t j = 0; j < C; ++j) {
          const float v = asc[0][j].item<float>();
          neg_zeros += v == 0.0f && std::signbit(v);
        }
        EXPECT_EQ(neg_zeros, 1) << mode;
      }
    });
  }
  Tensor y = zeros({32});
  EXPECT_NE(error_of([&] {
              sort_bad_kernel[{1}](y, tl::meta("WHICH", 0));
            }).find("tl::sort sorts along the last dimension only"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              sort_bad_kernel[{1}](y, tl::meta("WHICH", 1));
            }).find("k must be a power of two no larger than the last dimension, got k = 3"),
            std::string::npos);
  EXPECT_NE(error_of([&] { sort_bad_kernel[{1}](y, tl::meta("WHICH", 2)); }).find("got k = 8"),
            std::string::npos);
}

TL_JIT(dot_scaled_kernel, tl::Ptr a, tl::Ptr as, tl::Ptr b, tl::Ptr bs, tl::Ptr h, tl::Ptr g,
       tl::Ptr out, tl::Ptr out2, tl::Const M, tl::Const N, tl::Const K) {
  auto m = tl::arange(0, M), n = tl::arange(0, N), k = tl::arange(0, K), kh = tl::arange(0, K / 2),
       ks = tl::arange(0, K / 32);
  // lhs: e2m1 packed along K [M, K/2]; rhs: e4m3 bytes [K, N]; scales [M, K/32] and [N, K/32].
  auto lhs = tl::load(a + m[{tl::_, tl::None}] * (K / 2) + kh[{tl::None, tl::_}]);
  auto lhs_s = tl::load(as + m[{tl::_, tl::None}] * (K / 32) + ks[{tl::None, tl::_}]);
  auto rhs = tl::load(b + k[{tl::_, tl::None}] * N + n[{tl::None, tl::_}]);
  auto rhs_s = tl::load(bs + n[{tl::_, tl::None}] * (K / 32) + ks[{tl::None, tl::_}]);
  auto offs = m[{tl::_, tl::None}] * N + n[{tl::None, tl::_}];
  tl::store(out + offs, tl::dot_scaled(lhs, lhs_s, "e2m1", rhs, rhs_s, "e4m3"));
  // bf16 times e5m2 (as its float8 dtype), no scales, onto an accumulator.
  auto hb = tl::load(h + m[{tl::_, tl::None}] * K + k[{tl::None, tl::_}]);
  auto gb = tl::load(g + k[{tl::_, tl::None}] * N + n[{tl::None, tl::_}]);
  tl::store(out2 + offs, tl::dot_scaled(hb, std::nullopt, "bf16", gb, std::nullopt, "e5m2",
                                        tl::full({M, N}, 1.0f, tl::float32)));
}

TL_JIT(dot_scaled_bad_kernel, tl::Ptr a, tl::Ptr out, tl::Const WHICH) {
  auto r = tl::arange(0, 32), c = tl::arange(0, 32);
  auto x = tl::load(a + r[{tl::_, tl::None}] * 32 + c[{tl::None, tl::_}]);
  auto offs = r[{tl::_, tl::None}] * 32 + c[{tl::None, tl::_}];
  if (WHICH.int_value() == 0) {
    tl::store(out + offs, tl::dot_scaled(x, std::nullopt, "e3m2", x, std::nullopt, "e4m3"));
  } else {  // a scale of the wrong shape
    tl::store(out + offs, tl::dot_scaled(x, x, "e4m3", x, std::nullopt, "e4m3"));
  }
}

double e2m1_value(int nib) {
  const int e = (nib >> 1) & 3, m = nib & 1;
  const double mag = e == 0 ? 0.5 * m : (1 + 0.5 * m) * std::ldexp(1.0, e - 1);
  return nib & 8 ? -mag : mag;
}
double e4m3_value(int byte) {
  const int e = (byte >> 3) & 15, m = byte & 7;
  const double mag =
      e == 0 ? m / 8.0 * std::ldexp(1.0, -6) : (1 + m / 8.0) * std::ldexp(1.0, e - 7);
  return byte & 0x80 ? -mag : mag;
}

// tl.dot_scaled against float64 decodes of OCP microscaling operands: e2m1 (packed along K, low
// nibble first) with e8m0 scales times e4m3 with scales; bf16 times e5m2 onto an accumulator.
TEST(Parity, DotScaledDecodesMicroscalingFormats) {
  constexpr int64_t M = 32, N = 32, K = 64;
  std::mt19937 gen(static_cast<uint32_t>(rng()()));
  std::vector<uint8_t> av(M * K / 2), asv(M * K / 32), bv(K * N), bsv(N * K / 32);
  for (auto& x : av) x = static_cast<uint8_t>(gen());
  for (auto& x : bv) {
    do {
      x = static_cast<uint8_t>(gen());
    } while ((x & 0x7f) == 0x7f);  // e4m3's NaN encodings
  }
  for (auto& x : asv) x = static_cast<uint8_t>(120 + gen() % 15);
  for (auto& x : bsv) x = static_cast<uint8_t>(120 + gen() % 15);
  Tensor a = from_vector(av, {M, K / 2}), as = from_vector(asv, {M, K / 32}),
         b = from_vector(bv, {K, N}), bs = from_vector(bsv, {N, K / 32});
  Tensor h = (random_tensor({M, K}, DType::Float32)).to(DType::BFloat16);
  Tensor g = random_tensor({K, N}, DType::Float32).to(DType::Float8_e5m2);
  // The references: decoded in float64.
  // want_abs: the sum of |terms|, which bounds float32 accumulation's error (K u of it).
  std::vector<double> want(M * N, 0.0), want2(M * N, 1.0), want_abs(M * N, 0.0);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      for (int64_t kk = 0; kk < K; ++kk) {
        const uint8_t byte = av[static_cast<size_t>(i * K / 2 + kk / 2)];
        const double x = e2m1_value(kk % 2 == 0 ? byte & 15 : byte >> 4) *
                         std::ldexp(1.0, asv[static_cast<size_t>(i * K / 32 + kk / 32)] - 127);
        const double y = e4m3_value(bv[static_cast<size_t>(kk * N + j)]) *
                         std::ldexp(1.0, bsv[static_cast<size_t>(j * K / 32 + kk / 32)] - 127);
        want[static_cast<size_t>(i * N + j)] += x * y;
        want_abs[static_cast<size_t>(i * N + j)] += std::fabs(x * y);
        want2[static_cast<size_t>(i * N + j)] +=
            h[i][kk].item<double>() * g[kk][j].to(DType::Float64).item<double>();
      }
    }
  }
  every_mode([&](const char* mode) {
    Tensor out = empty({M, N}), out2 = empty({M, N});
    poison(out);
    poison(out2);
    dot_scaled_kernel[{1}](a, as, b, bs, h, g, out, out2, tl::meta("M", M), tl::meta("N", N),
                           tl::meta("K", K));
    for (int64_t i = 0; i < M * N; ++i) {
      const double w = want[static_cast<size_t>(i)], w2 = want2[static_cast<size_t>(i)];
      EXPECT_NEAR(out.view({M * N})[i].item<float>(), w,
                  K * 6e-8 * want_abs[static_cast<size_t>(i)] + 1e-30)
          << mode << " element " << i;
      EXPECT_NEAR(out2.view({M * N})[i].item<float>(), w2, 1e-4 * (std::fabs(w2) + 1)) << mode;
    }
  });
  Tensor bytes = zeros({32, 32}, TensorOptions().dtype(DType::UInt8)), o = empty({32, 32});
  EXPECT_NE(error_of([&] {
              dot_scaled_bad_kernel[{1}](bytes, o, tl::meta("WHICH", 0));
            }).find("format 'e3m2' is not one of e2m1, e4m3, e5m2, bf16, fp16"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              dot_scaled_bad_kernel[{1}](bytes, o, tl::meta("WHICH", 1));
            }).find("lhs scale must be uint8 e8m0 of shape [32, 1] (one per 32 elements of K)"),
            std::string::npos);
}

}  // namespace
