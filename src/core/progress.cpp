// The progress line of long autotuning rounds and compile batches (progress.h).
#include "core/progress.h"

#include <unistd.h>

#include <cstdio>

#include "tessera/env.h"

namespace tessera {

ProgressLine::ProgressLine(std::string what) : what_(std::move(what)), start_(Clock::now()) {
  const auto mode = knobs().progress;
  tty_ = ::isatty(2) == 1;
  enabled_ = mode == Knobs::Progress::Always || (mode == Knobs::Progress::Auto && tty_);
  if (mode == Knobs::Progress::Always) tty_ = false;  // a line per update: logs read it whole
}

ProgressLine::~ProgressLine() {
  if (shown_ && tty_) std::fputc('\n', stderr);
}

void ProgressLine::update(const std::string& text, bool last) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> g(mutex_);
  const auto now = Clock::now();
  const auto since = [&](Clock::time_point t) {
    return std::chrono::duration<double>(now - t).count();
  };
  if (tty_) {
    if (!shown_ && (since(start_) < 1.0 || last)) return;  // quick work shows nothing
    if (shown_ && !last && since(last_print_) < 0.1) return;
    std::string line = "[tessera] " + what_ + ": " + text;
    const size_t n = line.size();
    if (n < width_) line.append(width_ - n, ' ');
    width_ = std::max(width_, n);
    std::fprintf(stderr, "\r%s", line.c_str());
  } else {
    if (shown_ && !last && since(last_print_) < 1.0) return;
    std::fprintf(stderr, "[tessera] %s: %s\n", what_.c_str(), text.c_str());
  }
  std::fflush(stderr);
  shown_ = true;
  last_print_ = now;
}

}  // namespace tessera
