#include "tessera/symint.h"

#include <ostream>
#include <sstream>

namespace tessera {

SymInt::SymInt(SymNode node) : data_(0) {
  TS_INTERNAL_ASSERT(node && !node->is_bool()) << "SymInt from a missing or boolean node";
  if (auto c = node->constant_int()) {
    *this = SymInt(*c);
    return;
  }
  const auto bits = reinterpret_cast<uint64_t>(node.get());
  TS_INTERNAL_ASSERT((bits & kTagMask) == 0) << "node pointer does not fit the SymInt tag";
  node->incref();
  data_ = static_cast<int64_t>(bits | kTag);
}

void SymInt::throw_unrepresentable(int64_t v) {
  TS_ERROR(ValueError) << "integer " << v
                       << " is out of the range of sizes (SymInt holds values >= -2^62)";
}

int64_t SymInt::guard_slow(SourceLoc loc) const {
  return node_ptr()->guard_int(loc);
}

SymNode SymInt::to_node(const SymNode& like) const {
  if (is_symbolic()) return node();
  return like->wrap_int(data_);
}

std::string SymInt::str() const {
  if (is_symbolic()) return node_ptr()->str();
  return std::to_string(data_);
}

namespace {

// Applies a node method when either side is symbolic, else the plain function.
template <class Plain, class Sym>
SymInt binary(const SymInt& a, const SymInt& b, Plain plain, Sym sym) {
  if (!a.is_symbolic() && !b.is_symbolic()) return SymInt(plain(a.raw(), b.raw()));
  const SymNode like = a.is_symbolic() ? a.node() : b.node();
  return SymInt(sym(a.to_node(like), b.to_node(like)));
}

template <class Plain, class Sym>
SymBool compare(const SymInt& a, const SymInt& b, Plain plain, Sym sym) {
  if (!a.is_symbolic() && !b.is_symbolic()) return SymBool(plain(a.raw(), b.raw()));
  const SymNode like = a.is_symbolic() ? a.node() : b.node();
  return SymBool(sym(a.to_node(like), b.to_node(like)));
}

int64_t checked(bool overflow, int64_t v, const char* op) {
  TS_CHECK(!overflow, ValueError) << "integer overflow in SymInt " << op;
  return v;
}

int64_t py_floordiv(int64_t a, int64_t b) {
  TS_CHECK(b != 0, ValueError) << "integer division by zero";
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b) {
  TS_CHECK(b != 0, ValueError) << "integer modulo by zero";
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

}  // namespace

SymInt operator+(const SymInt& a, const SymInt& b) {
  // Identities keep symbolic expressions small without asking the node.
  if (a.is_symbolic() != b.is_symbolic()) {
    if (a.maybe_as_int() == 0) return b;
    if (b.maybe_as_int() == 0) return a;
  }
  return binary(
      a, b,
      [](int64_t x, int64_t y) {
        int64_t r;
        const bool overflow = __builtin_add_overflow(x, y, &r);
        return checked(overflow, r, "+");
      },
      [](const SymNode& x, const SymNode& y) { return x->add(y); });
}
SymInt operator-(const SymInt& a, const SymInt& b) {
  if (b.maybe_as_int() == 0) return a;
  return binary(
      a, b,
      [](int64_t x, int64_t y) {
        int64_t r;
        const bool overflow = __builtin_sub_overflow(x, y, &r);
        return checked(overflow, r, "-");
      },
      [](const SymNode& x, const SymNode& y) { return x->sub(y); });
}
SymInt operator*(const SymInt& a, const SymInt& b) {
  if (a.is_symbolic() != b.is_symbolic()) {
    if (a.maybe_as_int() == 1) return b;
    if (b.maybe_as_int() == 1) return a;
  }
  return binary(
      a, b,
      [](int64_t x, int64_t y) {
        int64_t r;
        const bool overflow = __builtin_mul_overflow(x, y, &r);
        return checked(overflow, r, "*");
      },
      [](const SymNode& x, const SymNode& y) { return x->mul(y); });
}
SymInt operator-(const SymInt& a) {
  if (!a.is_symbolic()) return SymInt(-a.raw());
  return SymInt(a.node()->neg());
}

SymInt floordiv(const SymInt& a, const SymInt& b) {
  return binary(a, b, py_floordiv,
                [](const SymNode& x, const SymNode& y) { return x->floordiv(y); });
}
SymInt mod(const SymInt& a, const SymInt& b) {
  return binary(a, b, py_mod, [](const SymNode& x, const SymNode& y) { return x->mod(y); });
}
SymInt cdiv(const SymInt& a, const SymInt& b) {
  if (!b.is_symbolic()) {
    TS_CHECK(b.raw() > 0, ValueError)
        << "cdiv(" << a << ", " << b.raw() << "): the divisor must be positive";
    if (!a.is_symbolic()) return SymInt(a.raw() / b.raw() + (a.raw() % b.raw() > 0));
  }
  return floordiv(a + b - 1, b);
}
SymInt sym_min(const SymInt& a, const SymInt& b) {
  return binary(
      a, b, [](int64_t x, int64_t y) { return x < y ? x : y; },
      [](const SymNode& x, const SymNode& y) { return x->min(y); });
}
SymInt sym_max(const SymInt& a, const SymInt& b) {
  return binary(
      a, b, [](int64_t x, int64_t y) { return x > y ? x : y; },
      [](const SymNode& x, const SymNode& y) { return x->max(y); });
}

#define TS_SYM_COMPARE(op, method)                                        \
  SymBool operator op(const SymInt& a, const SymInt& b) {                 \
    return compare(                                                       \
        a, b, [](int64_t x, int64_t y) { return x op y; },                \
        [](const SymNode& x, const SymNode& y) { return x->method(y); }); \
  }
TS_SYM_COMPARE(==, eq)
TS_SYM_COMPARE(!=, ne)
TS_SYM_COMPARE(<, lt)
TS_SYM_COMPARE(<=, le)
TS_SYM_COMPARE(>, gt)
TS_SYM_COMPARE(>=, ge)
#undef TS_SYM_COMPARE

SymBool::SymBool(SymNode node) {
  TS_INTERNAL_ASSERT(node && node->is_bool()) << "SymBool from a missing or integer node";
  if (auto c = node->constant_bool()) {
    value_ = *c;
  } else {
    node_ = std::move(node);
  }
}

std::string SymBool::str() const {
  if (node_) return node_->str();
  return value_ ? "True" : "False";
}

SymBool SymBool::sym_and(const SymBool& o) const {
  if (!node_ && !o.node_) return SymBool(value_ && o.value_);
  if (!node_) return value_ ? o : SymBool(false);
  if (!o.node_) return o.value_ ? *this : SymBool(false);
  return SymBool(node_->logical_and(o.node_));
}

SymBool SymBool::sym_or(const SymBool& o) const {
  if (!node_ && !o.node_) return SymBool(value_ || o.value_);
  if (!node_) return value_ ? SymBool(true) : o;
  if (!o.node_) return o.value_ ? SymBool(true) : *this;
  return SymBool(node_->logical_or(o.node_));
}

SymBool SymBool::sym_not() const {
  if (!node_) return SymBool(!value_);
  return SymBool(node_->logical_not());
}

std::ostream& operator<<(std::ostream& os, const SymInt& s) {
  return os << s.str();
}
std::ostream& operator<<(std::ostream& os, const SymBool& s) {
  return os << s.str();
}

bool any_symbolic(SymIntArrayRef a) {
  for (const auto& s : a) {
    if (s.is_symbolic()) return true;
  }
  return false;
}

SymInt sym_product(SymIntArrayRef a) {
  SymInt p = 1;
  for (const auto& s : a) p = p * s;
  return p;
}

IntArrayRef as_int_array(SymIntArrayRef a) {
  TS_INTERNAL_ASSERT(!any_symbolic(a)) << "expected plain sizes, got symbolic " << a;
  static_assert(sizeof(SymInt) == sizeof(int64_t));
  return IntArrayRef(reinterpret_cast<const int64_t*>(a.data()), a.size());
}

SymDimVector to_sym(IntArrayRef a) {
  SymDimVector out;
  out.reserve(a.size());
  for (int64_t v : a) out.emplace_back(v);
  return out;
}

DimVector guard_ints(SymIntArrayRef a, SourceLoc loc) {
  DimVector out;
  out.reserve(a.size());
  for (const auto& s : a) out.push_back(s.guard_int(loc));
  return out;
}

template <class T>
static std::ostream& print_list(std::ostream& os, ArrayRef<T> a) {
  os << "[";
  for (size_t i = 0; i < a.size(); ++i) os << (i ? ", " : "") << a[i];
  return os << "]";
}
std::ostream& operator<<(std::ostream& os, SymIntArrayRef a) {
  return print_list(os, a);
}
std::ostream& operator<<(std::ostream& os, IntArrayRef a) {
  return print_list(os, a);
}

}  // namespace tessera
