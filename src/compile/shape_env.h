/** \file
 * The symbolic-shape environment of one trace: the symbols standing for input sizes (with the
 * values they had when traced, their hints), the `SymNodeImpl` that `SymInt`s hold while the
 * graph compiler traces, and the guards recorded when traced code specializes a symbol
 * (`int64_t n = x.numel();`) or branches on a symbolic comparison.
 */
#pragma once

#include <string>
#include <vector>

#include "compile/sym.h"
#include "tessera/symint.h"

namespace tessera::compiler {

class ShapeEnv : public RefCounted {
 public:
  struct Symbol {
    std::string source;  ///< "x.size(0)"
    int64_t hint;        ///< the value while tracing
  };
  /** A condition the inputs must satisfy for the trace to be valid. */
  struct Guard {
    sym::ExprPtr condition;
    SourceLoc loc;
    std::string why;  ///< "specialized", "branch"
  };

  sym::Context ctx;
  std::vector<Symbol> symbols;
  std::vector<Guard> guards;
  /** The last traced call: where a guard made by an implicit conversion (which cannot take a
   * location) is reported, as "after" that line. `guard_int()` gives the exact line. */
  SourceLoc last_loc;

  /** A new size symbol (values >= 2: sizes 0 and 1 are specialized). */
  SymInt create_symbol(std::string source, int64_t hint);
  /** Wraps an expression (constants become plain integers). */
  SymInt wrap(sym::ExprPtr e);
  /** The expression of a SymInt of this environment (plain values become constants). */
  sym::ExprPtr expr_of(const SymInt& s);
  /** The value an expression had while tracing. */
  int64_t hint(sym::ExprPtr e);
  std::vector<int64_t> hints() const;
  /** Records that `condition` must hold (nothing when it is known to). */
  void add_guard(sym::ExprPtr condition, SourceLoc loc, std::string why);
};

/** The `SymNodeImpl` of traced sizes: an expression of a ShapeEnv. */
class SymExprNode : public SymNodeImpl {
 public:
  SymExprNode(IntrusivePtr<ShapeEnv> env, sym::ExprPtr e) : env_(std::move(env)), e_(e) {}
  sym::ExprPtr expr() const { return e_; }
  ShapeEnv& env() const { return *env_; }

  bool is_bool() const override { return e_->is_bool(); }
  SymNode add(const SymNode& o) override;
  SymNode sub(const SymNode& o) override;
  SymNode mul(const SymNode& o) override;
  SymNode floordiv(const SymNode& o) override;
  SymNode mod(const SymNode& o) override;
  SymNode neg() override;
  SymNode min(const SymNode& o) override;
  SymNode max(const SymNode& o) override;
  SymNode eq(const SymNode& o) override;
  SymNode ne(const SymNode& o) override;
  SymNode lt(const SymNode& o) override;
  SymNode le(const SymNode& o) override;
  SymNode gt(const SymNode& o) override;
  SymNode ge(const SymNode& o) override;
  SymNode logical_and(const SymNode& o) override;
  SymNode logical_or(const SymNode& o) override;
  SymNode logical_not() override;
  SymNode wrap_int(int64_t v) override;
  SymNode wrap_bool(bool v) override;
  std::optional<int64_t> constant_int() const override;
  std::optional<bool> constant_bool() const override;
  int64_t guard_int(SourceLoc loc) override;
  bool guard_bool(SourceLoc loc) override;
  std::string str() const override;

 private:
  SymNode make(sym::ExprPtr e) const { return SymNode(new SymExprNode(env_, e)); }
  sym::ExprPtr other(const SymNode& o) const;

  IntrusivePtr<ShapeEnv> env_;
  sym::ExprPtr e_;
};

}  // namespace tessera::compiler
