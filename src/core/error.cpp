#include "tessera/error.h"

#include <cstring>
#include <ostream>
#include <string_view>

namespace tessera {
namespace {
thread_local SourceLoc t_user_loc;

std::string with_location(const std::string& msg, SourceLoc loc) {
  if (!loc.known()) return msg;
  std::ostringstream os;
  os << msg << " (at " << loc << ")";
  return os.str();
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const SourceLoc& loc) {
  if (!loc.known()) return os << "<unknown>";
  const char* base = std::strrchr(loc.file, '/');
  return os << (base ? base + 1 : loc.file) << ":" << loc.line;
}

namespace {
// Locations inside tessera's own sources are not the user's: internal calls pass through public
// functions with their defaulted location, which must not mask the user's.
bool is_library_file(const char* file) {
  static constexpr std::string_view kSrc = TESSERA_SOURCE_DIR "/src/";
  static constexpr std::string_view kInc = TESSERA_SOURCE_DIR "/include/tessera/";
  const std::string_view f(file);
  return f.substr(0, kSrc.size()) == kSrc || f.substr(0, kInc.size()) == kInc;
}
}  // namespace

UserLocGuard::UserLocGuard(SourceLoc loc) noexcept
    : installed_(!t_user_loc.known() && loc.known() && !is_library_file(loc.file)) {
  if (installed_) t_user_loc = loc;
}

UserLocGuard::~UserLocGuard() {
  if (installed_) t_user_loc = SourceLoc{};
}

SourceLoc UserLocGuard::current() noexcept {
  return t_user_loc;
}

Error::Error(const std::string& msg, SourceLoc user_loc)
    : std::runtime_error(with_location(msg, user_loc)), message_(msg), user_loc_(user_loc) {}

}  // namespace tessera
