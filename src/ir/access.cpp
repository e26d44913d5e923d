#include "ir/access.h"

#include <cstdint>
#include <unordered_map>

namespace tessera::ir {
namespace {

using Mask = uint64_t;  // bit i: may point into parameter i (bit 63: anywhere)
constexpr Mask kAnywhere = Mask(1) << 63;

class Provenance {
 public:
  explicit Provenance(const Function& f) : f_(f) {
    for (size_t i = 0; i < f.params.size() && i < 63; ++i) {
      if (f.params[i].value != kNoValue) of_[f.params[i].value] = Mask(1) << i;
    }
  }

  void run() {
    // Loop-carried pointers make this a fixpoint; a few rounds suffice in practice.
    for (int round = 0; round < 16; ++round) {
      changed_ = false;
      region(f_.body);
      if (!changed_) break;
    }
  }

  std::vector<uint64_t> masks() const {
    std::vector<uint64_t> out(f_.num_values(), 0);
    uint64_t all = 0;
    for (size_t i = 0; i < f_.params.size() && i < 63; ++i) all |= uint64_t(1) << i;
    for (const auto& [v, m] : of_)
      out[static_cast<size_t>(v)] = (m & kAnywhere) ? (all | kAnywhere) : m;
    return out;
  }

  std::vector<ParamAccess> result() const {
    std::vector<ParamAccess> out(f_.params.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const Mask bit = i < 63 ? Mask(1) << i : 0;
      out[i].read = (read_ & bit) || (read_ & kAnywhere);
      out[i].written = (written_ & bit) || (written_ & kAnywhere);
      out[i].atomic = (atomic_ & bit) || (atomic_ & kAnywhere);
      if (f_.params[i].value == kNoValue || !f_.type(f_.params[i].value).ptr) {
        out[i] = ParamAccess{};
      }
    }
    return out;
  }

 private:
  Mask get(ValueId v) const {
    auto it = of_.find(v);
    return it == of_.end() ? 0 : it->second;
  }
  void add(ValueId v, Mask m) {
    Mask& cur = of_[v];
    if ((cur | m) != cur) {
      cur |= m;
      changed_ = true;
    }
  }

  void region(const Region& r) {
    for (const Op* op : r.ops) {
      switch (op->kind) {
        case OpKind::AddPtr:
        case OpKind::Splat:
        case OpKind::Broadcast:
        case OpKind::ExpandDims:
        case OpKind::Permute:
        case OpKind::Reshape:
        case OpKind::Extract:
        case OpKind::Flip:
          add(op->result(), get(op->operands[0]));
          break;
        case OpKind::Bitcast:  // a pointer cast keeps its provenance; from an integer: anywhere
          if (f_.type(op->result()).ptr)
            add(op->result(), f_.type(op->operands[0]).ptr ? get(op->operands[0]) : kAnywhere);
          break;
        case OpKind::Join:
        case OpKind::Cat:
          add(op->result(), get(op->operands[0]) | get(op->operands[1]));
          break;
        case OpKind::Select:
          add(op->result(), get(op->operands[1]) | get(op->operands[2]));
          break;
        case OpKind::Load:
          read_ |= get(op->operands[0]);
          if (f_.type(op->result()).ptr) add(op->result(), kAnywhere);
          break;
        case OpKind::Store:
          written_ |= get(op->operands[0]);
          break;
        case OpKind::Atomic:
        case OpKind::AtomicCas:
          read_ |= get(op->operands[0]);
          written_ |= get(op->operands[0]);
          atomic_ |= get(op->operands[0]);
          break;
        case OpKind::While: {
          const Region &cond = op->regions[0], &body = op->regions[1];
          const Op& y = *body.ops.back();
          for (size_t k = 0; k < op->operands.size(); ++k) {
            const Mask m = get(op->operands[k]) | get(y.operands[k]);
            add(cond.args[k], m);
            add(body.args[k], m);
            add(op->results[k], m);
          }
          region(cond);
          region(body);
          break;
        }
        case OpKind::For: {
          const Region& body = op->regions[0];
          const Op& y = *body.ops.back();
          for (size_t k = 0; k + 1 < body.args.size(); ++k) {
            const Mask m = get(op->operands[3 + k]) | get(y.operands[k]);
            add(body.args[k + 1], m);
            add(op->results[k], m);
          }
          region(body);
          break;
        }
        case OpKind::If:
          for (const auto& sub : op->regions) region(sub);
          for (size_t k = 0; k < op->results.size(); ++k) {
            add(op->results[k], get(op->regions[0].ops.back()->operands[k]) |
                                    get(op->regions[1].ops.back()->operands[k]));
          }
          break;
        default:
          break;
      }
    }
  }

  const Function& f_;
  std::unordered_map<ValueId, Mask> of_;
  Mask read_ = 0, written_ = 0, atomic_ = 0;
  bool changed_ = false;
};

}  // namespace

std::vector<ParamAccess> param_access(const Function& f) {
  Provenance p(f);
  p.run();
  return p.result();
}

std::vector<uint64_t> pointer_provenance(const Function& f) {
  Provenance p(f);
  p.run();
  return p.masks();
}

}  // namespace tessera::ir
