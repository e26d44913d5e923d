/** \file
 * tessera's symbolic integers (DESIGN.md D7): expressions over size symbols, as the graph
 * compiler needs them.
 *
 * Expressions are hash-consed in a `Context` (equal expressions are the same pointer) and kept in
 * canonical form: an integer expression is a polynomial (a constant plus integer multiples of
 * products of atoms), where atoms are symbols and the non-polynomial operations floor division,
 * modulo, min and max. Relations normalize to `d == 0`, `d != 0`, `d < 0`, `d <= 0` over the
 * difference `d` of their sides. Simplification uses interval analysis (each symbol has a range)
 * and divisibility (gcd of coefficients); `range()` and `statically_known()` expose it.
 * `Program` compiles a set of expressions into a flat bytecode evaluated once per call.
 *
 * Semantics are Python's: `floordiv` rounds toward negative infinity and `mod` takes the
 * divisor's sign; division by zero is an error when evaluated.
 */
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera::compiler::sym {

enum class Kind : uint8_t {
  // integers
  Poly,      ///< constant + sum of coef * monomial; `poly` holds the terms
  Symbol,    ///< `symbol` indexes the context's symbols
  FloorDiv,  ///< args: numerator, denominator
  Mod,       ///< args: value, divisor
  Min,       ///< args (sorted)
  Max,
  // booleans
  BoolConst,  ///< `value` 0 or 1
  Eq,         ///< args[0] == 0
  Ne,         ///< args[0] != 0
  Lt,         ///< args[0] < 0
  Le,         ///< args[0] <= 0
  And,
  Or,
  Not,
};

struct Expr;
using ExprPtr = const Expr*;

/** A term of a polynomial: coefficient times the product of atoms (sorted, repeated for powers). */
struct Term {
  int64_t coef;
  std::vector<ExprPtr> atoms;
};

struct Expr {
  Kind kind;
  int64_t value = 0;  ///< Poly: the constant; BoolConst: 0/1
  int symbol = -1;
  std::vector<ExprPtr> args;
  std::vector<Term> terms;  ///< Poly only, canonical order
  size_t hash = 0;
  uint32_t id = 0;  ///< creation order (stable sort key)

  bool is_bool() const { return kind >= Kind::BoolConst; }
  /** The value of a constant integer or boolean. */
  std::optional<int64_t> constant() const;
};

/** An inclusive range; the bounds saturate at +-kInf. */
struct Range {
  static constexpr int64_t kInf = INT64_MAX / 4;
  int64_t lo = -kInf, hi = kInf;
  bool contains(int64_t v) const { return lo <= v && v <= hi; }
};

/** Owns expressions and symbols. */
class Context {
 public:
  Context();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  /** A new symbol named `name`, with values in `range`. */
  ExprPtr new_symbol(std::string name, Range range = {2, Range::kInf});
  const std::string& symbol_name(int s) const { return symbols_.at(static_cast<size_t>(s)).name; }
  Range symbol_range(int s) const { return symbols_.at(static_cast<size_t>(s)).range; }
  int num_symbols() const { return static_cast<int>(symbols_.size()); }

  ExprPtr constant(int64_t v);
  ExprPtr boolean(bool v);
  ExprPtr add(ExprPtr a, ExprPtr b);
  ExprPtr sub(ExprPtr a, ExprPtr b);
  ExprPtr mul(ExprPtr a, ExprPtr b);
  ExprPtr neg(ExprPtr a);
  ExprPtr floordiv(ExprPtr a, ExprPtr b);
  ExprPtr ceildiv(ExprPtr a, ExprPtr b);
  ExprPtr mod(ExprPtr a, ExprPtr b);
  ExprPtr min(ExprPtr a, ExprPtr b);
  ExprPtr max(ExprPtr a, ExprPtr b);
  ExprPtr eq(ExprPtr a, ExprPtr b);
  ExprPtr ne(ExprPtr a, ExprPtr b);
  ExprPtr lt(ExprPtr a, ExprPtr b);
  ExprPtr le(ExprPtr a, ExprPtr b);
  ExprPtr gt(ExprPtr a, ExprPtr b) { return lt(b, a); }
  ExprPtr ge(ExprPtr a, ExprPtr b) { return le(b, a); }
  ExprPtr logical_and(ExprPtr a, ExprPtr b);
  ExprPtr logical_or(ExprPtr a, ExprPtr b);
  ExprPtr logical_not(ExprPtr a);

  /** Bounds of an integer expression (booleans: [0, 1] or the constant). */
  Range range(ExprPtr e);
  /** A boolean's value when interval analysis decides it for every symbol value in range. */
  std::optional<bool> statically_known(ExprPtr e);
  /** Whether an integer expression is a multiple of `k` for every symbol value. */
  bool divisible(ExprPtr e, int64_t k);
  /** Evaluates with symbol values (indexed by symbol); a ValueError on division by zero. */
  int64_t evaluate(ExprPtr e, const std::vector<int64_t>& symbols);
  /** "s0*s1 + 3", "(s0 + 3)//4", "Max(s0, 8)", "s0 < 5". */
  std::string str(ExprPtr e) const;

 private:
  struct Poly {
    int64_t constant = 0;
    std::vector<Term> terms;  // sorted by atoms, no zero coefficients
  };
  Poly as_poly(ExprPtr e);
  ExprPtr from_poly(Poly p);
  ExprPtr intern(Expr e);
  ExprPtr relation(Kind k, ExprPtr diff);
  ExprPtr minmax(Kind k, ExprPtr a, ExprPtr b);
  Range atom_range(ExprPtr e);
  Range monomial_range(const std::vector<ExprPtr>& atoms);
  int64_t coef_gcd(const Poly& p);

  struct SymbolInfo {
    std::string name;
    Range range;
  };
  std::vector<SymbolInfo> symbols_;
  std::vector<std::unique_ptr<Expr>> exprs_;
  std::unordered_multimap<size_t, ExprPtr> table_;
  std::unordered_map<ExprPtr, Range> range_cache_;
};

/**
 * A flat program evaluating many expressions at once: compiled from the expressions (shared
 * subexpressions once), run against the symbols' values at call start.
 */
class Program {
 public:
  /** Compiles; `outputs()` returns the values of `roots` in order after `run`. */
  Program(Context& ctx, const std::vector<ExprPtr>& roots);
  /** Evaluates; false on a division by zero or a result beyond int64. */
  bool run(const int64_t* symbols, int64_t* outputs) const;
  size_t num_outputs() const { return outputs_.size(); }
  size_t size() const { return code_.size(); }

  /** The program as data (AOT packages store it): each instruction's opcode, operand slots (the
   * indices of earlier instructions) and immediate, and the output slots. */
  struct RawInstr {
    uint8_t op;
    int32_t a, b;
    int64_t imm;
  };
  std::vector<RawInstr> raw_code() const;
  const std::vector<int32_t>& output_slots() const { return outputs_; }
  /** Rebuilds a program from data that may be hostile: every opcode known, every operand an
   * earlier instruction, every symbol below `num_symbols`, every output an instruction; a
   * ValueError naming the first violation otherwise. */
  static Program from_raw(const std::vector<RawInstr>& code, const std::vector<int32_t>& outputs,
                          size_t num_symbols);

 private:
  Program() = default;
  enum class Op : uint8_t {
    Const,
    Sym,
    Add,
    MulConst,
    Mul,
    FloorDiv,
    Mod,
    Min,
    Max,
    Eq0,
    Ne0,
    Lt0,
    Le0,
    And,
    Or,
    Not
  };
  struct Instr {
    Op op;
    int32_t a = 0, b = 0;  ///< operand slots
    int64_t imm = 0;       ///< constant / symbol index / multiplier
  };
  int32_t emit(Context& ctx, ExprPtr e, std::unordered_map<ExprPtr, int32_t>& slots);
  std::vector<Instr> code_;
  std::vector<int32_t> outputs_;
};

/** Python's floor division and modulo on plain integers. */
int64_t floordiv(int64_t a, int64_t b);
int64_t pymod(int64_t a, int64_t b);

}  // namespace tessera::compiler::sym
