// The affine analysis (ir/affine.h) on IR text: forms, contiguity, constancy and divisibility,
// where forms stop, and the exactness flag the emitters' 32-bit checks rely on; the
// materialization plan built on them, and what the CPU emitter makes of both.
#include <gtest/gtest.h>

#include "backend/cpu/emit.h"
#include "ir/affine.h"
#include "ir/materialize.h"
#include "ir/text.h"
#include "ir/uses.h"

using namespace tessera;

namespace {

std::vector<int64_t> coef(const ir::AffineForm* f) {
  return f ? std::vector<int64_t>(f->coef.begin(), f->coef.end()) : std::vector<int64_t>{-999};
}

const char* kTile2d = R"(kernel @k(%0: *fp32 x {div16}, %1: i32 n, %2: i32 stride) {
  %3 = program_id {axis = 0} : i32
  %4 = const 64 : i32
  %5 = mul %3, %4 : i32
  %6 = arange {start = 0, end = 16} : <16x i32>
  %7 = expand_dims %6 {axis = 1} : <16x1x i32>
  %8 = broadcast %7 : <16x32x i32>
  %9 = arange {start = 0, end = 32} : <32x i32>
  %10 = expand_dims %9 {axis = 0} : <1x32x i32>
  %11 = broadcast %10 : <16x32x i32>
  %12 = const 32 : <16x32x i32>
  %13 = mul %8, %12 : <16x32x i32>
  %14 = add %13, %11 : <16x32x i32>
  %15 = splat %5 : <16x32x i32>
  %16 = add %15, %14 : <16x32x i32>
  %17 = splat %2 : <16x32x i32>
  %18 = mul %8, %17 : <16x32x i32>
  %19 = splat %0 : <16x32x *fp32>
  %20 = addptr %19, %16 : <16x32x *fp32>
  %21 = permute %16 {perm = [1, 0]} : <32x16x i32>
  %22 = load %20 : <16x32x fp32>
  %23 = const 3 : <16x32x i32>
  %24 = sub %16, %23 : <16x32x i32>
  %25 = load %0 : fp32
}
)";

