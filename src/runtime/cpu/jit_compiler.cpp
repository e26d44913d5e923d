#include "runtime/cpu/jit_compiler.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <unordered_map>

#include "runtime/cpu/embedded_headers.h"
#include "tessera/detail/hash.h"
#include "tessera/env.h"
#include "tessera/error.h"
#include "tessera/version.h"

extern char** environ;

namespace tessera::runtime::cpu {
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
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
      TS_ERROR(RuntimeError) << "cannot create the cache directory " << cur << ": "
                             << std::strerror(errno)
                             << " (set TESSERA_CACHE_DIR to a writable directory)";
    }
  }
}

void remove_tree(const std::string& path) {
  if (DIR* d = ::opendir(path.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      const std::string p = path + "/" + n;
      struct stat st;
      if (::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        remove_tree(p);
      } else {
        ::unlink(p.c_str());
      }
    }
    ::closedir(d);
  }
  ::rmdir(path.c_str());
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  TS_CHECK(f.good(), RuntimeError) << "cannot write " << path;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  return std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + std::to_string(rd());
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
  info.flags = {"-std=c++17",    "-O3",
                "-march=native", "-fPIC",
                "-shared",       "-fno-math-errno",
                "-fwrapv",       "-fno-trapping-math",
                "-fopenmp-simd", "-fno-exceptions",
                "-fno-rtti",     "-fvisibility=hidden",
                "-fno-plt",      "-w"};
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
  h.field("tessera-cpu-kernel-v1")
      .field(build_id())
      .field(headers_digest())
      .field(c.path)
      .field(c.version);
  for (const auto& f : c.flags) h.field(f);
  h.field(c.target).field(source);
  return h.hex();
}

std::string entry_dir(const std::string& key) {
  return cache_root() + "/" + key.substr(0, 2) + "/" + key;
}

// Loads a complete entry; nullopt (after removing it) when it is missing or damaged.
trt::KernelFn try_load(const std::string& dir, std::string& why) {
  const std::string so = dir + "/kernel.so";
  const std::string info = read_file(dir + "/info");
  if (info.empty()) {
    why = "no info record";
    return nullptr;
  }
  const auto pos = info.find("bytes=");
  const uint64_t want =
      pos == std::string::npos ? 0 : std::strtoull(info.c_str() + pos + 6, nullptr, 10);
  if (want == 0 || file_size(so) != want) {
    why = "size mismatch";
    return nullptr;
  }
  void* handle = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    why = ::dlerror();
    return nullptr;
  }
  auto fn = reinterpret_cast<trt::KernelFn>(::dlsym(handle, "tessera_kernel"));
  if (!fn) {
    why = "no tessera_kernel symbol";
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

CompiledBinary compile(const std::string& source, const std::string& kernel) {
  CompiledBinary out;
  out.key = key_of(source);
  const std::string dir = entry_dir(out.key);
  out.path = dir + "/kernel.so";
  {
    std::lock_guard<std::mutex> g(loaded_mutex());
    auto it = loaded().find(out.key);
    if (it != loaded().end()) {
      out.fn = it->second;
      out.from_disk = true;
      return out;
    }
  }
  std::string why;
  if (exists(dir)) {
    out.fn = try_load(dir, why);
    if (!out.fn) {
      log("cache", "rebuilding damaged cache entry " + dir + " (" + why + ")");
      const std::string trash = cache_root() + "/tmp/damaged-" + unique_suffix();
      make_dirs(cache_root() + "/tmp");
      if (::rename(dir.c_str(), trash.c_str()) == 0) remove_tree(trash);
    } else {
      out.from_disk = true;
    }
  }
  if (!out.fn) {
    const CompilerInfo& c = compiler();
    const std::string tmp = cache_root() + "/tmp/" + out.key.substr(0, 16) + "-" + unique_suffix();
    make_dirs(tmp);
    write_file(tmp + "/kernel.cpp", source);
    std::vector<std::string> argv = {c.path};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    argv.insert(argv.end(), {"-I", include_dir(), "-o", tmp + "/kernel.so", tmp + "/kernel.cpp"});
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = run(argv, tmp + "/compiler.log");
    out.compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (rc != 0) {
      const std::string log_text = read_file(tmp + "/compiler.log");
      TS_ERROR(InternalError)
          << "the generated C++ of kernel '" << kernel
          << "' failed to compile (a tessera bug, please report it); source and "
          << "compiler output kept in " << tmp << "\n"
          << log_text.substr(0, 4000);
    }
    write_file(tmp + "/info", "kernel=" + kernel +
                                  "\nbytes=" + std::to_string(file_size(tmp + "/kernel.so")) +
                                  "\ncompile_ms=" + std::to_string(out.compile_ms) + "\n");
    ::unlink((tmp + "/compiler.log").c_str());
    make_dirs(cache_root() + "/" + out.key.substr(0, 2));
    if (::rename(tmp.c_str(), dir.c_str()) != 0)
      remove_tree(tmp);  // another process won: use its entry
    out.fn = try_load(dir, why);
    TS_CHECK(out.fn != nullptr, RuntimeError)
        << "cannot load the compiled kernel '" << kernel << "' from " << dir << ": " << why;
  }
  std::lock_guard<std::mutex> g(loaded_mutex());
  loaded().emplace(out.key, out.fn);
  return out;
}

std::vector<CacheEntry> cache_entries() {
  std::vector<CacheEntry> out;
  const std::string root = cache_root();
  DIR* d = ::opendir(root.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string shard = e->d_name;
    if (shard.size() != 2) continue;
    DIR* s = ::opendir((root + "/" + shard).c_str());
    if (!s) continue;
    while (dirent* k = ::readdir(s)) {
      const std::string key = k->d_name;
      if (key.size() != 64) continue;
      CacheEntry ce;
      ce.key = key;
      ce.dir = root + "/" + shard + "/" + key;
      const std::string info = read_file(ce.dir + "/info");
      const auto p = info.find("kernel=");
      if (p != std::string::npos) ce.kernel = info.substr(p + 7, info.find('\n', p) - p - 7);
      ce.bytes = file_size(ce.dir + "/kernel.so") + file_size(ce.dir + "/kernel.cpp");
      struct stat st;
      if (::stat((ce.dir + "/kernel.so").c_str(), &st) == 0) ce.mtime = st.st_mtime;
      out.push_back(ce);
    }
    ::closedir(s);
  }
  ::closedir(d);
  return out;
}

void forget_loaded() {
  std::lock_guard<std::mutex> g(loaded_mutex());
  loaded().clear();
}

size_t clear_cache() {
  const size_t n = cache_entries().size();
  remove_tree(cache_root());
  std::lock_guard<std::mutex> g(loaded_mutex());
  loaded().clear();
  return n;
}

}  // namespace tessera::runtime::cpu
