#include "testing.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

namespace tessera::testing {

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous:
      return "contiguous";
    case Layout::Transposed:
      return "transposed";
    case Layout::Strided:
      return "strided";
    case Layout::Offset:
      return "offset";
  }
  return "?";
}

uint64_t test_seed() {
  static const uint64_t seed = [] {
    if (const char* s = std::getenv("TESSERA_TEST_SEED"))
      return static_cast<uint64_t>(std::strtoull(s, nullptr, 10));
    return static_cast<uint64_t>(std::random_device{}()) << 32 | std::random_device{}();
  }();
  return seed;
}

std::mt19937_64& rng() {
  static std::mt19937_64 g(test_seed());
  return g;
}

namespace {

double draw(DType dtype, Domain domain) {
  auto& g = rng();
  if (dtype == DType::Bool) return std::uniform_int_distribution<int>(0, 1)(g);
  if (is_floating_point(dtype)) {
    double lo = -3, hi = 3;
    if (domain == Domain::Positive) lo = 0.1, hi = 4;
    if (domain == Domain::Unit) lo = -0.9, hi = 0.9;
    if (domain == Domain::Small) lo = 0, hi = 3;
    double v = std::uniform_real_distribution<double>(lo, hi)(g);
    if (domain == Domain::NonZero && std::fabs(v) < 0.25) v = v < 0 ? -0.5 : 0.5;
    return v;
  }
  int64_t lo = is_signed(dtype) ? -8 : 0, hi = is_signed(dtype) ? 8 : 16;
  if (domain == Domain::Positive) lo = 1, hi = 8;
  if (domain == Domain::Small) lo = 0, hi = 4;
  int64_t v = std::uniform_int_distribution<int64_t>(lo, hi)(g);
  if (domain == Domain::NonZero && v == 0) v = 1;
  return static_cast<double>(v);
}

}  // namespace

Tensor random_tensor(IntArrayRef shape, DType dtype, Domain domain, Layout layout) {
  std::vector<int64_t> sh(shape.begin(), shape.end());
  int64_t n = 1;
  for (auto s : sh) n *= s;
  std::vector<double> vals(static_cast<size_t>(n));
  for (auto& v : vals) v = draw(dtype, domain);
  const Tensor base = from_vector(vals, {n}, dtype).view(to_sym(shape));
  switch (layout) {
    case Layout::Contiguous:
      return base;
    case Layout::Transposed: {
      if (sh.size() < 2) return base;
      // Same values, reversed memory order: build the reversed-shape tensor, then permute back.
      std::vector<int64_t> perm(sh.size());
      for (size_t i = 0; i < sh.size(); ++i) perm[i] = static_cast<int64_t>(sh.size() - 1 - i);
      Tensor rev = base.permute(perm).contiguous();
      return rev.permute(perm);
    }
    case Layout::Strided: {
      if (sh.empty()) return base;
      std::vector<int64_t> big = sh;
      big.back() *= 2;
      Tensor wide = zeros(to_sym(big), dtype);
      Tensor view = wide.slice(-1, 0, std::nullopt, 2);
      view.copy_(base);
      return view;
    }
    case Layout::Offset: {
      Tensor buf = zeros({n + 7}, dtype);
      Tensor view = buf.narrow(0, 7, n).view(to_sym(shape));
      view.copy_(base);
      return view;
    }
  }
  return base;
}

double Ref::at(const std::vector<int64_t>& idx) const {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + idx[d];
  return data[static_cast<size_t>(off)];
}

Ref to_ref(const Tensor& t) {
  Ref r;
  for (const auto& s : t.sizes()) r.shape.push_back(s.expect_int());
  const int64_t n = t.numel().expect_int();
  r.data.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r.data[static_cast<size_t>(i)] = detail::read_double(t, i);
  return r;
}

Ref pointwise_ref(const std::vector<Ref>& in,
                  const std::function<double(const std::vector<double>&)>& f) {
  size_t nd = 0;
  for (const auto& r : in) nd = std::max(nd, r.shape.size());
  std::vector<int64_t> shape(nd, 1);
  for (const auto& r : in) {
    for (size_t i = 0; i < r.shape.size(); ++i) {
      int64_t& s = shape[nd - r.shape.size() + i];
      if (s == 1) s = r.shape[i];
    }
  }
  Ref out;
  out.shape = shape;
  int64_t n = 1;
  for (auto s : shape) n *= s;
  out.data.resize(static_cast<size_t>(n));
  std::vector<int64_t> idx(nd, 0);
  std::vector<double> args(in.size());
  for (int64_t k = 0; k < n; ++k) {
    int64_t rem = k;
    for (int64_t d = static_cast<int64_t>(nd) - 1; d >= 0; --d) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    for (size_t a = 0; a < in.size(); ++a) {
      const Ref& r = in[a];
      std::vector<int64_t> sub(r.shape.size());
      for (size_t i = 0; i < r.shape.size(); ++i) {
        sub[i] = r.shape[i] == 1 ? 0 : idx[nd - r.shape.size() + i];
      }
      args[a] = r.shape.empty() ? r.data[0] : r.at(sub);
    }
    out.data[static_cast<size_t>(k)] = f(args);
  }
  return out;
}

Tol default_tol(DType t) {
  switch (t) {
    case DType::Float64:
      return {1e-10, 1e-10};
    case DType::Float32:
      return {1e-5, 1e-5};
    case DType::Float16:
      return {2e-3, 2e-3};
    case DType::BFloat16:
      return {1.6e-2, 1.6e-2};
    case DType::Float8_e4m3fn:
      return {0.125, 0.125};
    case DType::Float8_e5m2:
      return {0.25, 0.25};
    default:
      return {0, 0};
  }
}

