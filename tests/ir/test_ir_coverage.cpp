// The store-coverage proof (ir/coverage.h) on IR text: what a store covers (the program axis, the
// block, the mask's bound, the offsets' width) and each reason a store proves nothing.
#include <gtest/gtest.h>

#include "ir/coverage.h"
#include "ir/text.h"

using namespace tessera;

namespace {

ir::StoreCoverage cover_of(const std::string& text, size_t param) {
  const auto f = ir::parse(text);
  const auto c = ir::store_coverage(*f);
  EXPECT_EQ(c.size(), f->params.size());
  return c.at(param);
}

// The seed's add_kernel, with BLOCK_SIZE = 4: program k stores [4k, 4k + 4) where < n.
const char* kAdd = R"(kernel @add(%0: *fp32 x, %1: *fp32 out, %2: i32 n) {
  %3 = const 4 : i32
  %4 = program_id {axis = 0} : i32
  %5 = mul %4, %3 : i32
  %6 = arange {start = 0, end = 4} : <4x i32>
  %7 = splat %5 : <4x i32>
  %8 = add %7, %6 : <4x i32>
  %9 = splat %2 : <4x i32>
  %10 = cmp.lt %8, %9 : <4x i1>
  %11 = splat %0 : <4x *fp32>
  %12 = addptr %11, %8 : <4x *fp32>
  %13 = load %12, %10 : <4x fp32>
  %14 = splat %1 : <4x *fp32>
  %15 = addptr %14, %8 : <4x *fp32>
  store %15, %13, %10
}
)";

