#include <chrono>
#include <iostream>

#include "ir/passes.h"
#include "tessera/env.h"

namespace tessera::ir {

void run_pipeline(Function& f) {
  const bool dump = knobs().dump_enabled("ir");
  if (dump) std::cerr << "// ---- tile IR of " << f.name << " as traced ----\n" << print(f);
  auto step = [&](const char* name, void (*pass)(Function&)) {
    const auto t0 = std::chrono::steady_clock::now();
    pass(f);
    if (dump) {
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      std::cerr << "// " << name << ": " << us << " us\n";
    }
  };
  step("verify", [](Function& g) { verify(g); });
  step("canonicalize", canonicalize);
  step("cse", cse);
  step("dce", dce);
  step("canonicalize", canonicalize);
  step("verify", [](Function& g) { verify(g); });
  if (dump) std::cerr << "// ---- tile IR of " << f.name << " after the pipeline ----\n" << print(f);
}

}  // namespace tessera::ir
