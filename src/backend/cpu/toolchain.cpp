#include "backend/cpu/toolchain.h"

#include "runtime/thread_pool.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "backend/common/link_inputs.h"
#include "backend/cpu/embedded_headers.h"
#include "core/files.h"
#include "core/progress.h"
#include "runtime/disk_cache.h"
#include "tessera/detail/hash.h"
#include "tessera/env.h"
#include "tessera/error.h"
#include "tessera/version.h"

extern char** environ;

namespace tessera::backend::cpu {

bool intel_avx512() {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  static const bool intel = __builtin_cpu_is("intel") && __builtin_cpu_supports("avx512f");
  return intel;
#else
  return false;
#endif
}

namespace {

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

uint64_t file_size(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

void make_dirs(const std::string& path) {
  TS_CHECK(files::make_dirs(path), RuntimeError)
      << "cannot create the cache directory " << path << ": " << std::strerror(errno)
      << " (set TESSERA_CACHE_DIR to a writable directory)";
}

using files::read_file;
using files::remove_tree;

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  TS_CHECK(f.good(), RuntimeError) << "cannot write " << path;
}

using runtime::disk::unique_suffix;

const runtime::disk::Store& store() {
  static const runtime::disk::Store s("cpu");
  return s;
}

// Runs argv, with stdout and stderr sent to `log`; returns the exit status.
int run(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  const int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

std::string find_in_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return exists(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const std::string p = dir + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

std::string cpu_features_digest() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(f, line)) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line;
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
  }
  return sha256_hex(model + "\n" + flags).substr(0, 16);
}

// The compiler's `--version` line. Asking costs a process (about 1.5 ms, most of a warm
// process's first launch), so the answer is remembered under the cache root, keyed by the
// compiler binary's identity (resolved path, inode, size, modification time): an upgraded
// compiler is a different file and is asked again.
std::string compiler_version(const std::string& path) {
  char real[PATH_MAX];
  struct stat st;
  std::string memo;
  if (::realpath(path.c_str(), real) && ::stat(real, &st) == 0) {
    std::ostringstream id;
    id << real << "\n"
       << st.st_ino << "\n"
       << st.st_size << "\n"
       << st.st_mtim.tv_sec << "." << st.st_mtim.tv_nsec;
    memo = cache_root() + "/compilers/" + sha256_hex(id.str()).substr(0, 32);
    const std::string known = first_line(read_file(memo));
    if (!known.empty()) return known;
  }
  char tmpl[] = "/tmp/tessera-cxx-version-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd >= 0) ::close(fd);
  run({path, "--version"}, tmpl);
  const std::string version = first_line(read_file(tmpl));
  ::unlink(tmpl);
  if (!memo.empty() && !version.empty()) {
    // Best effort: an unwritable cache only costs the next process the same question.
    try {
      make_dirs(cache_root() + "/compilers");
      const std::string tmp = memo + ".tmp-" + unique_suffix();
      write_file(tmp, version + "\n");
      if (::rename(tmp.c_str(), memo.c_str()) != 0) ::unlink(tmp.c_str());
    } catch (const Error&) {
    }
  }
  return version;
}

CompilerInfo discover() {
  CompilerInfo info;
  std::vector<std::string> candidates;
  if (!knobs().cxx.empty()) candidates.push_back(knobs().cxx);
  for (const char* c : {"c++", "g++", "clang++"}) candidates.push_back(c);
  for (const auto& c : candidates) {
    info.path = find_in_path(c);
    if (!info.path.empty()) break;
  }
  TS_CHECK(!info.path.empty(), RuntimeError)
      << "no C++ compiler found for kernels (looked for "
      << (knobs().cxx.empty() ? "" : knobs().cxx + ", ")
      << "c++, g++, clang++ on PATH); install g++ or set TESSERA_CXX";
  info.version = compiler_version(info.path);
  info.flags = {"-std=c++17",
                "-O3",
                "-march=native",
                "-fPIC",
                "-shared",
                "-fno-math-errno",
                "-fwrapv",
                "-fno-trapping-math",
                "-ffp-contract=off",
                "-fopenmp-simd",
                "-fno-exceptions",
                "-fno-rtti",
                "-fvisibility=hidden",
                "-fno-plt",
                "-w"};
  // 512-bit loops on Intel's AVX-512 CPUs: the runtime's lanes16 types are 64 bytes, and GCC's
  // tuning for these CPUs vectorizes loops with 32 bytes, so a staging buffer written by 256-bit
  // stores was read by a 512-bit load (a failed store-to-load forward per block). On the 2-core
  // Xeon, A/B in one session: user softmax 4.3 -> 2.8 ms, compiled layer norm 3.4 -> 1.7-2.5 ms
  // (docs/decisions.md). AMD's 512-bit operations are two halves: left to the compiler there.
  if (intel_avx512()) info.flags.push_back("-mprefer-vector-width=512");
#ifdef TESSERA_JIT_SANITIZE
  // A sanitizer build (`make sanitize`) checks the generated kernels too.
  info.flags.push_back("-fsanitize=" TESSERA_JIT_SANITIZE);
  info.flags.push_back("-fno-sanitize-recover=" TESSERA_JIT_SANITIZE);
  info.flags.push_back("-fno-omit-frame-pointer");
#endif
  info.target = cpu_features_digest();
  return info;
}

std::string headers_digest();

// The embedded runtime headers, written once per content under the cache root (re-created if the
// cache was cleared).
std::string headers_dir() {
  const std::string root = cache_root() + "/include/" + headers_digest().substr(0, 16);
  if (exists(root + "/.complete")) return root;
  const std::string tmp = cache_root() + "/tmp/include-" + unique_suffix();
  make_dirs(tmp + "/tessera/trt");
  for (int i = 0; i < kNumTrtHeaders; ++i)
    write_file(tmp + "/" + kTrtHeaders[i].path, kTrtHeaders[i].text);
  write_file(tmp + "/.complete", "");
  make_dirs(cache_root() + "/include");
  if (::rename(tmp.c_str(), root.c_str()) != 0) remove_tree(tmp);  // another process won
  return root;
}

std::string headers_digest() {
  static const std::string d = [] {
    Sha256 h;
    for (int i = 0; i < kNumTrtHeaders; ++i)
      h.field(kTrtHeaders[i].path).field(kTrtHeaders[i].text);
    return h.hex();
  }();
  return d;
}

std::string key_of(const std::string& source) {
  const CompilerInfo& c = compiler();
  Sha256 h;
  h.field("tessera-cpu-kernel-v2")
      .field(build_id())
      .field(headers_digest())
      .field(c.path)
      .field(c.version);
  for (const auto& f : c.flags) h.field(f);
  h.field(c.target).field(source);
  return h.hex();
}

std::string entry_dir(const std::string& key) {
  return store().dir_of(key);
}

// Loads an entry whose files the store has checked; null (the entry discarded) when the loader
// refuses it.
trt::KernelFn try_load(const std::string& key, std::string& why) {
  const auto info = store().open(key, &why);
  if (!info) {
    if (why.empty()) why = "no entry";
    return nullptr;
  }
  const std::string so = entry_dir(key) + "/" + info->get("so", "kernel.so");
  void* handle = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    why = ::dlerror();
    store().discard(key, why);
    return nullptr;
  }
  const std::string symbol = info->get("symbol", "tessera_kernel");
  auto fn = reinterpret_cast<trt::KernelFn>(::dlsym(handle, symbol.c_str()));
  if (!fn) {
    why = "no " + symbol + " symbol";
    store().discard(key, why);
    return nullptr;
  }
  return fn;  // handles stay open for the life of the process
}

