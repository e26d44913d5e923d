/** \file
 * A progress line on stderr for long work (autotuning rounds, compile batches): TESSERA_PROGRESS
 * (env.h) decides whether it shows. `auto`: only on a terminal, only once the work has taken a
 * second, rewritten in place (`\r`) and ended by a newline; `always`: from the start, one line per
 * update, at most one per second apart from the last (logs, CI); `0`: never. Thread-safe.
 */
#pragma once

#include <chrono>
#include <mutex>
#include <string>

namespace tessera {

class ProgressLine {
 public:
  /** `what` starts each line: "[tessera] <what>: <text>". */
  explicit ProgressLine(std::string what);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  /** Whether updates can show at all (so callers can skip building their text). */
  bool enabled() const { return enabled_; }
  /** Shows `text` if the mode and time allow (`last`: the final state, always shown once any
   * earlier update was). */
  void update(const std::string& text, bool last = false);

 private:
  using Clock = std::chrono::steady_clock;
  std::string what_;
  bool enabled_ = false, tty_ = false, shown_ = false;
  Clock::time_point start_, last_print_;
  size_t width_ = 0;  ///< the longest line written in place, to blank its tail
  std::mutex mutex_;
};

}  // namespace tessera
