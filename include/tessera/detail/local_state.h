/** \file
 * Thread-local state that must follow work into thread-pool tasks: grad mode, the two mode
 * stacks (owned by the dispatcher, opaque here) and the user's source location. The pool copies
 * the submitting thread's state into each task and restores the worker's own afterwards.
 */
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "tessera/error.h"

namespace tessera::detail {

struct LocalState {
  /** Whether autograd records operations (`NoGradGuard` clears it). */
  bool grad_enabled = true;
  /** Mode stacks, owned by the dispatcher (null when empty). */
  std::shared_ptr<const void> function_modes;
  std::shared_ptr<const void> dispatch_modes;
  /** Depths of the stacks visible to the current call (a mode's handler hides itself). */
  uint32_t function_depth = 0;
  uint32_t dispatch_depth = 0;
  /** Set while a dispatch mode's or wrapper's handler runs: calls start below autograd. */
  bool below_autograd = false;
  /** Where `OperatorHandle::redispatch` resumes (the dispatcher's level enum). */
  uint8_t resume_level = 0;
};

/** `TESSERA_LOGS=dispatch`: every operator call takes the dispatcher's logging path (set with the
 * knobs; read relaxed on the hot path). */
extern std::atomic<bool> g_log_dispatch;

/** This thread's state. */
LocalState& local_state() noexcept;

/** Installs `s` (and the user location) for the lifetime of the guard. */
class LocalStateGuard {
 public:
  LocalStateGuard(const LocalState& s, SourceLoc user_loc);
  ~LocalStateGuard();
  LocalStateGuard(const LocalStateGuard&) = delete;
  LocalStateGuard& operator=(const LocalStateGuard&) = delete;

 private:
  LocalState saved_;
  UserLocGuard loc_;
};

}  // namespace tessera::detail