std::mutex& loaded_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<std::string, trt::KernelFn>& loaded() {
  static auto* m = new std::unordered_map<std::string, trt::KernelFn>();
  return *m;
}

}  // namespace

const CompilerInfo& compiler() {
  static const CompilerInfo info = discover();
  return info;
}

std::string cache_root() {
  return knobs().cache_dir + "/cpu";
}

std::string include_dir() {
  return headers_dir();
}

std::string source_key(const std::string& source) {
  return key_of(source);
}

namespace {

// Finds a kernel in this process or on disk (a damaged entry is moved away); null when absent.
trt::KernelFn find_cached(const std::string& key) {
  {
    std::lock_guard<std::mutex> g(loaded_mutex());
    auto it = loaded().find(key);
    if (it != loaded().end()) return it->second;
  }
  std::string why;
  return try_load(key, why);
}

// The files of precompiled extern functions, after the source on the command line (archives
// are searched for what it calls); a shared object is found at run time by its folder.
void add_link_inputs(const std::vector<LinkInput>& links, std::vector<std::string>& argv) {
  for (const LinkInput& in : links) {
    argv.push_back(in.path);
    const std::string base = in.path.substr(in.path.rfind('/') + 1);
    if (base.size() > 3 &&
        (base.compare(base.size() - 3, 3, ".so") == 0 || base.find(".so.") != std::string::npos)) {
      argv.push_back("-Wl,-rpath," + in.path.substr(0, in.path.rfind('/')));
    }
  }
}

std::string names_of(const std::vector<LinkInput>& links) {
  std::string s;
  for (const LinkInput& in : links) s += (s.empty() ? "'" : ", '") + in.path + "'";
  return s;
}

// A failed build of a kernel that links files: when the kernel compiles without them (-c), the
// link failed, which is the files' doing (not position-independent, another architecture, a
// symbol defined twice): a CompileError with the linker's words. Else returns (a tessera bug).
void blame_link(std::vector<std::string> argv, const std::vector<LinkInput>& links,
                const std::string& kernel, const std::string& tmp) {
  const std::string link_log = read_file(tmp + "/compiler.log");
  std::vector<std::string> compile_only;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    const bool linked =
        std::any_of(links.begin(), links.end(), [&](const LinkInput& in) { return in.path == a; });
    if (linked || a.rfind("-Wl,", 0) == 0 || a == "-shared") continue;
    if (a == "-o") {
      compile_only.insert(compile_only.end(), {"-c", "-o", tmp + "/kernel.o"});
      ++i;
      continue;
    }
    compile_only.push_back(a);
  }
  if (run(compile_only, tmp + "/compile-only.log") != 0) return;
  remove_tree(tmp);
  throw CompileError("kernel '" + kernel + "': linking the extern functions' objects " +
                         names_of(links) + " failed:\n" + link_log.substr(0, 4000),
                     SourceLoc{});
}