TEST(IrCoverage, SeedAddKernelCoversItsBlocksBelowTheBound) {
  const ir::StoreCoverage c = cover_of(kAdd, 1);
  ASSERT_TRUE(c.proven) << c.why_not;
  EXPECT_EQ(c.axis, 0);
  EXPECT_EQ(c.tile, 4);
  EXPECT_TRUE(c.bounded);
  EXPECT_EQ(c.bound_param, 2);
  EXPECT_EQ(c.bound_constant, 0);
  EXPECT_EQ(c.offset_bits, 32);
  // The loaded parameter is not stored through.
  EXPECT_FALSE(cover_of(kAdd, 0).proven);
  EXPECT_NE(cover_of(kAdd, 0).why_not.find("no store"), std::string::npos);
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(IrCoverage, EachReasonAStoreProvesNothing) {
  auto why = [](const std::string& text) {
    const ir::StoreCoverage c = cover_of(text, 1);
    EXPECT_FALSE(c.proven);
    return c.why_not;
  };
  // Program k stores at 8k: every other block is skipped.
  EXPECT_NE(why(replaced(kAdd, "%3 = const 4 : i32", "%3 = const 8 : i32")).find("8*k"),
            std::string::npos);
  // Offsets shifted by one.
  const std::string shifted =
      replaced(kAdd, "  %14 = splat %1 : <4x *fp32>\n  %15 = addptr %14, %8",
               "  %16 = const 1 : <4x i32>\n  %17 = add %8, %16 : <4x i32>\n"
               "  %14 = splat %1 : <4x *fp32>\n  %15 = addptr %14, %17");
  EXPECT_NE(why(shifted).find("do not start at 0"), std::string::npos);
  // A strided block (every other element).
  const std::string strided =
      replaced(kAdd, "  %14 = splat %1 : <4x *fp32>\n  %15 = addptr %14, %8",
               "  %16 = const 2 : <4x i32>\n  %17 = mul %8, %16 : <4x i32>\n"
               "  %14 = splat %1 : <4x *fp32>\n  %15 = addptr %14, %17");
  EXPECT_NE(why(strided).find("not dense"), std::string::npos);
  // A mask that is not `offsets < bound`: a loaded value decides.
  EXPECT_NE(why(replaced(kAdd, "store %15, %13, %10",
                         "%16 = cmp.gt %13, %13 : <4x i1>\n  store %15, "
                         "%13, %16"))
                .find("mask"),
            std::string::npos);
  // Offsets that depend on a scalar parameter (n * pid).
  EXPECT_NE(why(replaced(kAdd, "%5 = mul %4, %3 : i32", "%5 = mul %4, %2 : i32")).find("linear"),
            std::string::npos);
}

TEST(IrCoverage, ABoundWithAConstantAndLessEqualMasks) {
  // offsets <= n - 1 is offsets < n; 5 >= offsets is offsets < 6.
  const std::string le = replaced(kAdd, "%10 = cmp.lt %8, %9 : <4x i1>",
                                  "%16 = const -1 : <4x i32>\n  %17 = add %9, %16 : <4x i32>\n"
                                  "  %10 = cmp.le %8, %17 : <4x i1>");
  const ir::StoreCoverage a = cover_of(le, 1);
  ASSERT_TRUE(a.proven) << a.why_not;
  EXPECT_EQ(a.bound_param, 2);
  EXPECT_EQ(a.bound_constant, 0);
  const std::string ge = replaced(kAdd, "%10 = cmp.lt %8, %9 : <4x i1>",
                                  "%16 = const 5 : <4x i32>\n  %10 = cmp.ge %16, %8 : <4x i1>");
  const ir::StoreCoverage b = cover_of(ge, 1);
  ASSERT_TRUE(b.proven) << b.why_not;
  EXPECT_EQ(b.bound_param, -1);
  EXPECT_EQ(b.bound_constant, 6);
  // Without a mask: unbounded.
  const ir::StoreCoverage c = cover_of(replaced(kAdd, "store %15, %13, %10", "store %15, %13"), 1);
  ASSERT_TRUE(c.proven);
  EXPECT_FALSE(c.bounded);
}

TEST(IrCoverage, TwoDimensionalBlocksInEitherOrderAndNestedStores) {
  // A 4x8 block at row-major offsets r * 8 + c (and its transpose, c * 4 + r), program k at 32k.
  const char* k2d = R"(kernel @k(%0: *fp32 out, %1: i64 n) {
  %90 = program_id {axis = 1} : i32
  %2 = cast %90 : i64
  %3 = const 32 : i64
  %4 = mul %2, %3 : i64
  %5 = arange {start = 0, end = 4} : <4x i32>
  %6 = cast %5 : <4x i64>
  %7 = expand_dims %6 {axis = 1} : <4x1x i64>
  %8 = broadcast %7 : <4x8x i64>
  %9 = const 8 : <4x8x i64>
  %10 = mul %8, %9 : <4x8x i64>
  %11 = arange {start = 0, end = 8} : <8x i32>
  %12 = cast %11 : <8x i64>
  %13 = expand_dims %12 {axis = 0} : <1x8x i64>
  %14 = broadcast %13 : <4x8x i64>
  %15 = add %10, %14 : <4x8x i64>
  %16 = splat %4 : <4x8x i64>
  %17 = add %16, %15 : <4x8x i64>
  %18 = splat %0 : <4x8x *fp32>
  %19 = addptr %18, %17 : <4x8x *fp32>
  %20 = const 1.0 : <4x8x fp32>
  store %19, %20
}
)";
  const ir::StoreCoverage c = cover_of(k2d, 0);
  ASSERT_TRUE(c.proven) << c.why_not;
  EXPECT_EQ(c.axis, 1);
  EXPECT_EQ(c.tile, 32);
  EXPECT_EQ(c.offset_bits, 64);
  EXPECT_FALSE(c.bounded);
  const std::string transposed =
      replaced(replaced(k2d, "%9 = const 8 : <4x8x i64>", "%9 = const 1 : <4x8x i64>"),
               "%15 = add %10, %14 : <4x8x i64>",
               "%21 = const 4 : <4x8x i64>\n  %22 = mul %14, %21 : <4x8x i64>\n"
               "  %15 = add %10, %22 : <4x8x i64>");
  const ir::StoreCoverage t = cover_of(transposed, 0);
  ASSERT_TRUE(t.proven) << t.why_not;
  EXPECT_EQ(t.tile, 32);
  // Rows 16 apart but 8 wide: holes between them.
  const ir::StoreCoverage h =
      cover_of(replaced(k2d, "%9 = const 8 : <4x8x i64>", "%9 = const 16 : <4x8x i64>"), 0);
  EXPECT_FALSE(h.proven);
  EXPECT_NE(h.why_not.find("not dense"), std::string::npos) << h.why_not;
  // A store inside a loop may not run.
  const char* looped = R"(kernel @k(%0: *fp32 out, %1: i32 n) {
  %2 = const 0 : i32
  %3 = const 1 : i32
  for %4: i32 = %2 to %1 step %3 {
    %5 = arange {start = 0, end = 4} : <4x i32>
    %6 = splat %0 : <4x *fp32>
    %7 = addptr %6, %5 : <4x *fp32>
    %8 = const 1.0 : <4x fp32>
    store %7, %8
    yield
  }
}
)";
  const ir::StoreCoverage l = cover_of(looped, 0);
  EXPECT_FALSE(l.proven);
  EXPECT_NE(l.why_not.find("top level"), std::string::npos) << l.why_not;
}

}  // namespace
