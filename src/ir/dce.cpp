#include <unordered_map>

#include "ir/passes.h"

namespace tessera::ir {
namespace {

void count_uses(const Region& r, std::unordered_map<ValueId, int>& uses) {
  for (const Op* op : r.ops) {
    for (ValueId v : op->operands) ++uses[v];
    for (const auto& sub : op->regions) count_uses(sub, uses);
  }
}

// Removes dead ops in reverse order so that chains die in one sweep.
bool sweep(Region& r, std::unordered_map<ValueId, int>& uses) {
  bool changed = false;
  std::vector<Op*> kept;
  for (auto it = r.ops.rbegin(); it != r.ops.rend(); ++it) {
    Op* op = *it;
    bool used = op->kind == OpKind::Yield || op->has_side_effects();
    for (ValueId res : op->results) used = used || uses[res] > 0;
    if (!used) {
      for (ValueId v : op->operands) --uses[v];
      for (auto& sub : op->regions) {
        walk(sub, [&](Op* inner) {
          for (ValueId v : inner->operands) --uses[v];
        });
      }
      changed = true;
      continue;
    }
    for (auto& sub : op->regions) changed = sweep(sub, uses) || changed;
    kept.push_back(op);
  }
  r.ops.assign(kept.rbegin(), kept.rend());
  return changed;
}

}  // namespace

void dce(Function& f) {
  std::unordered_map<ValueId, int> uses;
  count_uses(f.body, uses);
  while (sweep(f.body, uses)) {
  }
}

void replace_all_uses(Region& r, ValueId from, ValueId to) {
  walk(r, [&](Op* op) {
    for (auto& v : op->operands) {
      if (v == from) v = to;
    }
  });
}

}  // namespace tessera::ir

namespace tessera::ir {
namespace {
void strip_region(Region& r, OpKind kind) {
  std::vector<Op*> kept;
  for (Op* op : r.ops) {
    if (op->kind == kind) continue;
    for (auto& sub : op->regions) strip_region(sub, kind);
    kept.push_back(op);
  }
  r.ops = std::move(kept);
}
}  // namespace

void strip_asserts(Function& f) {
  strip_region(f.body, OpKind::Assert);
}

void strip_prints(Function& f) {
  strip_region(f.body, OpKind::Print);
  dce(f);
}

}  // namespace tessera::ir
