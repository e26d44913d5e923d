// Factories: empty, full (zeros, ones), arange, *_like, and random tensors from the global
// Philox generator (detail/philox.h describes the streams).
#include <atomic>
#include <cmath>

#include "ops/cpu_loops.h"
#include "ops/device_copy.h"
#include "ops/register.h"
#include "tessera/detail/philox.h"

namespace tessera {
namespace {

using namespace ops_detail;

constexpr uint64_t kDefaultSeed = 67280421310721ull;
std::atomic<uint64_t> g_seed{kDefaultSeed};
std::atomic<uint64_t> g_offset{0};

Tensor make_factory(SymIntArrayRef size, DType dtype, Device device, const char* op) {
  for (const auto& s : size) {
    TS_CHECK(s >= 0, ShapeError) << "[" << op << "] negative dimension " << s << " in size "
                                 << size;
  }
  return detail::make_empty(size, dtype, device);
}

Tensor empty_impl(SymIntArrayRef size, std::optional<DType> dtype, std::optional<Device> device) {
  return make_factory(size, dtype.value_or(default_float_dtype()), device.value_or(kCPU), "empty");
}

Tensor empty_strided_impl(SymIntArrayRef size, SymIntArrayRef stride, std::optional<DType> dtype,
                          std::optional<Device> device) {
  TS_CHECK(size.size() == stride.size(), ShapeError)
      << "[empty_strided] " << size.size() << " sizes but " << stride.size() << " strides";
  for (const auto& s : size) {
    TS_CHECK(s >= 0, ShapeError) << "[empty_strided] negative dimension " << s;
  }
  return detail::make_empty(size, dtype.value_or(default_float_dtype()), device.value_or(kCPU),
                            stride);
}

DType full_dtype(const Scalar& v, std::optional<DType> dtype) {
  if (dtype) return *dtype;
  if (v.is_bool()) return DType::Bool;
  if (v.is_integral()) return DType::Int64;
  return default_float_dtype();
}

Tensor full_cpu(SymIntArrayRef size, const Scalar& v, std::optional<DType> dtype,
                std::optional<Device> device) {
  Tensor t = make_factory(size, full_dtype(v, dtype), device.value_or(kCPU), "full");
  if (t.has_data()) cpu_fill(t, v);  // else symbolic sizes, traced: the shape only
  return t;
}

Tensor full_cuda(SymIntArrayRef size, const Scalar& v, std::optional<DType> dtype,
                 std::optional<Device> device) {
  Tensor t = make_factory(size, full_dtype(v, dtype), device.value_or(Device("cuda")), "full");
  if (t.has_data()) cuda_fill(t, v);
  return t;
}

Tensor full_meta(SymIntArrayRef size, const Scalar& v, std::optional<DType> dtype,
                 std::optional<Device> device) {
  return make_factory(size, full_dtype(v, dtype), device.value_or(kMeta), "full");
}

Tensor size_tensor_cpu(SymInt size, std::optional<DType> dtype, std::optional<Device> device) {
  Tensor t = make_factory({}, dtype.value_or(DType::Int64), device.value_or(kCPU), "size_tensor");
  if (!size.is_symbolic()) cpu_fill(t, Scalar(size.expect_int()));  // else traced: shape only
  return t;
}

Tensor size_tensor_cuda(SymInt size, std::optional<DType> dtype, std::optional<Device> device) {
  Tensor t = make_factory({}, dtype.value_or(DType::Int64), device.value_or(Device("cuda")),
                          "size_tensor");
  if (!size.is_symbolic()) cuda_fill(t, Scalar(size.expect_int()));
  return t;
}

Tensor size_tensor_meta(SymInt, std::optional<DType> dtype, std::optional<Device> device) {
  return make_factory({}, dtype.value_or(DType::Int64), device.value_or(kMeta), "size_tensor");
}

Tensor zeros_composite(SymIntArrayRef size, std::optional<DType> dtype,
                       std::optional<Device> device) {
  return full(
      size, 0,
      TensorOptions().dtype(dtype.value_or(default_float_dtype())).device(device.value_or(kCPU)));
}

Tensor ones_composite(SymIntArrayRef size, std::optional<DType> dtype,
                      std::optional<Device> device) {
  return full(
      size, 1,
      TensorOptions().dtype(dtype.value_or(default_float_dtype())).device(device.value_or(kCPU)));
}

Tensor like_output(const Tensor& self, std::optional<DType> dtype, std::optional<Device> device) {
  const DType dt = dtype.value_or(self.dtype());
  if (device && *device != self.device()) return detail::make_empty(self.sizes(), dt, *device);
  return detail::make_empty_like(self, self.sizes(), dt);
}

Tensor empty_like_impl(const Tensor& self, std::optional<DType> dtype,
                       std::optional<Device> device) {
  return like_output(self, dtype, device);
}

Tensor full_like_impl(const Tensor& self, const Scalar& v, std::optional<DType> dtype,
                      std::optional<Device> device) {
  Tensor t = like_output(self, dtype, device);
  if (t.has_data()) {
    if (t.device().is_cuda()) {
      cuda_fill(t, v);
    } else {
      cpu_fill(t, v);
    }
  }
  return t;
}

Tensor zeros_like_composite(const Tensor& self, std::optional<DType> dtype,
                            std::optional<Device> device) {
  return full_like(
      self, 0,
      TensorOptions().dtype(dtype.value_or(self.dtype())).device(device.value_or(self.device())));
}
Tensor ones_like_composite(const Tensor& self, std::optional<DType> dtype,
                           std::optional<Device> device) {
  return full_like(
      self, 1,
      TensorOptions().dtype(dtype.value_or(self.dtype())).device(device.value_or(self.device())));
}

// ---- arange ---------------------------------------------------------------------------------

DType arange_dtype(const Scalar& a, const Scalar& b, const Scalar& c, std::optional<DType> dtype) {
  if (dtype) return *dtype;
  const bool ints = !a.is_floating_point() && !b.is_floating_point() && !c.is_floating_point();
  return ints ? DType::Int64 : default_float_dtype();
}

int64_t arange_length(const Scalar& start, const Scalar& end, const Scalar& step) {
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  TS_CHECK(st != 0, ValueError) << "[arange] step must be nonzero";
  TS_CHECK(std::isfinite(s) && std::isfinite(e), ValueError)
      << "[arange] unsupported range: " << start << " -> " << end;
  TS_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), ValueError)
      << "[arange] upper bound and lower bound inconsistent with step sign";
  if (start.is_integral() && end.is_integral() && step.is_integral()) {
    const int64_t a = start.to_int(), b = end.to_int(), c = step.to_int();
    return c > 0 ? (b - a + c - 1) / c : (a - b - c - 1) / (-c);
  }
  return static_cast<int64_t>(std::ceil((e - s) / st));
}

