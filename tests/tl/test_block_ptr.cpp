// Block pointers and tensor descriptors (issue 13), written as Triton's users write them: a
// block-pointer matmul whose pointers advance through the K loop, a transpose through strided
// views, a descriptor's in-place update. Each runs compiled, checked and interpreted against a
// double-precision reference on fresh inputs with poisoned outputs; the errors name the line.
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/tessera.h"
#include "tessera/tl.h"
#include "testing.h"
#include "tl_testing.h"

using namespace tessera;
using namespace tessera::testing;
namespace tl = tessera::tl;

namespace {

bool all_nan(const Tensor& t) {
  const Tensor d = t.to(DType::Float64).contiguous();
  const double* p = d.data_ptr<double>();
  for (int64_t i = 0; i < d.numel().expect_int(); ++i) {
    if (!std::isnan(p[i])) return false;
  }
  return true;
}

// ---- a matmul through block pointers (Triton's block-pointer matmul)
// -----------------------------

TL_JIT(block_ptr_matmul, tl::Ptr a, tl::Ptr b, tl::Ptr c, tl::Int M, tl::Int N, tl::Int K,
       tl::Int sam, tl::Int sak, tl::Int sbk, tl::Int sbn, tl::Int scm, tl::Int scn, tl::Const BM,
       tl::Const BN, tl::Const BK) {
  auto pm = tl::program_id(0), pn = tl::program_id(1);
  tl::BlockPtr a_ptr = tl::make_block_ptr(a, {M, K}, {sam, sak}, {pm * BM, 0},
                                          {BM.int_value(), BK.int_value()}, {1, 0});
  tl::BlockPtr b_ptr = tl::make_block_ptr(b, {K, N}, {sbk, sbn}, {0, pn * BN},
                                          {BK.int_value(), BN.int_value()}, {1, 0});
  tl::Var acc = tl::zeros({BM, BN}, tl::float32);
  tl::range(0, tl::cdiv(K, BK), [&](tl::Tile) {
    auto ta = tl::load(a_ptr, {0, 1}, "zero");
    auto tb = tl::load(b_ptr, {0, 1}, "zero");
    acc = tl::dot(ta, tb, tl::Operand(acc), ieee());
    a_ptr = tl::advance(a_ptr, {0, BK});
    b_ptr = tl::advance(b_ptr, {BK, 0});
  });
  tl::BlockPtr c_ptr = tl::make_block_ptr(c, {M, N}, {scm, scn}, {pm * BM, pn * BN},
                                          {BM.int_value(), BN.int_value()}, {1, 0});
  tl::store(c_ptr, acc, {0, 1});
}

TEST(BlockPtr, AMatmulAdvancesThroughTheKLoop) {
  // Sizes that are not multiples of the blocks: the boundary checks pad and clip.
  const int64_t M = 37, N = 45, K = 70;
  Tensor a = random_tensor({M, K}, DType::Float32);
  // b as a transposed view: strides (1, K) exercise the strides, not just contiguity.
  Tensor bt = random_tensor({N, K}, DType::Float32);
  Tensor b = bt.t();
  const Tensor want = matmul(a.to(DType::Float64), b.to(DType::Float64));
  every_mode([&](const char* mode) {
    // c inside a larger buffer: a store past the checked bounds would land on the padding.
    Tensor cbuf = empty({M + 3, N + 5});
    poison(cbuf);
    Tensor c = cbuf.slice(0, 0, M).slice(1, 0, N);
    block_ptr_matmul[{tl::cdiv(M, 16), tl::cdiv(N, 16)}](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
        c.stride(1), tl::meta("BM", 16), tl::meta("BN", 16), tl::meta("BK", 16));
    // K = 70 float32 products added in float32: the error is absolute (the |a b| terms' scale),
    // not relative to a result that cancels (1.4e-5 seen at 0.385).
    EXPECT_TRUE(all_close(c.to(DType::Float64), want, 1e-5, 1e-4)) << mode;
    // The rows and columns outside c are untouched (still NaN).
    EXPECT_TRUE(all_nan(cbuf.slice(0, M, M + 3))) << mode;
    EXPECT_TRUE(all_nan(cbuf.slice(1, N, N + 5))) << mode;
  });
}

// ---- a transpose: one block pointer in, one out
// ------------------------------------------------

TL_JIT(block_ptr_transpose, tl::Ptr x, tl::Ptr y, tl::Int M, tl::Int N, tl::Int sxm, tl::Int sxn,
       tl::Int sym, tl::Int syn, tl::Const B) {
  auto pm = tl::program_id(0), pn = tl::program_id(1);
  auto xb = tl::make_block_ptr(x, {M, N}, {sxm, sxn}, {pm * B, pn * B},
                               {B.int_value(), B.int_value()}, {1, 0});
  auto yb = tl::make_block_ptr(y, {N, M}, {sym, syn}, {pn * B, pm * B},
                               {B.int_value(), B.int_value()}, {0, 1});
  tl::store(yb, tl::trans(tl::load(xb, {0, 1})), {0, 1});
}

TEST(BlockPtr, ATransposeWithBoundaryChecksOnBothSides) {
  const int64_t M = 19, N = 40;
  for (DType d : {DType::Float32, DType::Float16, DType::Int32}) {
    Tensor x = random_tensor({M, N}, d);
    every_mode([&](const char* mode) {
      Tensor y = empty({N, M}, TensorOptions().dtype(d));
      poison(y);
      block_ptr_transpose[{tl::cdiv(M, 8), tl::cdiv(N, 8)}](
          x, y, M, N, x.stride(0), x.stride(1), y.stride(0), y.stride(1), tl::meta("B", 8));
      EXPECT_TRUE(bitwise_equal(y, x.t().contiguous())) << mode << " " << dtype_name(d);
    });
  }
}

// ---- padding: "nan" fills the unchecked-out elements with NaN
// ----------------------------------

TL_JIT(block_ptr_pad, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const B) {
  auto xb = tl::make_block_ptr(x, {n}, {1}, {0}, {B.int_value()}, {0});
  tl::store(out + tl::arange(0, B), tl::load(xb, {0}, "nan"));
}

TEST(BlockPtr, NanPaddingFillsWhatTheBoundaryCheckMasks) {
  Tensor x = random_tensor({5}, DType::Float32);
  every_mode([&](const char* mode) {
    Tensor out = zeros({8});
    block_ptr_pad[{1}](x, out, 5, tl::meta("B", 8));
    EXPECT_TRUE(bitwise_equal(out.slice(0, 0, 5), x)) << mode;
    EXPECT_TRUE(all_nan(out.slice(0, 5, 8))) << mode;
  });
}

// ---- tensor descriptors (the documentation's in-place abs)
// -------------------------------------

TL_JIT(descriptor_abs, tl::Ptr p, tl::Int M, tl::Int N, tl::Const MB, tl::Const NB) {
  auto desc = tl::make_tensor_descriptor(p, {M, N}, {N, 1}, {MB.int_value(), NB.int_value()});
  auto mo = tl::program_id(0) * MB, no = tl::program_id(1) * NB;
  auto v = desc.load({mo, no});
  desc.store({mo, no}, tl::abs(v));
}

TEST(TensorDescriptor, AnInPlaceUpdateClipsAtTheEdges) {
  const int64_t M = 33, N = 52;
  Tensor x = random_tensor({M, N}, DType::Float32);
  const Tensor want = x.abs();
  every_mode([&](const char* mode) {
    // The tensor inside a larger buffer: the clipped stores must not touch what follows it.
    Tensor buf = empty({M * N + 64});
    poison(buf);
    Tensor p = buf.slice(0, 0, M * N).view({M, N});
    p.copy_(x);
    descriptor_abs[{tl::cdiv(M, 16), tl::cdiv(N, 32)}](p, M, N, tl::meta("MB", 16),
                                                       tl::meta("NB", 32));
    EXPECT_TRUE(bitwise_equal(p, want)) << mode;
    EXPECT_TRUE(all_nan(buf.slice(0, M * N, M * N + 64))) << mode;
  });
}

TL_JIT(descriptor_strided, tl::Ptr p, tl::Ptr out, tl::Int M, tl::Int N, tl::Int stride,
       tl::Const B) {
  auto desc = tl::make_tensor_descriptor(p, {M, N}, {stride, 1}, {B.int_value(), B.int_value()});
  tl::store(out + tl::arange(0, B)[{tl::_, tl::None}] * B + tl::arange(0, B)[{tl::None, tl::_}],
            desc.load({0, 0}));
}

TL_JIT(descriptor_runtime_stride, tl::Ptr p, tl::Ptr out, tl::Int s1, tl::Const B) {
  auto desc = tl::make_tensor_descriptor(p, {4, 8}, {16, s1}, {B.int_value(), B.int_value()});
  tl::store(out + tl::arange(0, B)[{tl::_, tl::None}] * B + tl::arange(0, B)[{tl::None, tl::_}],
            desc.load({0, 0}));
}

TEST(TensorDescriptor, TmasRulesAreCheckedInTheCheckedModeAndTheInterpreter) {
  // A base off 16-byte alignment (a slice starting at element 1 of a float32 buffer).
  Tensor buf = random_tensor({64}, DType::Float32);
  Tensor p = buf.slice(0, 1, 33).view({4, 8});
  Tensor out = empty({8, 8});
  {
    // Compiled without checks, the load works (the CPU has no TMA).
    ScopedEnv unchecked("TESSERA_DEBUG", nullptr), compiled("TESSERA_INTERPRET", nullptr);
    descriptor_strided[{1}](p, out, 4, 8, 8, tl::meta("B", 8));
    EXPECT_TRUE(bitwise_equal(out.slice(0, 0, 4), p)) << out;
  }
  for (const char* knob : {"TESSERA_DEBUG", "TESSERA_INTERPRET"}) {
    ScopedEnv mode(knob, "1");
    ::testing::internal::CaptureStderr();
    const std::string msg =
        error_of<RuntimeError>([&] { descriptor_strided[{1}](p, out, 4, 8, 8, tl::meta("B", 8)); });
    (void)::testing::internal::GetCapturedStderr();
    EXPECT_NE(msg.find("a tensor descriptor's base must be 16-byte aligned"), std::string::npos)
        << knob << ": " << msg;
    EXPECT_NE(msg.find("test_block_ptr.cpp:"), std::string::npos) << msg;
  }
  // A runtime last stride other than 1.
  Tensor q = random_tensor({4, 16}, DType::Float32);
  ScopedEnv debug("TESSERA_DEBUG", "1");
  ::testing::internal::CaptureStderr();
  const std::string msg =
      error_of<RuntimeError>([&] { descriptor_runtime_stride[{1}](q, out, 2, tl::meta("B", 4)); });
  (void)::testing::internal::GetCapturedStderr();
  EXPECT_NE(msg.find("a tensor descriptor's last stride must be 1"), std::string::npos) << msg;
}

// ---- errors name the kernel and the line
// ---------------------------------------------------------

TL_JIT(bad_boundary_dim, tl::Ptr x, tl::Const B) {
  auto xb = tl::make_block_ptr(x, {8}, {1}, {0}, {B.int_value()}, {0});
  (void)tl::load(xb, {1});
}
TL_JIT(bad_padding, tl::Ptr x, tl::Const B) {
  auto xb = tl::make_block_ptr(x, {8}, {1}, {0}, {B.int_value()}, {0});
  (void)tl::load(xb, {0}, "ones");
}
TL_JIT(bad_last_stride, tl::Ptr x, tl::Const B) {
  auto d = tl::make_tensor_descriptor(x, {4, 4}, {8, 2}, {B.int_value(), B.int_value()});
  (void)d;
}
TL_JIT(bad_advance, tl::Ptr x, tl::Const B) {
  auto xb = tl::make_block_ptr(x, {8, 8}, {8, 1}, {0, 0}, {B.int_value(), B.int_value()}, {1, 0});
  (void)tl::advance(xb, {1});
}
TL_JIT(bad_block_shape, tl::Ptr x) {
  (void)tl::make_block_ptr(x, {8}, {1}, {0}, {6}, {0});
}
TL_JIT(bad_order, tl::Ptr x, tl::Const B) {
  (void)tl::make_block_ptr(x, {8, 8}, {8, 1}, {0, 0}, {B.int_value(), B.int_value()}, {1, 1});
}
TL_JIT(bad_store_shape, tl::Ptr x, tl::Const B) {
  auto xb = tl::make_block_ptr(x, {8, 8}, {8, 1}, {0, 0}, {B.int_value(), B.int_value()}, {1, 0});
  tl::store(xb, tl::zeros({B, 1}, tl::float32));
}

TEST(BlockPtr, MistakesAreCompileErrorsAtTheLine) {
  Tensor x = zeros({64});
  auto check = [&](const std::string& msg, const std::string& want) {
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
    EXPECT_NE(msg.find("test_block_ptr.cpp:"), std::string::npos) << msg;
  };
  check(error_of<CompileError>([&] { bad_boundary_dim[{1}](x, tl::meta("B", 8)); }),
        "boundary_check dimension 1 is out of range for a 1-d block pointer");
  check(error_of<CompileError>([&] { bad_padding[{1}](x, tl::meta("B", 8)); }),
        "padding_option must be \"zero\" or \"nan\", got \"ones\"");
  check(error_of<CompileError>([&] { bad_last_stride[{1}](x, tl::meta("B", 4)); }),
        "a tensor descriptor's last dimension must be contiguous (stride 1), got stride 2");
  check(error_of<CompileError>([&] { bad_advance[{1}](x, tl::meta("B", 4)); }),
        "tl::advance needs one offset per dimension of the 2-d block pointer, got 1");
  check(error_of<CompileError>([&] { bad_block_shape[{1}](x); }),
        "block shape [6] must have powers of 2");
  check(error_of<CompileError>([&] { bad_order[{1}](x, tl::meta("B", 4)); }),
        "order must be a permutation of the dimensions 0..1");
  check(error_of<CompileError>([&] { bad_store_shape[{1}](x, tl::meta("B", 4)); }),
        "stores a block of shape [4, 4], got a value of shape [4, 1]");
}

}  // namespace
