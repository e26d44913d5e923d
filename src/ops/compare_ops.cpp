// isclose, allclose, equal. allclose and equal return C++ bools: they read tensor data, so they
// cannot run on meta or fake tensors (under the graph compiler they are graph breaks).
#include <cmath>

#include "ops/cpu_loops.h"
#include "ops/device_copy.h"
#include "ops/pointwise.h"
#include "ops/pointwise_functors.h"
#include "ops/register.h"

namespace tessera {
namespace {

using namespace ops_detail;

Tensor isclose_impl(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  TS_CHECK(a.dtype() == b.dtype(), DTypeError)
      << "[isclose] expected both inputs to have the same dtype, got " << dtype_name(a.dtype())
      << " and " << dtype_name(b.dtype());
  TS_CHECK(rtol >= 0 && atol >= 0, ValueError)
      << "[isclose] rtol and atol must be non-negative, got rtol=" << rtol << " atol=" << atol;
  check_same_device("isclose", {&a, &b});
  const SymDimVector shape = broadcast_shapes(a.sizes(), b.sizes(), "isclose");
  Tensor out = new_output(a.has_data() ? b : a, shape, DType::Bool);
  if (!out.has_data()) return out;
  if (!out.device().is_cpu() || through_tiles()) {
    static const PointwiseDesc desc{"isclose", ResultRule::BoolOut, kFloats, nullptr,
                                    PwOp::IsClose};
    const IsCloseArgs args{rtol, atol, equal_nan};
    run_on_device(desc, out, {a, b}, DType::Float64, &args);
    return out;
  }
  const Tensor x = broadcast_to(cpu_to_dtype(a, DType::Float64), shape);
  const Tensor y = broadcast_to(cpu_to_dtype(b, DType::Float64), shape);
  cpu::StridedIter<3> it({&out, &x, &y});
  const pw::IsClose<double> f{rtol, atol, equal_nan};
  cpu::cpu_kernel<bool, double, double>(it, [=](double p, double q) { return f(p, q); });
  return out;
}

bool all_true(const Tensor& t) {
  const Tensor c = cpu_contiguous(t);
  const bool* p = static_cast<const bool*>(c.impl()->data());
  const int64_t n = c.impl()->int_numel();
  for (int64_t i = 0; i < n; ++i) {
    if (!p[i]) return false;
  }
  return true;
}

void check_data(const char* op, const Tensor& a, const Tensor& b) {
  TS_CHECK(a.has_data() && b.has_data(), ValueError)
      << "[" << op << "] reads tensor values, so it cannot run on "
      << ((a.is_fake() || b.is_fake()) ? "fake" : "meta") << " tensors";
}

bool allclose_impl(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  check_data("allclose", a, b);
  return all_true(isclose_impl(a, b, rtol, atol, equal_nan));
}

bool equal_impl(const Tensor& a, const Tensor& b) {
  check_data("equal", a, b);
  check_same_device("equal", {&a, &b});
  if (!a.sizes().equals(b.sizes())) return false;
  const DType dt = result_type(a, b);
  const Tensor x = cpu_to_dtype(a, dt), y = cpu_to_dtype(b, dt);
  Tensor out = detail::make_empty(a.sizes(), DType::Bool, kCPU);
  cpu::StridedIter<3> it({&out, &x, &y});
  visit_dtype<kNumericAndBool>(dt, "equal", [&]<class T>() {
    using V = opmath_t<T>;
    cpu::cpu_kernel<bool, T, T>(it, [](V p, V q) { return p == q; });
  });
  return all_true(out);
}

}  // namespace

TS_REGISTER_OPS(compare_ops) {
  Library lib("aten");
  lib.def(
      "isclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool "
      "equal_nan=False) -> Tensor",
      kBuiltin);
  lib.def(
      "allclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool "
      "equal_nan=False) -> bool",
      kBuiltin | kTagDataDependent);
  lib.def("equal(Tensor self, Tensor other) -> bool", kBuiltin | kTagDataDependent);
  for (auto dev : {DeviceType::CPU, DeviceType::Meta, DeviceType::CUDA}) {
    lib.impl("isclose", dev, isclose_impl);
    lib.impl("allclose", dev, allclose_impl);
    lib.impl("equal", dev, equal_impl);
  }
  lib.impl("allclose", DeviceType::CUDA,
           [](const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
             check_same_device("allclose", {&a, &b});
             return allclose_impl(to_host(a), to_host(b), rtol, atol, equal_nan);
           });
  lib.impl("equal", DeviceType::CUDA, [](const Tensor& a, const Tensor& b) {
    check_same_device("equal", {&a, &b});
    return equal_impl(to_host(a), to_host(b));
  });
}

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan,
               SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::isclose", Tensor(const Tensor&, const Tensor&, double, double, bool), a, b, rtol,
          atol, equal_nan);
}
bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan,
              SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::allclose", bool(const Tensor&, const Tensor&, double, double, bool), a, b, rtol,
          atol, equal_nan);
}
bool equal(const Tensor& a, const Tensor& b, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::equal", bool(const Tensor&, const Tensor&), a, b);
}
bool Tensor::equal(const Tensor& other, SourceLoc loc) const {
  return tessera::equal(*this, other, loc);
}
bool Tensor::allclose(const Tensor& other, double rtol, double atol, bool equal_nan,
                      SourceLoc loc) const {
  return tessera::allclose(*this, other, rtol, atol, equal_nan, loc);
}

}  // namespace tessera
