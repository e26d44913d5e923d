// The `tessera` command line: doctor (what this machine offers), demo (the seed walkthrough),
// the kernel cache, the tuning database, benchmark charts and AOT packages.
#include <cstring>
#include <iostream>
#include <string>

#include "tools/tessera/commands.h"

namespace {

void usage() {
  std::cout
      << "usage: tessera <command>\n\n"
         "commands:\n"
         "  doctor    version, CPU, compilers, CUDA driver and NVRTC found on this machine\n"
         "  demo      the seed walkthrough (what `make demo` runs)\n"
         "  cache ls|stats|clear   the compiled-kernel cache ($TESSERA_CACHE_DIR)\n"
         "  tune-db ls|export [FILE]|import [FILE]|clear   the tuning database\n"
         "  chart IN.csv [OUT.svg] [--title T] [--xlabel X] [--ylabel Y] [--log-x] [--log-y]\n"
         "            a benchmark table as an SVG chart (lines, or bars over categories)\n"
         "  aot inspect|verify|run PACKAGE [--sha256 HEX] [--size NAME=V] [--repeat N]\n"
         "            an ahead-of-time package: what it holds, whether it loads here, a run\n"
         "  version   the version of tessera\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help") ||
      !std::strcmp(argv[1], "-h")) {
    usage();
    return argc < 2 ? 1 : 0;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "doctor") return tessera::cli::doctor();
    if (cmd == "demo") return tessera::cli::demo();
    if (cmd == "cache") return tessera::cli::cache(argc > 2 ? argv[2] : "stats");
    if (cmd == "tune-db")
      return tessera::cli::tune_db(std::vector<std::string>(argv + 2, argv + argc));
    if (cmd == "aot") return tessera::cli::aot(std::vector<std::string>(argv + 2, argv + argc));
    if (cmd == "chart") return tessera::cli::chart(std::vector<std::string>(argv + 2, argv + argc));
    if (cmd == "version") {
      std::cout << "tessera " << tessera::version() << "\n";
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << "tessera " << cmd << ": " << e.what() << "\n";
    return 1;
  }
  std::cerr << "tessera: unknown command '" << cmd << "'\n";
  usage();
  return 1;
}