Tensor arange_cpu(const Scalar& start, const Scalar& end, const Scalar& step,
                  std::optional<DType> dtype, std::optional<Device> device) {
  const int64_t n = arange_length(start, end, step);
  Tensor t =
      make_factory({n}, arange_dtype(start, end, step, dtype), device.value_or(kCPU), "arange");
  visit_dtype<kNumeric>(t.dtype(), "arange", [&]<class T>() {
    T* out = static_cast<T*>(t.impl()->data());
    if (start.is_floating_point() || step.is_floating_point()) {
      const double s = start.to_double(), st = step.to_double();
      for (int64_t i = 0; i < n; ++i) out[i] = convert<T>(s + st * static_cast<double>(i));
    } else {
      const int64_t s = start.to_int(), st = step.to_int();
      for (int64_t i = 0; i < n; ++i) out[i] = convert<T>(s + st * i);
    }
  });
  return t;
}

Tensor arange_meta(const Scalar& start, const Scalar& end, const Scalar& step,
                   std::optional<DType> dtype, std::optional<Device> device) {
  return make_factory({arange_length(start, end, step)}, arange_dtype(start, end, step, dtype),
                      device.value_or(kMeta), "arange");
}

// ---- random ---------------------------------------------------------------------------------

template <class Fill>
void fill_random(const Tensor& t, Fill fill) {
  const int64_t n = t.impl()->int_numel();
  const uint64_t seed = g_seed.load();
  const uint64_t base = reserve_random_offset(static_cast<uint64_t>(n));
  runtime::parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fill(i, philox::random4(seed, base + static_cast<uint64_t>(i)));
  });
}

