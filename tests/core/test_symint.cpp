#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "tessera/symint.h"

using namespace tessera;

namespace {

// A minimal expression node for tests: a tree evaluated against bindings, logging guards.
struct GuardLog {
  std::vector<std::string> guards;
  std::vector<SourceLoc> locs;
  std::map<std::string, int64_t> bindings;
};

class TestNode : public SymNodeImpl {
 public:
  TestNode(std::shared_ptr<GuardLog> log, std::string op, std::vector<SymNode> args, int64_t value,
           bool is_bool)
      : log_(std::move(log)), op_(std::move(op)), args_(std::move(args)), value_(value), bool_(is_bool) {}

  static SymNode symbol(std::shared_ptr<GuardLog> log, const std::string& name, int64_t v) {
    log->bindings[name] = v;
    return SymNode(new TestNode(log, name, {}, v, false));
  }

  bool is_bool() const override { return bool_; }
  SymNode make(const char* op, std::vector<SymNode> args, bool b) {
    return SymNode(new TestNode(log_, op, std::move(args), 0, b));
  }
  SymNode add(const SymNode& o) override { return make("+", {SymNode(this), o}, false); }
  SymNode sub(const SymNode& o) override { return make("-", {SymNode(this), o}, false); }
  SymNode mul(const SymNode& o) override { return make("*", {SymNode(this), o}, false); }
  SymNode floordiv(const SymNode& o) override { return make("//", {SymNode(this), o}, false); }
  SymNode mod(const SymNode& o) override { return make("%", {SymNode(this), o}, false); }
  SymNode neg() override { return make("neg", {SymNode(this)}, false); }
  SymNode min(const SymNode& o) override { return make("min", {SymNode(this), o}, false); }
  SymNode max(const SymNode& o) override { return make("max", {SymNode(this), o}, false); }
  SymNode eq(const SymNode& o) override { return make("==", {SymNode(this), o}, true); }
  SymNode ne(const SymNode& o) override { return make("!=", {SymNode(this), o}, true); }
  SymNode lt(const SymNode& o) override { return make("<", {SymNode(this), o}, true); }
  SymNode le(const SymNode& o) override { return make("<=", {SymNode(this), o}, true); }
  SymNode gt(const SymNode& o) override { return make(">", {SymNode(this), o}, true); }
  SymNode ge(const SymNode& o) override { return make(">=", {SymNode(this), o}, true); }
  SymNode logical_and(const SymNode& o) override { return make("and", {SymNode(this), o}, true); }
  SymNode logical_or(const SymNode& o) override { return make("or", {SymNode(this), o}, true); }
  SymNode logical_not() override { return make("not", {SymNode(this)}, true); }
  SymNode wrap_int(int64_t v) override { return SymNode(new TestNode(log_, "const", {}, v, false)); }
  SymNode wrap_bool(bool v) override { return SymNode(new TestNode(log_, "const", {}, v, true)); }

  int64_t eval() const {
    auto a = [&](int i) { return static_cast<TestNode*>(args_[i].get())->eval(); };
    if (op_ == "const") return value_;
    if (args_.empty()) return log_->bindings.at(op_);
    if (op_ == "+") return a(0) + a(1);
    if (op_ == "-") return a(0) - a(1);
    if (op_ == "*") return a(0) * a(1);
    if (op_ == "//") return a(0) / a(1);
    if (op_ == "%") return a(0) % a(1);
    if (op_ == "neg") return -a(0);
    if (op_ == "==") return a(0) == a(1);
    if (op_ == "<") return a(0) < a(1);
    if (op_ == ">=") return a(0) >= a(1);
    if (op_ == "not") return !a(0);
    if (op_ == "and") return a(0) && a(1);
    return 0;
  }
  int64_t guard_int(SourceLoc loc) override {
    log_->guards.push_back(str() + " == " + std::to_string(eval()));
    log_->locs.push_back(loc);
    return eval();
  }
  bool guard_bool(SourceLoc loc) override {
    log_->guards.push_back(str() + " is " + (eval() ? "True" : "False"));
    log_->locs.push_back(loc);
    return eval() != 0;
  }
  std::string str() const override {
    if (op_ == "const") return std::to_string(value_);
    if (args_.empty()) return op_;
    if (args_.size() == 1) return op_ + "(" + args_[0]->str() + ")";
    return "(" + args_[0]->str() + " " + op_ + " " + args_[1]->str() + ")";
  }

 private:
  std::shared_ptr<GuardLog> log_;
  std::string op_;
  std::vector<SymNode> args_;
  int64_t value_;
  bool bool_;
};

}  // namespace

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
  EXPECT_THROW(SymInt(std::numeric_limits<int64_t>::min()), ValueError);
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
