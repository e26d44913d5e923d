#include <chrono>
#include <sstream>

#include "ir/passes.h"
#include "tessera/env.h"

namespace tessera::ir {

void run_pipeline(Function& f) {
  const bool dumping = knobs().dump_enabled("ir");
  std::ostringstream text;
  if (dumping) text << "// ---- tile IR of " << f.name << " as traced ----\n" << print(f);
  auto step = [&](const char* name, void (*pass)(Function&)) {
    const auto t0 = std::chrono::steady_clock::now();
    pass(f);
    if (dumping) {
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      text << "// " << name << ": " << us << " us\n";
    }
  };
  step("verify", [](Function& g) { verify(g); });
  step("canonicalize", canonicalize);
  step("pointer_induction", pointer_induction);
  step("cse", cse);
  step("dce", dce);
  step("canonicalize", canonicalize);
  step("verify", [](Function& g) { verify(g); });
  if (dumping) {
    const std::string final_ir = print(f);
    text << "// ---- tile IR of " << f.name << " after the pipeline ----\n" << final_ir;
    dump("ir", f.name, final_ir, text.str(), "ir");
  }
}

}  // namespace tessera::ir
