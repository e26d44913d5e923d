// The tile IR's text form (`ir::parse`): dumps read back by tests and tools, and the form a
// package stores. Accepted text must print and parse back to the same function, and the
// optimization pipeline must either optimize a verified function or refuse it with a typed error.
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz.h"
#include "ir/passes.h"
#include "ir/text.h"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;  // bounded work per input
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<ir::Function> f;
  if (!fuzz::accepts("ir_text", [&] { f = ir::parse(text); })) return 0;
  const std::string printed = ir::print(*f);
  std::unique_ptr<ir::Function> g;
  fuzz::must("ir_text", "reparse of print()", [&] { g = ir::parse(printed); });
  std::string why;
  if (!ir::same_function(*f, *g, &why)) fuzz::finding("ir_text", "print/parse round trip: " + why);
  if (!fuzz::accepts("ir_text", [&] { ir::run_pipeline(*g); })) return 0;
  fuzz::must("ir_text", "verify after the pipeline", [&] { ir::verify(*g); });
  return 0;
}
