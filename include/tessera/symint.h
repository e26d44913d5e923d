/** \file
 * Symbolic integers (DESIGN.md D7).
 *
 * A `SymInt` is one 64-bit word: a plain integer in eager mode, or a tagged pointer to a
 * `SymNodeImpl` (an expression over size variables) while the graph compiler traces. Sizes,
 * strides and `numel()` of tensors are `SymInt`s, so code written against them works in both
 * modes. Arithmetic on symbolic values builds expressions; turning one into a plain `int64_t`
 * (implicitly, or with `guard_int()`) and branching on a `SymBool` ask the node to specialize,
 * which is where the compiler records a guard. Eager code pays one tag test.
 *
 * Plain values must be at least -2^62 (the tag lives in the top bits); sizes and strides always
 * are, and a smaller value is a `ValueError`.
 */
#pragma once

#include <concepts>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "tessera/detail/intrusive_ptr.h"
#include "tessera/detail/small_vector.h"
#include "tessera/error.h"

namespace tessera {

class SymNodeImpl;
using SymNode = IntrusivePtr<SymNodeImpl>;

/**
 * An expression node of a symbolic integer or boolean, implemented by the graph compiler. Binary
 * methods receive a node of the same family (plain operands are wrapped with `wrap_int`).
 */
class SymNodeImpl : public RefCounted {
 public:
  virtual bool is_bool() const = 0;

  virtual SymNode add(const SymNode& o) = 0;
  virtual SymNode sub(const SymNode& o) = 0;
  virtual SymNode mul(const SymNode& o) = 0;
  /** Floor division, as Python's `//`. */
  virtual SymNode floordiv(const SymNode& o) = 0;
  /** Modulo with the sign of the divisor, as Python's `%`. */
  virtual SymNode mod(const SymNode& o) = 0;
  virtual SymNode neg() = 0;
  virtual SymNode min(const SymNode& o) = 0;
  virtual SymNode max(const SymNode& o) = 0;

  virtual SymNode eq(const SymNode& o) = 0;
  virtual SymNode ne(const SymNode& o) = 0;
  virtual SymNode lt(const SymNode& o) = 0;
  virtual SymNode le(const SymNode& o) = 0;
  virtual SymNode gt(const SymNode& o) = 0;
  virtual SymNode ge(const SymNode& o) = 0;

  virtual SymNode logical_and(const SymNode& o) = 0;
  virtual SymNode logical_or(const SymNode& o) = 0;
  virtual SymNode logical_not() = 0;

  /** A constant node of this node's family. */
  virtual SymNode wrap_int(int64_t v) = 0;
  virtual SymNode wrap_bool(bool v) = 0;

  /** The value when it is a known constant. */
  virtual std::optional<int64_t> constant_int() const { return std::nullopt; }
  virtual std::optional<bool> constant_bool() const { return std::nullopt; }

  /** Specializes to the traced value; the compiler records a guard naming `loc`. */
  virtual int64_t guard_int(SourceLoc loc) = 0;
  virtual bool guard_bool(SourceLoc loc) = 0;

  virtual std::string str() const = 0;
};

class SymBool;

class SymInt {
 public:
  constexpr SymInt() noexcept : data_(0) {}
  SymInt(int64_t v) : data_(v) {  // NOLINT: sizes read as integers
    if (__builtin_expect(v < kMinPlain, 0)) throw_unrepresentable(v);
  }
  template <std::integral I>
  requires(!std::same_as<I, bool> && !std::same_as<I, int64_t>) SymInt(I v)
      : SymInt(static_cast<int64_t>(v)) {  // NOLINT
    if constexpr (std::is_unsigned_v<I> && sizeof(I) >= 8) {
      if (static_cast<uint64_t>(v) > static_cast<uint64_t>(INT64_MAX)) throw_unrepresentable(-1);
    }
  }
  /** Wraps a node; a node with a constant value collapses to a plain integer. */
  explicit SymInt(SymNode node);

  SymInt(const SymInt& o) noexcept : data_(o.data_) {
    if (o.is_symbolic()) o.node_ptr()->incref();
  }
  SymInt(SymInt&& o) noexcept : data_(o.data_) { o.data_ = 0; }
  SymInt& operator=(const SymInt& o) noexcept {
    if (this != &o) {
      SymInt tmp(o);
      std::swap(data_, tmp.data_);
    }
    return *this;
  }
  SymInt& operator=(SymInt&& o) noexcept {
    std::swap(data_, o.data_);
    return *this;
  }
  ~SymInt() {
    if (is_symbolic()) node_ptr()->decref();
  }

  /** True when this holds an expression rather than a plain integer. */
  bool is_symbolic() const noexcept { return (static_cast<uint64_t>(data_) & kTagMask) == kTag; }
  /** The plain value, or nullopt when symbolic (never guards). */
  std::optional<int64_t> maybe_as_int() const {
    if (!is_symbolic()) return data_;
    return std::nullopt;
  }
  /** The plain value; an internal error when symbolic. For code that never sees symbols. */
  int64_t expect_int() const {
    TS_INTERNAL_ASSERT(!is_symbolic()) << "expected a plain integer, got symbolic " << str();
    return data_;
  }
  /** The value, specializing a symbolic one (records a guard at `loc`). */
  int64_t guard_int(SourceLoc loc = SourceLoc::current()) const {
    if (!is_symbolic()) return data_;
    return guard_slow(loc);
  }
  /** Implicit use as an integer specializes, like `guard_int()` at the active user location. */
  operator int64_t() const {  // NOLINT
    if (!is_symbolic()) return data_;
    return guard_slow(UserLocGuard::current());
  }