int mantissa_bits(DType t) {
  switch (t) {
    case DType::Float16:
      return 11;
    case DType::BFloat16:
      return 8;
    case DType::Float8_e4m3fn:
      return 4;
    case DType::Float8_e5m2:
      return 3;
    default:
      return 24;
  }
}

Tensor rand_cpu(SymIntArrayRef size, std::optional<DType> dtype, std::optional<Device> device) {
  const DType dt = dtype.value_or(default_float_dtype());
  TS_CHECK(is_floating_point(dt), DTypeError)
      << "[rand] expected a floating point dtype, got " << dtype_name(dt);
  Tensor t = make_factory(size, dt, device.value_or(kCPU), "rand");
  if (!t.has_data()) return t;  // symbolic sizes, traced: the shape only (the replay draws)
  const int bits = mantissa_bits(dt);
  visit_dtype<kFloats | kFloat8>(dt, "rand", [&]<class T>() {
    T* out = static_cast<T*>(t.impl()->data());
    fill_random(t, [&](int64_t i, const philox::U32x4& r) {
      if constexpr (std::is_same_v<T, double>)
        out[i] = philox::uniform_double(r.v[0], r.v[1]);
      else
        out[i] = convert<T>(philox::uniform_float(r.v[0], bits));
    });
  });
  return t;
}

Tensor randn_cpu(SymIntArrayRef size, std::optional<DType> dtype, std::optional<Device> device) {
  const DType dt = dtype.value_or(default_float_dtype());
  TS_CHECK(is_floating_point(dt), DTypeError)
      << "[randn] expected a floating point dtype, got " << dtype_name(dt);
  Tensor t = make_factory(size, dt, device.value_or(kCPU), "randn");
  if (!t.has_data()) return t;  // symbolic sizes, traced: the shape only (the replay draws)
  visit_dtype<kFloats | kFloat8>(dt, "randn", [&]<class T>() {
    T* out = static_cast<T*>(t.impl()->data());
    fill_random(t, [&](int64_t i, const philox::U32x4& r) {
      double u1, u2;
      if constexpr (std::is_same_v<T, double>) {
        u1 = 1.0 - philox::uniform_double(r.v[0], r.v[1]);  // (0, 1]
        u2 = philox::uniform_double(r.v[2], r.v[3]);
      } else {
        u1 = static_cast<double>((r.v[0] >> 8) + 1) * (1.0 / 16777216.0);
        u2 = static_cast<double>(r.v[1] >> 8) * (1.0 / 16777216.0);
      }
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      out[i] = convert<T>(z);
    });
  });
  return t;
}

Tensor randint_cpu(int64_t low, int64_t high, SymIntArrayRef size, std::optional<DType> dtype,
                   std::optional<Device> device) {
  TS_CHECK(low < high, ValueError)
      << "[randint] expects 'low' < 'high', got low=" << low << " high=" << high;
  const DType dt = dtype.value_or(DType::Int64);
  Tensor t = make_factory(size, dt, device.value_or(kCPU), "randint");
  if (!t.has_data()) return t;  // symbolic sizes, traced: the shape only (the replay draws)
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  visit_dtype<kNumeric>(dt, "randint", [&]<class T>() {
    T* out = static_cast<T*>(t.impl()->data());
    fill_random(t, [&](int64_t i, const philox::U32x4& r) {
      const uint64_t x = (static_cast<uint64_t>(r.v[1]) << 32) | r.v[0];
      out[i] = convert<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + x % range));
    });
  });
  return t;
}

