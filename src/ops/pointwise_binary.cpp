// Binary pointwise operators: arithmetic, division, comparisons, logical and bitwise ops, and
// where. Each gets Tensor and Scalar overloads, an out= variant and (where PyTorch has one) an
// in-place variant, all driven by ops/pointwise.h.
#include <string>

#include "ops/pointwise.h"
#include "ops/pointwise_functors.h"
#include "ops/register.h"

namespace tessera {

namespace pw {
void throw_zero_division(const char* op) {
  TS_ERROR(ValueError) << "[" << op << "] ZeroDivisionError: integer division by zero";
}
}  // namespace pw

namespace {

using namespace ops_detail;

template <class F, DTypeSet Set, bool BoolOut = false>
constexpr PointwiseRunner binary_runner = &run_functor<F, Set, BoolOut, 2>;

// add and sub take alpha (extra points at a Scalar): a + alpha * b, a - alpha * b.
template <bool Negate, DTypeSet Set>
void run_add(const Tensor& out, ArrayRef<Tensor> in, DType compute, const void* extra) {
  const Scalar& alpha = *static_cast<const Scalar*>(extra);
  visit_dtype<Set>(compute, Negate ? "sub" : "add", [&]<class T>() {
    using V = opmath_t<T>;
    cpu::StridedIter<3> it({&out, &in[0], &in[1]});
    if (alpha == Scalar(1)) {
      if constexpr (Negate) {
        cpu::cpu_kernel<T, T, T>(it, [](V x, V y) { return pw::Sub()(x, y); });
      } else {
        cpu::cpu_kernel<T, T, T>(it, [](V x, V y) { return pw::Add()(x, y); });
      }
      return;
    }
    V a;
    if constexpr (std::is_same_v<V, bool>)
      a = alpha.to_bool();
    else if constexpr (std::is_integral_v<V>)
      a = static_cast<V>(alpha.to_int());
    else
      a = static_cast<V>(alpha.to_double());
    if constexpr (Negate) a = pw::wrap_neg(a);
    cpu::cpu_kernel<T, T, T>(it, [a](V x, V y) { return pw::AddScaled<V>{a}(x, y); });
  });
}

const PointwiseDesc kAdd{"add", ResultRule::Same, kNumericAndBool, &run_add<false, kNumericAndBool>,
                         PwOp::Add};
const PointwiseDesc kSub{"sub", ResultRule::Same, kNumeric, &run_add<true, kNumeric>, PwOp::Sub};
const PointwiseDesc kMul{"mul", ResultRule::Same, kNumericAndBool,
                         binary_runner<pw::Mul, kNumericAndBool>, PwOp::Mul};
const PointwiseDesc kDivTrue{"div", ResultRule::ToFloat, kFloats, binary_runner<pw::Div, kFloats>,
                             PwOp::Div};
const PointwiseDesc kDivTrunc{"div", ResultRule::Same, kNumeric,
                              binary_runner<pw::TruncDiv, kNumeric>, PwOp::TruncDiv};
const PointwiseDesc kDivFloor{"div", ResultRule::Same, kNumeric,
                              binary_runner<pw::FloorDiv, kNumeric>, PwOp::FloorDiv};
const PointwiseDesc kRemainder{"remainder", ResultRule::Same, kNumeric,
                               binary_runner<pw::Remainder, kNumeric>, PwOp::Remainder};
const PointwiseDesc kPow{"pow", ResultRule::Same, kNumeric, binary_runner<pw::Pow, kNumeric>,
                         PwOp::Pow};
const PointwiseDesc kMaximum{"maximum", ResultRule::Same, kNumericAndBool,
                             binary_runner<pw::Maximum, kNumericAndBool>, PwOp::Maximum};
const PointwiseDesc kMinimum{"minimum", ResultRule::Same, kNumericAndBool,
                             binary_runner<pw::Minimum, kNumericAndBool>, PwOp::Minimum};
const PointwiseDesc kEq{"eq", ResultRule::BoolOut, kNumericAndBool,
                        binary_runner<pw::Eq, kNumericAndBool, true>, PwOp::Eq};
const PointwiseDesc kNe{"ne", ResultRule::BoolOut, kNumericAndBool,
                        binary_runner<pw::Ne, kNumericAndBool, true>, PwOp::Ne};
const PointwiseDesc kLt{"lt", ResultRule::BoolOut, kNumericAndBool,
                        binary_runner<pw::Lt, kNumericAndBool, true>, PwOp::Lt};
const PointwiseDesc kLe{"le", ResultRule::BoolOut, kNumericAndBool,
                        binary_runner<pw::Le, kNumericAndBool, true>, PwOp::Le};
const PointwiseDesc kGt{"gt", ResultRule::BoolOut, kNumericAndBool,
                        binary_runner<pw::Gt, kNumericAndBool, true>, PwOp::Gt};
const PointwiseDesc kGe{"ge", ResultRule::BoolOut, kNumericAndBool,
                        binary_runner<pw::Ge, kNumericAndBool, true>, PwOp::Ge};
const PointwiseDesc kLogicalAnd{"logical_and", ResultRule::LogicalOut, kNumericAndBool,
                                binary_runner<pw::LogicalAnd, kNumericAndBool, true>,
                                PwOp::LogicalAnd};
const PointwiseDesc kLogicalOr{"logical_or", ResultRule::LogicalOut, kNumericAndBool,
                               binary_runner<pw::LogicalOr, kNumericAndBool, true>,
                               PwOp::LogicalOr};
const PointwiseDesc kLogicalXor{"logical_xor", ResultRule::LogicalOut, kNumericAndBool,
                                binary_runner<pw::LogicalXor, kNumericAndBool, true>,
                                PwOp::LogicalXor};
const PointwiseDesc kBitAnd{"bitwise_and", ResultRule::Same, kIntsAndBool,
                            binary_runner<pw::BitAnd, kIntsAndBool>, PwOp::BitAnd};
const PointwiseDesc kBitOr{"bitwise_or", ResultRule::Same, kIntsAndBool,
                           binary_runner<pw::BitOr, kIntsAndBool>, PwOp::BitOr};
const PointwiseDesc kBitXor{"bitwise_xor", ResultRule::Same, kIntsAndBool,
                            binary_runner<pw::BitXor, kIntsAndBool>, PwOp::BitXor};
const PointwiseDesc kShl{"bitwise_left_shift", ResultRule::Same, kInts,
                         binary_runner<pw::ShiftLeft, kInts>, PwOp::Shl};
const PointwiseDesc kShr{"bitwise_right_shift", ResultRule::Same, kInts,
                         binary_runner<pw::ShiftRight, kInts>, PwOp::Shr};
const PointwiseDesc kGeluBackward{"gelu_backward", ResultRule::Same, kFloats,
                                  binary_runner<pw::GeluBackward, kFloats>, PwOp::GeluBackward};
const PointwiseDesc kGeluTanhBackward{"gelu_backward", ResultRule::Same, kFloats,
                                      binary_runner<pw::GeluTanhBackward, kFloats>,
                                      PwOp::GeluTanhBackward};

// Logical ops compare each input against zero in its own type: promote only for the loop.
DType logical_promoted(const Tensor& a, const Tensor& b) {
  try {
    return result_type(a, b);
  } catch (const DTypeError&) {
    return DType::Float64;  // e.g. uint32 with int8: any wide type compares to zero the same
  }
}

void check_alpha(const PointwiseDesc& d, DType promoted, const Scalar& alpha) {
  if (is_integral(promoted)) {
    TS_CHECK(!alpha.is_floating_point(), TypeError)
        << "[" << d.name << "] for integral input tensors, argument alpha must not be a floating "
        << "point number";
  } else if (promoted == DType::Bool) {
    TS_CHECK(alpha.is_bool() || alpha == Scalar(1), TypeError)
        << "[" << d.name << "] boolean alpha only supported for boolean results";
  }
}

void check_sub(DType a, DType b) {
  TS_CHECK(!(a == DType::Bool && b == DType::Bool), TypeError)
      << "[sub] subtraction, the `-` operator, with two bool tensors is not supported; use the "
      << "`^` or `logical_xor()` operator instead";
}

// Registers name.Tensor, name.Scalar, name.out (and name_.Tensor / name_.Scalar) with alpha.
void def_alpha_op(Library& lib, const std::string& n, const PointwiseDesc* d) {
  const uint32_t t = kBuiltin | kTagPointwise;
  const bool is_sub = d == &kSub;
  lib.def(n + ".Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", t);
  lib.def(n + ".Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", t);
  lib.def(n + ".out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
          t);
  lib.def(n + ".Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out) -> "
              "Tensor(a!)",
          t);
  lib.def(n + "_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
          t | kTagInplace);
  lib.def(n + "_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)",
          t | kTagInplace);
  auto tensor = [d, is_sub](const Tensor& a, const Tensor& b, const Scalar& alpha) {
    if (is_sub) check_sub(a.dtype(), b.dtype());
    const DType p = result_type(a, b);
    check_alpha(*d, p, alpha);
    return pointwise(*d, {a, b}, p, &alpha);
  };
  auto scalar = [d, is_sub](const Tensor& a, const Scalar& b, const Scalar& alpha) {
    if (is_sub) check_sub(a.dtype(), b.dtype());
    const DType p = result_type(a, b);
    check_alpha(*d, p, alpha);
    return pointwise(*d, {a, scalar_tensor(b, p)}, p, &alpha);
  };
  auto out = [d, is_sub](const Tensor& a, const Tensor& b, const Scalar& alpha,
                         Tensor& o) -> Tensor& {
    if (is_sub) check_sub(a.dtype(), b.dtype());
    const DType p = result_type(a, b);
    check_alpha(*d, p, alpha);
    return pointwise_out(*d, {a, b}, p, o, &alpha);
  };
  auto scalar_out = [d, is_sub](const Tensor& a, const Scalar& b, const Scalar& alpha,
                                Tensor& o) -> Tensor& {
    if (is_sub) check_sub(a.dtype(), b.dtype());
    const DType p = result_type(a, b);
    check_alpha(*d, p, alpha);
    return pointwise_out(*d, {a, scalar_tensor(b, p)}, p, o, &alpha);
  };
  auto inplace = [d, is_sub](Tensor& self, const Tensor& b, const Scalar& alpha) -> Tensor& {
    if (is_sub) check_sub(self.dtype(), b.dtype());
    const DType p = result_type(self, b);
    check_alpha(*d, p, alpha);
    pointwise_inplace(*d, self, {self, b}, p, &alpha);
    return self;
  };
  auto inplace_scalar = [d, is_sub](Tensor& self, const Scalar& b, const Scalar& alpha) -> Tensor& {
    if (is_sub) check_sub(self.dtype(), b.dtype());
    const DType p = result_type(self, b);
    check_alpha(*d, p, alpha);
    pointwise_inplace(*d, self, {self, scalar_tensor(b, p)}, p, &alpha);
    return self;
  };
  for (auto dev : {DeviceType::CPU, DeviceType::CUDA, DeviceType::Meta}) {
    lib.impl(n + ".Tensor", dev, tensor);
    lib.impl(n + ".Scalar", dev, scalar);
    lib.impl(n + ".out", dev, out);
    lib.impl(n + ".Scalar_out", dev, scalar_out);
    lib.impl(n + "_.Tensor", dev, inplace);
    lib.impl(n + "_.Scalar", dev, inplace_scalar);
  }
}

// Registers name.Tensor, name.Scalar, name.out, and optionally name_.Tensor / name_.Scalar.
void def_binary_op(Library& lib, const std::string& n, const PointwiseDesc* d,
                   bool inplace_variants) {
  const uint32_t t = kBuiltin | kTagPointwise;
  const bool logical = d->rule == ResultRule::LogicalOut;
  lib.def(n + ".Tensor(Tensor self, Tensor other) -> Tensor", t);
  lib.def(n + ".Scalar(Tensor self, Scalar other) -> Tensor", t);
  lib.def(n + ".out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)", t);
  lib.def(n + ".Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)", t);
  auto promote = [logical](const Tensor& a, const Tensor& b) {
    return logical ? logical_promoted(a, b) : result_type(a, b);
  };
  auto tensor = [d, promote](const Tensor& a, const Tensor& b) {
    return pointwise(*d, {a, b}, promote(a, b));
  };
  auto scalar = [d](const Tensor& a, const Scalar& b) {
    const DType p = result_type(a, b);
    return pointwise(*d, {a, scalar_tensor(b, p)}, p);
  };
  auto out = [d, promote](const Tensor& a, const Tensor& b, Tensor& o) -> Tensor& {
    return pointwise_out(*d, {a, b}, promote(a, b), o);
  };
  auto scalar_out = [d](const Tensor& a, const Scalar& b, Tensor& o) -> Tensor& {
    const DType p = result_type(a, b);
    return pointwise_out(*d, {a, scalar_tensor(b, p)}, p, o);
  };
  for (auto dev : {DeviceType::CPU, DeviceType::CUDA, DeviceType::Meta}) {
    lib.impl(n + ".Tensor", dev, tensor);
    lib.impl(n + ".Scalar", dev, scalar);
    lib.impl(n + ".out", dev, out);
    lib.impl(n + ".Scalar_out", dev, scalar_out);
  }
  if (!inplace_variants) return;
  lib.def(n + "_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", t | kTagInplace);
  lib.def(n + "_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", t | kTagInplace);
  auto inplace = [d, promote](Tensor& self, const Tensor& b) -> Tensor& {
    pointwise_inplace(*d, self, {self, b}, promote(self, b));
    return self;
  };
  auto inplace_scalar = [d](Tensor& self, const Scalar& b) -> Tensor& {
    const DType p = result_type(self, b);
    pointwise_inplace(*d, self, {self, scalar_tensor(b, p)}, p);
    return self;
  };
  for (auto dev : {DeviceType::CPU, DeviceType::CUDA, DeviceType::Meta}) {
    lib.impl(n + "_.Tensor", dev, inplace);
    lib.impl(n + "_.Scalar", dev, inplace_scalar);
  }
}

const PointwiseDesc& div_desc(const std::optional<std::string_view>& mode) {
  if (!mode) return kDivTrue;
  if (*mode == "trunc") return kDivTrunc;
  if (*mode == "floor") return kDivFloor;
  TS_ERROR(ValueError) << "[div] expected rounding_mode to be one of None, 'trunc', or 'floor' "
                       << "but found '" << *mode << "'";
}

void check_int_pow(const Tensor& base, const Scalar& exponent) {
  TS_CHECK(!(is_integral(base.dtype(), true) && exponent.is_integral() && exponent.to_int() < 0),
           ValueError)
      << "[pow] integers to negative integer powers are not allowed";
}

// ---- where ------------------------------------------------------------------------------------

// where through the device runner (no CPU loop of its own: `run` is never called).
const PointwiseDesc kWhere{"where", ResultRule::Same, kNumericAndBool, nullptr, PwOp::Where};

void where_loop(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b, DType dt) {
  if (!out.has_data()) return;
  if (!out.device().is_cpu() || through_tiles()) {
    run_on_device(kWhere, out, {cond, a, b}, dt, nullptr);
    return;
  }
  const Tensor c = broadcast_to(cond, out.sizes());
  const Tensor x = broadcast_to(cpu_to_dtype(a, dt), out.sizes());
  const Tensor y = broadcast_to(cpu_to_dtype(b, dt), out.sizes());
  visit_dtype<kAllDTypes>(dt, "where", [&]<class T>() {
    cpu::StridedIter<4> it({&out, &c, &x, &y});
    using V = opmath_t<T>;
    cpu::cpu_kernel<T, bool, T, T>(it, [](bool k, V p, V q) { return pw::Where()(k, p, q); });
  });
}

SymDimVector where_shape(const Tensor& cond, const Tensor& a, const Tensor& b) {
  TS_CHECK(cond.dtype() == DType::Bool, DTypeError)
      << "[where] expected condition to be a boolean tensor, but got a tensor with dtype "
      << dtype_name(cond.dtype());
  return broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
}

Tensor where_impl(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same_device("where", {&cond, &a, &b});
  const SymDimVector shape = where_shape(cond, a, b);
  const DType dt = result_type(a, b);
  const Tensor* like = !cond.has_data() ? &cond : !a.has_data() ? &a : !b.has_data() ? &b : &a;
  Tensor out = new_output(*like, shape, dt);
  where_loop(out, cond, a, b, dt);
  return out;
}

Tensor where_scalar_impl(const Tensor& cond, const Tensor& a, const Scalar& b) {
  const DType dt = result_type(a, b);
  return where_impl(cond, a, scalar_tensor(b, dt));
}

Tensor& where_out_impl(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  check_same_device("where", {&cond, &a, &b, &out});
  const SymDimVector shape = where_shape(cond, a, b);
  const DType dt = result_type(a, b);
  return write_out(out, shape, dt, "where", {cond, a, b},
                   [&](const Tensor& target) { where_loop(target, cond, a, b, dt); });
}

}  // namespace

TS_REGISTER_OPS(pointwise_binary) {
  Library lib("aten");
  def_alpha_op(lib, "add", &kAdd);
  def_alpha_op(lib, "sub", &kSub);
  def_binary_op(lib, "mul", &kMul, true);
  def_binary_op(lib, "remainder", &kRemainder, true);
  def_binary_op(lib, "maximum", &kMaximum, false);
  def_binary_op(lib, "minimum", &kMinimum, false);
  def_binary_op(lib, "eq", &kEq, false);
  def_binary_op(lib, "ne", &kNe, false);
  def_binary_op(lib, "lt", &kLt, false);
  def_binary_op(lib, "le", &kLe, false);
  def_binary_op(lib, "gt", &kGt, false);
  def_binary_op(lib, "ge", &kGe, false);
  def_binary_op(lib, "logical_and", &kLogicalAnd, false);
  def_binary_op(lib, "logical_or", &kLogicalOr, false);
  def_binary_op(lib, "logical_xor", &kLogicalXor, false);
  def_binary_op(lib, "bitwise_and", &kBitAnd, true);
  def_binary_op(lib, "bitwise_or", &kBitOr, true);
  def_binary_op(lib, "bitwise_xor", &kBitXor, true);
  def_binary_op(lib, "bitwise_left_shift", &kShl, false);
  def_binary_op(lib, "bitwise_right_shift", &kShr, false);

  const uint32_t t = kBuiltin | kTagPointwise;
  lib.def("div.Tensor(Tensor self, Tensor other, *, str? rounding_mode=None) -> Tensor", t);
  lib.def("div.Scalar(Tensor self, Scalar other, *, str? rounding_mode=None) -> Tensor", t);
  lib.def(
      "div.out(Tensor self, Tensor other, *, str? rounding_mode=None, Tensor(a!) out) -> "
      "Tensor(a!)",
      t);
  lib.def(
      "div.Scalar_out(Tensor self, Scalar other, *, str? rounding_mode=None, Tensor(a!) out) -> "
      "Tensor(a!)",
      t);
  lib.def("div_.Tensor(Tensor(a!) self, Tensor other, *, str? rounding_mode=None) -> Tensor(a!)",
          t | kTagInplace);
  lib.def("div_.Scalar(Tensor(a!) self, Scalar other, *, str? rounding_mode=None) -> Tensor(a!)",
          t | kTagInplace);
  lib.def("pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor", t);
  lib.def("pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor", t);
  lib.def("pow.Scalar(Scalar self, Tensor exponent) -> Tensor", t);
  lib.def("pow.Tensor_Tensor_out(Tensor self, Tensor exponent, *, Tensor(a!) out) -> Tensor(a!)",
          t);
  lib.def("pow.Tensor_Scalar_out(Tensor self, Scalar exponent, *, Tensor(a!) out) -> Tensor(a!)",
          t);
  lib.def("pow.Scalar_out(Scalar self, Tensor exponent, *, Tensor(a!) out) -> Tensor(a!)", t);
  lib.def("where.self(Tensor condition, Tensor self, Tensor other) -> Tensor", t);
  lib.def("where.ScalarOther(Tensor condition, Tensor self, Scalar other) -> Tensor", t);
  lib.def(
      "where.self_out(Tensor condition, Tensor self, Tensor other, *, Tensor(a!) out) -> "
      "Tensor(a!)",
      t);
  lib.def("floor_divide(Tensor self, Tensor other) -> Tensor", t);
  // GELU's backward in one op (its formula as separate ops: ~10 kernels, each rounding)
  lib.def("gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor", t);
  lib.composite("floor_divide",
                [](const Tensor& a, const Tensor& b) { return div(a, b, "floor"); });

  for (auto dev : {DeviceType::CPU, DeviceType::CUDA, DeviceType::Meta}) {
    lib.impl("div.Tensor", dev,
             [](const Tensor& a, const Tensor& b, std::optional<std::string_view> m) {
               return pointwise(div_desc(m), {a, b}, result_type(a, b));
             });
    lib.impl("div.Scalar", dev,
             [](const Tensor& a, const Scalar& b, std::optional<std::string_view> m) {
               const DType p = result_type(a, b);
               return pointwise(div_desc(m), {a, scalar_tensor(b, p)}, p);
             });
    lib.impl("div.out", dev,
             [](const Tensor& a, const Tensor& b, std::optional<std::string_view> m,
                Tensor& o) -> Tensor& {
               return pointwise_out(div_desc(m), {a, b}, result_type(a, b), o);
             });
    lib.impl("div.Scalar_out", dev,
             [](const Tensor& a, const Scalar& b, std::optional<std::string_view> m,
                Tensor& o) -> Tensor& {
               const DType p = result_type(a, b);
               return pointwise_out(div_desc(m), {a, scalar_tensor(b, p)}, p, o);
             });
    lib.impl("div_.Tensor", dev,
             [](Tensor& self, const Tensor& b, std::optional<std::string_view> m) -> Tensor& {
               pointwise_inplace(div_desc(m), self, {self, b}, result_type(self, b));
               return self;
             });
    lib.impl("div_.Scalar", dev,
             [](Tensor& self, const Scalar& b, std::optional<std::string_view> m) -> Tensor& {
               const DType p = result_type(self, b);
               pointwise_inplace(div_desc(m), self, {self, scalar_tensor(b, p)}, p);
               return self;
             });
    lib.impl("pow.Tensor_Tensor", dev, [](const Tensor& a, const Tensor& b) {
      return pointwise(kPow, {a, b}, result_type(a, b));
    });
    lib.impl("pow.Tensor_Scalar", dev, [](const Tensor& a, const Scalar& b) {
      check_int_pow(a, b);
      const DType p = result_type(a, b);
      return pointwise(kPow, {a, scalar_tensor(b, p)}, p);
    });
    lib.impl("pow.Scalar", dev, [](const Scalar& a, const Tensor& b) {
      const DType p = result_type(b, a);
      return pointwise(kPow, {scalar_tensor(a, p), b}, p);
    });
    lib.impl("pow.Tensor_Tensor_out", dev,
             [](const Tensor& a, const Tensor& b, Tensor& o) -> Tensor& {
               return pointwise_out(kPow, {a, b}, result_type(a, b), o);
             });
    lib.impl("pow.Tensor_Scalar_out", dev,
             [](const Tensor& a, const Scalar& b, Tensor& o) -> Tensor& {
               check_int_pow(a, b);
               const DType p = result_type(a, b);
               return pointwise_out(kPow, {a, scalar_tensor(b, p)}, p, o);
             });
    lib.impl("pow.Scalar_out", dev, [](const Scalar& a, const Tensor& b, Tensor& o) -> Tensor& {
      const DType p = result_type(b, a);
      return pointwise_out(kPow, {scalar_tensor(a, p), b}, p, o);
    });
    lib.impl("where.self", dev, where_impl);
    lib.impl("where.ScalarOther", dev, where_scalar_impl);
    lib.impl("where.self_out", dev, where_out_impl);
    lib.impl("gelu_backward", dev,
             [](const Tensor& g, const Tensor& x, std::string_view approximate) {
               TS_CHECK(approximate == "none" || approximate == "tanh", ValueError)
                   << "[gelu_backward] approximate argument must be either 'none' or 'tanh', "
                   << "got '" << approximate << "'";
               return pointwise(approximate == "tanh" ? kGeluTanhBackward : kGeluBackward, {g, x},
                                result_type(g, x));
             });
  }
}

// ---- public functions ---------------------------------------------------------------------------

using TTS = Tensor(const Tensor&, const Tensor&, const Scalar&);
using TSS = Tensor(const Tensor&, const Scalar&, const Scalar&);
using TT = Tensor(const Tensor&, const Tensor&);
using TS = Tensor(const Tensor&, const Scalar&);
using Mode = std::optional<std::string_view>;

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::add.Tensor", TTS, a, b, alpha);
}
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::add.Scalar", TSS, a, b, alpha);
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::sub.Tensor", TTS, a, b, alpha);
}
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::sub.Scalar", TSS, a, b, alpha);
}
Tensor div(const Tensor& a, const Tensor& b, Mode mode, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::div.Tensor", Tensor(const Tensor&, const Tensor&, Mode), a, b, mode);
}
Tensor div(const Tensor& a, const Scalar& b, Mode mode, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::div.Scalar", Tensor(const Tensor&, const Scalar&, Mode), a, b, mode);
}
Tensor floor_divide(const Tensor& a, const Tensor& b, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::floor_divide", TT, a, b);
}
Tensor pow(const Tensor& a, const Tensor& b, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::pow.Tensor_Tensor", TT, a, b);
}
Tensor pow(const Tensor& a, const Scalar& b, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::pow.Tensor_Scalar", TS, a, b);
}
Tensor pow(const Scalar& a, const Tensor& b, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::pow.Scalar", Tensor(const Scalar&, const Tensor&), a, b);
}
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::where.self", Tensor(const Tensor&, const Tensor&, const Tensor&), cond, a, b);
}
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::where.ScalarOther", Tensor(const Tensor&, const Tensor&, const Scalar&), cond, a,
          b);
}

