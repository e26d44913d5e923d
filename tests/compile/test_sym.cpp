// The symbolic integer library against brute force: random expressions are built twice, once
// through the simplifying Context and once as a plain tree, and must agree on every sampled
// binding; ranges must contain every value; relations decided statically must hold everywhere;
// the bytecode Program must match the evaluator.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>

#include "compile/sym.h"
#include "tessera/error.h"

using namespace tessera::compiler::sym;

namespace {

// Python's floor division and modulo, written independently of the library (by the definition
// through the real quotient; exact for the small values the tests use).
int64_t ref_floordiv(int64_t a, int64_t b) {
  return static_cast<int64_t>(
      std::floor(static_cast<long double>(a) / static_cast<long double>(b)));
}
int64_t ref_mod(int64_t a, int64_t b) {
  return a - b * ref_floordiv(a, b);
}

TEST(SymReference, FloorDivisionAndModuloArePythons) {
  EXPECT_EQ(ref_floordiv(-7, 2), -4);
  EXPECT_EQ(ref_floordiv(7, -2), -4);
  EXPECT_EQ(ref_floordiv(-7, -2), 3);
  EXPECT_EQ(ref_mod(-7, 2), 1);
  EXPECT_EQ(ref_mod(7, -2), -1);
  EXPECT_EQ(ref_mod(6, 3), 0);
}

// A plain expression tree with Python semantics, evaluated naively.
struct Naive {
  std::function<int64_t(const std::vector<int64_t>&)> eval;
  std::string text;
};

struct Gen {
  Context& ctx;
  std::mt19937_64& rng;
  std::vector<ExprPtr> syms;

  int64_t small(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }

  std::pair<ExprPtr, Naive> leaf() {
    if (small(0, 2) == 0) {
      const int64_t c = small(-6, 9);
      return {ctx.constant(c), {[c](const std::vector<int64_t>&) { return c; }, std::to_string(c)}};
    }
    const size_t s = static_cast<size_t>(small(0, static_cast<int64_t>(syms.size()) - 1));
    return {syms[s],
            {[s](const std::vector<int64_t>& v) { return v[s]; }, "s" + std::to_string(s)}};
  }

  std::pair<ExprPtr, Naive> expr(int depth) {
    if (depth == 0) return leaf();
    auto pa = expr(depth - 1),
         pb = expr(depth - 1);  // (not structured bindings: clang 14 cannot capture them)
    auto a = pa.first, b = pb.first;
    auto na = pa.second, nb = pb.second;
    switch (small(0, 8)) {
      case 0:
        return {ctx.add(a, b),
                {[na, nb](auto& v) { return na.eval(v) + nb.eval(v); },
                 "(" + na.text + "+" + nb.text + ")"}};
      case 1:
        return {ctx.sub(a, b),
                {[na, nb](auto& v) { return na.eval(v) - nb.eval(v); },
                 "(" + na.text + "-" + nb.text + ")"}};
      case 2: {
        auto pc = leaf();  // keep products small
        auto c = pc.first;
        auto nc = pc.second;
        return {ctx.mul(a, c),
                {[na, nc](auto& v) { return na.eval(v) * nc.eval(v); },
                 "(" + na.text + "*" + nc.text + ")"}};
      }
      case 3: {
        const int64_t k = small(0, 4) == 0 ? -3 : small(1, 8);
        return {ctx.floordiv(a, ctx.constant(k)),
                {[na, k](auto& v) { return ref_floordiv(na.eval(v), k); },
                 "(" + na.text + "//" + std::to_string(k) + ")"}};
      }
      case 4: {
        const int64_t k = small(1, 8);
        return {ctx.mod(a, ctx.constant(k)),
                {[na, k](auto& v) { return ref_mod(na.eval(v), k); },
                 "(" + na.text + "%" + std::to_string(k) + ")"}};
      }
      case 5: {
        const int64_t k = small(1, 8);
        return {ctx.ceildiv(a, ctx.constant(k)),
                {[na, k](auto& v) { return -ref_floordiv(-na.eval(v), k); },
                 "cdiv(" + na.text + "," + std::to_string(k) + ")"}};
      }
      case 6:
        return {ctx.min(a, b),
                {[na, nb](auto& v) { return std::min(na.eval(v), nb.eval(v)); },
                 "min(" + na.text + "," + nb.text + ")"}};
      case 7:
        return {ctx.max(a, b),
                {[na, nb](auto& v) { return std::max(na.eval(v), nb.eval(v)); },
                 "max(" + na.text + "," + nb.text + ")"}};
      default: {
        // Division by a symbol with a positive range (s0 and s1).
        const size_t s = static_cast<size_t>(
            small(0, std::min<int64_t>(1, static_cast<int64_t>(syms.size()) - 1)));
        return {ctx.floordiv(a, syms[s]),
                {[na, s](auto& v) { return ref_floordiv(na.eval(v), v[s]); },
                 "(" + na.text + "//s" + std::to_string(s) + ")"}};
      }
    }
  }
};

std::vector<int64_t> sample(Context& ctx, std::mt19937_64& rng) {
  std::vector<int64_t> v;
  for (int s = 0; s < ctx.num_symbols(); ++s) {
    const Range r = ctx.symbol_range(s);
    v.push_back(
        std::uniform_int_distribution<int64_t>(r.lo, std::min<int64_t>(r.hi, r.lo + 60))(rng));
  }
  return v;
}

TEST(SymbolicIntegers, SimplificationAgreesWithBruteForce) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    Context ctx;
    Gen g{ctx,
          rng,
          {ctx.new_symbol("s0"), ctx.new_symbol("s1", {1, 40}), ctx.new_symbol("s2", {0, 7})}};
    auto [e, naive] = g.expr(static_cast<int>(g.small(1, 4)));
    const Range r = ctx.range(e);
    for (int k = 0; k < 40; ++k) {
      const auto v = sample(ctx, rng);
      const int64_t want = naive.eval(v);
      ASSERT_EQ(ctx.evaluate(e, v), want) << naive.text << " simplified to " << ctx.str(e);
      ASSERT_TRUE(r.contains(want))
          << naive.text << " = " << want << " outside [" << r.lo << ", " << r.hi << "]";
    }
  }
}

