// NVRTC loaded with dlopen: the entry points tessera uses, declared here.
#include "runtime/cuda/nvrtc.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "runtime/cuda/dl.h"
#include "tessera/error.h"

namespace tessera::runtime::cuda {
namespace {

using nvrtcResult = int;
struct _nvrtcProgram;
using nvrtcProgram = _nvrtcProgram*;

struct Api {
  nvrtcResult (*nvrtcVersion)(int*, int*);
  const char* (*nvrtcGetErrorString)(nvrtcResult);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int,
                                    const char* const*, const char* const*);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*);
  // (optional: LTO-IR for kernels that link precompiled device code; NVRTC 12.0 on)
  nvrtcResult (*nvrtcGetLTOIRSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetLTOIR)(nvrtcProgram, char*);
};

struct Loaded {
  Api api{};
  NvrtcInfo info;
  bool ok = false;
  std::string why;
};

constexpr std::initializer_list<const char*> kNames = {"libnvrtc.so.13", "libnvrtc.alt.so.13",
                                                       "libnvrtc.so.12", "libnvrtc.so"};

Loaded load() {
  Loaded l;
  void* lib = open_toolkit_library(kNames, l.info.path);
  if (!lib) {
    l.why =
        "no NVRTC (looked for libnvrtc.so.13 and libnvrtc.alt.so.13 under $CUDA_HOME/lib64, "
        "/usr/local/cuda/lib64 and the loader's path)";
    return l;
  }
  Api& a = l.api;
  const bool ok = resolve_symbol(lib, "nvrtcVersion", a.nvrtcVersion) &&
                  resolve_symbol(lib, "nvrtcGetErrorString", a.nvrtcGetErrorString) &&
                  resolve_symbol(lib, "nvrtcCreateProgram", a.nvrtcCreateProgram) &&
                  resolve_symbol(lib, "nvrtcDestroyProgram", a.nvrtcDestroyProgram) &&
                  resolve_symbol(lib, "nvrtcCompileProgram", a.nvrtcCompileProgram) &&
                  resolve_symbol(lib, "nvrtcGetProgramLogSize", a.nvrtcGetProgramLogSize) &&
                  resolve_symbol(lib, "nvrtcGetProgramLog", a.nvrtcGetProgramLog) &&
                  resolve_symbol(lib, "nvrtcGetCUBINSize", a.nvrtcGetCUBINSize) &&
                  resolve_symbol(lib, "nvrtcGetCUBIN", a.nvrtcGetCUBIN) &&
                  resolve_symbol(lib, "nvrtcGetPTXSize", a.nvrtcGetPTXSize) &&
                  resolve_symbol(lib, "nvrtcGetPTX", a.nvrtcGetPTX);
  if (!ok) {
    l.why = l.info.path + " lacks an entry point tessera needs (an NVRTC older than 11.1?)";
    return l;
  }
  if (!resolve_symbol(lib, "nvrtcGetLTOIRSize", a.nvrtcGetLTOIRSize) ||
      !resolve_symbol(lib, "nvrtcGetLTOIR", a.nvrtcGetLTOIR)) {
    a.nvrtcGetLTOIRSize = nullptr;
    a.nvrtcGetLTOIR = nullptr;
  }
  a.nvrtcVersion(&l.info.major, &l.info.minor);
  if (l.info.major < 12) {
    l.why = l.info.path + " is NVRTC " + std::to_string(l.info.major) + "." +
            std::to_string(l.info.minor) + "; tessera needs 12 or newer";
    return l;
  }
  l.ok = true;
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

const Api& api(const char* what) {
  const Loaded& l = loaded();
  TS_CHECK(l.ok, RuntimeError) << "[" << what << "] needs NVRTC, but " << l.why;
  return l.api;
}

void check(const Api& a, nvrtcResult r, const char* call, const std::string& name) {
  TS_CHECK(r == 0, RuntimeError) << "[kernel " << name << "] " << call
                                 << " failed: " << a.nvrtcGetErrorString(r);
}

}  // namespace

const NvrtcInfo* nvrtc(std::string* why) {
  const Loaded& l = loaded();
  if (!l.ok && why) *why = l.why;
  return l.ok ? &l.info : nullptr;
}

