// tessera::testing::make_tensor and poison (tessera/testing.h): test inputs and outputs.
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <random>
#include <vector>

#include "tessera/ops.h"
#include "tessera/tensor.h"
#include "tessera/testing.h"

namespace tessera::testing {
namespace {

// The process-wide generator: TESSERA_TEST_SEED when set, else a fixed seed.
std::mt19937_64& shared_generator(std::unique_lock<std::mutex>& lock) {
  static std::mutex m;
  static std::mt19937_64 g([] {
    const char* s = std::getenv("TESSERA_TEST_SEED");
    return s ? std::strtoull(s, nullptr, 10) : 20261203ull;
  }());
  lock = std::unique_lock<std::mutex>(m);
  return g;
}

}  // namespace

Tensor make_tensor(const std::vector<int64_t>& shape, DType dtype,
                   const MakeTensorOptions& options) {
  int64_t n = 1;
  for (int64_t s : shape) {
    TS_CHECK(s >= 0, ValueError) << "[make_tensor] negative dimension " << s;
    n *= s;
  }
  const bool floating = is_floating_point(dtype);
  const bool unsigned_int = !floating && dtype != DType::Bool && !is_signed(dtype);
  const double low = options.low.value_or(unsigned_int ? 0.0 : -9.0);
  const double high = options.high.value_or(unsigned_int ? 10.0 : 9.0);
  TS_CHECK(low < high, ValueError) << "[make_tensor] low " << low << " must be below high " << high;
  std::vector<double> values(static_cast<size_t>(n));
  auto draw = [&](std::mt19937_64& g) {
    for (double& v : values) {
      if (dtype == DType::Bool) {
        v = static_cast<double>(g() & 1);
      } else if (floating) {
        v = std::uniform_real_distribution<double>(low, high)(g);
      } else {
        const auto lo = static_cast<int64_t>(std::ceil(low));
        const auto hi = static_cast<int64_t>(std::ceil(high)) - 1;
        TS_CHECK(lo <= hi, ValueError)
            << "[make_tensor] no integer in [" << low << ", " << high << ")";
        v = static_cast<double>(std::uniform_int_distribution<int64_t>(lo, hi)(g));
      }
    }
  };
  if (options.seed) {
    std::mt19937_64 g(*options.seed);
    draw(g);
  } else {
    std::unique_lock<std::mutex> lock;
    draw(shared_generator(lock));
  }
  std::vector<SymInt> sizes(shape.begin(), shape.end());
  Tensor t = from_vector(values, {n}, dtype).view(sizes);
  if (options.noncontiguous && !shape.empty()) {
    std::vector<SymInt> wide = sizes;
    wide.back() = wide.back() * 2;
    Tensor buffer = zeros(wide, TensorOptions().dtype(dtype));
    Tensor view = buffer.slice(-1, 0, std::nullopt, 2);
    view.copy_(t);
    t = view;
  }
  return options.device == "cpu" ? t : t.to(Device(options.device));
}

void poison(Tensor& t) {
  if (t.numel() == 0) return;
  if (is_floating_point(t.dtype())) {
    t.fill_(std::nan(""));
  } else if (t.dtype() == DType::Bool) {
    t.fill_(true);
  } else {
    t.fill_(is_signed(t.dtype()) ? -77 : 77);
  }
}

}  // namespace tessera::testing