// A kernel that links files must resolve every function it calls: a shared object may be linked
// with symbols missing (the loader finds them, or not, later); load it once to know now.
void check_resolved(const std::string& so, const std::vector<LinkInput>& links,
                    const std::string& kernel, const std::string& tmp) {
  void* h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h) {
    ::dlclose(h);
    return;
  }
  const std::string why = ::dlerror();
  remove_tree(tmp);
  throw CompileError("kernel '" + kernel + "' links the extern functions' objects " +
                         names_of(links) + ", but the loader refuses it: " + why,
                     SourceLoc{});
}

// One compiler run over several kernels: each source is renamed to its own entry point and the
// shared object is linked into every kernel's cache entry. Returns the compiler time.
double build_bundle(const std::vector<const KernelSource*>& members,
                    const std::vector<std::string>& keys) {
  const CompilerInfo& c = compiler();
  const std::string tmp =
      cache_root() + "/tmp/bundle-" + keys[0].substr(0, 16) + "-" + unique_suffix();
  make_dirs(tmp);
  const bool single = members.size() == 1;
  std::string text;
  for (size_t i = 0; i < members.size(); ++i) {
    if (single) {
      text = members[i]->source;
      break;
    }
    text += "#define tessera_kernel tessera_kernel_" + std::to_string(i) + "\n" +
            members[i]->source + "\n#undef tessera_kernel\n";
  }
  write_file(tmp + "/kernel.cpp", text);
  std::vector<std::string> argv = {c.path};
  argv.insert(argv.end(), c.flags.begin(), c.flags.end());
  argv.insert(argv.end(), {"-I", include_dir(), "-o", tmp + "/kernel.so", tmp + "/kernel.cpp"});
  // A kernel calling precompiled extern functions (built alone: compile_many) links their files.
  const std::vector<LinkInput> links = link_inputs(text);
  for (const LinkInput& in : links) check_unchanged(in, members[0]->kernel);
  add_link_inputs(links, argv);
  const auto t0 = std::chrono::steady_clock::now();
  int rc = run(argv, tmp + "/compiler.log");
  if (rc != 0 &&
      read_file(tmp + "/compiler.log").find("internal compiler error") != std::string::npos) {
    // A crash of the compiler's vectorizer (GCC 12 on some narrow-integer reductions): the
    // kernel again without it, slower rather than lost; the first log stays beside the second.
    std::rename((tmp + "/compiler.log").c_str(), (tmp + "/compiler-ice.log").c_str());
    argv.insert(argv.begin() + 1, "-fno-tree-vectorize");
    rc = run(argv, tmp + "/compiler.log");
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (rc != 0 && !links.empty()) blame_link(argv, links, members[0]->kernel, tmp);
  if (rc != 0) {
    std::string names;
    for (const auto* m : members) names += (names.empty() ? "'" : ", '") + m->kernel + "'";
    const std::string log_text = read_file(tmp + "/compiler.log");
    TS_ERROR(InternalError) << "the generated C++ of kernel " << names
                            << " failed to compile (a tessera bug, please report it); source and "
                            << "compiler output kept in " << tmp << "\n"
                            << log_text.substr(0, 4000);
  }
  const std::string so = tmp + "/kernel.so";
  if (!links.empty()) check_resolved(so, links, members[0]->kernel, tmp);
  // A new file name per build: the dynamic loader would hand back a library it loaded before
  // from the same path (with other entry points) when a cleared entry is rebuilt in-process.
  const std::string so_name = "kernel-" + sha256_hex(tmp).substr(0, 16) + ".so";
  const runtime::disk::Info::File so_file{so_name, file_size(so), runtime::disk::file_digest(so)};
  for (size_t i = 0; i < members.size(); ++i) {
    const std::string entry = store().stage();
    write_file(entry + "/kernel.cpp", members[i]->source);
    if (::link(so.c_str(), (entry + "/" + so_name).c_str()) != 0)
      write_file(entry + "/" + so_name, read_file(so));
    runtime::disk::Info info;
    info.values = {{"kernel", members[i]->kernel},
                   {"so", so_name},
                   {"compile_ms", std::to_string(ms)},
                   {"bundle", std::to_string(members.size())}};
    if (!single) info.values["symbol"] = "tessera_kernel_" + std::to_string(i);
    info.files.push_back(so_file);  // checked when a process first loads the entry
    runtime::disk::Store::record_file(info, entry, "kernel.cpp");
    store().publish(entry, keys[i], info);  // another process may have won: its entry stands
  }
  remove_tree(tmp);
  return ms;
}

}  // namespace