Tensor rand_meta(SymIntArrayRef size, std::optional<DType> dtype, std::optional<Device> device) {
  return make_factory(size, dtype.value_or(default_float_dtype()), device.value_or(kMeta), "rand");
}
Tensor randint_meta(int64_t low, int64_t high, SymIntArrayRef size, std::optional<DType> dtype,
                    std::optional<Device> device) {
  TS_CHECK(low < high, ValueError)
      << "[randint] expects 'low' < 'high', got low=" << low << " high=" << high;
  return make_factory(size, dtype.value_or(DType::Int64), device.value_or(kMeta), "randint");
}

// CUDA factories computed on the host, then copied: the random streams are the CPU's, bit for
// bit (the tile IR generates them on the GPU later, issue 14).
Tensor on_device(const Tensor& host, std::optional<Device> device) {
  Tensor out = detail::make_empty(host.sizes(), host.dtype(), device.value_or(Device("cuda")));
  copy_between(out, host);
  return out;
}
Tensor arange_cuda(const Scalar& start, const Scalar& end, const Scalar& step,
                   std::optional<DType> dtype, std::optional<Device> device) {
  return on_device(arange_cpu(start, end, step, dtype, kCPU), device);
}
Tensor rand_cuda(SymIntArrayRef size, std::optional<DType> dtype, std::optional<Device> device) {
  return on_device(rand_cpu(size, dtype, kCPU), device);
}
Tensor randn_cuda(SymIntArrayRef size, std::optional<DType> dtype, std::optional<Device> device) {
  return on_device(randn_cpu(size, dtype, kCPU), device);
}
Tensor randint_cuda(int64_t low, int64_t high, SymIntArrayRef size, std::optional<DType> dtype,
                    std::optional<Device> device) {
  return on_device(randint_cpu(low, high, size, dtype, kCPU), device);
}

Tensor rand_like_composite(const Tensor& self, std::optional<DType> dtype,
                           std::optional<Device> device) {
  return rand(
      self.sizes(),
      TensorOptions().dtype(dtype.value_or(self.dtype())).device(device.value_or(self.device())));
}
Tensor randn_like_composite(const Tensor& self, std::optional<DType> dtype,
                            std::optional<Device> device) {
  return randn(
      self.sizes(),
      TensorOptions().dtype(dtype.value_or(self.dtype())).device(device.value_or(self.device())));
}

}  // namespace