TEST(IrAffine, FormsThroughViewsAddAndMultiplicationByConstants) {
  const auto f = ir::parse(kTile2d);
  const ir::AffineInfo a(*f);
  EXPECT_EQ(coef(a.form(6)), (std::vector<int64_t>{1}));
  EXPECT_EQ(coef(a.form(8)), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(coef(a.form(11)), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(coef(a.form(14)), (std::vector<int64_t>{32, 1}));  // row * 32 + col
  EXPECT_EQ(coef(a.form(16)), (std::vector<int64_t>{32, 1}));
  EXPECT_EQ(coef(a.form(20)), (std::vector<int64_t>{32, 1}));  // pointers: in elements
  EXPECT_EQ(coef(a.form(21)), (std::vector<int64_t>{1, 32}));  // permuted
  EXPECT_EQ(coef(a.form(24)), (std::vector<int64_t>{32, 1}));
  EXPECT_EQ(a.form(18), nullptr);  // index * a runtime stride: not affine
  EXPECT_EQ(a.form(22), nullptr);  // loaded
  EXPECT_EQ(a.form(25), nullptr);  // a float scalar
  // Contiguity and constancy per dimension.
  EXPECT_EQ(a.contiguity(16, 1), 32);
  EXPECT_EQ(a.contiguity(16, 0), 1);
  EXPECT_EQ(a.constancy(8, 1), 32);
  EXPECT_EQ(a.constancy(8, 0), 1);
  EXPECT_EQ(a.contiguity(21, 0), 32);
  EXPECT_EQ(a.contiguity(18, 1), 1);  // no form: nothing known
  // Bases: known values and divisibility.
  ASSERT_TRUE(a.form(14)->base_value.has_value());
  EXPECT_EQ(*a.form(14)->base_value, 0);
  EXPECT_FALSE(a.form(16)->base_value.has_value());  // pid * 64 is a runtime value
  EXPECT_EQ(a.form(5)->divisibility, 64);            // pid * 64
  EXPECT_EQ(a.form(16)->divisibility, 64);
  EXPECT_EQ(a.form(20)->divisibility, 16);  // a 16-byte aligned pointer plus 256-byte steps
  EXPECT_EQ(a.form(24)->divisibility, 1);   // minus 3
  EXPECT_EQ(*a.form(23)->base_value, 3);
  // Exactness: arange and views cannot wrap; arithmetic may (the 32-bit check applies there).
  EXPECT_TRUE(a.form(11)->exact);
  EXPECT_FALSE(a.form(14)->exact);
  // Scalars are uniform leaves: their own variable, whatever computed them.
  EXPECT_EQ(a.node(a.form(5)->base).kind, ir::UniformNode::Kind::Value);
  EXPECT_EQ(a.node(a.form(5)->base).value, 5);
  EXPECT_TRUE(a.form(1)->coef.empty());
}

TEST(IrAffine, LoopCarriedTilesHaveNoFormAndTheInductionVariableIsUniform) {
  const auto f = ir::parse(R"(kernel @k(%0: i32 n) {
  %1 = const 0 : i32
  %2 = const 1 : i32
  %3 = arange {start = 0, end = 8} : <8x i32>
  %4 = for %5: i32 = %1 to %0 step %2 iter_args(%6: <8x i32> = %3) : <8x i32> {
    %7 = splat %5 : <8x i32>
    %8 = add %6, %7 : <8x i32>
    %9 = add %3, %7 : <8x i32>
    yield %8
  }
}
)");
  const ir::AffineInfo a(*f);
  ASSERT_NE(a.form(5), nullptr);
  EXPECT_TRUE(a.form(5)->coef.empty());
  EXPECT_EQ(a.form(6), nullptr);  // carried: changes per iteration
  EXPECT_EQ(a.form(8), nullptr);
  EXPECT_EQ(a.form(4), nullptr);                          // the loop's tile result
  EXPECT_EQ(coef(a.form(9)), (std::vector<int64_t>{1}));  // arange + the induction variable
}

// Loose forms (what vector widths need): a runtime stride is known by its divisor, a tile that is
// no affine function of its index but varies along one dimension (`offs % m`) is an unknown term
// of that dimension, and a scalar's conversion keeps its divisibility. form() keeps giving only
// exact forms.
TEST(IrAffine, LooseFormsKnowRuntimeStridesAndRemaindersByTheirDivisors) {
  const auto f =
      ir::parse(R"(kernel @k(%0: *fp16 x {div16}, %1: i32 m, %2: i32 s {div16}, %3: i32 t) {
  %4 = arange {start = 0, end = 16} : <16x i32>
  %5 = splat %1 : <16x i32>
  %6 = rem %4, %5 : <16x i32>
  %7 = expand_dims %6 {axis = 1} : <16x1x i32>
  %8 = broadcast %7 : <16x32x i32>
  %9 = splat %2 : <16x32x i32>
  %10 = mul %8, %9 : <16x32x i32>
  %11 = arange {start = 0, end = 32} : <32x i32>
  %12 = expand_dims %11 {axis = 0} : <1x32x i32>
  %13 = broadcast %12 : <16x32x i32>
  %14 = add %10, %13 : <16x32x i32>
  %15 = splat %0 : <16x32x *fp16>
  %16 = addptr %15, %14 : <16x32x *fp16>
  %17 = splat %3 : <16x32x i32>
  %18 = mul %13, %17 : <16x32x i32>
  %19 = mul %4, %4 : <16x i32>
  %20 = mul %8, %13 : <16x32x i32>
  %21 = cast %2 : i64
  %22 = const 0 : <16x32x i32>
  %23 = mul %10, %22 : <16x32x i32>
}
)");
  const ir::AffineInfo a(*f);
  auto unknown = [&](ir::ValueId v) {
    const ir::AffineForm* l = a.loose_form(v);
    if (!l) return std::vector<int64_t>{-999};
    std::vector<int64_t> u;
    for (size_t d = 0; d < l->coef.size(); ++d) u.push_back(l->coef_known(d) ? -1 : l->unknown[d]);
    return u;  // -1: known
  };
  EXPECT_EQ(unknown(6), (std::vector<int64_t>{1}));        // i % m: any value along its dimension
  EXPECT_EQ(unknown(8), (std::vector<int64_t>{1, -1}));    // broadcast: constant along columns
  EXPECT_EQ(unknown(10), (std::vector<int64_t>{16, -1}));  // times a stride divisible by 16
  EXPECT_EQ(unknown(14), (std::vector<int64_t>{16, -1}));
  EXPECT_EQ(a.loose_form(14)->coef[1], 1);  // ... plus the column: contiguous
  EXPECT_EQ(unknown(16), (std::vector<int64_t>{16, -1}));
  EXPECT_EQ(a.loose_form(16)->coef[1], 1);
  EXPECT_EQ(a.loose_form(16)->divisibility, 16);           // the base: the aligned pointer
  EXPECT_EQ(unknown(18), (std::vector<int64_t>{-1, 1}));   // column * a stride of unknown parity
  EXPECT_EQ(unknown(19), (std::vector<int64_t>{1}));       // i * i: an unknown term too
  EXPECT_EQ(a.loose_form(20), nullptr);                    // varies along both: nothing known
  EXPECT_EQ(a.form(21)->divisibility, 16);                 // int32 -> int64 keeps it
  EXPECT_EQ(unknown(23), (std::vector<int64_t>{-1, -1}));  // times zero: known zeros
  for (ir::ValueId v : {6, 8, 10, 14, 16, 18, 19}) EXPECT_EQ(a.form(v), nullptr) << v;
  EXPECT_NE(a.form(23), nullptr);
}

