#include "ir/uses.h"

namespace tessera::ir {

UseInfo::UseInfo(const Function& f)
    : uses_(f.num_values()), def_region_(f.num_values(), nullptr), def_pos_(f.num_values(), -1) {
  walk(f.body);
}

void UseInfo::walk(const Region& r) {
  for (ValueId a : r.args) def_region_[static_cast<size_t>(a)] = &r;
  for (size_t i = 0; i < r.ops.size(); ++i) {
    const Op* op = r.ops[i];
    for (ValueId v : op->operands) uses_[static_cast<size_t>(v)].push_back({op, &r});
    for (ValueId res : op->results) {
      def_region_[static_cast<size_t>(res)] = &r;
      def_pos_[static_cast<size_t>(res)] = static_cast<int>(i);
    }
    for (const auto& sub : op->regions) walk(sub);
  }
}

}  // namespace tessera::ir
