// `tessera-aot inspect|verify|run PACKAGE ...`: the AOT loader on its own (docs/aot.md). The
// same commands as `tessera aot`, in a program linked only to libtessera_runtime.
#include <iostream>
#include <string>
#include <vector>

#include "tools/tessera/commands.h"

int main(int argc, char** argv) {
  try {
    return tessera::cli::aot(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << "tessera-aot: " << e.what() << "\n";
    return 1;
  }
}
