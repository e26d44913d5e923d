// The on-disk caches' writer and checker: staging, atomic publish, digests, damaged entries.
#include "runtime/disk_cache.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "core/files.h"
#include "tessera/detail/hash.h"
#include "tessera/env.h"
#include "tessera/error.h"

namespace tessera::runtime::disk {
namespace {

uint64_t file_size(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

void make_dirs_or_throw(const std::string& path) {
  TS_CHECK(files::make_dirs(path), RuntimeError)
      << "cannot create the cache directory " << path << ": " << std::strerror(errno)
      << " (set TESSERA_CACHE_DIR to a writable directory)";
}

void write_or_throw(const std::string& path, std::string_view text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  f.close();
  TS_CHECK(f.good(), RuntimeError) << "cannot write " << path;
}

}  // namespace

std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  return std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + std::to_string(rd());
}

bool write_atomic(const std::string& path, std::string_view bytes, const char* what) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  if (!files::make_dirs(dir)) {
    warn_once(std::string("cannot write ") + what + " under " + dir + ": " + std::strerror(errno));
    return false;
  }
  const std::string tmp = dir + "/.tmp-" + unique_suffix();
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f.good()) {
      ::unlink(tmp.c_str());
      warn_once(std::string("cannot write ") + what + " under " + dir);
      return false;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

std::string file_digest(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  Sha256 h;
  char buf[1 << 16];
  while (f) {
    f.read(buf, sizeof buf);
    h.update(buf, static_cast<size_t>(f.gcount()));
  }
  return h.hex();
}

std::string Info::get(const std::string& k, const std::string& fallback) const {
  auto it = values.find(k);
  return it == values.end() ? fallback : it->second;
}

std::string Info::text() const {
  std::ostringstream os;
  for (const auto& [k, v] : values) os << k << "=" << v << "\n";
  for (const auto& f : files) os << "file=" << f.name << " " << f.bytes << " " << f.sha256 << "\n";
  return os.str();
}

std::optional<Info> Info::parse(const std::string& text) {
  Info info;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos || eq == 0) return std::nullopt;
    const std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    if (k == "file") {
      std::istringstream fs(v);
      File f;
      if (!(fs >> f.name >> f.bytes >> f.sha256) || f.sha256.size() != 64) return std::nullopt;
      info.files.push_back(f);
    } else {
      info.values[k] = v;
    }
  }
  return info;
}

std::string Store::root() const {
  return knobs().cache_dir + "/" + area_;
}

std::string Store::dir_of(const std::string& key) const {
  return root() + "/" + key.substr(0, 2) + "/" + key;
}

std::string Store::stage() const {
  const std::string dir = root() + "/tmp/stage-" + unique_suffix();
  make_dirs_or_throw(dir);
  return dir;
}

void Store::record_file(Info& info, const std::string& staged, const std::string& name) {
  const std::string path = staged + "/" + name;
  info.files.push_back({name, file_size(path), file_digest(path)});
}

bool Store::publish(const std::string& staged, const std::string& key, const Info& info) const {
  write_or_throw(staged + "/info", info.text());
  make_dirs_or_throw(root() + "/" + key.substr(0, 2));
  if (::rename(staged.c_str(), dir_of(key).c_str()) != 0) {
    files::remove_tree(staged);  // another process won: its entry stands
    return false;
  }
  return true;
}

std::optional<Info> Store::open(const std::string& key, std::string* why) const {
  const std::string dir = dir_of(key);
  if (!exists(dir)) return std::nullopt;
  std::string problem;
  const auto info = Info::parse(files::read_file(dir + "/info"));
  if (!info || info->files.empty()) {
    problem = "a missing or garbled info record";
  } else {
    for (const auto& f : info->files) {
      const std::string path = dir + "/" + f.name;
      if (file_size(path) != f.bytes) {
        problem = f.name + " has " + std::to_string(file_size(path)) + " bytes, the record says " +
                  std::to_string(f.bytes);
        break;
      }
      if (file_digest(path) != f.sha256) {
        problem = f.name + "'s SHA-256 differs from the record (the file was changed)";
        break;
      }
    }
  }
  if (problem.empty()) return info;
  if (why) *why = problem;
  discard(key, problem);
  return std::nullopt;
}

void Store::discard(const std::string& key, const std::string& why) const {
  const std::string dir = dir_of(key);
  log("cache", "rebuilding damaged cache entry " + dir + " (" + why + ")");
  const std::string trash = root() + "/tmp/damaged-" + unique_suffix();
  files::make_dirs(root() + "/tmp");
  if (::rename(dir.c_str(), trash.c_str()) == 0) files::remove_tree(trash);
}

std::vector<std::string> Store::keys() const {
  std::vector<std::string> out;
  const std::string r = root();
  DIR* d = ::opendir(r.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string shard = e->d_name;
    if (shard.size() != 2) continue;
    DIR* s = ::opendir((r + "/" + shard).c_str());
    if (!s) continue;
    while (dirent* k = ::readdir(s)) {
      const std::string key = k->d_name;
      if (key.size() == 64 && key.compare(0, 2, shard) == 0) out.push_back(key);
    }
    ::closedir(s);
  }
  ::closedir(d);
  return out;
}

size_t Store::clear() const {
  const size_t n = keys().size();
  files::remove_tree(root());
  return n;
}

}  // namespace tessera::runtime::disk
