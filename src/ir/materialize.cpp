#include "ir/materialize.h"

#include <algorithm>

#include "ir/op_traits.h"

namespace tessera::ir {
namespace {

bool cheap(const Op& op) {
  if (op.kind == OpKind::Unary) return unary_traits(static_cast<UnaryKind>(op.sub)).cheap;
  return traits(op.kind).has(kCheap);
}

}  // namespace

MaterializationPlan::MaterializationPlan(const Function& f, const UseInfo& uses, bool reread_loads)
    : f_(f),
      uses_(uses),
      storage_(f.num_values(), Storage::Inline),
      fused_(f.num_values(), false),
      inline_size_(f.num_values(), 1),
      reread_loads_(reread_loads) {
  for (const auto& p : f_.params) {
    if (p.value != kNoValue) storage_[static_cast<size_t>(p.value)] = Storage::Scalar;
  }
  classify(f_.body);
  store_dot_operands(f_.body);
  place_loads(f_.body);
  fuse_into_reductions(f_.body);
}

void MaterializationPlan::classify(const Region& r) {
  for (ValueId a : r.args) {
    storage_[static_cast<size_t>(a)] = f_.type(a).is_scalar() ? Storage::Scalar : Storage::Array;
  }
  for (const Op* op : r.ops) {
    for (const auto& sub : op->regions) classify(sub);
    for (ValueId v : op->results) {
      const Type& t = f_.type(v);
      Storage s;
      if (op->kind == OpKind::For || op->kind == OpKind::If) {
        s = t.is_scalar() ? Storage::Scalar : Storage::Array;
      } else if (t.is_scalar()) {
        s = op->kind == OpKind::Constant ? Storage::Inline : Storage::Scalar;
      } else if (cheap(*op)) {
        // Inline, unless its expression (operands expanded where they are inline too) is large
        // and used more than once: a chain of such values (an unrolled loop's `x = x * x`)
        // would otherwise print exponentially long code. Stored, it is computed once.
        int64_t size = 1;
        for (ValueId o : op->operands) {
          if (storage_[static_cast<size_t>(o)] == Storage::Inline) size += inline_size_[o];
        }
        s = size > kMaxSharedInline && !uses_.single_local_use(v) ? Storage::Array
                                                                  : Storage::Inline;
        inline_size_[v] = s == Storage::Inline ? size : 1;
      } else if (op->kind == OpKind::Unary || op->kind == OpKind::Load) {
        s = uses_.single_local_use(v) ? Storage::Inline : Storage::Array;
        // An inline transcendental counts as a large expression: a cheap value computed from it
        // and used several times (a cast of a tanh read by three terms of GELU's derivative) is
        // stored, or the transcendental would be evaluated once per use.
        if (s == Storage::Inline && op->kind == OpKind::Unary) inline_size_[v] = kMaxSharedInline;
      } else {
        s = Storage::Array;  // Reduce
      }
      storage_[static_cast<size_t>(v)] = s;
    }
  }
}

// Whether evaluating `v` inline costs more than a stored element: a division or remainder in its
// expression (`offs_am % M`: no affine address, a gather), or many ops.
bool MaterializationPlan::expensive_inline(ValueId v, int& budget) const {
  if (storage_[static_cast<size_t>(v)] != Storage::Inline) return false;
  const Op* d = f_.def(v);
  if (!d) return false;
  if (d->kind == OpKind::Binary) {
    const auto k = static_cast<BinaryKind>(d->sub);
    if (k == BinaryKind::Div || k == BinaryKind::Rem) return true;
  }
  if (!traits(d->kind).has(kViewLike) && --budget < 0) return true;
  for (ValueId u : d->operands) {
    if (expensive_inline(u, budget)) return true;
  }
  return false;
}

// A dot reads each element of its operands once per row or column of the result: an operand whose
// inline expression is expensive is stored (computed once) rather than evaluated inside the dot's
// loops; cheap affine loads stay inline (the dot reads them straight from memory).
void MaterializationPlan::store_dot_operands(const Region& r) {
  for (const Op* op : r.ops) {
    for (const auto& sub : op->regions) store_dot_operands(sub);
    if (op->kind != OpKind::Dot) continue;
    for (size_t k = 0; k < 2; ++k) {
      const ValueId v = op->operands[k];
      int budget = 16;
      if (expensive_inline(v, budget)) storage_[static_cast<size_t>(v)] = Storage::Array;
    }
  }
}

// Whether inline value `v`'s expression reads memory (a gather's index load): such an address is
// not read again per use.
bool MaterializationPlan::reads_memory_inline(ValueId v, int depth) const {
  if (storage_[static_cast<size_t>(v)] != Storage::Inline || depth > 32) return depth > 32;
  const Op* d = f_.def(v);
  if (!d) return false;
  if (d->kind == OpKind::Load) return true;
  for (ValueId u : d->operands) {
    if (reads_memory_inline(u, depth + 1)) return true;
  }
  return false;
}

// A load stays inline only if the places it is evaluated (the first non-inline consumers up
// chains of uses: one op, or with reread_loads up to kMaxRereads of them) come before any op that
// may write memory.
void MaterializationPlan::place_loads(const Region& r) {
  for (size_t i = 0; i < r.ops.size(); ++i) {
    const Op* op = r.ops[i];
    for (const auto& sub : op->regions) place_loads(sub);
    if (op->kind != OpKind::Load || op->results.empty()) continue;
    const ValueId v0 = op->result();
    // With reread_loads, a load stored for having several uses is reconsidered; one that
    // store_dot_operands stored for an expensive address stays stored (a reconsidered load must
    // have a cheap one, below).
    const bool reconsider = reread_loads_ && storage_[static_cast<size_t>(v0)] == Storage::Array &&
                            !uses_.single_local_use(v0);
    if (storage_[static_cast<size_t>(v0)] != Storage::Inline && !reconsider) continue;
    // Every use, through inline values, must end in a root op of this region: the load is then
    // evaluated inside those ops' element loops only (twice in one expression, `d * d` with d from
    // the load, is one load for the C++ compiler: no store in between).
    std::vector<const Op*> roots;
    bool ok = true;
    std::vector<ValueId> work{v0};
    for (size_t w = 0; ok && w < work.size() && w < 64; ++w) {
      const ValueId v = work[w];
      if (uses_.uses(v).empty()) ok = false;
      for (const Use& u : uses_.uses(v)) {
        if (!ok) break;
        if (u.region != &r) {
          ok = false;
          break;
        }
        const Op* user = u.user;
        if (!user->results.empty() && user->kind != OpKind::For && user->kind != OpKind::If &&
            storage_[static_cast<size_t>(user->result())] == Storage::Inline) {
          if (std::find(work.begin(), work.end(), user->result()) == work.end())
            work.push_back(user->result());
          continue;
        }
        if (std::find(roots.begin(), roots.end(), user) == roots.end()) roots.push_back(user);
      }
    }
    ok = ok && !roots.empty() && work.size() < 64;
    if (ok && (roots.size() > 1 || reconsider)) {
      // Read again per root: only a cheap, direct address, and a bounded number of times.
      ok = reread_loads_ && roots.size() <= kMaxRereads;
      int budget = 16;
      for (ValueId o : op->operands) {
        ok = ok && !expensive_inline(o, budget) && !reads_memory_inline(o, 0);
      }
    }
    if (ok) {  // nothing writes memory before the last root (an earlier root included)
      size_t left = roots.size();
      for (size_t j = i + 1; ok && j < r.ops.size(); ++j) {
        const bool is_root = std::find(roots.begin(), roots.end(), r.ops[j]) != roots.end();
        if (is_root && --left == 0) break;
        if (r.ops[j]->has_side_effects()) ok = false;
      }
      ok = ok && left == 0;
    }
    storage_[static_cast<size_t>(v0)] = ok ? Storage::Inline : Storage::Array;
  }
}

// An array computed by an elementwise op and then reduced along its innermost axis is written
// by the reduction's loop instead of a loop of its own (one pass over the tile, not two), when
// nothing between the two ops reads the array or has side effects.
void MaterializationPlan::fuse_into_reductions(const Region& r) {
  for (size_t i = 0; i < r.ops.size(); ++i) {
    const Op* red = r.ops[i];
    for (const auto& sub : red->regions) fuse_into_reductions(sub);
    if (red->kind != OpKind::Reduce) continue;
    const ValueId in = red->operands[0];
    const Type& it = f_.type(in);
    if (red->ival != it.rank() - 1 || it.elem == DType::Bool ||
        f_.type(red->result()).elem != it.elem)
      continue;
    if (storage_[static_cast<size_t>(in)] != Storage::Array || uses_.def_region(in) != &r) continue;
    // Only ops computed element by element (or moving elements) can be evaluated inside the
    // reduction's loop; a dot, a reduction, a scan or a loop writes its whole array first.
    const Op* prod = f_.def(in);
    if (!prod || prod->results.size() != 1 ||
        !(traits(prod->kind).has(kElementwise) || traits(prod->kind).has(kViewLike))) {
      continue;
    }
    bool ok = true;
    for (int j = uses_.def_pos(in) + 1; ok && j < static_cast<int>(i); ++j) {
      const Op* mid = r.ops[static_cast<size_t>(j)];
      if (mid->has_side_effects() || !mid->regions.empty()) ok = false;
      for (ValueId u : mid->operands) ok = ok && u != in;
    }
    if (ok) fused_[static_cast<size_t>(in)] = true;
  }
}

}  // namespace tessera::ir
