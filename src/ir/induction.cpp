// Loop-carried pointer tiles advanced by a uniform step become induction variables (DESIGN D4:
// `ptrs += BK * stride` is rewritten): inside the loop the pointer is `init + i * step` for the
// iteration number i, an expression of the loop index, so it is no longer stored and copied each
// iteration and the affine analysis sees addresses affine in the element index (vector loads on
// the CPU, coalesced ones on GPUs).
#include <unordered_set>

#include "ir/builder.h"
#include "ir/op_traits.h"
#include "ir/passes.h"

namespace tessera::ir {
namespace {

// The rank-0 value that `v` is a splat of (through Splat, Broadcast, ExpandDims), if `v` is
// defined outside `loop` (or is a constant); kNoValue otherwise.
ValueId uniform_outside(const Function& f, ValueId v, const Region& loop) {
  for (;;) {
    const Op* d = f.def(v);
    if (f.type(v).is_scalar()) {
      if (!d) return v;  // a parameter or a region argument: outside unless it is loop's own
      for (ValueId a : loop.args) {
        if (a == v) return kNoValue;
      }
      bool inside = false;
      walk(loop, [&](const Op* o) {
        if (o == d) inside = true;
      });
      return inside ? kNoValue : v;
    }
    if (!d) return kNoValue;
    if (d->kind == OpKind::Constant) return v;  // a splat constant: uniform everywhere
    if (d->kind != OpKind::Splat && d->kind != OpKind::Broadcast && d->kind != OpKind::ExpandDims)
      return kNoValue;
    v = d->operands[0];
  }
}

bool used_anywhere(Function& f, ValueId v) {
  bool used = false;
  walk(f.body, [&](Op* o) {
    for (ValueId u : o->operands) used = used || u == v;
  });
  return used;
}

void rewrite_loop(Function& f, Op& loop) {
  Region& body = loop.regions[0];
  Op& yield = *body.ops.back();
  for (size_t k = 0; k + 1 < body.args.size();) {
    const ValueId carried = body.args[k + 1];
    const ValueId next = yield.operands[k];
    const Op* step_op = f.def(next);
    const Type t = f.type(carried);  // a copy: the builder below adds values (and types)
    ValueId step = kNoValue;
    if (t.ptr && step_op && step_op->kind == OpKind::AddPtr && step_op->operands[0] == carried)
      step = uniform_outside(f, step_op->operands[1], body);
    if (step == kNoValue || used_anywhere(f, loop.results[k])) {
      ++k;
      continue;
    }
    // At the top of the body: i = (iv - lb) / s; ptr = init + splat(i * step), in 64 bits.
    Region prologue;
    Builder b(f);
    b.set_insertion_region(&prologue);
    const ValueId iv = body.args[0];
    const ValueId lb = loop.operands[0], s = loop.operands[2], init = loop.operands[3 + k];
    const ValueId iv64 = b.cast(iv, DType::Int64);
    const ValueId i =
        b.binary(BinaryKind::Div, b.binary(BinaryKind::Sub, iv64, b.cast(lb, DType::Int64)),
                 b.cast(s, DType::Int64));
    // A splat constant's scalar value.
    if (!f.type(step).is_scalar())
      step = b.constant_int(f.def(step)->ival, Type::scalar(f.type(step).elem));
    const ValueId step64 = b.cast(step, DType::Int64);
    const ValueId delta = b.binary(BinaryKind::Mul, i, step64);
    const ValueId ptr = b.addptr(init, t.is_scalar() ? delta : b.splat(delta, t.shape));
    body.ops.insert(body.ops.begin(), prologue.ops.begin(), prologue.ops.end());
    replace_all_uses(body, carried, ptr);
    // The slot is no longer carried.
    body.args.erase(body.args.begin() + static_cast<std::ptrdiff_t>(k + 1));
    yield.operands.erase(yield.operands.begin() + static_cast<std::ptrdiff_t>(k));
    loop.operands.erase(loop.operands.begin() + static_cast<std::ptrdiff_t>(3 + k));
    loop.results.erase(loop.results.begin() + static_cast<std::ptrdiff_t>(k));
  }
}

// Moves the pure scalar ops of a loop's body that depend only on values from outside it to just
// before the loop (`BLOCK_K * stride_ak` traced inside the loop is loop-invariant); returns how
// many were moved.
size_t hoist_invariants(const Function& f, Region& parent, size_t at, Op& loop) {
  Region& body = loop.regions[0];
  std::unordered_set<ValueId> inside(body.args.begin(), body.args.end());
  walk(body, [&](Op* o) {
    for (ValueId v : o->results) inside.insert(v);
    for (const auto& sub : o->regions) inside.insert(sub.args.begin(), sub.args.end());
  });
  std::vector<Op*> out, stay;
  for (Op* o : body.ops) {
    // Scalars only: an invariant tile moved out of the loop would be stored, not recomputed.
    bool invariant = traits(o->kind).has(kPure) && !o->has_side_effects() && o->regions.empty() &&
                     o->results.size() == 1 && f.type(o->results[0]).is_scalar();
    for (ValueId u : o->operands) invariant = invariant && !inside.count(u);
    if (invariant) {
      inside.erase(o->results[0]);  // ops after it may use it and still be invariant
      out.push_back(o);
    } else {
      stay.push_back(o);
    }
  }
  body.ops = std::move(stay);
  parent.ops.insert(parent.ops.begin() + static_cast<std::ptrdiff_t>(at), out.begin(), out.end());
  return out.size();
}

void visit(Function& f, Region& r) {
  for (size_t i = 0; i < r.ops.size(); ++i) {
    Op* op = r.ops[i];
    for (auto& sub : op->regions) visit(f, sub);
    if (op->kind != OpKind::For) continue;
    i += hoist_invariants(f, r, i, *op);
    rewrite_loop(f, *op);
  }
}

}  // namespace

void pointer_induction(Function& f) {
  visit(f, f.body);
}

}  // namespace tessera::ir
