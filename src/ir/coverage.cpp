#include "ir/coverage.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/access.h"

namespace tessera::ir {
namespace {

/** A linear form: `c + sum coef * atom + sum_d dim_coef[d] * i[d]` (+ a pointer parameter). Atoms
 * are program ids (`-(axis + 1)`) and scalar parameters (their value id). */
struct Lin {
  int64_t c = 0;
  std::vector<std::pair<int64_t, int64_t>> terms;  ///< (atom, coefficient), sorted, nonzero
  SmallVector<int64_t, 4> dims;                    ///< per dimension of the value's shape
  ValueId ptr = kNoValue;                          ///< the pointer parameter (pointers)
  int bits = 64;  ///< the narrowest integer width the value was computed in

  bool uniform() const {
    return std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d == 0; });
  }
  bool constant() const { return terms.empty() && uniform() && ptr == kNoValue; }
  bool same_offsets(const Lin& o) const { return c == o.c && terms == o.terms && dims == o.dims; }
};

/** Signed integers: their arithmetic is the integers' while it does not overflow. */
bool signed_int(const Type& t) {
  return !t.ptr && is_integral(t.elem) && is_signed(t.elem);
}

int bits_of(const Type& t) {
  return static_cast<int>(itemsize(t.elem) * 8);
}

Lin add(const Lin& a, const Lin& b, int64_t sign) {
  Lin r = a;
  r.c += sign * b.c;
  for (const auto& term : b.terms) {
    const auto& [atom, k] = term;
    auto it = std::find_if(r.terms.begin(), r.terms.end(),
                           [&](const auto& t) { return t.first == term.first; });
    if (it == r.terms.end()) {
      r.terms.emplace_back(atom, sign * k);
    } else {
      it->second += sign * k;
    }
  }
  r.terms.erase(
      std::remove_if(r.terms.begin(), r.terms.end(), [](const auto& t) { return t.second == 0; }),
      r.terms.end());
  std::sort(r.terms.begin(), r.terms.end());
  for (size_t d = 0; d < r.dims.size() && d < b.dims.size(); ++d) r.dims[d] += sign * b.dims[d];
  r.bits = std::min(a.bits, b.bits);
  return r;
}

Lin scale(Lin a, int64_t k) {
  a.c *= k;
  for (auto& t : a.terms) t.second *= k;
  a.terms.erase(
      std::remove_if(a.terms.begin(), a.terms.end(), [](const auto& t) { return t.second == 0; }),
      a.terms.end());
  for (auto& d : a.dims) d *= k;
  return a;
}

class Linear {
 public:
  explicit Linear(const Function& f) : f_(f) {
    for (const Param& p : f.params) {
      if (p.value != kNoValue) param_.emplace(p.value, &p - f.params.data());
    }
  }

  const std::optional<Lin>& of(ValueId v) {
    if (auto it = memo_.find(v); it != memo_.end()) return it->second;
    std::optional<Lin> r = compute(v);
    return memo_[v] = std::move(r);
  }

  int param_index(ValueId v) const {
    auto it = param_.find(v);
    return it == param_.end() ? -1 : static_cast<int>(it->second);
  }

