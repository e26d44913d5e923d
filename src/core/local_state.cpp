#include "tessera/detail/local_state.h"

namespace tessera::detail {

namespace {
// Read on every operator call and kernel launch: initial-exec TLS is one fs-relative access.
thread_local LocalState t_state __attribute__((tls_model("initial-exec")));
}  // namespace

LocalState& local_state() noexcept {
  return t_state;
}

LocalStateGuard::LocalStateGuard(const LocalState& s, SourceLoc user_loc)
    : saved_(local_state()), loc_(user_loc) {
  local_state() = s;
}

LocalStateGuard::~LocalStateGuard() {
  local_state() = std::move(saved_);
}

}  // namespace tessera::detail
