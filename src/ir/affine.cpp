#include "ir/affine.h"

#include <algorithm>

namespace tessera::ir {
namespace {

constexpr int64_t kMaxDivisibility = int64_t{1} << 30;

int64_t pow2_factor(int64_t v) {
  if (v == 0) return kMaxDivisibility;
  const auto u = static_cast<uint64_t>(v);
  return std::min<int64_t>(static_cast<int64_t>(u & (~u + 1)), kMaxDivisibility);
}

bool affine_type(const Type& t) {
  return t.ptr || t.elem == DType::Int32 || t.elem == DType::Int64;
}

// A form's coefficients as `unknown` entries: 0 where known.
SmallVector<int64_t, 4>& unknowns(AffineForm& a) {
  if (a.unknown.empty()) a.unknown.assign(a.coef.size(), 0);
  return a.unknown;
}

}  // namespace

int64_t AffineForm::coef_divisibility(size_t d) const {
  return coef_known(d) ? pow2_factor(coef[d]) : unknown[d];
}

AffineInfo::AffineInfo(const Function& f, bool rem_as_identity)
    : f_(f), rem_as_identity_(rem_as_identity), index_(f.num_values(), -1) {
  for (const auto& p : f.params) {
    if (p.value == kNoValue || !affine_type(f.type(p.value))) continue;
    AffineForm a;
    a.base = add_node({UniformNode::Kind::Value, 0, p.value});
    a.divisibility = p.divisible_by_16 ? 16 : 1;
    set(p.value, std::move(a));
  }
  region(f.body);
}

int32_t AffineInfo::add_node(UniformNode n) {
  nodes_.push_back(n);
  return static_cast<int32_t>(nodes_.size() - 1);
}

void AffineInfo::set(ValueId v, AffineForm f) {
  index_[static_cast<size_t>(v)] = static_cast<int32_t>(forms_.size());
  forms_.push_back(std::move(f));
}

void AffineInfo::region(const Region& r, int64_t iv_divisibility) {
  for (ValueId a : r.args) {
    // Region arguments: scalars (a loop's induction variable, carried scalars) are uniform
    // leaves; carried tiles have no form (their values change per iteration).
    const Type& t = f_.type(a);
    if (!t.is_scalar() || !affine_type(t)) continue;
    AffineForm s;
    s.base = add_node({UniformNode::Kind::Value, 0, a});
    // A loop's induction variable is lb + k * step: it keeps what divides both.
    if (a == r.args.front()) s.divisibility = iv_divisibility;
    set(a, std::move(s));
  }
  for (const Op* o : r.ops) {
    int64_t iv = 1;
    if (o->kind == OpKind::For) {
      const AffineForm* lb = loose_form(o->operands[0]);
      const AffineForm* step = loose_form(o->operands[2]);
      if (lb && step) iv = std::min(lb->divisibility, step->divisibility);
    }
    for (const auto& sub : o->regions) region(sub, iv);
    op(*o);
  }
}

void AffineInfo::op(const Op& o) {
  if (o.results.size() != 1) {
    // Several results (loops, branches, multi-value reductions): scalars are uniform leaves.
    for (ValueId v : o.results) {
      const Type& t = f_.type(v);
      if (!t.is_scalar() || !affine_type(t)) continue;
      AffineForm a;
      a.base = add_node({UniformNode::Kind::Value, 0, v});
      set(v, std::move(a));
    }
    return;
  }
  const ValueId v = o.result();
  const Type& t = f_.type(v);
  if (!affine_type(t)) return;
  auto of = [&](size_t i) { return loose_form(o.operands[i]); };
  std::optional<AffineForm> r;
  switch (o.kind) {
    case OpKind::Constant: {
      AffineForm a;
      a.coef.assign(t.shape.size(), 0);
      a.base = add_node({UniformNode::Kind::Constant, o.ival});
      a.base_value = o.ival;
      a.divisibility = pow2_factor(o.ival);
      r = std::move(a);
      break;
    }
    case OpKind::Arange: {
      AffineForm a;
      a.coef = {1};
      a.base = add_node({UniformNode::Kind::Constant, o.ival});
      a.base_value = o.ival;
      a.divisibility = pow2_factor(o.ival);
      r = std::move(a);
      break;
    }
    case OpKind::Splat:
    case OpKind::Broadcast:
    case OpKind::ExpandDims:
    case OpKind::Permute: {
      const AffineForm* s = of(0);
      if (!s) break;
      AffineForm a = *s;
      if (o.kind == OpKind::Splat) {
        a.coef.assign(t.shape.size(), 0);
        a.unknown.clear();
      } else if (o.kind == OpKind::Broadcast) {
        const auto& src = f_.type(o.operands[0]).shape;
        for (size_t d = 0; d < src.size(); ++d) {
          if (src[d] != 1) continue;
          a.coef[d] = 0;  // a stretched dimension repeats its one element
          if (!a.unknown.empty()) a.unknown[d] = 0;
        }
      } else if (o.kind == OpKind::ExpandDims) {
        a.coef.insert(a.coef.begin() + o.ival, 0);
        if (!a.unknown.empty()) a.unknown.insert(a.unknown.begin() + o.ival, 0);
      } else {
        for (size_t d = 0; d < t.shape.size(); ++d) {
          const auto from = static_cast<size_t>((o.ival >> (4 * d)) & 15);
          a.coef[d] = s->coef[from];
          if (!a.unknown.empty()) a.unknown[d] = s->unknown[from];
        }
      }
      r = std::move(a);
      break;
    }
    case OpKind::Binary: {
      const auto k = static_cast<BinaryKind>(o.sub);
      const AffineForm* x = of(0);
      const AffineForm* y = of(1);
      if (!x || !y) break;
      AffineForm a;
      a.exact = false;
      if (k == BinaryKind::Add || k == BinaryKind::Sub) {
        const int64_t sign = k == BinaryKind::Add ? 1 : -1;
        a.coef = x->coef;
        for (size_t d = 0; d < a.coef.size(); ++d) a.coef[d] += sign * y->coef[d];
        combine_unknowns(a, *x, *y);
        a.base = add_node({k == BinaryKind::Add ? UniformNode::Kind::Add : UniformNode::Kind::Sub,
                           0, kNoValue, x->base, y->base});
        if (x->base_value && y->base_value) a.base_value = *x->base_value + sign * *y->base_value;
        a.divisibility = std::min(x->divisibility, y->divisibility);
      } else if (k == BinaryKind::Mul) {
        if (!x->uniform() && !y->uniform()) break;  // index * index: not affine
        if (!y->uniform()) std::swap(x, y);
        const int64_t c = y->base_value.value_or(0);
        a.coef = x->coef;
        for (auto& e : a.coef) e *= c;
        if (!x->uniform() && (!y->base_value || !x->coefs_known())) {
          // index * a runtime value (or an unknown coefficient * c): each coefficient is known
          // by a divisor, x's times y's (a zero stays a known zero)
          auto& u = unknowns(a);
          for (size_t d = 0; d < a.coef.size(); ++d) {
            if (x->coef_known(d) && x->coef[d] == 0) continue;
            const int64_t dy = y->base_value ? pow2_factor(c) : y->divisibility;
            u[d] = std::min(x->coef_divisibility(d) * dy, kMaxDivisibility);
            a.coef[d] = 0;
          }
          if (!a.coefs_known() && y->base_value && c == 0) a.unknown.clear();
        }
        a.base = add_node({UniformNode::Kind::Mul, 0, kNoValue, x->base, y->base});
        if (x->base_value && y->base_value) a.base_value = *x->base_value * *y->base_value;
        a.divisibility = std::min(x->divisibility * y->divisibility, kMaxDivisibility);
      } else if (k == BinaryKind::Rem && rem_as_identity_ && y->uniform() && x->coefs_known()) {
        // (B - B % m is a multiple of m: B % m keeps what divides both)
        a = *x;
        a.base = add_node({UniformNode::Kind::Rem, 0, kNoValue, x->base, y->base});
        a.base_value.reset();
        if (x->base_value && y->base_value && *y->base_value != 0)
          a.base_value = *x->base_value % *y->base_value;
        a.divisibility = std::min(x->divisibility, y->divisibility);
      } else {
        break;
      }
      r = std::move(a);
      break;
    }
    case OpKind::Cast: {
      // A scalar integer's conversion to another width keeps what divides it (sign extension
      // and truncation keep the low bits); tiles get no form (a wrap would change it).
      const AffineForm* x = of(0);
      if (!x || !t.is_scalar() || t.ptr || f_.type(o.operands[0]).ptr) break;
      AffineForm a;
      a.base = x->base;
      a.divisibility = std::min<int64_t>(x->divisibility, int64_t{1} << 30);
      r = std::move(a);
      break;
    }
    case OpKind::AddPtr: {
      const AffineForm* p = of(0);
      const AffineForm* off = of(1);
      if (!p || !off) break;
      AffineForm a;
      a.coef = off->coef;
      a.unknown = off->unknown;
      if (!p->uniform()) {  // a pointer tile plus offsets: (x + rows * s) + cols
        if (p->coef.size() != off->coef.size()) break;
        for (size_t d = 0; d < a.coef.size(); ++d) a.coef[d] += p->coef[d];
        combine_unknowns(a, *p, *off);
      }
      a.base = add_node({UniformNode::Kind::Add, 0, kNoValue, p->base, off->base});
      const auto size = static_cast<int64_t>(itemsize(t.elem));
      a.divisibility =
          std::min(p->divisibility, std::min(off->divisibility * size, kMaxDivisibility));
      a.exact = off->exact && p->exact;
      r = std::move(a);
      break;
    }
    default:
      break;
  }
  if (t.is_scalar()) {
    // A scalar is its own uniform leaf (emitters hold it in a variable); what was derived above
    // still gives its value and divisibility.
    AffineForm a;
    a.base = add_node({UniformNode::Kind::Value, 0, v});
    if (r) {
      a.divisibility = r->divisibility;
      a.base_value = r->base_value;
      if (o.kind == OpKind::Constant) a.base = r->base;
    }
    set(v, std::move(a));
    return;
  }
  if (!r && t.elem != DType::Bool && !t.ptr) {
    // A tile that is no affine function of its index (`offs % M`, a loaded index) but varies
    // along one dimension only: a loose form whose term of that dimension is unknown (values
    // divisible by 1), so that `offs[:, None] * stride + cols` still has a known last dimension.
    size_t varying = 0, dim = 0;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] != 1) ++varying, dim = d;
    }
    if (varying == 1) {
      AffineForm a;
      a.coef.assign(t.shape.size(), 0);
      a.unknown.assign(t.shape.size(), 0);
      a.unknown[dim] = 1;
      a.base = add_node({UniformNode::Kind::Constant, 0});
      a.base_value = 0;
      a.divisibility = kMaxDivisibility;
      a.exact = false;
      r = std::move(a);
    }
  }
  if (r) set(v, std::move(*r));
}

void AffineInfo::combine_unknowns(AffineForm& a, const AffineForm& x, const AffineForm& y) {
  a.unknown.clear();
  if (x.coefs_known() && y.coefs_known()) return;
  auto& u = unknowns(a);
  for (size_t d = 0; d < a.coef.size(); ++d) {
    if (x.coef_known(d) && y.coef_known(d)) continue;
    u[d] = std::min(x.coef_divisibility(d), y.coef_divisibility(d));
    a.coef[d] = 0;
  }
}

int64_t AffineInfo::contiguity(ValueId v, size_t dim) const {
  const AffineForm* a = form(v);
  if (!a || dim >= a->coef.size() || a->coef[dim] != 1) return 1;
  return f_.type(v).shape[dim];
}

int64_t AffineInfo::constancy(ValueId v, size_t dim) const {
  const AffineForm* a = form(v);
  if (!a || dim >= a->coef.size() || a->coef[dim] != 0) return 1;
  return f_.type(v).shape[dim];
}

}  // namespace tessera::ir