 private:
  std::optional<Lin> compute(ValueId v) {
    const Type& t = f_.type(v);
    const Op* op = f_.def(v);
    if (!op) {  // a parameter (anything else with no definition is a region argument)
      if (param_index(v) < 0 || !t.is_scalar()) return std::nullopt;
      Lin r;
      if (t.ptr) {
        r.ptr = v;
      } else if (signed_int(t)) {
        r.terms.emplace_back(v, 1);  // exact: only arithmetic in a narrow type can wrap
      } else {
        return std::nullopt;
      }
      return r;
    }
    auto operand = [&](size_t i) -> const std::optional<Lin>& { return of(op->operands[i]); };
    const int rank = static_cast<int>(t.rank());
    switch (op->kind) {
      case OpKind::Constant: {
        if (!signed_int(t)) return std::nullopt;
        Lin r;
        r.c = op->ival;
        r.dims.assign(static_cast<size_t>(rank), 0);
        return r;
      }
      case OpKind::ProgramId: {
        Lin r;
        r.terms.emplace_back(-(op->ival + 1), 1);
        return r;
      }
      case OpKind::Arange: {
        Lin r;
        r.c = op->ival;
        r.dims = {1};
        return r;
      }
      case OpKind::Splat: {
        std::optional<Lin> r = operand(0);
        if (!r) return r;
        r->dims.assign(static_cast<size_t>(rank), 0);
        return r;
      }
      case OpKind::Broadcast: {
        std::optional<Lin> r = operand(0);
        const Type& from = f_.type(op->operands[0]);
        if (!r || from.rank() != rank) return std::nullopt;
        for (int d = 0; d < rank; ++d) {
          if (from.shape[static_cast<size_t>(d)] == 1) r->dims[static_cast<size_t>(d)] = 0;
        }
        return r;
      }
      case OpKind::ExpandDims: {
        std::optional<Lin> r = operand(0);
        if (!r || op->ival < 0 || op->ival > static_cast<int64_t>(r->dims.size()))
          return std::nullopt;
        r->dims.insert(r->dims.begin() + op->ival, 0);
        return r;
      }
      case OpKind::Permute: {
        std::optional<Lin> r = operand(0);
        if (!r) return r;
        SmallVector<int64_t, 4> dims(static_cast<size_t>(rank), 0);
        for (int d = 0; d < rank; ++d) {
          const auto from = static_cast<size_t>((op->ival >> (4 * d)) & 0xF);
          if (from >= r->dims.size()) return std::nullopt;
          dims[static_cast<size_t>(d)] = r->dims[from];
        }
        r->dims = dims;
        return r;
      }
      case OpKind::Binary: {
        if (!signed_int(t)) return std::nullopt;
        const auto& a = operand(0);
        const auto& b = operand(1);
        if (!a || !b || a->ptr != kNoValue || b->ptr != kNoValue) return std::nullopt;
        std::optional<Lin> r;
        switch (static_cast<BinaryKind>(op->sub)) {
          case BinaryKind::Add:
            r = add(*a, *b, 1);
            break;
          case BinaryKind::Sub:
            r = add(*a, *b, -1);
            break;
          case BinaryKind::Mul:
            if (b->constant()) {
              r = scale(*a, b->c);
            } else if (a->constant()) {
              r = scale(*b, a->c);
            }
            break;
          default:
            break;
        }
        if (r) r->bits = std::min(r->bits, bits_of(t));
        return r;
      }
      case OpKind::Cast: {  // integer widening keeps the values
        const Type& from = f_.type(op->operands[0]);
        if (!signed_int(t) || !signed_int(from) || itemsize(t.elem) < itemsize(from.elem))
          return std::nullopt;
        return operand(0);
      }
      case OpKind::AddPtr: {
        const auto& p = operand(0);
        const auto& off = operand(1);
        if (!p || !off || p->ptr == kNoValue || off->ptr != kNoValue) return std::nullopt;
        Lin r = add(*p, *off, 1);
        r.ptr = p->ptr;
        return r;
      }
      default:
        return std::nullopt;
    }
  }

  const Function& f_;
  std::unordered_map<ValueId, size_t> param_;
  std::unordered_map<ValueId, std::optional<Lin>> memo_;
};

/** The coverage of one top-level store, or the reason it proves nothing. */
StoreCoverage prove(const Function& f, Linear& lin, const Op& store, const Lin& ptr) {
  StoreCoverage c;
  const Type& t = f.type(store.operands[0]);
  // The block: strides that form one mixed radix over the dimensions longer than 1.
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (t.shape[d] > 1) dims.emplace_back(ptr.dims[d], t.shape[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t tile = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != tile) {
      c.why_not =
          "its block is not dense (strides of the stored offsets are not one row-major "
          "layout of the block)";
      return c;
    }
    tile *= size;
  }
  if (ptr.c != 0) {
    c.why_not = "its offsets do not start at 0 (a constant " + std::to_string(ptr.c) + " is added)";
    return c;
  }
  for (const auto& [atom, k] : ptr.terms) {
    if (atom >= 0) {
      c.why_not = "its offsets depend on the scalar '" + f.info(static_cast<ValueId>(atom)).name +
                  "', not only on program ids";
      return c;
    }
    if (c.axis >= 0 || k != tile) {
      c.why_not = "program k stores at offset " + std::to_string(k) + "*k, not at k times its " +
                  std::to_string(tile) + " elements";
      return c;
    }
    c.axis = static_cast<int>(-atom - 1);
  }
  c.tile = tile;
  c.offset_bits = ptr.bits;
  if (store.operands.size() > 2) {
    const ValueId m = store.operands[2];
    const Op* cmp = f.def(m);
    if (const Op* k = f.constant(m); k && k->ival != 0) {
      // an always-true mask
    } else if (cmp && cmp->kind == OpKind::Compare) {
      const auto kind = static_cast<CmpKind>(cmp->sub);
      const bool flip = kind == CmpKind::GT || kind == CmpKind::GE;
      const auto& lhs = lin.of(cmp->operands[flip ? 1 : 0]);
      const auto& rhs = lin.of(cmp->operands[flip ? 0 : 1]);
      const bool less = kind == CmpKind::LT || kind == CmpKind::GT;
      const bool less_equal = kind == CmpKind::LE || kind == CmpKind::GE;
      if (!(less || less_equal) || !lhs || !rhs || !lhs->same_offsets(ptr) || !rhs->uniform() ||
          rhs->ptr != kNoValue || rhs->terms.size() > 1 ||
          (rhs->terms.size() == 1 &&
           (rhs->terms[0].second != 1 || lin.param_index(rhs->terms[0].first) < 0))) {
        c.why_not =
            "its mask is not `offsets < bound` (with the stored offsets and a scalar "
            "parameter or constant bound)";
        return c;
      }
      c.bounded = true;
      c.bound_constant = rhs->c + (less_equal ? 1 : 0);
      if (!rhs->terms.empty()) c.bound_param = lin.param_index(rhs->terms[0].first);
    } else {
      c.why_not = "its mask is not `offsets < bound`";
      return c;
    }
  }
  c.proven = true;
  return c;
}

