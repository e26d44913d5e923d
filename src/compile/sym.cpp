#include "compile/sym.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "tessera/error.h"

namespace tessera::compiler::sym {

int64_t floordiv(int64_t a, int64_t b) {
  TS_CHECK(b != 0, ValueError) << "integer division by zero in a size expression";
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t pymod(int64_t a, int64_t b) {
  TS_CHECK(b != 0, ValueError) << "integer modulo by zero in a size expression";
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

std::optional<int64_t> Expr::constant() const {
  if (kind == Kind::Poly && terms.empty()) return value;
  if (kind == Kind::BoolConst) return value;
  return std::nullopt;
}

namespace {

constexpr int64_t kInf = Range::kInf;

int64_t clamp_inf(__int128 v) {
  if (v >= kInf) return kInf;
  if (v <= -kInf) return -kInf;
  return static_cast<int64_t>(v);
}
int64_t sat_add(int64_t a, int64_t b) {
  if (a >= kInf || b >= kInf) return (a <= -kInf || b <= -kInf) ? 0 : kInf;
  if (a <= -kInf || b <= -kInf) return -kInf;
  return clamp_inf(static_cast<__int128>(a) + b);
}
int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  const bool inf = a >= kInf || a <= -kInf || b >= kInf || b <= -kInf;
  if (inf) return ((a > 0) == (b > 0)) ? kInf : -kInf;
  return clamp_inf(static_cast<__int128>(a) * b);
}
Range mul_range(Range x, Range y) {
  const int64_t c[4] = {sat_mul(x.lo, y.lo), sat_mul(x.lo, y.hi), sat_mul(x.hi, y.lo),
                        sat_mul(x.hi, y.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}
int64_t floor_div_inf(int64_t a, int64_t k) {  // k > 0
  if (a >= kInf) return kInf;
  if (a <= -kInf) return -kInf;
  return floordiv(a, k);
}

bool atoms_less(const std::vector<ExprPtr>& a, const std::vector<ExprPtr>& b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                      [](ExprPtr x, ExprPtr y) { return x->id < y->id; });
}

size_t mix(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

size_t hash_of(const Expr& e) {
  size_t h = mix(static_cast<size_t>(e.kind), static_cast<size_t>(e.value));
  h = mix(h, static_cast<size_t>(e.symbol + 1));
  for (ExprPtr a : e.args) h = mix(h, reinterpret_cast<size_t>(a));
  for (const Term& t : e.terms) {
    h = mix(h, static_cast<size_t>(t.coef));
    for (ExprPtr a : t.atoms) h = mix(h, reinterpret_cast<size_t>(a));
  }
  return h;
}

bool same(const Expr& a, const Expr& b) {
  if (a.kind != b.kind || a.value != b.value || a.symbol != b.symbol || a.args != b.args ||
      a.terms.size() != b.terms.size()) {
    return false;
  }
  for (size_t i = 0; i < a.terms.size(); ++i) {
    if (a.terms[i].coef != b.terms[i].coef || a.terms[i].atoms != b.terms[i].atoms) return false;
  }
  return true;
}

}  // namespace

Context::Context() = default;
Context::~Context() = default;

ExprPtr Context::intern(Expr e) {
  e.hash = hash_of(e);
  auto [lo, hi] = table_.equal_range(e.hash);
  for (auto it = lo; it != hi; ++it) {
    if (same(*it->second, e)) return it->second;
  }
  e.id = static_cast<uint32_t>(exprs_.size());
  exprs_.push_back(std::make_unique<Expr>(std::move(e)));
  ExprPtr p = exprs_.back().get();
  table_.emplace(p->hash, p);
  return p;
}

ExprPtr Context::new_symbol(std::string name, Range range) {
  const int s = static_cast<int>(symbols_.size());
  symbols_.push_back({std::move(name), range});
  Expr e;
  e.kind = Kind::Symbol;
  e.symbol = s;
  return intern(std::move(e));
}

ExprPtr Context::constant(int64_t v) {
  Expr e;
  e.kind = Kind::Poly;
  e.value = v;
  return intern(std::move(e));
}

ExprPtr Context::boolean(bool v) {
  Expr e;
  e.kind = Kind::BoolConst;
  e.value = v ? 1 : 0;
  return intern(std::move(e));
}

Context::Poly Context::as_poly(ExprPtr e) {
  TS_INTERNAL_ASSERT(!e->is_bool()) << "a boolean where an integer expression is expected";
  if (e->kind == Kind::Poly) return {e->value, e->terms};
  return {0, {Term{1, {e}}}};
}

ExprPtr Context::from_poly(Poly p) {
  std::sort(p.terms.begin(), p.terms.end(),
            [](const Term& a, const Term& b) { return atoms_less(a.atoms, b.atoms); });
  std::vector<Term> merged;
  for (auto& t : p.terms) {
    if (!merged.empty() && merged.back().atoms == t.atoms) {
      merged.back().coef += t.coef;
    } else {
      merged.push_back(std::move(t));
    }
  }
  merged.erase(
      std::remove_if(merged.begin(), merged.end(), [](const Term& t) { return t.coef == 0; }),
      merged.end());
  if (p.constant == 0 && merged.size() == 1 && merged[0].coef == 1 && merged[0].atoms.size() == 1) {
    return merged[0].atoms[0];
  }
  Expr e;
  e.kind = Kind::Poly;
  e.value = p.constant;
  e.terms = std::move(merged);
  return intern(std::move(e));
}

ExprPtr Context::add(ExprPtr a, ExprPtr b) {
  Poly x = as_poly(a), y = as_poly(b);
  x.constant += y.constant;
  x.terms.insert(x.terms.end(), y.terms.begin(), y.terms.end());
  return from_poly(std::move(x));
}

ExprPtr Context::neg(ExprPtr a) {
  Poly x = as_poly(a);
  x.constant = -x.constant;
  for (auto& t : x.terms) t.coef = -t.coef;
  return from_poly(std::move(x));
}

ExprPtr Context::sub(ExprPtr a, ExprPtr b) {
  return add(a, neg(b));
}

ExprPtr Context::mul(ExprPtr a, ExprPtr b) {
  const Poly x = as_poly(a), y = as_poly(b);
  Poly r;
  r.constant = x.constant * y.constant;
  for (const Term& t : x.terms) r.terms.push_back({t.coef * y.constant, t.atoms});
  for (const Term& t : y.terms) r.terms.push_back({t.coef * x.constant, t.atoms});
  for (const Term& s : x.terms) {
    for (const Term& t : y.terms) {
      Term m{s.coef * t.coef, s.atoms};
      m.atoms.insert(m.atoms.end(), t.atoms.begin(), t.atoms.end());
      std::sort(m.atoms.begin(), m.atoms.end(), [](ExprPtr p, ExprPtr q) { return p->id < q->id; });
      r.terms.push_back(std::move(m));
    }
  }
  return from_poly(std::move(r));
}

int64_t Context::coef_gcd(const Poly& p) {
  int64_t g = 0;
  for (const Term& t : p.terms) g = std::gcd(g, t.coef < 0 ? -t.coef : t.coef);
  return g;
}

ExprPtr Context::floordiv(ExprPtr a, ExprPtr b) {
  const auto ca = a->constant(), cb = b->constant();
  if (cb) {
    const int64_t k = *cb;
    TS_CHECK(k != 0, ValueError) << "floor division by zero in a size expression (" << str(a)
                                 << " // 0)";
    if (ca) return constant(sym::floordiv(*ca, k));
    if (k == 1) return a;
    if (k < 0) return floordiv(neg(a), constant(-k));
    // a = k*Q + R: Q from the terms and constant divisible by k.
    Poly p = as_poly(a), q, r;
    q.constant = sym::floordiv(p.constant, k);
    r.constant = pymod(p.constant, k);
    for (const Term& t : p.terms) {
      if (t.coef % k == 0) {
        q.terms.push_back({t.coef / k, t.atoms});
      } else {
        r.terms.push_back(t);
      }
    }
    ExprPtr Q = from_poly(std::move(q)), R = from_poly(std::move(r));
    if (auto rc = R->constant(); rc && *rc == 0) return Q;
    const Range rr = range(R);
    if (rr.lo >= 0 && rr.hi < k) return Q;
    // (x // m) // k == x // (m * k) for positive m, k.
    if (R->kind == Kind::FloorDiv && R->args[1]->constant() && *R->args[1]->constant() > 0) {
      return add(Q, floordiv(R->args[0], constant(*R->args[1]->constant() * k)));
    }
    Expr e;
    e.kind = Kind::FloorDiv;
    e.args = {R, b};
    return add(Q, intern(std::move(e)));
  }
  if (a == b) return constant(1);
  const Range ra = range(a), rb = range(b);
  if (rb.lo > 0 && ra.lo >= 0 && ra.hi < rb.lo) return constant(0);
  Expr e;
  e.kind = Kind::FloorDiv;
  e.args = {a, b};
  return intern(std::move(e));
}

ExprPtr Context::ceildiv(ExprPtr a, ExprPtr b) {
  if (auto cb = b->constant(); cb && *cb > 0) return floordiv(add(a, constant(*cb - 1)), b);
  if (range(b).lo > 0) return floordiv(sub(add(a, b), constant(1)), b);
  return neg(floordiv(neg(a), b));
}

ExprPtr Context::mod(ExprPtr a, ExprPtr b) {
  const auto ca = a->constant(), cb = b->constant();
  if (cb) {
    const int64_t k = *cb;
    TS_CHECK(k != 0, ValueError) << "modulo by zero in a size expression (" << str(a) << " % 0)";
    if (ca) return constant(pymod(*ca, k));
    if (k == 1 || k == -1) return constant(0);
    if (k > 0) {
      Poly p = as_poly(a), r;
      r.constant = pymod(p.constant, k);
      for (const Term& t : p.terms) {
        const int64_t c = pymod(t.coef, k);
        if (c != 0) r.terms.push_back({c, t.atoms});
      }
      ExprPtr R = from_poly(std::move(r));
      const Range rr = range(R);
      if (rr.lo >= 0 && rr.hi < k) return R;
      Expr e;
      e.kind = Kind::Mod;
      e.args = {R, b};
      return intern(std::move(e));
    }
  }
  if (a == b) return constant(0);
  const Range ra = range(a), rb = range(b);
  if (rb.lo > 0 && ra.lo >= 0 && ra.hi < rb.lo) return a;
  Expr e;
  e.kind = Kind::Mod;
  e.args = {a, b};
  return intern(std::move(e));
}

ExprPtr Context::minmax(Kind k, ExprPtr a, ExprPtr b) {
  if (a == b) return a;
  const auto ca = a->constant(), cb = b->constant();
  if (ca && cb) return constant(k == Kind::Min ? std::min(*ca, *cb) : std::max(*ca, *cb));
  const Range d = range(sub(a, b));
  if (d.hi <= 0) return k == Kind::Min ? a : b;
  if (d.lo >= 0) return k == Kind::Min ? b : a;
  Expr e;
  e.kind = k;
  e.args = a->id < b->id ? std::vector<ExprPtr>{a, b} : std::vector<ExprPtr>{b, a};
  return intern(std::move(e));
}

ExprPtr Context::min(ExprPtr a, ExprPtr b) {
  return minmax(Kind::Min, a, b);
}
ExprPtr Context::max(ExprPtr a, ExprPtr b) {
  return minmax(Kind::Max, a, b);
}

ExprPtr Context::relation(Kind k, ExprPtr d) {
  if (auto c = d->constant()) {
    switch (k) {
      case Kind::Eq:
        return boolean(*c == 0);
      case Kind::Ne:
        return boolean(*c != 0);
      case Kind::Lt:
        return boolean(*c < 0);
      default:
        return boolean(*c <= 0);
    }
  }
  Poly p = as_poly(d);
  // Scale by the gcd of the non-constant coefficients. For ==/!= a constant it does not divide
  // decides the relation; for < and <= the constant rounds (d < 0 <=> g*q + c < 0 <=> q < -c/g).
  const int64_t g = coef_gcd(p);
  if (g > 1) {
    if (k == Kind::Eq || k == Kind::Ne) {
      if (p.constant % g != 0) return boolean(k == Kind::Ne);
      p.constant /= g;
    } else {
      // q < -c/g  <=>  q <= ceil(-c/g) - 1  (Lt);  q <= floor(-c/g)  (Le).
      const int64_t bound =
          k == Kind::Lt ? -sym::floordiv(p.constant, g) - 1 : sym::floordiv(-p.constant, g);
      p.constant = -bound;
      k = Kind::Le;
    }
    for (auto& t : p.terms) t.coef /= g;
    d = from_poly(p);
  }
  if ((k == Kind::Eq || k == Kind::Ne) && !p.terms.empty() && p.terms.front().coef < 0) d = neg(d);
  const Range r = range(d);
  switch (k) {
    case Kind::Eq:
      if (r.lo > 0 || r.hi < 0) return boolean(false);
      if (r.lo == 0 && r.hi == 0) return boolean(true);
      break;
    case Kind::Ne:
      if (r.lo > 0 || r.hi < 0) return boolean(true);
      if (r.lo == 0 && r.hi == 0) return boolean(false);
      break;
    case Kind::Lt:
      if (r.hi < 0) return boolean(true);
      if (r.lo >= 0) return boolean(false);
      break;
    default:
      if (r.hi <= 0) return boolean(true);
      if (r.lo > 0) return boolean(false);
      break;
  }
  Expr e;
  e.kind = k;
  e.args = {d};
  return intern(std::move(e));
}

ExprPtr Context::eq(ExprPtr a, ExprPtr b) {
  return relation(Kind::Eq, sub(a, b));
}
ExprPtr Context::ne(ExprPtr a, ExprPtr b) {
  return relation(Kind::Ne, sub(a, b));
}
ExprPtr Context::lt(ExprPtr a, ExprPtr b) {
  return relation(Kind::Lt, sub(a, b));
}
ExprPtr Context::le(ExprPtr a, ExprPtr b) {
  return relation(Kind::Le, sub(a, b));
}

ExprPtr Context::logical_not(ExprPtr a) {
  switch (a->kind) {
    case Kind::BoolConst:
      return boolean(a->value == 0);
    case Kind::Not:
      return a->args[0];
    case Kind::Eq:
      return relation(Kind::Ne, a->args[0]);
    case Kind::Ne:
      return relation(Kind::Eq, a->args[0]);
    case Kind::Lt:
      return relation(Kind::Le, neg(a->args[0]));  // !(d < 0) <=> -d <= 0
    case Kind::Le:
      return relation(Kind::Lt, neg(a->args[0]));  // !(d <= 0) <=> -d < 0
    default:
      break;
  }
  Expr e;
  e.kind = Kind::Not;
  e.args = {a};
  return intern(std::move(e));
}

ExprPtr Context::logical_and(ExprPtr a, ExprPtr b) {
  if (a->kind == Kind::BoolConst) return a->value ? b : a;
  if (b->kind == Kind::BoolConst) return b->value ? a : b;
  if (a == b) return a;
  if (logical_not(a) == b) return boolean(false);
  Expr e;
  e.kind = Kind::And;
  e.args = a->id < b->id ? std::vector<ExprPtr>{a, b} : std::vector<ExprPtr>{b, a};
  return intern(std::move(e));
}

ExprPtr Context::logical_or(ExprPtr a, ExprPtr b) {
  if (a->kind == Kind::BoolConst) return a->value ? a : b;
  if (b->kind == Kind::BoolConst) return b->value ? b : a;
  if (a == b) return a;
  if (logical_not(a) == b) return boolean(true);
  Expr e;
  e.kind = Kind::Or;
  e.args = a->id < b->id ? std::vector<ExprPtr>{a, b} : std::vector<ExprPtr>{b, a};
  return intern(std::move(e));
}

Range Context::monomial_range(const std::vector<ExprPtr>& atoms) {
  Range r{1, 1};
  for (ExprPtr a : atoms) r = mul_range(r, atom_range(a));
  // x*x is non-negative whatever the sign of x.
  for (size_t i = 0; i + 1 < atoms.size(); ++i) {
    if (atoms[i] == atoms[i + 1] && atoms.size() == 2) r.lo = std::max<int64_t>(r.lo, 0);
  }
  return r;
}

Range Context::atom_range(ExprPtr e) {
  switch (e->kind) {
    case Kind::Symbol:
      return symbol_range(e->symbol);
    case Kind::FloorDiv: {
      const Range a = range(e->args[0]), b = range(e->args[1]);
      if (auto k = e->args[1]->constant(); k && *k > 0)
        return {floor_div_inf(a.lo, *k), floor_div_inf(a.hi, *k)};
      if (b.lo > 0 && a.lo >= 0) {
        return {b.hi >= kInf ? 0 : floor_div_inf(a.lo, b.hi), floor_div_inf(a.hi, b.lo)};
      }
      return {};
    }
    case Kind::Mod: {
      const Range a = range(e->args[0]), b = range(e->args[1]);
      if (b.lo > 0) {
        const int64_t hi = b.hi >= kInf ? kInf : b.hi - 1;
        return {0, a.lo >= 0 ? std::min(hi, a.hi) : hi};
      }
      return {};
    }
    case Kind::Min: {
      const Range a = range(e->args[0]), b = range(e->args[1]);
      return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
    }
    case Kind::Max: {
      const Range a = range(e->args[0]), b = range(e->args[1]);
      return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
    }
    default:
      return range(e);
  }
}

Range Context::range(ExprPtr e) {
  if (auto it = range_cache_.find(e); it != range_cache_.end()) return it->second;
  Range r;
  if (e->is_bool()) {
    r = e->kind == Kind::BoolConst ? Range{e->value, e->value} : Range{0, 1};
  } else if (e->kind == Kind::Poly) {
    r = {e->value, e->value};
    // c*k * (a // k) == c*a - c*(a % k) with a % k in [0, k-1]: the rewrite keeps a's correlation
    // with the other terms, which bounds `cdiv(n, k) * k - n` in [0, k-1] (a grid covering n).
    for (size_t i = 0; i < e->terms.size(); ++i) {
      const Term& t = e->terms[i];
      if (t.atoms.size() != 1 || t.atoms[0]->kind != Kind::FloorDiv) continue;
      const auto k = t.atoms[0]->args[1]->constant();
      if (!k || *k <= 0 || t.coef % *k != 0) continue;
      const int64_t c = t.coef / *k;
      Poly rest{e->value, {}};
      for (size_t j = 0; j < e->terms.size(); ++j) {
        if (j != i) rest.terms.push_back(e->terms[j]);
      }
      const ExprPtr rewritten =
          add(from_poly(std::move(rest)), mul(constant(c), t.atoms[0]->args[0]));
      const Range a = range(rewritten);
      const Range m = mul_range({0, *k - 1}, {-c, -c});
      r = {sat_add(a.lo, m.lo), sat_add(a.hi, m.hi)};
      range_cache_[e] = r;
      return r;
    }
    for (const Term& t : e->terms) {
      const Range m = mul_range(monomial_range(t.atoms), {t.coef, t.coef});
      r = {sat_add(r.lo, m.lo), sat_add(r.hi, m.hi)};
    }
  } else {
    r = atom_range(e);
  }
  range_cache_[e] = r;
  return r;
}

std::optional<bool> Context::statically_known(ExprPtr e) {
  if (e->kind == Kind::BoolConst) return e->value != 0;
  return std::nullopt;  // relations are decided when built; what remains depends on the symbols
}

bool Context::divisible(ExprPtr e, int64_t k) {
  if (k == 1 || k == -1) return true;
  const Poly p = as_poly(e);
  if (p.constant % k != 0) return false;
  for (const Term& t : p.terms) {
    if (t.coef % k != 0) return false;
  }
  return true;
}

int64_t Context::evaluate(ExprPtr e, const std::vector<int64_t>& s) {
  switch (e->kind) {
    case Kind::Poly: {
      int64_t v = e->value;
      for (const Term& t : e->terms) {
        int64_t m = t.coef;
        for (ExprPtr a : t.atoms) m *= evaluate(a, s);
        v += m;
      }
      return v;
    }
    case Kind::Symbol:
      return s.at(static_cast<size_t>(e->symbol));
    case Kind::FloorDiv:
      return sym::floordiv(evaluate(e->args[0], s), evaluate(e->args[1], s));
    case Kind::Mod:
      return pymod(evaluate(e->args[0], s), evaluate(e->args[1], s));
    case Kind::Min:
      return std::min(evaluate(e->args[0], s), evaluate(e->args[1], s));
    case Kind::Max:
      return std::max(evaluate(e->args[0], s), evaluate(e->args[1], s));
    case Kind::BoolConst:
      return e->value;
    case Kind::Eq:
      return evaluate(e->args[0], s) == 0;
    case Kind::Ne:
      return evaluate(e->args[0], s) != 0;
    case Kind::Lt:
      return evaluate(e->args[0], s) < 0;
    case Kind::Le:
      return evaluate(e->args[0], s) <= 0;
    case Kind::And:
      return evaluate(e->args[0], s) && evaluate(e->args[1], s);
    case Kind::Or:
      return evaluate(e->args[0], s) || evaluate(e->args[1], s);
    case Kind::Not:
      return !evaluate(e->args[0], s);
  }
  return 0;
}

std::string Context::str(ExprPtr e) const {
  auto atom_str = [&](ExprPtr a) -> std::string {
    const std::string s = str(a);
    const bool composite =
        a->kind == Kind::Poly && (a->terms.size() > 1 || (a->terms.size() == 1 && a->value != 0));
    return composite ? "(" + s + ")" : s;
  };
  switch (e->kind) {
    case Kind::Poly: {
      std::string out;
      for (const Term& t : e->terms) {
        std::string m;
        for (ExprPtr a : t.atoms) {
          const bool paren = a->kind == Kind::FloorDiv || a->kind == Kind::Mod;
          m += (m.empty() ? "" : "*") + (paren ? "(" + str(a) + ")" : str(a));
        }
        const int64_t c = t.coef < 0 ? -t.coef : t.coef;
        if (c != 1) m = std::to_string(c) + "*" + m;
        if (out.empty()) {
          out = (t.coef < 0 ? "-" : "") + m;
        } else {
          out += (t.coef < 0 ? " - " : " + ") + m;
        }
      }
      if (out.empty()) return std::to_string(e->value);
      if (e->value != 0)
        out += (e->value < 0 ? " - " : " + ") + std::to_string(e->value < 0 ? -e->value : e->value);
      return out;
    }
    case Kind::Symbol:
      return symbol_name(e->symbol);
    case Kind::FloorDiv:
      return atom_str(e->args[0]) + "//" + atom_str(e->args[1]);
    case Kind::Mod:
      return atom_str(e->args[0]) + " % " + atom_str(e->args[1]);
    case Kind::Min:
      return "Min(" + str(e->args[0]) + ", " + str(e->args[1]) + ")";
    case Kind::Max:
      return "Max(" + str(e->args[0]) + ", " + str(e->args[1]) + ")";
    case Kind::BoolConst:
      return e->value ? "True" : "False";
    case Kind::Eq:
    case Kind::Ne:
    case Kind::Lt:
    case Kind::Le: {
      // d op 0 printed as lhs op rhs: positive terms left, the rest moved right.
      const Expr& d = *e->args[0];
      std::string lhs, rhs;
      auto term_str = [&](const Term& t, int64_t sign) {
        std::string m;
        for (ExprPtr a : t.atoms) m += (m.empty() ? "" : "*") + str(a);
        const int64_t c = t.coef * sign;
        return (c == 1 ? "" : std::to_string(c) + "*") + m;
      };
      for (const Term& t : d.terms) {
        std::string& side = t.coef > 0 ? lhs : rhs;
        side += (side.empty() ? "" : " + ") + term_str(t, t.coef > 0 ? 1 : -1);
      }
      const int64_t c = d.kind == Kind::Poly ? d.value : 0;
      if (d.kind != Kind::Poly) lhs = str(e->args[0]);
      if (c > 0) lhs += (lhs.empty() ? "" : " + ") + std::to_string(c);
      if (c < 0) rhs += (rhs.empty() ? "" : " + ") + std::to_string(-c);
      if (lhs.empty()) lhs = "0";
      if (rhs.empty()) rhs = "0";
      static const char* kOps[] = {"==", "!=", "<", "<="};
      return lhs + " " + kOps[static_cast<int>(e->kind) - static_cast<int>(Kind::Eq)] + " " + rhs;
    }
    case Kind::And:
      return "(" + str(e->args[0]) + ") and (" + str(e->args[1]) + ")";
    case Kind::Or:
      return "(" + str(e->args[0]) + ") or (" + str(e->args[1]) + ")";
    case Kind::Not:
      return "not (" + str(e->args[0]) + ")";
  }
  return "?";
}

// ---- Program ----------------------------------------------------------------------------------

Program::Program(Context& ctx, const std::vector<ExprPtr>& roots) {
  std::unordered_map<ExprPtr, int32_t> slots;
  for (ExprPtr r : roots) outputs_.push_back(emit(ctx, r, slots));
}

int32_t Program::emit(Context& ctx, ExprPtr e, std::unordered_map<ExprPtr, int32_t>& slots) {
  if (auto it = slots.find(e); it != slots.end()) return it->second;
  auto push = [&](Instr in) {
    code_.push_back(in);
    return static_cast<int32_t>(code_.size() - 1);
  };
  int32_t out = 0;
  switch (e->kind) {
    case Kind::Poly: {
      out = push({Op::Const, 0, 0, e->value});
      for (const Term& t : e->terms) {
        int32_t m = emit(ctx, t.atoms[0], slots);
        for (size_t i = 1; i < t.atoms.size(); ++i)
          m = push({Op::Mul, m, emit(ctx, t.atoms[i], slots), 0});
        if (t.coef != 1) m = push({Op::MulConst, m, 0, t.coef});
        out = push({Op::Add, out, m, 0});
      }
      break;
    }
    case Kind::Symbol:
      out = push({Op::Sym, 0, 0, e->symbol});
      break;
    case Kind::BoolConst:
      out = push({Op::Const, 0, 0, e->value});
      break;
    case Kind::FloorDiv:
    case Kind::Mod:
    case Kind::Min:
    case Kind::Max:
    case Kind::And:
    case Kind::Or: {
      const int32_t a = emit(ctx, e->args[0], slots), b = emit(ctx, e->args[1], slots);
      const Op op = e->kind == Kind::FloorDiv ? Op::FloorDiv
                    : e->kind == Kind::Mod    ? Op::Mod
                    : e->kind == Kind::Min    ? Op::Min
                    : e->kind == Kind::Max    ? Op::Max
                    : e->kind == Kind::And    ? Op::And
                                              : Op::Or;
      out = push({op, a, b, 0});
      break;
    }
    case Kind::Eq:
    case Kind::Ne:
    case Kind::Lt:
    case Kind::Le:
    case Kind::Not: {
      const int32_t a = emit(ctx, e->args[0], slots);
      const Op op = e->kind == Kind::Eq   ? Op::Eq0
                    : e->kind == Kind::Ne ? Op::Ne0
                    : e->kind == Kind::Lt ? Op::Lt0
                    : e->kind == Kind::Le ? Op::Le0
                                          : Op::Not;
      out = push({op, a, 0, 0});
      break;
    }
  }
  slots[e] = out;
  return out;
}

std::vector<Program::RawInstr> Program::raw_code() const {
  std::vector<RawInstr> out;
  out.reserve(code_.size());
  for (const Instr& in : code_) out.push_back({static_cast<uint8_t>(in.op), in.a, in.b, in.imm});
  return out;
}

Program Program::from_raw(const std::vector<RawInstr>& code, const std::vector<int32_t>& outputs,
                          size_t num_symbols) {
  Program p;
  p.code_.reserve(code.size());
  for (size_t i = 0; i < code.size(); ++i) {
    const RawInstr& r = code[i];
    TS_CHECK(r.op <= static_cast<uint8_t>(Op::Not), ValueError)
        << "size program: instruction " << i << " has an unknown opcode " << int(r.op);
    const Op op = static_cast<Op>(r.op);
    const bool two = op == Op::Add || op == Op::Mul || op == Op::FloorDiv || op == Op::Mod ||
                     op == Op::Min || op == Op::Max || op == Op::And || op == Op::Or;
    const bool one = two || op == Op::MulConst || op == Op::Eq0 || op == Op::Ne0 || op == Op::Lt0 ||
                     op == Op::Le0 || op == Op::Not;
    const auto earlier = [&](int32_t s) { return s >= 0 && static_cast<size_t>(s) < i; };
    TS_CHECK(!one || earlier(r.a), ValueError)
        << "size program: instruction " << i << " reads slot " << r.a << ", not an earlier one";
    TS_CHECK(!two || earlier(r.b), ValueError)
        << "size program: instruction " << i << " reads slot " << r.b << ", not an earlier one";
    TS_CHECK(op != Op::Sym || (r.imm >= 0 && static_cast<uint64_t>(r.imm) < num_symbols),
             ValueError)
        << "size program: instruction " << i << " reads symbol " << r.imm << " of " << num_symbols;
    p.code_.push_back({op, one ? r.a : 0, two ? r.b : 0, r.imm});
  }
  for (int32_t o : outputs) {
    TS_CHECK(o >= 0 && static_cast<size_t>(o) < code.size(), ValueError)
        << "size program: output slot " << o << " of " << code.size() << " instructions";
  }
  p.outputs_ = outputs;
  return p;
}

bool Program::run(const int64_t* sym, int64_t* outputs) const {
  int64_t stack_regs[256];
  std::vector<int64_t> heap;
  int64_t* r = stack_regs;
  if (code_.size() > 256) {
    heap.resize(code_.size());
    r = heap.data();
  }
  for (size_t i = 0; i < code_.size(); ++i) {
    const Instr& in = code_[i];
    switch (in.op) {
      case Op::Const:
        r[i] = in.imm;
        break;
      case Op::Sym:
        r[i] = sym[in.imm];
        break;
      case Op::Add:
        if (__builtin_add_overflow(r[in.a], r[in.b], &r[i])) return false;
        break;
      case Op::MulConst:
        if (__builtin_mul_overflow(r[in.a], in.imm, &r[i])) return false;
        break;
      case Op::Mul:
        if (__builtin_mul_overflow(r[in.a], r[in.b], &r[i])) return false;
        break;
      case Op::FloorDiv:
        if (r[in.b] == 0 || (r[in.b] == -1 && r[in.a] == INT64_MIN)) return false;
        r[i] = floordiv(r[in.a], r[in.b]);
        break;
      case Op::Mod:
        if (r[in.b] == 0 || (r[in.b] == -1 && r[in.a] == INT64_MIN)) return false;
        r[i] = pymod(r[in.a], r[in.b]);
        break;
      case Op::Min:
        r[i] = std::min(r[in.a], r[in.b]);
        break;
      case Op::Max:
        r[i] = std::max(r[in.a], r[in.b]);
        break;
      case Op::Eq0:
        r[i] = r[in.a] == 0;
        break;
      case Op::Ne0:
        r[i] = r[in.a] != 0;
        break;
      case Op::Lt0:
        r[i] = r[in.a] < 0;
        break;
      case Op::Le0:
        r[i] = r[in.a] <= 0;
        break;
      case Op::And:
        r[i] = r[in.a] && r[in.b];
        break;
      case Op::Or:
        r[i] = r[in.a] || r[in.b];
        break;
      case Op::Not:
        r[i] = !r[in.a];
        break;
    }
  }
  for (size_t i = 0; i < outputs_.size(); ++i) outputs[i] = r[outputs_[i]];
  return true;
}

}  // namespace tessera::compiler::sym