namespace {
// The first candidate NVRTC file that exists, in load()'s order, with its stat; nothing when only
// the loader's search path could find one.
bool first_nvrtc_file(std::string& path, struct stat& st) {
  for (const std::string& d : toolkit_dirs()) {
    if (d.empty()) break;  // the loader's own path: only a load says which file
    for (const char* n : kNames) {
      if (::stat((d + n).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      char* real = ::realpath((d + n).c_str(), nullptr);
      path = real ? real : d + n;
      std::free(real);
      return true;
    }
  }
  return false;
}
}  // namespace

std::string nvrtc_identity() {
  static const std::string id = [] {
    std::string path;
    struct stat st;
    if (first_nvrtc_file(path, st))
      return path + ":" + std::to_string(st.st_size) + ":" +
             std::to_string(static_cast<int64_t>(st.st_mtime));
    const NvrtcInfo* n = nvrtc();
    return n ? n->path + ":" + std::to_string(n->major) + "." + std::to_string(n->minor)
             : std::string("none");
  }();
  return id;
}

std::vector<std::string> nvrtc_files() {
  std::vector<std::string> files;
  std::string path;
  struct stat st;
  if (!first_nvrtc_file(path, st)) return files;
  files.push_back(path);
  const size_t slash = path.rfind('/') + 1;
  const std::string dir = path.substr(0, slash);
  // libnvrtc.alt.so.13 loads libnvrtc-builtins.alt.so.13.x, libnvrtc.so.13 the other.
  const bool alt = path.find(".alt.", slash) != std::string::npos;
  const std::string prefix = alt ? "libnvrtc-builtins.alt.so" : "libnvrtc-builtins.so";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.rfind(prefix, 0) != 0) continue;
      struct stat bs;
      if (::lstat((dir + n).c_str(), &bs) == 0 && S_ISREG(bs.st_mode)) files.push_back(dir + n);
    }
    ::closedir(d);
  }
  return files;
}

void prefetch_nvrtc() {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      // The thread only opens, reads and closes: nothing it touches outlives a process that
      // exits while it runs. The files are read, not advised (POSIX_FADV_WILLNEED reads one
      // readahead window, 128 KiB to a few MiB, of a 110 MB file).
      std::thread([] {
        constexpr size_t kChunk = size_t(1) << 20;
        std::unique_ptr<char[]> buf(new (std::nothrow) char[kChunk]);
        if (!buf) return;
        for (const std::string& f : nvrtc_files()) {
          const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
          if (fd < 0) continue;
          ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);  // a larger readahead window
          while (::read(fd, buf.get(), kChunk) > 0) {
          }
          ::close(fd);
        }
      }).detach();
    } catch (const std::system_error&) {
      // no thread to spare: the first compile reads the library itself, as before
    }
  });
}

PtxasReport parse_ptxas_log(const std::string& log) {
  PtxasReport r;
  // "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
  // "ptxas info    : Used 10 registers, used 1 barriers, 256 bytes smem"
  auto number_before = [&](size_t at) -> int64_t {
    size_t b = at;
    while (b > 0 && log[b - 1] == ' ') --b;
    size_t e = b;
    while (b > 0 && log[b - 1] >= '0' && log[b - 1] <= '9') --b;
    return b < e ? std::stoll(log.substr(b, e - b)) : 0;
  };
  if (size_t p = log.rfind(" bytes stack frame"); p != std::string::npos)
    r.stack_bytes = number_before(p);
  if (size_t p = log.rfind(" bytes spill stores"); p != std::string::npos)
    r.spill_stores = number_before(p);
  if (size_t p = log.rfind(" bytes spill loads"); p != std::string::npos)
    r.spill_loads = number_before(p);
  // The first "Used N registers" (the log has one kernel; other "Used" phrases are skipped).
  for (size_t p = log.find("Used "); p != std::string::npos; p = log.find("Used ", p + 5)) {
    size_t e = p + 5;
    while (e < log.size() && log[e] >= '0' && log[e] <= '9') ++e;
    if (e > p + 5 && log.compare(e, 10, " registers") == 0) {
      r.registers = static_cast<int>(std::stol(log.substr(p + 5, e - p - 5)));
      break;
    }
  }
  return r;
}