TEST(SymbolicIntegers, RelationsDecidedStaticallyHoldEverywhere) {
  std::mt19937_64 rng(11);
  int decided = 0;
  for (int trial = 0; trial < 400; ++trial) {
    Context ctx;
    Gen g{ctx, rng, {ctx.new_symbol("s0"), ctx.new_symbol("s1", {1, 40})}};
    auto [a, na] = g.expr(2);
    auto [b, nb] = g.expr(1);
    const int which = static_cast<int>(g.small(0, 5));
    ExprPtr rel = which == 0   ? ctx.eq(a, b)
                  : which == 1 ? ctx.ne(a, b)
                  : which == 2 ? ctx.lt(a, b)
                  : which == 3 ? ctx.le(a, b)
                  : which == 4 ? ctx.gt(a, b)
                               : ctx.ge(a, b);
    ExprPtr notrel = ctx.logical_not(rel);
    decided += rel->kind == Kind::BoolConst;
    for (int k = 0; k < 30; ++k) {
      const auto v = sample(ctx, rng);
      const int64_t x = na.eval(v), y = nb.eval(v);
      const bool want = which == 0   ? x == y
                        : which == 1 ? x != y
                        : which == 2 ? x < y
                        : which == 3 ? x <= y
                        : which == 4 ? x > y
                                     : x >= y;
      ASSERT_EQ(ctx.evaluate(rel, v) != 0, want)
          << na.text << " op" << which << " " << nb.text << " as " << ctx.str(rel);
      ASSERT_EQ(ctx.evaluate(notrel, v) != 0, !want) << ctx.str(notrel);
    }
  }
  EXPECT_GT(decided, 10);  // the analysis does decide some
}

// k * (a // k) is a - a % k: a grid of cdiv(n, k) blocks of k covers n, whatever n (the dead-fill
// proof), and the bound is tight.
TEST(SymbolicIntegers, MultiplesOfAFloorDivisionKeepTheirNumerator) {
  Context ctx;
  ExprPtr n = ctx.new_symbol("s0"), m = ctx.new_symbol("s1", {1, 40});
  for (int64_t k : {1, 4, 1024}) {
    ExprPtr blocks = ctx.ceildiv(ctx.mul(n, m), ctx.constant(k));
    ExprPtr slack = ctx.sub(ctx.mul(blocks, ctx.constant(k)), ctx.mul(n, m));
    const Range r = ctx.range(slack);
    EXPECT_EQ(r.lo, 0) << k;
    EXPECT_EQ(r.hi, k - 1) << k;
    EXPECT_EQ(ctx.ge(ctx.mul(blocks, ctx.constant(k)), ctx.mul(n, m)), ctx.boolean(true)) << k;
    // Twice the elements: not decided for k > 1 (true for small n only); false for k = 1.
    if (k > 1) {
      EXPECT_NE(
          ctx.ge(ctx.mul(blocks, ctx.constant(k)), ctx.mul(ctx.constant(2), ctx.mul(n, m)))->kind,
          Kind::BoolConst)
          << k;
    }
  }
  // A coefficient that is not a multiple of the divisor keeps the plain interval.
  ExprPtr odd = ctx.sub(ctx.mul(ctx.floordiv(n, ctx.constant(4)), ctx.constant(6)), n);
  EXPECT_NE(ctx.ge(odd, ctx.constant(0))->kind, Kind::BoolConst);
}

