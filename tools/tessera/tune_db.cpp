// `tessera tune-db ls|export|import|clear`: the tuning database.
#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <tuple>

#include "tessera/tune_db.h"
#include "tools/tessera/commands.h"

namespace tessera::cli {

int tune_db(const std::vector<std::string>& args) {
  const std::string what = args.empty() ? "ls" : args[0];
  if (what == "ls") {
    auto records = tessera::tune_db::records();
    std::sort(records.begin(), records.end(),
              [](const tune_db::Record& a, const tune_db::Record& b) {
                return std::tie(a.kernel, a.key, a.ms) < std::tie(b.kernel, b.key, b.ms);
              });
    std::cout << "tuning database: " << tessera::tune_db::root() << " (" << records.size()
              << " records)\n";
    std::string last;
    for (const auto& r : records) {
      const std::string head = r.kernel + "  key: " + r.key + "  target: " + r.target;
      if (head != last) std::cout << head << "\n";
      last = head;
      std::cout << "  " << std::setw(12) << std::setprecision(5) << r.ms << " ms  " << r.config
                << "  (code " << r.code.substr(0, 12) << ")\n";
    }
    return 0;
  }
  if (what == "export") {
    const std::string text = tessera::tune_db::export_text();
    if (args.size() > 1 && args[1] != "-") {
      std::ofstream f(args[1]);
      f << text;
      if (!f.good()) {
        std::cerr << "tessera tune-db export: cannot write " << args[1] << "\n";
        return 1;
      }
    } else {
      std::cout << text;
    }
    return 0;
  }
  if (what == "import") {
    std::stringstream ss;
    if (args.size() > 1 && args[1] != "-") {
      std::ifstream f(args[1]);
      if (!f) {
        std::cerr << "tessera tune-db import: cannot read " << args[1] << "\n";
        return 1;
      }
      ss << f.rdbuf();
    } else {
      ss << std::cin.rdbuf();
    }
    const size_t n = tessera::tune_db::import_text(ss.str());  // all lines checked first
    std::cout << "imported " << n << " records into " << tessera::tune_db::root() << "\n";
    return 0;
  }
  if (what == "clear") {
    std::cout << "removed " << tessera::tune_db::clear() << " records from "
              << tessera::tune_db::root() << "\n";
    return 0;
  }
  std::cerr << "tessera tune-db: unknown subcommand '" << what
            << "' (ls, export [FILE], import [FILE], clear)\n";
  return 1;
}

}  // namespace tessera::cli
