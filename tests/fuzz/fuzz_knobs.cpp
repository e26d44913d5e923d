// The `TESSERA_*` environment knobs (core/env): each input line sets one variable (its first byte
// picks a known knob, or an unknown name made of the rest of the line), then the knobs are read
// again and queried. Values are whatever a user or a launcher script might put there.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz.h"
#include "tessera/env.h"

using namespace tessera;

namespace {
const char* const kNames[] = {
    "TESSERA_CACHE_DIR", "TESSERA_NUM_THREADS", "TESSERA_LOGS",
    "TESSERA_DUMP",      "TESSERA_DEBUG",       "TESSERA_INTERPRET",
    "TESSERA_DEVICE",    "TESSERA_CXX",         "TESSERA_PRINT_AUTOTUNING",
    "TESSERA_DUMP_DIR",  "TESSERA_CROSSCHECK",  "TESSERA_CUDA_MMA",
};
constexpr size_t kCount = sizeof(kNames) / sizeof(kNames[0]);
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> set;
  size_t pos = 0;
  while (pos < in.size() && set.size() < 16) {
    size_t end = in.find('\n', pos);
    if (end == std::string::npos) end = in.size();
    const std::string line = in.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    std::string value = line.substr(1);
    if (value.find('\0') != std::string::npos) value.resize(value.find('\0'));
    std::string name;
    const size_t pick = static_cast<unsigned char>(line[0]) % (kCount + 1);
    if (pick < kCount) {
      name = kNames[pick];
    } else {  // an unknown TESSERA_ name: the value up to '='
      const size_t eq = value.find('=');
      name = "TESSERA_" + value.substr(0, eq);
      value = eq == std::string::npos ? "" : value.substr(eq + 1);
      if (name.find('=') != std::string::npos || name.rfind("TESSERA_TEST_", 0) == 0) continue;
    }
    ::setenv(name.c_str(), value.c_str(), 1);
    set.push_back(name);
  }
  fuzz::must("knobs", "reading the knobs", [&] {
    reload_knobs();
    const Knobs& k = knobs();
    for (const char* channel : {"cache", "recompiles", "graph", "all", ""})
      (void)k.log_enabled(channel);
    for (const char* what : {"ir", "src", ""}) (void)k.dump_enabled(what);
    if (k.num_threads < 0 || k.num_threads > 4096)
      fuzz::finding("knobs", "num_threads out of range");
    if (!k.crosscheck.empty() && k.crosscheck != "cuda" && k.crosscheck != "nvrtc" &&
        k.crosscheck != "sim")
      fuzz::finding("knobs", "an unknown TESSERA_CROSSCHECK value was kept: " + k.crosscheck);
  });
  for (const std::string& name : set) ::unsetenv(name.c_str());
  return 0;
}
