#include <algorithm>
#include <unordered_map>

#include "ir/builder.h"
#include "ir/passes.h"

namespace tessera::ir {
namespace {

class Canonicalizer {
 public:
  explicit Canonicalizer(Function& f) : f_(f) {}

  void run() {
    count_uses(f_.body);
    region(f_.body);
  }

 private:
  ValueId map(ValueId v) const {
    auto it = repl_.find(v);
    return it == repl_.end() ? v : it->second;
  }

  bool is_const(ValueId v, double want) const {
    const Op* c = f_.constant(v);
    if (!c) return false;
    return f_.type(v).is_float() ? c->fval == want : static_cast<double>(c->ival) == want;
  }

  void count_uses(const Region& r) {
    for (const Op* op : r.ops) {
      for (ValueId v : op->operands) ++uses_[v];
      for (const Region& sub : op->regions) count_uses(sub);
    }
  }

  // `x + dot(a, b, 0)` (either order) with the dot's result used only there and the dot in the
  // same region: `dot(a, b, x)`, the sum accumulated by the dot (Triton's combine pass does the
  // same; flash attention's `acc += dot(p, v)` then needs no second accumulator). The dot it
  // replaces is dropped from `out`.
  ValueId dot_add(const Op& add, std::vector<Op*>& out, Builder& b) {
    for (size_t s = 0; s < 2; ++s) {
      const ValueId d = add.operands[s], x = add.operands[1 - s];
      Op* dot = f_.def(d);
      if (!dot || dot->kind != OpKind::Dot || uses_[d] != 1 || !is_const(dot->operands[2], 0) ||
          f_.type(d) != f_.type(add.result()) || f_.type(x) != f_.type(d))
        continue;
      auto at = std::find(out.begin(), out.end(), dot);
      if (at == out.end()) continue;
      const ValueId r =
          b.dot(dot->operands[0], dot->operands[1], x, static_cast<DotPrecision>(dot->sub));
      Op* fresh = f_.def(r);
      fresh->ival = dot->ival;
      fresh->fval = dot->fval;
      out.erase(at);
      return r;
    }
    return kNoValue;
  }

  void region(Region& r) {
    std::vector<Op*> out;
    out_ = &out;
    Region scratch;  // constants created while rewriting land here first
    for (Op* op : r.ops) {
      for (auto& v : op->operands) v = map(v);
      for (auto& sub : op->regions) region(sub);
      out_ = &out;
      const ValueId simpler = simplify(*op, scratch);
      for (Op* created : scratch.ops) out.push_back(created);
      scratch.ops.clear();
      if (simpler != kNoValue) {
        repl_[op->result()] = simpler;
        continue;  // the op is dropped; its result now reads `simpler`
      }
      out.push_back(op);
    }
    r.ops = std::move(out);
  }

  // Returns a value equivalent to op's result, or kNoValue to keep the op.
  ValueId simplify(Op& op, Region& scratch) {
    if (op.results.size() != 1 || op.kind == OpKind::For || op.kind == OpKind::If) return kNoValue;
    const Type& t = f_.type(op.result());
    Builder b(f_);
    b.set_insertion_region(&scratch);
    b.set_loc(op.loc);
    switch (op.kind) {
      case OpKind::Binary: {
        const auto k = static_cast<BinaryKind>(op.sub);
        const ValueId x = op.operands[0], y = op.operands[1];
        if (f_.constant(x) && f_.constant(y)) return b.binary(k, x, y);
        const bool is_int = !t.is_float();
        switch (k) {
          case BinaryKind::Add:
            // Only for integers: -0.0 + 0.0 is +0.0, so x + 0.0 is not x for floats.
            if (is_int && is_const(y, 0)) return x;
            if (is_int && is_const(x, 0)) return y;
            if (t.shape.size() == 2) return dot_add(op, *out_, b);
            break;
          case BinaryKind::Sub:
            if (is_const(y, 0)) return x;
            break;
          case BinaryKind::Mul:
            if (is_const(y, 1)) return x;
            if (is_const(x, 1)) return y;
            if (is_int && (is_const(x, 0) || is_const(y, 0))) return b.constant_int(0, t);
            break;
          case BinaryKind::Div:
            if (is_const(y, 1)) return x;
            break;
          case BinaryKind::Max:
          case BinaryKind::Min:
          case BinaryKind::And:
          case BinaryKind::Or:
            if (x == y) return x;
            break;
          default:
            break;
        }
        break;
      }
      case OpKind::Select:
        if (op.operands[1] == op.operands[2]) return op.operands[1];
        if (f_.constant(op.operands[0]))
          return b.select(op.operands[0], op.operands[1], op.operands[2]);
        break;
      case OpKind::Cast:
        if (f_.type(op.operands[0]) == t) return op.operands[0];
        if (f_.constant(op.operands[0])) return b.cast(op.operands[0], t.elem);
        break;
      case OpKind::Compare:
        if (f_.constant(op.operands[0]) && f_.constant(op.operands[1])) {
          return b.compare(static_cast<CmpKind>(op.sub), op.operands[0], op.operands[1]);
        }
        break;
      case OpKind::Splat:
        if (f_.constant(op.operands[0])) return b.splat(op.operands[0], t.shape);
        break;
      case OpKind::Broadcast: {
        const ValueId src = op.operands[0];
        if (f_.type(src) == t) return src;
        if (f_.constant(src)) return b.broadcast(src, t.shape);
        // broadcast(splat(s)) == splat(s)
        if (const Op* d = f_.def(src); d && d->kind == OpKind::Splat)
          return b.splat(d->operands[0], t.shape);
        break;
      }
      case OpKind::Unary:
        if (f_.constant(op.operands[0])) {
          const ValueId folded = b.unary(static_cast<UnaryKind>(op.sub), op.operands[0]);
          if (f_.constant(folded)) return folded;
          scratch.ops.clear();  // not foldable: drop the duplicate the builder made
        }
        break;
      default:
        break;
    }
    return kNoValue;
  }

  Function& f_;
  std::unordered_map<ValueId, ValueId> repl_;
  std::unordered_map<ValueId, int> uses_;  // operand uses of each value (before rewriting)
  std::vector<Op*>* out_ = nullptr;        // the ops kept so far in the region being rewritten
};

}  // namespace

void canonicalize(Function& f) {
  Canonicalizer(f).run();
}

}  // namespace tessera::ir
