#include "backend/common/link_inputs.h"

#include <algorithm>

#include "runtime/disk_cache.h"
#include "tessera/error.h"

namespace tessera::backend {
namespace {
constexpr const char* kDirective = "// tessera-link: ";
constexpr size_t kDigestChars = 64;

// "<64 hex> <path>" -> the pair; false when the line is not one.
bool split_line(const std::string& line, LinkInput& out) {
  if (line.size() < kDigestChars + 2 || line[kDigestChars] != ' ') return false;
  out.digest = line.substr(0, kDigestChars);
  out.path = line.substr(kDigestChars + 1);
  return true;
}

void add_once(std::vector<LinkInput>& all, LinkInput in) {
  const bool seen = std::any_of(all.begin(), all.end(), [&](const LinkInput& x) {
    return x.path == in.path && x.digest == in.digest;
  });
  if (!seen) all.push_back(std::move(in));
}
}  // namespace

std::vector<LinkInput> parse_object_list(const std::string& list) {
  std::vector<LinkInput> out;
  for (size_t at = 0; at < list.size();) {
    const size_t end = std::min(list.find('\n', at), list.size());
    LinkInput in;
    TS_CHECK(split_line(list.substr(at, end - at), in), CompileError)
        << "a malformed object list in an extern op: '" << list.substr(at, end - at) << "'";
    add_once(out, std::move(in));
    at = end + 1;
  }
  return out;
}

std::string link_directive(const LinkInput& in) {
  return kDirective + in.digest + " " + in.path + "\n";
}

std::vector<LinkInput> link_inputs(const std::string& source) {
  std::vector<LinkInput> out;
  const std::string prefix = std::string("\n") + kDirective;
  for (size_t at = source.find(prefix); at != std::string::npos; at = source.find(prefix, at + 1)) {
    const size_t begin = at + prefix.size();
    const size_t end = std::min(source.find('\n', begin), source.size());
    LinkInput in;
    if (split_line(source.substr(begin, end - begin), in)) add_once(out, std::move(in));
  }
  return out;
}

void check_unchanged(const LinkInput& in, const std::string& kernel) {
  const std::string now = runtime::disk::file_digest(in.path);
  TS_CHECK(now == in.digest, CompileError)
      << "kernel '" << kernel << "' links '" << in.path << "', which "
      << (now.empty() ? "can no longer be read" : "changed after the kernel was traced")
      << "; trace the kernel again (a new process, or clear the in-memory caches)";
}

}  // namespace tessera::backend
