// Operator schemas (`tessera::FunctionSchema::parse`) and dtype names: what a library's
// TORCH_LIBRARY-style registration text and a package manifest hand to the parser.
#include <cstdint>
#include <optional>
#include <string>

#include "fuzz.h"
#include "tessera/dtype.h"
#include "tessera/schema.h"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)parse_dtype(text);
  std::optional<FunctionSchema> s;
  if (!fuzz::accepts("schema", [&] { s = FunctionSchema::parse(text, "fuzz"); })) return 0;
  // The normalized text is a schema and normalizes to itself.
  const std::string norm = s->str();
  fuzz::must("schema", "reparse of str()", [&] {
    FunctionSchema again = FunctionSchema::parse(norm, "fuzz");
    if (again.str() != norm)
      fuzz::finding("schema", "str() not stable: '" + norm + "' -> '" + again.str() + "'");
    if (!again.same_signature(*s)) fuzz::finding("schema", "signature changed by str(): " + norm);
  });
  return 0;
}