  /** The node, or null when plain. */
  SymNode node() const { return is_symbolic() ? SymNode(node_ptr()) : SymNode(); }
  /** This value as a node of `like`'s family. */
  SymNode to_node(const SymNode& like) const;

  std::string str() const;

  /** The raw word, for hashing and for viewing a plain array as int64_t. */
  int64_t raw() const noexcept { return data_; }

  SymInt& operator+=(const SymInt& o) { return *this = *this + o; }
  SymInt& operator-=(const SymInt& o) { return *this = *this - o; }
  SymInt& operator*=(const SymInt& o) { return *this = *this * o; }

  friend SymInt operator+(const SymInt& a, const SymInt& b);
  friend SymInt operator-(const SymInt& a, const SymInt& b);
  friend SymInt operator*(const SymInt& a, const SymInt& b);
  friend SymInt operator-(const SymInt& a);
  friend SymBool operator==(const SymInt& a, const SymInt& b);
  friend SymBool operator!=(const SymInt& a, const SymInt& b);
  friend SymBool operator<(const SymInt& a, const SymInt& b);
  friend SymBool operator<=(const SymInt& a, const SymInt& b);
  friend SymBool operator>(const SymInt& a, const SymInt& b);
  friend SymBool operator>=(const SymInt& a, const SymInt& b);

 private:
  static constexpr uint64_t kTagMask = 0xE000000000000000ull;
  static constexpr uint64_t kTag = 0xA000000000000000ull;
  static constexpr int64_t kMinPlain = -(int64_t(1) << 62);

  SymNodeImpl* node_ptr() const noexcept {
    return reinterpret_cast<SymNodeImpl*>(static_cast<uint64_t>(data_) & ~kTagMask);
  }
  int64_t guard_slow(SourceLoc loc) const;
  [[noreturn]] static void throw_unrepresentable(int64_t v);

  int64_t data_;
};

/** A boolean that may be symbolic (the result of comparing `SymInt`s). */
class SymBool {
 public:
  SymBool(bool v = false) : value_(v) {}  // NOLINT
  explicit SymBool(SymNode node);

  bool is_symbolic() const { return static_cast<bool>(node_); }
  std::optional<bool> maybe_as_bool() const {
    if (!node_) return value_;
    return std::nullopt;
  }
  /** The value, specializing a symbolic one (records a guard at `loc`). */
  bool guard_bool(SourceLoc loc = SourceLoc::current()) const {
    if (!node_) return value_;
    return node_->guard_bool(loc);
  }
  /** Branching on a symbolic comparison specializes it at the active user location. */
  operator bool() const {  // NOLINT
    if (!node_) return value_;
    return node_->guard_bool(UserLocGuard::current());
  }
  const SymNode& node() const { return node_; }
  std::string str() const;

  SymBool sym_and(const SymBool& o) const;
  SymBool sym_or(const SymBool& o) const;
  SymBool sym_not() const;

 private:
  bool value_ = false;
  SymNode node_;
};

/** Floor division and modulo with Python's signs; `ValueError` on division by zero. */
SymInt floordiv(const SymInt& a, const SymInt& b);
SymInt mod(const SymInt& a, const SymInt& b);
/** Ceiling division: `cdiv(a, b) == (a + b - 1) // b` for positive `b`. */
SymInt cdiv(const SymInt& a, const SymInt& b);
SymInt sym_min(const SymInt& a, const SymInt& b);
SymInt sym_max(const SymInt& a, const SymInt& b);

// Mixed operators with C++ integers; templates so that `n + 1` picks them over the built-in
// operator reached through the implicit conversion to int64_t.
#define TS_SYMINT_MIXED(op, R)                                           \
  template <std::integral I>                                             \
  requires(!std::same_as<I, bool>) R operator op(const SymInt& a, I b) { \
    return a op SymInt(b);                                               \
  }                                                                      \
  template <std::integral I>                                             \
  requires(!std::same_as<I, bool>) R operator op(I a, const SymInt& b) { \
    return SymInt(a) op b;                                               \
  }
TS_SYMINT_MIXED(+, SymInt)
TS_SYMINT_MIXED(-, SymInt)
TS_SYMINT_MIXED(*, SymInt)
TS_SYMINT_MIXED(==, SymBool)
TS_SYMINT_MIXED(!=, SymBool)
TS_SYMINT_MIXED(<, SymBool)
TS_SYMINT_MIXED(<=, SymBool)
TS_SYMINT_MIXED(>, SymBool)
TS_SYMINT_MIXED(>=, SymBool)
#undef TS_SYMINT_MIXED

std::ostream& operator<<(std::ostream& os, const SymInt& s);
std::ostream& operator<<(std::ostream& os, const SymBool& s);

using SymIntArrayRef = ArrayRef<SymInt>;
using IntArrayRef = ArrayRef<int64_t>;
/** Sizes and strides: up to 5 dimensions inline. */
using SymDimVector = SmallVector<SymInt, 5>;
using DimVector = SmallVector<int64_t, 5>;

/** True when any element is symbolic. */
bool any_symbolic(SymIntArrayRef a);
/** The product of the elements (1 for none). */
SymInt sym_product(SymIntArrayRef a);
/** Views an array of plain SymInts as int64_t (no copy); an internal error if any is symbolic. */
IntArrayRef as_int_array(SymIntArrayRef a);
/** Converts plain integers to SymInts. */
SymDimVector to_sym(IntArrayRef a);
/** Specializes every element (guards symbolic ones). */
DimVector guard_ints(SymIntArrayRef a, SourceLoc loc = SourceLoc::current());

/** Prints `[2, 3]` style lists. */
std::ostream& operator<<(std::ostream& os, SymIntArrayRef a);
std::ostream& operator<<(std::ostream& os, IntArrayRef a);

}  // namespace tessera
