#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "sym_test_node.h"
#include "tessera/symint.h"

using namespace tessera;

using tessera::testing::GuardLog;
using tessera::testing::TestNode;

TEST(SymInt, PlainValuesBehaveAsIntegers) {
  SymInt a = 6, b = 4;
  EXPECT_FALSE(a.is_symbolic());
  EXPECT_EQ(int64_t(a + b), 10);
  EXPECT_EQ(int64_t(a * 2), 12);
  EXPECT_EQ(int64_t(3 - a), -3);
  EXPECT_TRUE(a > b);
  EXPECT_TRUE(a == 6);
  EXPECT_TRUE(6 == a);
  int64_t plain = a;
  EXPECT_EQ(plain, 6);
  EXPECT_EQ(floordiv(SymInt(-7), 2).expect_int(), -4);
  EXPECT_EQ(mod(SymInt(-7), 2).expect_int(), 1);
  EXPECT_EQ(mod(SymInt(7), -2).expect_int(), -1);
  EXPECT_EQ(cdiv(SymInt(10), 4).expect_int(), 3);
  EXPECT_EQ(sym_max(SymInt(3), 5).expect_int(), 5);
  EXPECT_EQ(sizeof(SymInt), sizeof(int64_t));
  SymInt big = int64_t(1) << 61;
  EXPECT_THROW(big * big, ValueError);
  EXPECT_THROW((void)SymInt(std::numeric_limits<int64_t>::min()), ValueError);
  EXPECT_THROW(floordiv(SymInt(1), 0), ValueError);
}

TEST(SymInt, PlainArraysViewAsInt64) {
  SymDimVector v{2, 3, 4};
  IntArrayRef ints = as_int_array(v);
  ASSERT_EQ(ints.size(), 3u);
  EXPECT_EQ(ints[2], 4);
  EXPECT_EQ(sym_product(v).expect_int(), 24);
}

TEST(SymInt, SymbolicArithmeticBuildsExpressions) {
  auto log = std::make_shared<GuardLog>();
  SymInt n(TestNode::symbol(log, "s0", 10));
  EXPECT_TRUE(n.is_symbolic());
  SymInt e = (n + 3) * 2;
  EXPECT_TRUE(e.is_symbolic());
  EXPECT_EQ(e.str(), "((s0 + 3) * 2)");
  EXPECT_FALSE(e.maybe_as_int().has_value());
  EXPECT_TRUE(log->guards.empty());  // building expressions guards nothing

  SymInt copy = e;  // refcounts the node
  EXPECT_EQ(copy.str(), e.str());
}

TEST(SymInt, ConversionAndBranchingGuardWithLocation) {
  auto log = std::make_shared<GuardLog>();
  SymInt n(TestNode::symbol(log, "s0", 10));
  const int line = __LINE__ + 1;
  int64_t v = (n + 1).guard_int();
  EXPECT_EQ(v, 11);
  ASSERT_EQ(log->guards.size(), 1u);
  EXPECT_EQ(log->guards[0], "(s0 + 1) == 11");
  EXPECT_EQ(log->locs[0].line, line);

  {
    UserLocGuard g(SourceLoc{"model.cpp", 42});
    int64_t implicit = n * 2;  // implicit conversion guards at the active user location
    EXPECT_EQ(implicit, 20);
    if (n < 16) {
      SUCCEED();
    } else {
      FAIL();
    }
  }
  ASSERT_EQ(log->guards.size(), 3u);
  EXPECT_EQ(log->guards[2], "(s0 < 16) is True");
  EXPECT_EQ(log->locs[2].line, 42);
}

TEST(SymBool, PlainLogic) {
  SymBool t = true, f = false;
  EXPECT_FALSE(t.sym_and(f).guard_bool());
  EXPECT_TRUE(t.sym_or(f).guard_bool());
  EXPECT_TRUE(f.sym_not().guard_bool());
}
