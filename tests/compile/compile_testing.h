/** \file
 * Helpers of the graph compiler's tests: a dispatch mode that poisons every allocation a compiled
 * call makes (so an element a generated kernel skips cannot pass) and counts the operators run.
 */
#pragma once

#include <functional>
#include <map>
#include <string>

#include "tessera/compile.h"
#include "tessera/tessera.h"
#include "tessera/testing.h"
#include "testing.h"

namespace tessera::testing {

/** Poisons every `empty` / `empty_like` result and counts the operators it sees. */
struct PoisonAndCount : DispatchMode {
  std::map<std::string, int> calls;
  void handle(const OperatorHandle& op, Stack& stack) override {
    ++calls[op.name()];
    const bool alloc = op.name() == "aten::empty" || op.name() == "aten::empty_like";
    op.redispatch(stack);
    if (alloc) {
      Tensor t = stack[0].to_tensor();
      poison(t);
    }
  }
};

/** Poisons the tensors a compiled call places in its memory plan's arena while alive. */
struct PoisonPlanned {
  PoisonPlanned() {
    compile_detail::set_planned_allocation_hook([](Tensor& t) { tessera::testing::poison(t); });
  }
  ~PoisonPlanned() { compile_detail::set_planned_allocation_hook(nullptr); }
  PoisonPlanned(const PoisonPlanned&) = delete;
  PoisonPlanned& operator=(const PoisonPlanned&) = delete;
};

/** Runs `call` under PoisonAndCount, with planned allocations poisoned too; returns the
 * operators' counts (a planned allocation is no operator call: it is not counted). */
inline std::map<std::string, int> run_poisoned(const std::function<void()>& call) {
  PoisonAndCount mode;
  PoisonPlanned planned;
  ModeGuard guard(&mode, ModeKind::Dispatch);
  call();
  return mode.calls;
}

/** `fullgraph = true` and a name. */
inline CompileOptions fullgraph(std::string name) {
  CompileOptions o;
  o.fullgraph = true;
  o.name = std::move(name);
  return o;
}

}  // namespace tessera::testing