namespace {
enum class Output { Cubin, Ptx, LtoIr };

CompiledCubin compile_program(const std::string& source, const std::string& name, int arch,
                              const std::vector<Header>& headers,
                              const std::vector<std::string>& options,
                              const std::string& arch_suffix, Output what) {
  const bool ptx = what == Output::Ptx;
  const Api& a = api(name.c_str());
  std::vector<const char*> hdr_text, hdr_name;
  for (const auto& [n, text] : headers) {
    hdr_name.push_back(n.c_str());
    hdr_text.push_back(text.c_str());
  }
  nvrtcProgram prog = nullptr;
  check(a,
        a.nvrtcCreateProgram(&prog, source.c_str(), (name + ".cu").c_str(),
                             static_cast<int>(headers.size()), hdr_text.data(), hdr_name.data()),
        "nvrtcCreateProgram", name);
  struct Destroy {
    const Api& a;
    nvrtcProgram& p;
    ~Destroy() { a.nvrtcDestroyProgram(&p); }
  } destroy{a, prog};
  std::vector<std::string> opts = {
      (ptx ? "-arch=compute_" : "-arch=sm_") + std::to_string(arch) + arch_suffix,
      "-default-device", "-std=c++17"};
  // (PTX and LTO-IR: no ptxas run here, so none of its options)
  for (const std::string& o : options)
    if (what == Output::Cubin || o.rfind("-Xptxas", 0) != 0) opts.push_back(o);
  if (what == Output::LtoIr) {
    TS_CHECK(a.nvrtcGetLTOIR, RuntimeError)
        << "[kernel " << name << "] linking precompiled CUDA objects needs NVRTC's LTO-IR output "
        << "(NVRTC 12.0 or newer; " << loaded().info.path << " lacks nvrtcGetLTOIR)";
    opts.insert(opts.end(), {"-rdc=true", "-dlto"});
  }
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  const nvrtcResult r = a.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  CompiledCubin out;
  out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  size_t log_size = 0;
  a.nvrtcGetProgramLogSize(prog, &log_size);
  if (log_size > 1) {
    out.log.resize(log_size);
    a.nvrtcGetProgramLog(prog, out.log.data());
    out.log.resize(log_size - 1);  // the terminating NUL
  }
  if (r != 0) {
    std::string cmd;
    for (const auto& o : opts) cmd += " " + o;
    throw CompileError("[kernel " + name + "] NVRTC could not compile the generated CUDA (" +
                           a.nvrtcGetErrorString(r) + ", options:" + cmd + "):\n" + out.log,
                       SourceLoc{});
  }
  size_t size = 0;
  if (what == Output::LtoIr) {
    check(a, a.nvrtcGetLTOIRSize(prog, &size), "nvrtcGetLTOIRSize", name);
    out.cubin.resize(size);
    check(a, a.nvrtcGetLTOIR(prog, out.cubin.data()), "nvrtcGetLTOIR", name);
    return out;
  }
  if (ptx) {  // the text with its terminating NUL, as cuModuleLoadData reads it
    check(a, a.nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize", name);
    out.cubin.resize(size);
    check(a, a.nvrtcGetPTX(prog, out.cubin.data()), "nvrtcGetPTX", name);
    return out;
  }
  check(a, a.nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize", name);
  out.cubin.resize(size);
  check(a, a.nvrtcGetCUBIN(prog, out.cubin.data()), "nvrtcGetCUBIN", name);
  out.resources = parse_ptxas_log(out.log);
  return out;
}
}  // namespace

CompiledCubin compile_cubin(const std::string& source, const std::string& name, int arch,
                            const std::vector<Header>& headers,
                            const std::vector<std::string>& options,
                            const std::string& arch_suffix) {
  return compile_program(source, name, arch, headers, options, arch_suffix, Output::Cubin);
}

CompiledCubin compile_ptx(const std::string& source, const std::string& name, int arch,
                          const std::vector<Header>& headers,
                          const std::vector<std::string>& options, const std::string& arch_suffix) {
  return compile_program(source, name, arch, headers, options, arch_suffix, Output::Ptx);
}

CompiledCubin compile_ltoir(const std::string& source, const std::string& name, int arch,
                            const std::vector<Header>& headers,
                            const std::vector<std::string>& options,
                            const std::string& arch_suffix) {
  return compile_program(source, name, arch, headers, options, arch_suffix, Output::LtoIr);
}

}  // namespace tessera::runtime::cuda
