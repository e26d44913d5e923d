/** \file
 * A minimal symbolic-integer node for tests: an expression tree evaluated against bindings, which
 * logs every guard with its location. The graph compiler has the real one.
 */
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/symint.h"

namespace tessera::testing {

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
      : log_(std::move(log)),
        op_(std::move(op)),
        args_(std::move(args)),
        value_(value),
        bool_(is_bool) {}

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
  SymNode wrap_int(int64_t v) override {
    return SymNode(new TestNode(log_, "const", {}, v, false));
  }
  SymNode wrap_bool(bool v) override { return SymNode(new TestNode(log_, "const", {}, v, true)); }

  int64_t eval() const {
    auto a = [&](int i) { return static_cast<TestNode*>(args_[i].get())->eval(); };
    if (op_ == "const") return value_;
    if (args_.empty()) return log_->bindings.at(op_);
    if (op_ == "+") return a(0) + a(1);
    if (op_ == "-") return a(0) - a(1);
    if (op_ == "*") return a(0) * a(1);
    if (op_ == "//") {
      const int64_t x = a(0), y = a(1);
      return x / y - ((x % y != 0) && ((x < 0) != (y < 0)) ? 1 : 0);
    }
    if (op_ == "%") {
      const int64_t x = a(0), y = a(1);
      const int64_t r = x % y;
      return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
    }
    if (op_ == "min") return std::min(a(0), a(1));
    if (op_ == "max") return std::max(a(0), a(1));
    if (op_ == "!=") return a(0) != a(1);
    if (op_ == "<=") return a(0) <= a(1);
    if (op_ == ">") return a(0) > a(1);
    if (op_ == "or") return a(0) || a(1);
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

}  // namespace tessera::testing