// Whether pointer `p` is `param + offsets` through views and addptr only: the parameter's index.
int direct_param(const Function& f, ValueId p) {
  for (size_t i = 0; i < f.params.size(); ++i) {
    if (f.params[i].value == p) return static_cast<int>(i);
  }
  const Op* op = f.def(p);
  if (!op) return -1;
  switch (op->kind) {
    case OpKind::Splat:
    case OpKind::Broadcast:
    case OpKind::ExpandDims:
    case OpKind::AddPtr:
      return direct_param(f, op->operands[0]);
    default:
      return -1;
  }
}

}  // namespace

namespace {

// Per parameter: every access op (`is_access`) whose pointer may derive from it addresses it
// directly, and there is at least one.
template <class Pred>
std::vector<bool> direct_accesses(const Function& f, Pred is_access) {
  std::vector<bool> out(f.params.size(), false), broken(f.params.size(), false);
  const std::vector<uint64_t> provenance = pointer_provenance(f);
  walk(f.body, [&](const Op* op) {
    if (!is_access(op->kind)) return;
    const ValueId p = op->operands[0];
    const int direct = direct_param(f, p);
    for (size_t i = 0; i < f.params.size(); ++i) {
      const bool through = i < 63 ? (provenance[static_cast<size_t>(p)] >> i & 1) != 0 : true;
      if (!through) continue;
      if (direct == static_cast<int>(i)) {
        out[i] = true;
      } else {
        broken[i] = true;
      }
    }
  });
  for (size_t i = 0; i < out.size(); ++i) out[i] = out[i] && !broken[i];
  return out;
}

}  // namespace

std::vector<bool> direct_stores(const Function& f) {
  return direct_accesses(f, [](OpKind k) {
    return k == OpKind::Store || k == OpKind::Atomic || k == OpKind::AtomicCas;
  });
}

std::vector<bool> direct_loads(const Function& f) {
  return direct_accesses(f, [](OpKind k) { return k == OpKind::Load; });
}

std::vector<StoreCoverage> store_coverage(const Function& f) {
  std::vector<StoreCoverage> out(f.params.size());
  for (auto& c : out)
    c.why_not =
        "no store through it at the kernel's top level (stores in loops and branches may "
        "not run)";
  Linear lin(f);
  std::vector<uint64_t> provenance;  // computed for the first store whose pointer is not linear
  for (const Op* op : f.body.ops) {  // top level only: nested stores may not run
    if (op->kind != OpKind::Store) continue;
    const auto& ptr = lin.of(op->operands[0]);
    if (!ptr || ptr->ptr == kNoValue) {
      if (provenance.empty()) provenance = pointer_provenance(f);
      for (size_t p = 0; p < out.size() && p < 63; ++p) {
        if ((provenance[static_cast<size_t>(op->operands[0])] >> p & 1) &&
            out[p].why_not.rfind("no store", 0) == 0)
          out[p].why_not =
              "its stored offsets are not linear in the program ids and the "
              "block's indices";
      }
      continue;
    }
    const int p = lin.param_index(ptr->ptr);
    if (p < 0 || out[static_cast<size_t>(p)].proven) continue;
    StoreCoverage c = prove(f, lin, *op, *ptr);
    if (c.proven || out[static_cast<size_t>(p)].why_not.rfind("no store", 0) == 0)
      out[static_cast<size_t>(p)] = std::move(c);
  }
  return out;
}

}  // namespace tessera::ir