// The materialization plan keeps a load inline when every use ends, through inline values, in one
// op (`d * d`, d = x - 1 from the load, stored: one loop, no array), and stores it when its uses
// end in two ops (each would evaluate it in a loop of its own), unless the emitter reads loads
// again (the CPU's `reread_loads`): then up to four ops each read it, where its address is direct
// and nothing writes memory before the last of them.
TEST(IrMaterialize, ALoadUsedTwiceByOneStoreStaysInline) {
  auto plan_of = [](const std::string& tail, bool reread = false) {
    const auto f = ir::parse(R"(kernel @k(%0: *fp32 x, %1: *fp32 out) {
  %2 = arange {start = 0, end = 8} : <8x i32>
  %3 = splat %0 : <8x *fp32>
  %4 = addptr %3, %2 : <8x *fp32>
  %5 = load %4 : <8x fp32>
  %6 = splat %1 : <8x *fp32>
  %7 = addptr %6, %2 : <8x *fp32>
  %8 = const 1.0 : fp32
  %9 = splat %8 : <8x fp32>
  %10 = sub %5, %9 : <8x fp32>
  %11 = mul %10, %10 : <8x fp32>
)" + tail + "}\n");
    const ir::UseInfo uses(*f);
    return ir::MaterializationPlan(*f, uses, reread).storage(5);
  };
  EXPECT_EQ(plan_of("  store %7, %11\n"), ir::Storage::Inline);
  EXPECT_EQ(plan_of("  store %7, %11\n  store %4, %10\n"), ir::Storage::Array);
  // A row's max and its use after: two reads (reread) or one array.
  const std::string max_then_store =
      "  %12 = reduce.max %5 {axis = 0} : fp32\n  %13 = splat %12 : <8x fp32>\n"
      "  %14 = sub %11, %13 : <8x fp32>\n  store %7, %14\n";
  EXPECT_EQ(plan_of(max_then_store, true), ir::Storage::Inline);
  EXPECT_EQ(plan_of(max_then_store, false), ir::Storage::Array);
  // A store between the two readers: the second would read what the store wrote.
  EXPECT_EQ(plan_of("  store %7, %11\n  store %4, %10\n", true), ir::Storage::Array);
  // Five readers (four sums and the store): more than kMaxRereads; four are read again.
  auto sums = [](int count) {
    std::string r;
    for (int k = 0; k < count; ++k)
      r += "  %" + std::to_string(20 + k) + " = reduce.sum %5 {axis = 0} : fp32\n";
    return r + "  store %7, %11\n";
  };
  EXPECT_EQ(plan_of(sums(4), true), ir::Storage::Array);
  EXPECT_EQ(plan_of(sums(3), true), ir::Storage::Inline);
}

