// The checked mode's reports and summary, and the bounds of the arguments' views.
#include "backend/common/checks.h"

#include <cstdio>
#include <cstring>
#include <iostream>

#include "backend/backend.h"
#include "tessera/tensor.h"

namespace tessera::backend {
namespace {

constexpr int kMaxReports = 10;

// A location's file without its directories (as SourceLoc prints it).
const char* file_name(const SourceLoc& loc) {
  if (!loc.file) return "?";
  const char* base = std::strrchr(loc.file, '/');
  return base ? base + 1 : loc.file;
}

std::mutex& print_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

std::vector<PointerBounds> tensor_bounds(ArrayRef<Arg> args) {
  std::vector<PointerBounds> out(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const Tensor* t = args[i].tensor;
    if (!t || !t->has_data()) continue;
    const auto size = static_cast<int64_t>(itemsize(t->dtype()));
    int64_t lo = 0, hi = 0;
    bool empty = false;
    for (int64_t d = 0; d < t->dim(); ++d) {
      const int64_t n = t->size(d).expect_int(), st = t->stride(d).expect_int();
      if (n == 0) empty = true;
      if (n > 0) (st < 0 ? lo : hi) += (n - 1) * st;
    }
    auto& b = out[i];
    b.known = true;
    // The pointer the kernel receives: the tensor's data, or its copy's (the cross-check runs the
    // CUDA side on GPU mirrors of CPU tensors, whose views' shapes and strides are the same).
    b.base = reinterpret_cast<uintptr_t>(args[i].ptr ? args[i].ptr : t->impl()->data());
    b.elem_size = size;
    b.lo = b.base + static_cast<uintptr_t>(lo * size);
    b.hi = empty ? b.lo : b.base + static_cast<uintptr_t>((hi + 1) * size);
  }
  return out;
}

void report_out_of_bounds(const std::string& kernel, const char* what, SourceLoc loc,
                          const int32_t pid[3], int64_t lane, const std::string& param,
                          const PointerBounds& b, uintptr_t addr, CheckCounters& c) {
  if (c.violations.fetch_add(1) >= kMaxReports) return;
  const auto base = static_cast<int64_t>(b.base);
  const int64_t elem = (static_cast<int64_t>(addr) - base) / b.elem_size;
  const int64_t first = (static_cast<int64_t>(b.lo) - base) / b.elem_size;
  const int64_t last = (static_cast<int64_t>(b.hi) - base) / b.elem_size - 1;
  std::lock_guard<std::mutex> g(print_mutex());
  std::fprintf(stderr,
               "tessera: [kernel %s] out-of-bounds %s at %s:%d: program (%d, %d, %d), lane %lld: "
               "element %lld of '%s' (valid: %lld..%lld)\n",
               kernel.c_str(), what, file_name(loc), loc.line, pid[0], pid[1], pid[2],
               static_cast<long long>(lane), static_cast<long long>(elem), param.c_str(),
               static_cast<long long>(first), static_cast<long long>(last));
}

void report_int_overflow(const std::string& kernel, SourceLoc loc, const int32_t pid[3],
                         int64_t lane, int64_t exact, CheckCounters& c) {
  if (c.overflows.fetch_add(1) >= kMaxReports) return;
  const auto wrapped = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(exact)));
  std::lock_guard<std::mutex> g(print_mutex());
  std::fprintf(stderr,
               "tessera: [kernel %s] int32 overflow at %s:%d: program (%d, %d, %d), lane %lld: the "
               "result %lld wrapped to %d (offsets past 2^31 need int64, e.g. "
               "`tl::program_id(0).to(tl::int64) * BLOCK`)\n",
               kernel.c_str(), file_name(loc), loc.line, pid[0], pid[1], pid[2],
               static_cast<long long>(lane), static_cast<long long>(exact), wrapped);
}

void report_assert_failure(const std::string& kernel, SourceLoc loc, const std::string& message,
                           const int32_t pid[3], int64_t lane, CheckCounters& c) {
  if (c.assert_failures.fetch_add(1) >= kMaxReports) return;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "[kernel %s] device_assert failed at %s:%d: program (%d, %d, %d), lane %lld: %s",
                kernel.c_str(), file_name(loc), loc.line, pid[0], pid[1], pid[2],
                static_cast<long long>(lane), message.c_str());
  {
    std::lock_guard<std::mutex> g(print_mutex());
    std::fprintf(stderr, "tessera: %s\n", buf);
  }
  std::lock_guard<std::mutex> g(c.first_mutex);
  if (c.first_assert.empty()) c.first_assert = buf;
}

void report_false_hint(const std::string& kernel, SourceLoc loc, const std::string& message,
                       const int32_t pid[3], int64_t lane, CheckCounters& c) {
  if (c.false_hints.fetch_add(1) >= 1) return;
  std::lock_guard<std::mutex> g(print_mutex());
  std::fprintf(
      stderr,
      "tessera: warning: [kernel %s] %s at %s:%d: program (%d, %d, %d), lane %lld (tessera "
      "does not rely on hints yet, but Triton's compiler vectorizes by them: make it "
      "true or drop it)\n",
      kernel.c_str(), message.c_str(), file_name(loc), loc.line, pid[0], pid[1], pid[2],
      static_cast<long long>(lane));
}

void finish_checks(const std::string& kernel, CheckCounters& c) {
  const int64_t violations = c.violations.load(), overflows = c.overflows.load(),
                failures = c.assert_failures.load();
  if (violations > kMaxReports) {
    std::cerr << "tessera: [kernel " << kernel << "] " << violations
              << " out-of-bounds accesses in this launch (the first 10 shown)\n";
  }
  if (overflows > kMaxReports) {
    std::cerr << "tessera: [kernel " << kernel << "] " << overflows
              << " int32 results wrapped in this launch (the first 10 shown)\n";
  }
  if (failures) {
    throw RuntimeError(
        c.first_assert +
            (failures > 1 ? " (and " + std::to_string(failures - 1) + " more failing lanes)" : ""),
        UserLocGuard::current());
  }
}

}  // namespace tessera::backend