TS_REGISTER_OPS(factory_ops) {
  using namespace ops_detail;
  Library lib("aten");
  const uint32_t f = kBuiltin | kTagFactory;
  const char* opts = "*, ScalarType? dtype=None, Device? device=None";
  auto def = [&](const std::string& head, uint32_t tags) {
    lib.def(head + opts + ") -> Tensor", tags);
  };
  def("empty(SymInt[] size, ", f);
  lib.impl("empty", DeviceType::CPU, empty_impl).fake("empty", empty_impl);
  lib.impl("empty", DeviceType::CUDA, empty_impl);
  def("empty_strided(SymInt[] size, SymInt[] stride, ", f);
  lib.impl("empty_strided", DeviceType::CPU, empty_strided_impl)
      .fake("empty_strided", empty_strided_impl);
  lib.impl("empty_strided", DeviceType::CUDA, empty_strided_impl);
  def("full(SymInt[] size, Scalar fill_value, ", f);
  lib.impl("full", DeviceType::CPU, full_cpu).fake("full", full_meta);
  lib.impl("full", DeviceType::CUDA, full_cuda);
  {
    Library tlib("tessera");
    tlib.def(std::string("size_tensor(SymInt size, ") + opts + ") -> Tensor", f);
    tlib.impl("size_tensor", DeviceType::CPU, size_tensor_cpu)
        .fake("size_tensor", size_tensor_meta);
    tlib.impl("size_tensor", DeviceType::CUDA, size_tensor_cuda);
  }
  def("zeros(SymInt[] size, ", f);
  lib.composite("zeros", zeros_composite);
  def("ones(SymInt[] size, ", f);
  lib.composite("ones", ones_composite);
  def("arange.start_step(Scalar start, Scalar end, Scalar step=1, ", f);
  lib.impl("arange.start_step", DeviceType::CPU, arange_cpu).fake("arange.start_step", arange_meta);
  lib.impl("arange.start_step", DeviceType::CUDA, arange_cuda);
  def("empty_like(Tensor self, ", f);
  lib.impl_all("empty_like", empty_like_impl);
  def("full_like(Tensor self, Scalar fill_value, ", f);
  lib.impl("full_like", DeviceType::CPU, full_like_impl).fake("full_like", full_like_impl);
  lib.impl("full_like", DeviceType::CUDA, full_like_impl);
  def("zeros_like(Tensor self, ", f);
  lib.composite("zeros_like", zeros_like_composite);
  def("ones_like(Tensor self, ", f);
  lib.composite("ones_like", ones_like_composite);
  def("rand(SymInt[] size, ", f | kTagRandom);
  lib.impl("rand", DeviceType::CPU, rand_cpu).fake("rand", rand_meta);
  lib.impl("rand", DeviceType::CUDA, rand_cuda);
  def("randn(SymInt[] size, ", f | kTagRandom);
  lib.impl("randn", DeviceType::CPU, randn_cpu).fake("randn", rand_meta);
  lib.impl("randn", DeviceType::CUDA, randn_cuda);
  def("randint.low(int low, int high, SymInt[] size, ", f | kTagRandom);
  lib.impl("randint.low", DeviceType::CPU, randint_cpu).fake("randint.low", randint_meta);
  lib.impl("randint.low", DeviceType::CUDA, randint_cuda);
  def("rand_like(Tensor self, ", f | kTagRandom);
  lib.composite("rand_like", rand_like_composite);
  def("randn_like(Tensor self, ", f | kTagRandom);
  lib.composite("randn_like", randn_like_composite);
}

namespace {
Tensor with_grad(const TensorOptions& o, Tensor t) {
  if (o.requires_grad()) t.requires_grad_();
  return t;
}
}  // namespace

void manual_seed(uint64_t seed) {
  g_seed.store(seed);
  g_offset.store(0);
}
uint64_t initial_seed() {
  return g_seed.load();
}
uint64_t reserve_random_offset(uint64_t n) {
  return g_offset.fetch_add(n);
}

// Factories honour TensorOptions::requires_grad by making the new tensor a leaf that requires it.
#define TS_FACTORY(name, ...)                                                          \
  UserLocGuard g(loc);                                                                 \
  return with_grad(o, [&]() -> Tensor {                                                \
    TS_CALL(name, Tensor(SymIntArrayRef, std::optional<DType>, std::optional<Device>), \
            __VA_ARGS__);                                                              \
  }())

Tensor empty(SymIntArrayRef size, TensorOptions o, SourceLoc loc) {
  TS_FACTORY("aten::empty", size, o.dtype_opt(), o.device_opt());
}
Tensor zeros(SymIntArrayRef size, TensorOptions o, SourceLoc loc) {
  TS_FACTORY("aten::zeros", size, o.dtype_opt(), o.device_opt());
}
Tensor ones(SymIntArrayRef size, TensorOptions o, SourceLoc loc) {
  TS_FACTORY("aten::ones", size, o.dtype_opt(), o.device_opt());
}
Tensor rand(SymIntArrayRef size, TensorOptions o, SourceLoc loc) {
  TS_FACTORY("aten::rand", size, o.dtype_opt(), o.device_opt());
}
Tensor randn(SymIntArrayRef size, TensorOptions o, SourceLoc loc) {
  TS_FACTORY("aten::randn", size, o.dtype_opt(), o.device_opt());
}
#undef TS_FACTORY

