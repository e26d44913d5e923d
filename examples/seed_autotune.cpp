// The seed's advanced usage (autotuning) as a checked example (see seed_autotune.h): exits
// non-zero when a result disagrees with the eager operators.
#include "seed_autotune.h"

int main() {
  const bool ok = seed_autotune::run(std::cout);
  std::cout << (ok ? "seed_autotune: OK" : "seed_autotune: MISMATCH") << "\n";
  return ok ? 0 : 1;
}
