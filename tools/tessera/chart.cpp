// `tessera chart IN.csv [OUT.svg] [--title T] [--xlabel X] [--ylabel Y] [--log-x] [--log-y]`:
// draws a benchmark table (perf_report's CSV, or one column per line) as an SVG with the same
// renderer as perf_report: lines over numeric x values, grouped bars over categories.
// bench/compare_cpu.py and bench/gpu_table.py draw docs/charts/ with it.
#include <fstream>
#include <iostream>
#include <sstream>

#include "tessera/testing.h"
#include "tools/tessera/commands.h"

namespace tessera::cli {

int chart(const std::vector<std::string>& args) {
  std::string in, out;
  testing::Benchmark b;
  b.ylabel = "";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      TS_CHECK(i + 1 < args.size(), ValueError) << "chart: " << a << " needs a value";
      return args[++i];
    };
    if (a == "--title") {
      b.plot_name = value();
    } else if (a == "--xlabel") {
      b.xlabel = value();
    } else if (a == "--ylabel") {
      b.ylabel = value();
    } else if (a == "--log-x") {
      b.x_log = true;
    } else if (a == "--log-y") {
      b.y_log = true;
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      TS_ERROR(ValueError) << "chart: unknown option '" << a << "'";
    } else if (in.empty()) {
      in = a;
    } else if (out.empty()) {
      out = a;
    } else {
      TS_ERROR(ValueError) << "chart: one input and one output, got '" << a << "' too";
    }
  }
  TS_CHECK(!in.empty(), ValueError) << "chart: usage: tessera chart IN.csv [OUT.svg] [--title T] "
                                       "[--xlabel X] [--ylabel Y] [--log-x] [--log-y]";
  std::ostringstream text;
  if (in == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream f(in);
    TS_CHECK(f.good(), RuntimeError) << "chart: cannot read " << in;
    text << f.rdbuf();
  }
  if (b.plot_name == "benchmark") b.plot_name = in == "-" ? "" : in;
  const testing::PerfTable t = testing::PerfTable::parse_csv(text.str(), b);
  const std::string svg = t.svg(720, 420);
  if (out.empty() || out == "-") {
    std::cout << svg;
    return 0;
  }
  std::ofstream f(out);
  f << svg;
  TS_CHECK(f.good(), RuntimeError) << "chart: cannot write " << out;
  return 0;
}

}  // namespace tessera::cli