Tensor empty_strided(SymIntArrayRef size, SymIntArrayRef stride, TensorOptions o, SourceLoc loc) {
  UserLocGuard g(loc);
  return with_grad(o, [&]() -> Tensor {
    TS_CALL("aten::empty_strided",
            Tensor(SymIntArrayRef, SymIntArrayRef, std::optional<DType>, std::optional<Device>),
            size, stride, o.dtype_opt(), o.device_opt());
  }());
}
Tensor full(SymIntArrayRef size, const Scalar& value, TensorOptions o, SourceLoc loc) {
  UserLocGuard g(loc);
  return with_grad(o, [&]() -> Tensor {
    TS_CALL("aten::full",
            Tensor(SymIntArrayRef, const Scalar&, std::optional<DType>, std::optional<Device>),
            size, value, o.dtype_opt(), o.device_opt());
  }());
}
Tensor size_tensor(const SymInt& size, TensorOptions o, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("tessera::size_tensor", Tensor(SymInt, std::optional<DType>, std::optional<Device>), size,
          o.dtype_opt(), o.device_opt());
}
Tensor arange(const Scalar& end, TensorOptions o, SourceLoc loc) {
  return arange(0, end, 1, o, loc);
}
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions o,
              SourceLoc loc) {
  UserLocGuard g(loc);
  return with_grad(o, [&]() -> Tensor {
    TS_CALL("aten::arange.start_step",
            Tensor(const Scalar&, const Scalar&, const Scalar&, std::optional<DType>,
                   std::optional<Device>),
            start, end, step, o.dtype_opt(), o.device_opt());
  }());
}
Tensor randint(int64_t low, int64_t high, SymIntArrayRef size, TensorOptions o, SourceLoc loc) {
  UserLocGuard g(loc);
  return with_grad(o, [&]() -> Tensor {
    TS_CALL("aten::randint.low",
            Tensor(int64_t, int64_t, SymIntArrayRef, std::optional<DType>, std::optional<Device>),
            low, high, size, o.dtype_opt(), o.device_opt());
  }());
}

#define TS_LIKE(name, ...)                                                            \
  UserLocGuard g(loc);                                                                \
  return with_grad(o, [&]() -> Tensor {                                               \
    TS_CALL(name, Tensor(const Tensor&, std::optional<DType>, std::optional<Device>), \
            __VA_ARGS__);                                                             \
  }())
Tensor empty_like(const Tensor& t, TensorOptions o, SourceLoc loc) {
  TS_LIKE("aten::empty_like", t, o.dtype_opt(), o.device_opt());
}
Tensor zeros_like(const Tensor& t, TensorOptions o, SourceLoc loc) {
  TS_LIKE("aten::zeros_like", t, o.dtype_opt(), o.device_opt());
}
Tensor ones_like(const Tensor& t, TensorOptions o, SourceLoc loc) {
  TS_LIKE("aten::ones_like", t, o.dtype_opt(), o.device_opt());
}
Tensor rand_like(const Tensor& t, TensorOptions o, SourceLoc loc) {
  TS_LIKE("aten::rand_like", t, o.dtype_opt(), o.device_opt());
}
Tensor randn_like(const Tensor& t, TensorOptions o, SourceLoc loc) {
  TS_LIKE("aten::randn_like", t, o.dtype_opt(), o.device_opt());
}
#undef TS_LIKE
Tensor full_like(const Tensor& t, const Scalar& value, TensorOptions o, SourceLoc loc) {
  UserLocGuard g(loc);
  return with_grad(o, [&]() -> Tensor {
    TS_CALL("aten::full_like",
            Tensor(const Tensor&, const Scalar&, std::optional<DType>, std::optional<Device>), t,
            value, o.dtype_opt(), o.device_opt());
  }());
}

}  // namespace tessera