std::vector<CompiledBinary> compile_many(const std::vector<KernelSource>& kernels,
                                         size_t max_groups) {
  std::vector<CompiledBinary> out(kernels.size());
  std::vector<size_t> misses;
  std::unordered_map<std::string, size_t> first;  // key -> first index (duplicates compile once)
  for (size_t i = 0; i < kernels.size(); ++i) {
    out[i].key = key_of(kernels[i].source);
    out[i].path = entry_dir(out[i].key);
    out[i].fn = find_cached(out[i].key);
    out[i].from_disk = out[i].fn != nullptr;
    if (!out[i].fn && first.emplace(out[i].key, i).second) misses.push_back(i);
  }
  if (!misses.empty()) {
    // One translation unit per thread of the pool (TESSERA_NUM_THREADS; all cores by default),
    // compiled in parallel.
    const size_t cores = static_cast<size_t>(std::max(1, runtime::num_threads()));
    const size_t spread = std::min(misses.size(), max_groups ? max_groups : cores);
    std::vector<std::vector<const KernelSource*>> members(spread);
    std::vector<std::vector<std::string>> keys(spread);
    std::vector<std::vector<size_t>> index(spread);
    // A kernel linking precompiled files gets a translation unit of its own (no other kernel
    // links them, or fails with them).
    size_t spread_next = 0;
    for (size_t m = 0; m < misses.size(); ++m) {
      size_t g = 0;
      if (link_inputs(kernels[misses[m]].source).empty()) {
        g = spread_next++ % spread;
      } else {
        g = members.size();
        members.emplace_back();
        keys.emplace_back();
        index.emplace_back();
      }
      members[g].push_back(&kernels[misses[m]]);
      keys[g].push_back(out[misses[m]].key);
      index[g].push_back(misses[m]);
    }
    // (groups left empty by kernels that went alone)
    for (size_t g = members.size(); g-- > 0;) {
      if (!members[g].empty()) continue;
      members.erase(members.begin() + static_cast<std::ptrdiff_t>(g));
      keys.erase(keys.begin() + static_cast<std::ptrdiff_t>(g));
      index.erase(index.begin() + static_cast<std::ptrdiff_t>(g));
    }
    const size_t groups = members.size();
    std::vector<double> ms(groups, 0);
    std::vector<std::exception_ptr> errors(groups);
    // A long batch shows a progress line (TESSERA_PROGRESS): kernels built, seconds so far.
    ProgressLine progress("compiling " + std::to_string(misses.size()) + " kernel" +
                          (misses.size() == 1 ? "" : "s") + " (" + kernels[misses[0]].kernel +
                          (misses.size() > 1 ? ", ..." : "") + ")");
    std::mutex done_mutex;
    std::condition_variable done_cv;
    size_t groups_done = 0, kernels_done = 0;
    auto work = [&](size_t g) {
      try {
        ms[g] = build_bundle(members[g], keys[g]);
      } catch (...) {
        errors[g] = std::current_exception();
      }
      std::lock_guard<std::mutex> l(done_mutex);
      ++groups_done;
      kernels_done += members[g].size();
      done_cv.notify_all();
    };
    const auto t0 = std::chrono::steady_clock::now();
    auto show = [&](bool last) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      char text[96];
      std::snprintf(text, sizeof text, "%zu/%zu built, %.1f s", kernels_done, misses.size(), s);
      progress.update(text, last);
    };
    std::vector<std::thread> threads;
    if (!progress.enabled()) {
      for (size_t g = 1; g < groups; ++g) threads.emplace_back(work, g);
      work(0);
    } else {  // every group on a thread; this one waits and reports
      for (size_t g = 0; g < groups; ++g) threads.emplace_back(work, g);
      std::unique_lock<std::mutex> l(done_mutex);
      while (groups_done < groups) {
        done_cv.wait_for(l, std::chrono::milliseconds(200));
        show(false);
      }
      show(true);
    }
    for (auto& t : threads) t.join();
    for (const auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    for (size_t g = 0; g < groups; ++g) {
      for (size_t i : index[g]) out[i].compile_ms = ms[g];
    }
  }
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (out[i].fn) continue;
    std::string why;
    out[i].fn = try_load(out[i].key, why);
    TS_CHECK(out[i].fn != nullptr, RuntimeError)
        << "cannot load the compiled kernel '" << kernels[i].kernel << "' from "
        << entry_dir(out[i].key) << ": " << why;
  }
  std::lock_guard<std::mutex> g(loaded_mutex());
  for (const auto& b : out) loaded().emplace(b.key, b.fn);
  return out;
}

