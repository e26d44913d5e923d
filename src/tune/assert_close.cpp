// testing::assert_close: torch.testing.assert_close's checks and message, on any device.
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "tessera/ops.h"
#include "tessera/tensor.h"
#include "tessera/testing.h"

namespace tessera::testing {
namespace {

struct Tolerance {
  double rtol, atol;
};

Tolerance default_tolerance(DType d) {
  switch (d) {
    case DType::Float16:
      return {1e-3, 1e-5};
    case DType::BFloat16:
      return {1.6e-2, 1e-5};
    case DType::Float32:
      return {1.3e-6, 1e-5};
    case DType::Float64:
      return {1e-7, 1e-7};
    case DType::Float8_e4m3fn:
      return {1.25e-1, 1e-5};
    case DType::Float8_e5m2:
      return {2.5e-1, 1e-5};
    default:
      return {0, 0};
  }
}

std::string index_of(int64_t flat, IntArrayRef sizes) {
  std::vector<int64_t> idx(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    idx[d] = flat % sizes[d];
    flat /= sizes[d];
  }
  std::ostringstream os;
  os << "(";
  for (size_t d = 0; d < idx.size(); ++d) os << (d ? ", " : "") << idx[d];
  os << (idx.size() == 1 ? ",)" : ")");
  return os.str();
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

}  // namespace

void assert_close(const Tensor& actual, const Tensor& expected, const CloseOptions& o,
                  SourceLoc loc) {
  UserLocGuard guard(loc);
  const std::string head = "[assert_close] " + (o.msg.empty() ? "" : o.msg + ": ");
  TS_CHECK(o.rtol.has_value() == o.atol.has_value(), ValueError)
      << head << "give both rtol and atol, or neither (" << (o.rtol ? "rtol" : "atol")
      << " alone was given)";
  TS_CHECK(actual.sizes().equals(expected.sizes()), AssertionError)
      << head << "the shapes do not match: " << actual.sizes() << " != " << expected.sizes();
  TS_CHECK(!o.check_device || actual.device() == expected.device(), AssertionError)
      << head << "the devices do not match: " << actual.device() << " != " << expected.device();
  TS_CHECK(!o.check_dtype || actual.dtype() == expected.dtype(), AssertionError)
      << head << "the dtypes do not match: " << dtype_name(actual.dtype())
      << " != " << dtype_name(expected.dtype());
  const Tolerance def = default_tolerance(actual.dtype());
  const double rtol = o.rtol.value_or(def.rtol), atol = o.atol.value_or(def.atol);
  // Both read back as float64 (exact for every dtype but 64-bit integers past 2^53).
  const Tensor a = actual.cpu().to(DType::Float64).contiguous();
  const Tensor e = expected.cpu().to(DType::Float64).contiguous();
  const auto* pa = static_cast<const double*>(a.impl()->data());
  const auto* pe = static_cast<const double*>(e.impl()->data());
  const int64_t n = a.impl()->int_numel();
  int64_t bad = 0, abs_at = -1, rel_at = -1;
  double max_abs = 0, max_rel = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = pa[i], y = pe[i];
    if (x == y || (o.equal_nan && std::isnan(x) && std::isnan(y))) continue;
    const double diff = std::fabs(x - y);
    const bool finite = std::isfinite(x) && std::isfinite(y);
    if (finite && diff <= atol + rtol * std::fabs(y)) continue;
    ++bad;
    const double abs_diff = std::isnan(diff) ? INFINITY : diff;
    const double rel_diff = y == 0 ? INFINITY : abs_diff / std::fabs(y);
    if (abs_at < 0 || abs_diff > max_abs) max_abs = abs_diff, abs_at = i;
    if (rel_at < 0 || rel_diff > max_rel) max_rel = rel_diff, rel_at = i;
  }
  if (bad == 0) return;
  const IntArrayRef sizes = a.impl()->int_sizes();
  TS_CHECK(false, AssertionError)
      << head << "tensor-likes are not close!\n\nMismatched elements: " << bad << " / " << n << " ("
      << number(100.0 * static_cast<double>(bad) / static_cast<double>(n)) << "%)\n"
      << "Greatest absolute difference: " << number(max_abs) << " at index "
      << index_of(abs_at, sizes) << " (up to " << number(atol) << " allowed)\n"
      << "Greatest relative difference: " << number(max_rel) << " at index "
      << index_of(rel_at, sizes) << " (up to " << number(rtol) << " allowed)";
}

}  // namespace tessera::testing
