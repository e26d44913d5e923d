#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include "ir/op_traits.h"
#include "ir/passes.h"

namespace tessera::ir {
namespace {

using Key = std::tuple<int, int, int64_t, int64_t, uint64_t, std::vector<ValueId>, std::string>;

class Cse {
 public:
  explicit Cse(Function& f) : f_(f) {}
  void run() { region(f_.body); }

 private:
  static bool pure(const Op& op) {
    return traits(op.kind).has(kPure) && !op.has_side_effects() && op.results.size() == 1;
  }

  Key key(const Op& op) const {
    uint64_t fbits;
    std::memcpy(&fbits, &op.fval, sizeof fbits);
    // An extern call's text names its function: calls of two functions are not one value.
    return Key{static_cast<int>(op.kind),
               op.sub,
               op.ival,
               op.ival2,
               fbits,
               op.operands,
               f_.type(op.result()).str() + (op.kind == OpKind::Extern ? "|" + op.text : "")};
  }

  ValueId map(ValueId v) const {
    auto it = repl_.find(v);
    return it == repl_.end() ? v : it->second;
  }

  void region(Region& r) {
    scopes_.emplace_back();
    std::vector<Op*> out;
    for (Op* op : r.ops) {
      for (auto& v : op->operands) v = map(v);
      if (pure(*op)) {
        const Key k = key(*op);
        ValueId found = kNoValue;
        for (auto it = scopes_.rbegin(); it != scopes_.rend() && found == kNoValue; ++it) {
          auto hit = it->find(k);
          if (hit != it->end()) found = hit->second;
        }
        if (found != kNoValue) {
          repl_[op->result()] = found;
          continue;
        }
        scopes_.back()[k] = op->result();
      }
      for (auto& sub : op->regions) region(sub);
      out.push_back(op);
    }
    r.ops = std::move(out);
    scopes_.pop_back();
  }

  Function& f_;
  std::vector<std::map<Key, ValueId>> scopes_;
  std::map<ValueId, ValueId> repl_;
};

}  // namespace

void cse(Function& f) {
  Cse(f).run();
}

}  // namespace tessera::ir
