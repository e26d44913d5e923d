/** \file
 * The checked mode's pieces every backend shares (`TESSERA_DEBUG=1`): the memory each pointer
 * argument's view may touch, the sites a checked kernel reports by number, the report formats
 * (the first 10 of each kind per launch, then a count) and the end-of-launch summary.
 */
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "tessera/error.h"

namespace tessera::backend {

/** The memory a pointer parameter may touch (byte addresses, [lo, hi)). */
struct PointerBounds {
  bool known = false;
  uintptr_t base = 0;  ///< the tensor's first element (element indices are reported from it)
  uintptr_t lo = 0, hi = 0;
  int64_t elem_size = 1;
};

/** A checked operation of a kernel: what it is ("load", "store", "atomic", "assert",
 * "overflow"), where, and an assertion's message. */
struct CheckSite {
  std::string what;
  SourceLoc loc;
  std::string text;
  bool hint = false;  ///< a tl::multiple_of / max_contiguous check: a warning, not a failure
};

/** The counts of one checked launch (all threads). */
struct CheckCounters {
  std::atomic<int64_t> violations{0}, overflows{0}, assert_failures{0}, false_hints{0};
  std::mutex first_mutex;
  std::string first_assert;  ///< the first failed device_assert's report
};

/** Reports an out-of-bounds lane: `[kernel k] out-of-bounds load at f.cpp:12: program (2, 0, 0),
 * lane 8: element 40 of 'x' (valid: 0..39)`. */
void report_out_of_bounds(const std::string& kernel, const char* what, SourceLoc loc,
                          const int32_t pid[3], int64_t lane, const std::string& param,
                          const PointerBounds& b, uintptr_t addr, CheckCounters& c);
/** Reports an int32 result that wrapped (it still wraps, as on a GPU). */
void report_int_overflow(const std::string& kernel, SourceLoc loc, const int32_t pid[3],
                         int64_t lane, int64_t exact, CheckCounters& c);
/** Reports a failing device_assert lane, keeping the first report. */
void report_assert_failure(const std::string& kernel, SourceLoc loc, const std::string& message,
                           const int32_t pid[3], int64_t lane, CheckCounters& c);
/** Reports a false tl::multiple_of / max_contiguous hint as a warning (the first per launch):
 * Triton's own tutorials promise contiguity that wraps at the matrix edge, and nothing in
 * tessera relies on a hint yet, so it is not a failure. */
void report_false_hint(const std::string& kernel, SourceLoc loc, const std::string& message,
                       const int32_t pid[3], int64_t lane, CheckCounters& c);
/** After a checked launch: the summaries past the first 10, and a failed device_assert as a
 * RuntimeError at the user's line. */
void finish_checks(const std::string& kernel, CheckCounters& c);

}  // namespace tessera::backend