::testing::AssertionResult close_to(const Tensor& got, const Ref& want, Tol tol) {
  std::vector<int64_t> shape;
  for (const auto& s : got.sizes()) shape.push_back(s.expect_int());
  if (shape != want.shape) {
    std::ostringstream os;
    os << "shape " << got.sizes() << " != expected [";
    for (size_t i = 0; i < want.shape.size(); ++i) os << (i ? ", " : "") << want.shape[i];
    return ::testing::AssertionFailure() << os.str() << "] (seed " << test_seed() << ")";
  }
  const Ref g = to_ref(got);
  for (size_t i = 0; i < g.data.size(); ++i) {
    const double a = g.data[i], b = want.data[i];
    bool ok;
    if (std::isnan(b))
      ok = std::isnan(a);
    else if (std::isinf(b))
      ok = a == b;
    else
      ok = std::fabs(a - b) <= tol.atol + tol.rtol * std::fabs(b);
    if (!ok) {
      return ::testing::AssertionFailure()
             << "element " << i << " of " << g.data.size() << ": got " << a << ", expected " << b
             << " (atol " << tol.atol << ", rtol " << tol.rtol << ", dtype "
             << dtype_name(got.dtype()) << ", seed " << test_seed() << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

namespace {
std::vector<int64_t> int_shape(const Tensor& t) {
  std::vector<int64_t> shape;
  for (const auto& s : t.sizes()) shape.push_back(s.expect_int());
  return shape;
}
}  // namespace

::testing::AssertionResult all_close(const Tensor& got, const Tensor& want, double rtol,
                                     double atol, bool equal_nan) {
  if (int_shape(got) != int_shape(want)) {
    return ::testing::AssertionFailure()
           << "shape " << got.sizes() << " != expected " << want.sizes();
  }
  if (allclose(got, want, rtol, atol, equal_nan)) return ::testing::AssertionSuccess();
  const Ref g = to_ref(got), w = to_ref(want);
  for (size_t i = 0; i < g.data.size(); ++i) {
    const double a = g.data[i], b = w.data[i];
    const bool nan_ok = equal_nan && std::isnan(a) && std::isnan(b);
    if (!nan_ok && a != b && !(std::fabs(a - b) <= atol + rtol * std::fabs(b))) {
      return ::testing::AssertionFailure()
             << "element " << i << " of " << g.data.size() << ": got " << a << ", expected " << b
             << " (atol " << atol << ", rtol " << rtol << ", seed " << test_seed() << ")";
    }
  }
  return ::testing::AssertionFailure() << "not allclose (seed " << test_seed() << ")";
}

::testing::AssertionResult bitwise_equal(const Tensor& got, const Tensor& want) {
  if (int_shape(got) != int_shape(want) || got.dtype() != want.dtype()) {
    return ::testing::AssertionFailure()
           << "got " << dtype_name(got.dtype()) << got.sizes() << ", expected "
           << dtype_name(want.dtype()) << want.sizes();
  }
  const Tensor a = got.contiguous(), b = want.contiguous();
  const size_t size = itemsize(got.dtype());
  const auto* pa = static_cast<const unsigned char*>(a.impl()->data());
  const auto* pb = static_cast<const unsigned char*>(b.impl()->data());
  const Ref ra = to_ref(a), rb = to_ref(b);
  for (int64_t i = 0; i < a.numel().expect_int(); ++i) {
    if (std::memcmp(pa + i * size, pb + i * size, size) != 0) {
      return ::testing::AssertionFailure()
             << "element " << i << " of " << a.numel() << ": got "
             << ra.data[static_cast<size_t>(i)] << ", expected " << rb.data[static_cast<size_t>(i)]
             << " (bits differ; " << dtype_name(got.dtype()) << ", seed " << test_seed() << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

double ulp_error(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e9;
  if (std::isinf(want)) return got == static_cast<float>(want) ? 0 : 1e9;
  const float w = static_cast<float>(want);
  if (w == 0.0f)
    return std::fabs(static_cast<double>(got)) / std::numeric_limits<float>::denorm_min();
  const double ulp = std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

Device test_device() {
  const char* d = std::getenv("TESSERA_TEST_DEVICE");
  return d && *d ? Device(d) : kCPU;
}

Tensor same_layout_on(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  // The smallest storage span the view reaches, from element 0 of its storage.
  int64_t span = t.storage_offset().expect_int() + 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t n = t.size(d).expect_int();
    if (n == 0) {
      return empty_strided(t.sizes(), t.strides(), TensorOptions().dtype(t.dtype()).device(device));
    }
    span += (n - 1) * t.stride(d).expect_int();
  }
  const Tensor flat = t.as_strided({span}, {1}, 0);
  const Tensor moved = flat.to(device);
  return moved.as_strided(t.sizes(), t.strides(), t.storage_offset());
}

ScopedEnv::ScopedEnv(const char* name, const char* value) : name_(name) {
  if (const char* old = std::getenv(name)) saved_ = old;
  if (value) {
    ::setenv(name, value, 1);
  } else {
    ::unsetenv(name);
  }
  reload_knobs();
}

ScopedEnv::~ScopedEnv() {
  if (saved_) {
    ::setenv(name_.c_str(), saved_->c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
  reload_knobs();
}

}  // namespace tessera::testing