std::string compile_bundle(const std::vector<std::string>& sources, const std::string& march) {
  const CompilerInfo& c = compiler();
  const std::string tmp = cache_root() + "/tmp/aot-" + unique_suffix();
  make_dirs(tmp);
  std::string text;
  for (size_t i = 0; i < sources.size(); ++i) {
    text += "#define tessera_kernel tessera_kernel_" + std::to_string(i) + "\n" + sources[i] +
            "\n#undef tessera_kernel\n";
  }
  write_file(tmp + "/kernels.cpp", text);
  std::vector<std::string> argv = {c.path};
  for (const auto& f : c.flags) argv.push_back(f == "-march=native" ? "-march=" + march : f);
  argv.insert(argv.end(), {"-I", include_dir(), "-o", tmp + "/kernels.so", tmp + "/kernels.cpp"});
  // Precompiled extern functions are linked in (a shared object stays a run-time dependency).
  const std::vector<LinkInput> links = link_inputs(text);
  for (const LinkInput& in : links) check_unchanged(in, "(package)");
  add_link_inputs(links, argv);
  if (run(argv, tmp + "/compiler.log") != 0) {
    if (!links.empty()) blame_link(argv, links, "(package)", tmp);
    const std::string log_text = read_file(tmp + "/compiler.log");
    TS_ERROR(InternalError) << "the package's kernels failed to compile for -march=" << march
                            << " (a tessera bug, please report it); source and compiler output "
                               "kept in "
                            << tmp << "\n"
                            << log_text.substr(0, 4000);
  }
  std::string so = read_file(tmp + "/kernels.so");
  remove_tree(tmp);
  return so;
}

CompiledBinary compile(const std::string& source, const std::string& kernel) {
  return compile_many({KernelSource{source, kernel}})[0];
}

std::vector<CacheEntry> cache_entries() {
  std::vector<CacheEntry> out;
  for (const auto& key : store().keys()) {
    CacheEntry ce;
    ce.key = key;
    ce.dir = entry_dir(key);
    const auto info = runtime::disk::Info::parse(read_file(ce.dir + "/info"));
    if (info) ce.kernel = info->get("kernel");
    ce.so = ce.dir + "/" + (info ? info->get("so", "kernel.so") : std::string("kernel.so"));
    ce.bytes = file_size(ce.so) + file_size(ce.dir + "/kernel.cpp");
    struct stat st;
    if (::stat(ce.so.c_str(), &st) == 0) ce.mtime = st.st_mtime;
    out.push_back(ce);
  }
  return out;
}

void forget_loaded() {
  std::lock_guard<std::mutex> g(loaded_mutex());
  loaded().clear();
}

size_t clear_cache() {
  const size_t n = store().clear();
  std::lock_guard<std::mutex> g(loaded_mutex());
  loaded().clear();
  return n;
}

}  // namespace tessera::backend::cpu