TEST(SymbolicIntegers, CanonicalFormsAndPrinting) {
  Context ctx;
  ExprPtr n = ctx.new_symbol("s0"), m = ctx.new_symbol("s1");
  EXPECT_EQ(ctx.add(n, m), ctx.add(m, n));  // hash-consed, commutative
  EXPECT_EQ(ctx.mul(ctx.add(n, ctx.constant(1)), ctx.constant(2)),
            ctx.add(ctx.add(n, n), ctx.constant(2)));
  EXPECT_EQ(ctx.sub(n, n), ctx.constant(0));
  EXPECT_EQ(ctx.floordiv(ctx.mul(n, ctx.constant(4)), ctx.constant(4)), n);
  EXPECT_EQ(ctx.mod(ctx.add(ctx.mul(n, ctx.constant(8)), ctx.constant(3)), ctx.constant(4)),
            ctx.constant(3));
  EXPECT_EQ(ctx.str(ctx.ceildiv(n, ctx.constant(4))), "(s0 + 3)//4");
  EXPECT_EQ(ctx.str(ctx.add(ctx.mul(n, m), ctx.constant(-3))), "s0*s1 - 3");
  EXPECT_EQ(ctx.str(ctx.lt(n, ctx.constant(5))), "s0 < 5");
  EXPECT_EQ(ctx.str(ctx.eq(ctx.mul(n, ctx.constant(2)), ctx.constant(8))), "s0 == 4");
  // Sizes are at least 2: these are decided by ranges.
  EXPECT_EQ(ctx.lt(n, ctx.constant(1)), ctx.boolean(false));
  EXPECT_EQ(ctx.ge(ctx.mul(n, m), ctx.constant(4)), ctx.boolean(true));
  EXPECT_EQ(ctx.max(n, ctx.constant(1)), n);
  // gcd: 2*s0 == 7 has no solution.
  EXPECT_EQ(ctx.eq(ctx.mul(n, ctx.constant(2)), ctx.constant(7)), ctx.boolean(false));
  EXPECT_TRUE(ctx.divisible(ctx.mul(ctx.add(n, m), ctx.constant(16)), 16));
  EXPECT_FALSE(ctx.divisible(ctx.add(ctx.mul(n, ctx.constant(16)), ctx.constant(1)), 16));
  EXPECT_THROW(ctx.floordiv(n, ctx.constant(0)), tessera::ValueError);
}

TEST(SymbolicIntegers, ProgramMatchesTheEvaluator) {
  std::mt19937_64 rng(3);
  Context ctx;
  Gen g{ctx,
        rng,
        {ctx.new_symbol("s0"), ctx.new_symbol("s1", {1, 40}), ctx.new_symbol("s2", {0, 7})}};
  std::vector<ExprPtr> roots;
  for (int i = 0; i < 50; ++i) {
    roots.push_back(g.expr(3).first);
    roots.push_back(ctx.lt(g.expr(2).first, g.expr(1).first));
  }
  Program p(ctx, roots);
  std::vector<int64_t> out(p.num_outputs());
  for (int k = 0; k < 100; ++k) {
    const auto v = sample(ctx, rng);
    ASSERT_TRUE(p.run(v.data(), out.data()));
    for (size_t i = 0; i < roots.size(); ++i)
      ASSERT_EQ(out[i], ctx.evaluate(roots[i], v)) << ctx.str(roots[i]);
  }
  // Shared subexpressions are computed once.
  ExprPtr big = ctx.mul(ctx.add(g.syms[0], g.syms[1]), ctx.add(g.syms[0], ctx.constant(3)));
  Program one(ctx, {big}), twice(ctx, {big, big});
  EXPECT_EQ(one.size(), twice.size());
  EXPECT_EQ(twice.num_outputs(), 2u);
}

}  // namespace