#define TS_BINARY_FN(name)                                       \
  Tensor name(const Tensor& a, const Tensor& b, SourceLoc loc) { \
    UserLocGuard g(loc);                                         \
    TS_CALL("aten::" #name ".Tensor", TT, a, b);                 \
  }
#define TS_BINARY_SCALAR_FN(name)                                \
  Tensor name(const Tensor& a, const Scalar& b, SourceLoc loc) { \
    UserLocGuard g(loc);                                         \
    TS_CALL("aten::" #name ".Scalar", TS, a, b);                 \
  }
TS_BINARY_FN(mul)
TS_BINARY_SCALAR_FN(mul)
TS_BINARY_FN(remainder)
TS_BINARY_SCALAR_FN(remainder)
TS_BINARY_FN(maximum)
Tensor gelu_backward(const Tensor& grad, const Tensor& self, std::string_view approximate,
                     SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::gelu_backward", Tensor(const Tensor&, const Tensor&, std::string_view), grad, self,
          approximate);
}
TS_BINARY_FN(minimum)
TS_BINARY_FN(eq)
TS_BINARY_SCALAR_FN(eq)
TS_BINARY_FN(ne)
TS_BINARY_SCALAR_FN(ne)
TS_BINARY_FN(lt)
TS_BINARY_SCALAR_FN(lt)
TS_BINARY_FN(le)
TS_BINARY_SCALAR_FN(le)
TS_BINARY_FN(gt)
TS_BINARY_SCALAR_FN(gt)
TS_BINARY_FN(ge)
TS_BINARY_SCALAR_FN(ge)
TS_BINARY_FN(logical_and)
TS_BINARY_FN(logical_or)
TS_BINARY_FN(logical_xor)
TS_BINARY_FN(bitwise_and)
TS_BINARY_FN(bitwise_or)
TS_BINARY_FN(bitwise_xor)
TS_BINARY_FN(bitwise_left_shift)
TS_BINARY_FN(bitwise_right_shift)
#undef TS_BINARY_FN
#undef TS_BINARY_SCALAR_FN

using OutTT = Tensor&(const Tensor&, const Tensor&, Tensor&);
Tensor& add_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::add.out", Tensor & (const Tensor&, const Tensor&, const Scalar&, Tensor&), a, b,
          alpha, out);
}
Tensor& sub_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::sub.out", Tensor & (const Tensor&, const Tensor&, const Scalar&, Tensor&), a, b,
          alpha, out);
}
Tensor& div_out(Tensor& out, const Tensor& a, const Tensor& b, Mode mode, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::div.out", Tensor & (const Tensor&, const Tensor&, Mode, Tensor&), a, b, mode, out);
}
Tensor& pow_out(Tensor& out, const Tensor& a, const Tensor& b, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::pow.Tensor_Tensor_out", OutTT, a, b, out);
}
Tensor& where_out(Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b,
                  SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::where.self_out", Tensor & (const Tensor&, const Tensor&, const Tensor&, Tensor&),
          cond, a, b, out);
}
#define TS_BINARY_OUT_FN(name)                                                       \
  Tensor& name##_out(Tensor& out, const Tensor& a, const Tensor& b, SourceLoc loc) { \
    UserLocGuard g(loc);                                                             \
    TS_CALL("aten::" #name ".out", OutTT, a, b, out);                                \
  }
