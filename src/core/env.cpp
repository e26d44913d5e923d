#include "tessera/env.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

#include "tessera/detail/hash.h"
#include "tessera/detail/local_state.h"

extern char** environ;

namespace tessera {
namespace {

std::vector<std::string> split_list(const char* v) {
  std::vector<std::string> out;
  if (!v) return out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool truthy(const char* v) {
  if (!v) return false;
  std::string s(v);
  return !(s.empty() || s == "0" || s == "false" || s == "False" || s == "off" || s == "no");
}

constexpr const char* kKnown[] = {
    "TESSERA_CACHE_DIR",
    "TESSERA_NUM_THREADS",
    "TESSERA_LOGS",
    "TESSERA_DUMP",
    "TESSERA_DEBUG",
    "TESSERA_INTERPRET",
    "TESSERA_DEVICE",
    "TESSERA_CXX",
    "TESSERA_PRINT_AUTOTUNING",
    "TESSERA_DUMP_DIR",
    "TESSERA_CROSSCHECK",
    "TESSERA_PROGRESS",
    "TESSERA_CUDA_MMA",
    "TESSERA_CUDA_WGMMA",
    "TESSERA_CUDA_WGMMA_ASYNC",
    "TESSERA_CUDA_WGMMA_RS",
    "TESSERA_CPU_DOT512",
    "TESSERA_COLUMN_SUMS",
    "TESSERA_NVRTC_PREFETCH",
    "TESSERA_CUDA_RING_REQUEST_FIRST",
    "TESSERA_CUDA_WGMMA_DEFER",
};

Knobs read_knobs() {
  Knobs k;
  if (const char* d = std::getenv("TESSERA_CACHE_DIR"); d && *d) {
    k.cache_dir = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    k.cache_dir = std::string(x) + "/tessera";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    k.cache_dir = std::string(h) + "/.cache/tessera";
  } else {
    k.cache_dir = "/tmp/tessera-cache";
  }
  if (const char* n = std::getenv("TESSERA_NUM_THREADS"); n && *n) {
    char* end = nullptr;
    long v = std::strtol(n, &end, 10);
    if (end && *end == '\0' && v > 0 && v <= 4096) {
      k.num_threads = static_cast<int>(v);
    } else {
      warn_once(std::string("TESSERA_NUM_THREADS='") + n + "' is not a positive integer; ignored");
    }
  }
  k.logs = split_list(std::getenv("TESSERA_LOGS"));
  k.dump = split_list(std::getenv("TESSERA_DUMP"));
  if (const char* d = std::getenv("TESSERA_DUMP_DIR"); d && *d) k.dump_dir = d;
  k.debug = truthy(std::getenv("TESSERA_DEBUG"));
  k.interpret = truthy(std::getenv("TESSERA_INTERPRET"));
  k.print_autotuning = truthy(std::getenv("TESSERA_PRINT_AUTOTUNING"));
  if (const char* d = std::getenv("TESSERA_DEVICE"); d && *d) {
    k.device = d;
    warn_once(std::string("TESSERA_DEVICE='") + d +
              "' changes nothing yet: it is reserved for the CUDA backend (tensors are made on "
              "the CPU unless a device is given)");
  }
  if (const char* c = std::getenv("TESSERA_CXX")) k.cxx = c;
  if (const char* p = std::getenv("TESSERA_PROGRESS"); p && *p) {
    const std::string v = p;
    if (v == "auto") {
      k.progress = Knobs::Progress::Auto;
    } else if (v == "1" || v == "always") {
      k.progress = Knobs::Progress::Always;
    } else if (!truthy(p)) {
      k.progress = Knobs::Progress::Never;
    } else {
      warn_once("TESSERA_PROGRESS='" + v + "' is not auto, 0 or 1 (always); ignored");
    }
  }
  if (const char* m = std::getenv("TESSERA_CUDA_MMA"); m && *m) k.cuda_mma = truthy(m);
  if (const char* m = std::getenv("TESSERA_CUDA_WGMMA"); m && *m) k.cuda_wgmma = truthy(m);
  if (const char* m = std::getenv("TESSERA_CUDA_WGMMA_ASYNC"); m && *m)
    k.cuda_wgmma_async = std::atoi(m) >= 2 ? 2 : truthy(m) ? 1 : 0;  // ("1", "on": 1)
  if (const char* m = std::getenv("TESSERA_CUDA_WGMMA_RS"); m && *m) k.cuda_wgmma_rs = truthy(m);
  if (const char* m = std::getenv("TESSERA_CUDA_RING_REQUEST_FIRST"); m && *m)
    k.cuda_ring_request_first = truthy(m);
  if (const char* m = std::getenv("TESSERA_CUDA_WGMMA_DEFER"); m && *m)
    k.cuda_wgmma_defer = std::string(m) == "auto" ? -1 : truthy(m) ? 1 : 0;
  if (const char* d = std::getenv("TESSERA_CPU_DOT512"); d && *d)
    k.cpu_dot512 = std::string(d) == "auto" ? -1 : truthy(d) ? 1 : 0;
  if (const char* d = std::getenv("TESSERA_COLUMN_SUMS"); d && *d)
    k.column_sums = std::string(d) == "auto" ? -1 : truthy(d) ? 1 : 0;
  if (const char* d = std::getenv("TESSERA_NVRTC_PREFETCH"); d && *d) k.nvrtc_prefetch = truthy(d);
  if (const char* c = std::getenv("TESSERA_CROSSCHECK"); c && *c) {
    const std::string v = c;
    if (v == "cuda" || v == "nvrtc" || v == "sim") {
      k.crosscheck = v;
    } else {
      warn_once("TESSERA_CROSSCHECK='" + v + "' is not 'cuda', 'nvrtc' or 'sim'; ignored");
    }
  }

  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "TESSERA_", 8) != 0) continue;
    // TESSERA_TEST_* belong to the test suite (seed, device), not to the library.
    if (std::strncmp(*e, "TESSERA_TEST_", 13) == 0) continue;
    std::string name(*e, std::strcspn(*e, "="));
    bool known = false;
    for (const char* kn : kKnown) known = known || name == kn;
    if (!known) {
      std::string msg = "unknown environment variable " + name + " (known:";
      for (const char* kn : kKnown) msg += std::string(" ") + kn;
      warn_once(msg + ")");
    }
  }
  return k;
}