// A gather (its address from another load) is not read again per use: the index load would be
// too.
TEST(IrMaterialize, AGatheredLoadUsedTwiceIsStored) {
  const auto f = ir::parse(R"(kernel @k(%0: *fp32 x, %1: *i32 idx, %2: *fp32 out) {
  %3 = arange {start = 0, end = 8} : <8x i32>
  %4 = splat %1 : <8x *i32>
  %5 = addptr %4, %3 : <8x *i32>
  %6 = load %5 : <8x i32>
  %7 = splat %0 : <8x *fp32>
  %8 = addptr %7, %6 : <8x *fp32>
  %9 = load %8 : <8x fp32>
  %10 = reduce.max %9 {axis = 0} : fp32
  %11 = splat %10 : <8x fp32>
  %12 = sub %9, %11 : <8x fp32>
  %13 = splat %2 : <8x *fp32>
  %14 = addptr %13, %3 : <8x *fp32>
  store %14, %12
}
)");
  const ir::UseInfo uses(*f);
  EXPECT_EQ(ir::MaterializationPlan(*f, uses, true).storage(9), ir::Storage::Array);
}

// Triton's tutorial 02 softmax row on the CPU: the row is loaded once and read by the max and by
// the exp (no array for it: each reads memory, the second from the cache), and the max's
// vector loop, where the mask is proven true, loads the row in place (`trt::load16(` of the
// address) instead of staging it through a buffer first. A store before the max keeps the
// array (the exp must not read what the store wrote).
TEST(CpuEmit, ASoftmaxRowIsReadInPlaceByItsMaxAndItsExp) {
  auto source = [](const std::string& before_max) {
    const auto f = ir::parse(R"(kernel @k(%0: *fp32 out {div16}, %1: *fp32 x {div16}, %2: i32 n) {
  %3 = program_id {axis = 0} : i32
  %4 = arange {start = 0, end = 1024} : <1024x i32>
  %5 = mul %3, %2 : i32
  %6 = addptr %1, %5 : *fp32
  %7 = splat %6 : <1024x *fp32>
  %8 = addptr %7, %4 : <1024x *fp32>
  %9 = splat %2 : <1024x i32>
  %10 = cmp.lt %4, %9 : <1024x i1>
  %11 = const -inf : <1024x fp32>
  %12 = load %8, %10, %11 : <1024x fp32>
  %13 = addptr %0, %5 : *fp32
  %14 = splat %13 : <1024x *fp32>
  %15 = addptr %14, %4 : <1024x *fp32>
)" + before_max + R"(  %16 = reduce.max %12 {axis = 0} : fp32
  %17 = splat %16 : <1024x fp32>
  %18 = sub %12, %17 : <1024x fp32>
  %19 = exp %18 : <1024x fp32>
  %20 = reduce.sum %19 {axis = 0} : fp32
  %21 = splat %20 : <1024x fp32>
  %22 = div %19, %21 : <1024x fp32>
  store %15, %22, %10
}
)");
    return backend::cpu::emit(*f).source;
  };
  const std::string row = source("");
  EXPECT_EQ(row.find("v12["), std::string::npos) << row;
  EXPECT_NE(row.find("trt::fmax_num(_acc"), std::string::npos) << row;
  EXPECT_NE(row.find("trt::load16((v"), std::string::npos) << row;
  const std::string stored = source("  store %15, %12, %10\n");
  EXPECT_NE(stored.find("float v12[1024]"), std::string::npos) << stored;
  EXPECT_EQ(stored.find("trt::load16((v"), std::string::npos) << stored;
}

}  // namespace
