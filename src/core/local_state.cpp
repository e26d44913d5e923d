#include "tessera/detail/local_state.h"

namespace tessera::detail {

LocalState& local_state() noexcept {
  thread_local LocalState state;
  return state;
}

LocalStateGuard::LocalStateGuard(const LocalState& s, SourceLoc user_loc)
    : saved_(local_state()), loc_(user_loc) {
  local_state() = s;
}

LocalStateGuard::~LocalStateGuard() {
  local_state() = std::move(saved_);
}

}  // namespace tessera::detail