std::mutex& knob_mutex() {
  static std::mutex m;
  return m;
}

// The current knobs, read without a lock on every kernel launch. A reload publishes a new object;
// replaced ones stay alive (reloads are rare: tests and tools), so references handed out remain
// valid.
std::atomic<const Knobs*>& knob_slot() {
  static std::atomic<const Knobs*> k{nullptr};
  return k;
}
std::vector<std::unique_ptr<const Knobs>>& all_knobs() {
  static auto* v = new std::vector<std::unique_ptr<const Knobs>>();  // never freed
  return *v;
}

const Knobs& publish(Knobs fresh) {
  all_knobs().push_back(std::make_unique<const Knobs>(std::move(fresh)));
  const Knobs* k = all_knobs().back().get();
  knob_slot().store(k, std::memory_order_release);
  return *k;
}

}  // namespace

bool Knobs::log_enabled(const std::string& channel) const {
  for (const auto& l : logs) {
    if (l == channel || l == "all") return true;
  }
  return false;
}

bool Knobs::dump_enabled(const std::string& what) const {
  for (const auto& d : dump) {
    if (d == what || d == "all") return true;
  }
  return false;
}

const Knobs& knobs() {
  if (const Knobs* k = knob_slot().load(std::memory_order_acquire)) return *k;
  std::lock_guard<std::mutex> g(knob_mutex());
  if (const Knobs* k = knob_slot().load(std::memory_order_acquire)) return *k;
  return publish(read_knobs());
}

void reload_knobs() {
  Knobs fresh = read_knobs();
  std::lock_guard<std::mutex> g(knob_mutex());
  const Knobs& k = publish(std::move(fresh));
  detail::g_log_dispatch.store(k.log_enabled("dispatch"), std::memory_order_relaxed);
}

namespace detail {
std::atomic<bool> g_log_dispatch{knobs().log_enabled("dispatch")};
}  // namespace detail

void dump(const std::string& what, const std::string& kernel, const std::string& identity,
          const std::string& text, const char* ext) {
  const Knobs& k = knobs();
  if (!k.dump_enabled(what)) return;
  if (k.dump_dir.empty()) {
    static std::mutex m;
    std::lock_guard<std::mutex> g(m);
    std::cerr << text << std::flush;
    return;
  }
  // One file per distinct text: a kernel compiled twice with the same code writes one file.
  ::mkdir(k.dump_dir.c_str(), 0755);
  std::string stem;
  for (char c : kernel) stem += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  const std::string path =
      k.dump_dir + "/" + stem + "-" + Sha256().field(identity).hex().substr(0, 16) + "." + ext;
  const std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "-" +
                          std::to_string(reinterpret_cast<uintptr_t>(&text));
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    if (!f.good()) {
      warn_once("cannot write dumps to TESSERA_DUMP_DIR='" + k.dump_dir + "'");
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
}

void warn_once(const std::string& msg) {
  static std::mutex m;
  static std::set<std::string>* seen = new std::set<std::string>();
  std::lock_guard<std::mutex> g(m);
  if (seen->insert(msg).second) std::cerr << "tessera: warning: " << msg << std::endl;
}

void log(const std::string& channel, const std::string& msg) {
  if (!knobs().log_enabled(channel)) return;
  static std::mutex m;
  std::lock_guard<std::mutex> g(m);
  std::cerr << "[tessera:" << channel << "] " << msg << std::endl;
}

}  // namespace tessera
