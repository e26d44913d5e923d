#include "tessera/error.h"

#include <cstring>
#include <ostream>

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

UserLocGuard::UserLocGuard(SourceLoc loc) noexcept : installed_(!t_user_loc.known()) {
  if (installed_) t_user_loc = loc;
}

UserLocGuard::~UserLocGuard() {
  if (installed_) t_user_loc = SourceLoc{};
}

SourceLoc UserLocGuard::current() noexcept { return t_user_loc; }

Error::Error(const std::string& msg, SourceLoc user_loc)
    : std::runtime_error(with_location(msg, user_loc)), message_(msg), user_loc_(user_loc) {}

}  // namespace tessera