TS_BINARY_OUT_FN(mul)
TS_BINARY_OUT_FN(remainder)
TS_BINARY_OUT_FN(maximum)
TS_BINARY_OUT_FN(minimum)
TS_BINARY_OUT_FN(eq)
TS_BINARY_OUT_FN(lt)
#undef TS_BINARY_OUT_FN

// ---- Tensor methods and operators ---------------------------------------------------------------

Tensor Tensor::add(const Tensor& o, const Scalar& alpha, SourceLoc loc) const {
  return tessera::add(*this, o, alpha, loc);
}
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha, SourceLoc loc) const {
  return tessera::sub(*this, o, alpha, loc);
}
Tensor Tensor::mul(const Tensor& o, SourceLoc loc) const {
  return tessera::mul(*this, o, loc);
}
Tensor Tensor::div(const Tensor& o, SourceLoc loc) const {
  return tessera::div(*this, o, std::nullopt, loc);
}
Tensor Tensor::pow(const Scalar& e, SourceLoc loc) const {
  return tessera::pow(*this, e, loc);
}
Tensor Tensor::eq(const Tensor& o, SourceLoc loc) const {
  return tessera::eq(*this, o, loc);
}
Tensor Tensor::ne(const Tensor& o, SourceLoc loc) const {
  return tessera::ne(*this, o, loc);
}
Tensor Tensor::lt(const Tensor& o, SourceLoc loc) const {
  return tessera::lt(*this, o, loc);
}
Tensor Tensor::le(const Tensor& o, SourceLoc loc) const {
  return tessera::le(*this, o, loc);
}
Tensor Tensor::gt(const Tensor& o, SourceLoc loc) const {
  return tessera::gt(*this, o, loc);
}
Tensor Tensor::ge(const Tensor& o, SourceLoc loc) const {
  return tessera::ge(*this, o, loc);
}

Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::add_.Tensor", Tensor & (Tensor&, const Tensor&, const Scalar&), *this, o, alpha);
}
Tensor& Tensor::add_(const Scalar& o, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::add_.Scalar", Tensor & (Tensor&, const Scalar&, const Scalar&), *this, o, 1);
}
Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::sub_.Tensor", Tensor & (Tensor&, const Tensor&, const Scalar&), *this, o, alpha);
}
Tensor& Tensor::mul_(const Tensor& o, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::mul_.Tensor", Tensor & (Tensor&, const Tensor&), *this, o);
}
Tensor& Tensor::mul_(const Scalar& o, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::mul_.Scalar", Tensor & (Tensor&, const Scalar&), *this, o);
}
Tensor& Tensor::div_(const Tensor& o, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::div_.Tensor", Tensor & (Tensor&, const Tensor&, Mode), *this, o, std::nullopt);
}
Tensor& Tensor::div_(const Scalar& o, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::div_.Scalar", Tensor & (Tensor&, const Scalar&, Mode), *this, o, std::nullopt);
}

Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator+(const Tensor& a, const Scalar& b) {
  return add(a, b);
}
Tensor operator+(const Scalar& a, const Tensor& b) {
  return add(b, a);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
Tensor operator-(const Tensor& a, const Scalar& b) {
  return sub(a, b);
}
Tensor operator-(const Scalar& a, const Tensor& b) {
  return add(neg(b), a);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
Tensor operator*(const Tensor& a, const Scalar& b) {
  return mul(a, b);
}
Tensor operator*(const Scalar& a, const Tensor& b) {
  return mul(b, a);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
Tensor operator/(const Tensor& a, const Scalar& b) {
  return div(a, b);
}
Tensor operator/(const Scalar& a, const Tensor& b) {
  const DType p = ops_detail::result_type(b, a);
  return div(ops_detail::scalar_tensor(a, p), b);  // (a CPU scalar joins any device)
}
Tensor operator%(const Tensor& a, const Tensor& b) {
  return remainder(a, b);
}
Tensor operator%(const Tensor& a, const Scalar& b) {
  return remainder(a, b);
}
Tensor operator&(const Tensor& a, const Tensor& b) {
  return bitwise_and(a, b);
}
Tensor operator|(const Tensor& a, const Tensor& b) {
  return bitwise_or(a, b);
}
Tensor operator^(const Tensor& a, const Tensor& b) {
  return bitwise_xor(a, b);
}
Tensor operator==(const Tensor& a, const Tensor& b) {
  return eq(a, b);
}
Tensor operator==(const Tensor& a, const Scalar& b) {
  return eq(a, b);
}
Tensor operator!=(const Tensor& a, const Tensor& b) {
  return ne(a, b);
}
Tensor operator!=(const Tensor& a, const Scalar& b) {
  return ne(a, b);
}
Tensor operator<(const Tensor& a, const Tensor& b) {
  return lt(a, b);
}
Tensor operator<(const Tensor& a, const Scalar& b) {
  return lt(a, b);
}
Tensor operator<=(const Tensor& a, const Tensor& b) {
  return le(a, b);
}
Tensor operator<=(const Tensor& a, const Scalar& b) {
  return le(a, b);
}
Tensor operator>(const Tensor& a, const Tensor& b) {
  return gt(a, b);
}
Tensor operator>(const Tensor& a, const Scalar& b) {
  return gt(a, b);
}
Tensor operator>=(const Tensor& a, const Tensor& b) {
  return ge(a, b);
}
Tensor operator>=(const Tensor& a, const Scalar& b) {
  return ge(a, b);
}
Tensor& operator+=(Tensor& a, const Tensor& b) {
  return a.add_(b);
}
Tensor& operator+=(Tensor& a, const Scalar& b) {
  return a.add_(b);
}
Tensor& operator-=(Tensor& a, const Tensor& b) {
  return a.sub_(b);
}
Tensor& operator*=(Tensor& a, const Tensor& b) {
  return a.mul_(b);
}
Tensor& operator*=(Tensor& a, const Scalar& b) {
  return a.mul_(b);
}
Tensor& operator/=(Tensor& a, const Tensor& b) {
  return a.div_(b);
}
Tensor& operator/=(Tensor& a, const Scalar& b) {
  return a.div_(b);
}

}  // namespace tessera
