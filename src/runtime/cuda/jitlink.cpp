// nvJitLink loaded with dlopen: the entry points tessera uses, declared here.
#include "runtime/cuda/jitlink.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdint>

#include "runtime/cuda/dl.h"
#include "tessera/error.h"

namespace tessera::runtime::cuda {
namespace {

using Result = int;
struct _Handle;
using Handle = _Handle*;
constexpr int kInputAny = 10;  // NVJITLINK_INPUT_ANY: the file's kind from its contents
constexpr int kInputLtoIr = 3;

struct Api {
  Result (*create)(Handle*, uint32_t, const char**);
  Result (*destroy)(Handle*);
  Result (*add_data)(Handle, int, const void*, size_t, const char*);
  Result (*add_file)(Handle, int, const char*);
  Result (*complete)(Handle);
  Result (*cubin_size)(Handle, size_t*);
  Result (*cubin)(Handle, void*);
  Result (*error_log_size)(Handle, size_t*);
  Result (*error_log)(Handle, char*);
  Result (*info_log_size)(Handle, size_t*);
  Result (*info_log)(Handle, char*);
  Result (*version)(unsigned*, unsigned*);
};

struct Loaded {
  Api api{};
  NvrtcInfo info;
  bool ok = false;
  std::string why;
};

// An entry point by its plain name, else by the versioned one the headers' inline wrappers call.
template <class F>
bool resolve(void* lib, const std::string& name, F& out) {
  for (const char* suffix : {"", "_13_0", "_12_0"}) {
    const std::string n = *suffix ? "__" + name + suffix : name;
    if (resolve_symbol(lib, n.c_str(), out)) return true;
  }
  return false;
}

Loaded load() {
  Loaded l;
  void* lib = open_toolkit_library({"libnvJitLink.so.13", "libnvJitLink.so.12", "libnvJitLink.so"},
                                   l.info.path);
  if (!lib) {
    l.why =
        "no nvJitLink (looked for libnvJitLink.so.13 and .12 under $CUDA_HOME/lib64, "
        "/usr/local/cuda/lib64 and the loader's path)";
    return l;
  }
  Api& a = l.api;
  const bool ok = resolve(lib, "nvJitLinkCreate", a.create) &&
                  resolve(lib, "nvJitLinkDestroy", a.destroy) &&
                  resolve(lib, "nvJitLinkAddData", a.add_data) &&
                  resolve(lib, "nvJitLinkAddFile", a.add_file) &&
                  resolve(lib, "nvJitLinkComplete", a.complete) &&
                  resolve(lib, "nvJitLinkGetLinkedCubinSize", a.cubin_size) &&
                  resolve(lib, "nvJitLinkGetLinkedCubin", a.cubin) &&
                  resolve(lib, "nvJitLinkGetErrorLogSize", a.error_log_size) &&
                  resolve(lib, "nvJitLinkGetErrorLog", a.error_log) &&
                  resolve(lib, "nvJitLinkGetInfoLogSize", a.info_log_size) &&
                  resolve(lib, "nvJitLinkGetInfoLog", a.info_log) &&
                  resolve_symbol(lib, "nvJitLinkVersion", a.version);
  if (!ok) {
    l.why = l.info.path + " lacks an entry point tessera needs (an nvJitLink older than 12.3?)";
    return l;
  }
  unsigned major = 0, minor = 0;
  a.version(&major, &minor);
  l.info.major = static_cast<int>(major);
  l.info.minor = static_cast<int>(minor);
  l.ok = true;
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

std::string log_of(Result (*size_fn)(Handle, size_t*), Result (*text_fn)(Handle, char*), Handle h) {
  size_t n = 0;
  if (size_fn(h, &n) != 0 || n <= 1) return {};
  std::string s(n, '\0');
  text_fn(h, s.data());
  s.resize(n - 1);
  return s;
}

}  // namespace

const NvrtcInfo* jitlink(std::string* why) {
  const Loaded& l = loaded();
  if (!l.ok && why) *why = l.why;
  return l.ok ? &l.info : nullptr;
}

CompiledCubin link_cubin(const std::string& ltoir, const std::vector<std::string>& files,
                         const std::string& name, int arch, const std::string& arch_suffix) {
  const Loaded& l = loaded();
  TS_CHECK(l.ok, RuntimeError) << "[kernel " << name
                               << "] links precompiled CUDA objects, which needs nvJitLink, but "
                               << l.why;
  const Api& a = l.api;
  const std::string arch_opt = "-arch=sm_" + std::to_string(arch) + arch_suffix;
  const char* opts[] = {arch_opt.c_str(), "-lto", "-fma=0", "-lineinfo", "-Xptxas=-v"};
  Handle h = nullptr;
  Result r = a.create(&h, sizeof opts / sizeof opts[0], opts);
  TS_CHECK(r == 0, RuntimeError) << "[kernel " << name << "] nvJitLinkCreate failed (" << r << ")";
  struct Destroy {
    const Api& a;
    Handle& h;
    ~Destroy() { a.destroy(&h); }
  } destroy{a, h};
  const auto t0 = std::chrono::steady_clock::now();
  auto fail = [&](const std::string& what) {
    const std::string log = log_of(a.error_log_size, a.error_log, h);
    throw CompileError("[kernel " + name + "] nvJitLink could not " + what + " (error " +
                           std::to_string(r) + "):\n" + log,
                       SourceLoc{});
  };
  r = a.add_data(h, kInputLtoIr, ltoir.data(), ltoir.size(), (name + ".ltoir").c_str());
  if (r != 0) fail("take the kernel's LTO-IR");
  for (const std::string& f : files) {
    r = a.add_file(h, kInputAny, f.c_str());
    if (r != 0) fail("read '" + f + "'");
  }
  r = a.complete(h);
  if (r != 0) fail("link the kernel with " + std::to_string(files.size()) + " file(s)");
  CompiledCubin out;
  out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out.log = log_of(a.info_log_size, a.info_log, h);
  size_t size = 0;
  r = a.cubin_size(h, &size);
  if (r != 0) fail("give the linked cubin's size");
  out.cubin.resize(size);
  r = a.cubin(h, out.cubin.data());
  if (r != 0) fail("give the linked cubin");
  out.resources = parse_ptxas_log(out.log);
  return out;
}

}  // namespace tessera::runtime::cuda
