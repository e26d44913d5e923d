// The tuning database: one file per timing record, written atomically.
#include "tune/tune_db.h"

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

namespace tessera::tune {
namespace {

constexpr const char* kHeader =
    "# tessera tuning database v1: kernel\tconfig\tkey\ttarget\tcode\tms\tunix_time";

using files::make_dirs;
using files::read_file;
using files::remove_tree;

std::string path_of(const std::string& id) {
  return root() + "/" + id.substr(0, 2) + "/" + id;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string line_of(const Record& r) {
  std::ostringstream os;
  os.precision(9);
  os << r.kernel << '\t' << r.config << '\t' << r.key << '\t' << r.target << '\t' << r.code << '\t'
     << r.ms << '\t' << r.unix_time;
  return os.str();
}

// A record from one line; nullopt when malformed.
std::optional<Record> parse(const std::string& line) {
  const auto f = split(line, '\t');
  if (f.size() != 7) return std::nullopt;
  Record r{f[0], f[1], f[2], f[3], f[4]};
  char* end = nullptr;
  r.ms = std::strtod(f[5].c_str(), &end);
  if (end == f[5].c_str() || *end || !(r.ms >= 0)) return std::nullopt;
  r.unix_time = std::strtoll(f[6].c_str(), &end, 10);
  if (end == f[6].c_str() || *end) return std::nullopt;
  if (r.kernel.empty() || r.code.empty()) return std::nullopt;
  return r;
}

}  // namespace

std::string root() {
  return knobs().cache_dir + "/tune";
}

std::optional<Record> find(const Record& identity) {
  const std::string text = read_file(path_of(identity.id()));
  if (text.empty()) return std::nullopt;
  auto r = parse(text.substr(0, text.find('\n')));
  // A record must describe what it is named for (a damaged or foreign file is ignored).
  if (!r || r->code != identity.code || r->config != identity.config || r->key != identity.key ||
      r->target != identity.target)
    return std::nullopt;
  return r;
}

void put(const Record& r) {
  runtime::disk::write_atomic(path_of(r.id()), line_of(r) + "\n", "the tuning database");
}

std::vector<Record> all() {
  std::vector<Record> out;
  DIR* d = ::opendir(root().c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string shard = e->d_name;
    if (shard.size() != 2) continue;
    DIR* s = ::opendir((root() + "/" + shard).c_str());
    if (!s) continue;
    while (dirent* k = ::readdir(s)) {
      const std::string name = k->d_name;
      if (name.size() != 64) continue;
      const std::string text = read_file(root() + "/" + shard + "/" + name);
      auto r = parse(text.substr(0, text.find('\n')));
      if (r && r->id() == name) out.push_back(*r);
    }
    ::closedir(s);
  }
  ::closedir(d);
  return out;
}

size_t clear() {
  const size_t n = all().size();
  remove_tree(root());
  return n;
}

std::string to_text(const std::vector<Record>& records) {
  std::string out = std::string(kHeader) + "\n";
  for (const auto& r : records) out += line_of(r) + "\n";
  return out;
}

std::vector<Record> from_text(const std::string& text) {
  std::vector<Record> out;
  std::stringstream ss(text);
  std::string line;
  int n = 0;
  while (std::getline(ss, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    auto r = parse(line);
    TS_CHECK(r.has_value(), ValueError)
        << "tuning database import: line " << n
        << " is not a record (7 tab-separated fields: kernel, config, key, "
           "target, code, ms, unix_time)";
    out.push_back(*r);
  }
  return out;
}

}  // namespace tessera::tune

namespace tessera::tune_db {

std::string Record::id() const {
  Sha256 h;
  h.field("tessera-tune-v1").field(code).field(config).field(key).field(target);
  return h.hex();
}

std::string root() {
  return tune::root();
}
std::vector<Record> records() {
  return tune::all();
}
std::string export_text(const std::vector<Record>& records) {
  return tune::to_text(records);
}
std::string export_text() {
  return tune::to_text(tune::all());
}
std::vector<Record> parse_text(const std::string& text) {
  return tune::from_text(text);
}
size_t import_text(const std::string& text) {
  const std::vector<Record> records = tune::from_text(text);  // every line checked first
  for (const Record& r : records) tune::put(r);
  return records.size();
}
size_t clear() {
  return tune::clear();
}

}  // namespace tessera::tune_db
