// The seed's composability section as a checked example (see seed_composability.h): exits
// non-zero when a result disagrees with the eager operators.
#include "seed_composability.h"

int main() {
  const bool ok = seed_composability::run(std::cout);
  std::cout << (ok ? "seed_composability: OK" : "seed_composability: MISMATCH") << "\n";
  return ok ? 0 : 1;
}
