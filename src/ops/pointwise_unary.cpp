// Unary pointwise operators and clamp, each with an out= variant.
#include <string>

#include "ops/pointwise.h"
#include "ops/pointwise_functors.h"
#include "ops/register.h"

namespace tessera {
namespace {

using namespace ops_detail;

template <class F, DTypeSet Set, bool BoolOut = false>
constexpr PointwiseRunner unary_runner = &run_functor<F, Set, BoolOut, 1>;

#define TS_UNARY_DESC(var, name, rule, set, F)                                                  \
  const PointwiseDesc var{name, ResultRule::rule, set,                                          \
                          unary_runner<pw::F, set, ResultRule::rule == ResultRule::LogicalOut>, \
                          PwOp::F};
TS_UNARY_DESC(kNeg, "neg", Same, kNumeric, Neg)
TS_UNARY_DESC(kAbs, "abs", Same, kNumeric, Abs)
TS_UNARY_DESC(kExp, "exp", ToFloat, kFloats, Exp)
TS_UNARY_DESC(kExp2, "exp2", ToFloat, kFloats, Exp2)
TS_UNARY_DESC(kLog, "log", ToFloat, kFloats, Log)
TS_UNARY_DESC(kLog2, "log2", ToFloat, kFloats, Log2)
TS_UNARY_DESC(kSqrt, "sqrt", ToFloat, kFloats, Sqrt)
TS_UNARY_DESC(kRsqrt, "rsqrt", ToFloat, kFloats, Rsqrt)
TS_UNARY_DESC(kSin, "sin", ToFloat, kFloats, Sin)
TS_UNARY_DESC(kCos, "cos", ToFloat, kFloats, Cos)
TS_UNARY_DESC(kTanh, "tanh", ToFloat, kFloats, Tanh)
TS_UNARY_DESC(kSigmoid, "sigmoid", ToFloat, kFloats, Sigmoid)
TS_UNARY_DESC(kErf, "erf", ToFloat, kFloats, Erf)
TS_UNARY_DESC(kRelu, "relu", Same, kNumeric, Relu)
TS_UNARY_DESC(kGelu, "gelu", Same, kFloats, Gelu)
TS_UNARY_DESC(kGeluTanh, "gelu", Same, kFloats, GeluTanh)
TS_UNARY_DESC(kSilu, "silu", Same, kFloats, Silu)
TS_UNARY_DESC(kLogicalNot, "logical_not", LogicalOut, kNumericAndBool, LogicalNot)
TS_UNARY_DESC(kBitNot, "bitwise_not", Same, kIntsAndBool, BitNot)
#undef TS_UNARY_DESC

struct UnaryEntry {
  const char* name;
  const PointwiseDesc* desc;
};
constexpr UnaryEntry kUnary[] = {
    {"neg", &kNeg},
    {"abs", &kAbs},
    {"exp", &kExp},
    {"exp2", &kExp2},
    {"log", &kLog},
    {"log2", &kLog2},
    {"sqrt", &kSqrt},
    {"rsqrt", &kRsqrt},
    {"sin", &kSin},
    {"cos", &kCos},
    {"tanh", &kTanh},
    {"sigmoid", &kSigmoid},
    {"erf", &kErf},
    {"relu", &kRelu},
    {"silu", &kSilu},
    {"logical_not", &kLogicalNot},
    {"bitwise_not", &kBitNot},
};

void check_unary(const PointwiseDesc* d, const Tensor& a) {
  if (d == &kNeg) {
    TS_CHECK(a.dtype() != DType::Bool, TypeError)
        << "[neg] negation, the `-` operator, on a bool tensor is not supported; use the `~` or "
        << "`logical_not()` operator instead";
  }
  if (d == &kAbs || d == &kRelu) {
    TS_CHECK(a.dtype() != DType::Bool, DTypeError)
        << "[" << d->name << "] not implemented for 'bool'";
  }
}

const PointwiseDesc& gelu_desc(std::string_view approximate) {
  if (approximate == "none") return kGelu;
  if (approximate == "tanh") return kGeluTanh;
  TS_ERROR(ValueError) << "[gelu] approximate argument must be either 'none' or 'tanh', got '"
                       << approximate << "'";
}

// ---- clamp ------------------------------------------------------------------------------------

void run_clamp(const Tensor& out, ArrayRef<Tensor> in, DType compute, const void* extra) {
  const auto& args = *static_cast<const ClampArgs*>(extra);
  visit_dtype<kNumeric>(compute, "clamp", [&]<class T>() {
    using V = opmath_t<T>;
    auto as_v = [](const Scalar& s) -> V {
      if constexpr (std::is_integral_v<V>)
        return static_cast<V>(s.to_int());
      else
        return static_cast<V>(s.to_double());
    };
    pw::Clamp<V> f{args.lo.has_value(), args.hi.has_value(), args.lo ? as_v(*args.lo) : V(0),
                   args.hi ? as_v(*args.hi) : V(0)};
    cpu::StridedIter<2> it({&out, &in[0]});
    cpu::cpu_kernel<T, T>(it, f);
  });
}
const PointwiseDesc kClamp{"clamp", ResultRule::Same, kNumeric, &run_clamp, PwOp::Clamp};

DType clamp_type(const Tensor& a, const ClampArgs& args) {
  TS_CHECK(args.lo || args.hi, ValueError)
      << "[clamp] at least one of 'min' or 'max' must not be None";
  ResultType r;
  r.add(a.dtype(), operand_kind(a));
  if (args.lo) r.add(args.lo->dtype(), OperandKind::WrappedNumber);
  if (args.hi) r.add(args.hi->dtype(), OperandKind::WrappedNumber);
  return r.result();
}

}  // namespace

TS_REGISTER_OPS(pointwise_unary) {
  Library lib("aten");
  const uint32_t t = kBuiltin | kTagPointwise;
  for (const auto& e : kUnary) {
    const std::string n = e.name;
    const PointwiseDesc* d = e.desc;
    lib.def(n + "(Tensor self) -> Tensor", t);
    lib.def(n + ".out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", t);
    for (auto dev : {DeviceType::CPU, DeviceType::CUDA, DeviceType::Meta}) {
      lib.impl(n, dev, [d](const Tensor& a) {
        check_unary(d, a);
        return pointwise(*d, {a}, a.dtype());
      });
      lib.impl(n + ".out", dev, [d](const Tensor& a, Tensor& out) -> Tensor& {
        check_unary(d, a);
        return pointwise_out(*d, {a}, a.dtype(), out);
      });
    }
  }
  lib.def("gelu(Tensor self, *, str approximate='none') -> Tensor", t);
  lib.def("clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", t);
  for (auto dev : {DeviceType::CPU, DeviceType::CUDA, DeviceType::Meta}) {
    lib.impl("gelu", dev, [](const Tensor& a, std::string_view approximate) {
      return pointwise(gelu_desc(approximate), {a}, a.dtype());
    });
    lib.impl("clamp", dev,
             [](const Tensor& a, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
               const ClampArgs args{lo, hi};
               return pointwise(kClamp, {a}, clamp_type(a, args), &args);
             });
  }
}

// ---- public functions ---------------------------------------------------------------------------

#define TS_UNARY_FN(name)                              \
  Tensor name(const Tensor& a, SourceLoc loc) {        \
    UserLocGuard g(loc);                               \
    TS_CALL("aten::" #name, Tensor(const Tensor&), a); \
  }
TS_UNARY_FN(neg)
TS_UNARY_FN(abs)
TS_UNARY_FN(exp)
TS_UNARY_FN(exp2)
TS_UNARY_FN(log)
TS_UNARY_FN(log2)
TS_UNARY_FN(sqrt)
TS_UNARY_FN(rsqrt)
TS_UNARY_FN(sin)
TS_UNARY_FN(cos)
TS_UNARY_FN(tanh)
TS_UNARY_FN(sigmoid)
TS_UNARY_FN(erf)
TS_UNARY_FN(relu)
TS_UNARY_FN(silu)
TS_UNARY_FN(logical_not)
TS_UNARY_FN(bitwise_not)
#undef TS_UNARY_FN

Tensor gelu(const Tensor& a, std::string_view approximate, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::gelu", Tensor(const Tensor&, std::string_view), a, approximate);
}
Tensor clamp(const Tensor& a, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi,
             SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::clamp",
          Tensor(const Tensor&, const std::optional<Scalar>&, const std::optional<Scalar>&), a, lo,
          hi);
}

#define TS_UNARY_OUT_FN(name)                                                \
  Tensor& name##_out(Tensor& out, const Tensor& a, SourceLoc loc) {          \
    UserLocGuard g(loc);                                                     \
    TS_CALL("aten::" #name ".out", Tensor&(const Tensor&, Tensor&), a, out); \
  }
TS_UNARY_OUT_FN(exp)
TS_UNARY_OUT_FN(neg)
TS_UNARY_OUT_FN(sqrt)
#undef TS_UNARY_OUT_FN

Tensor& pointwise_out(std::string_view op, Tensor& out, TensorList inputs, SourceLoc loc) {
  UserLocGuard g(loc);
  Stack args;
  for (const auto& t : inputs) args.emplace_back(t);
  OpRef(std::string("aten::") + std::string(op) + ".out").call(std::move(args), {kw("out", out)});
  return out;
}

Tensor Tensor::neg(SourceLoc loc) const {
  return tessera::neg(*this, loc);
}
Tensor Tensor::abs(SourceLoc loc) const {
  return tessera::abs(*this, loc);
}
Tensor Tensor::exp(SourceLoc loc) const {
  return tessera::exp(*this, loc);
}
Tensor Tensor::log(SourceLoc loc) const {
  return tessera::log(*this, loc);
}
Tensor Tensor::sqrt(SourceLoc loc) const {
  return tessera::sqrt(*this, loc);
}
Tensor Tensor::rsqrt(SourceLoc loc) const {
  return tessera::rsqrt(*this, loc);
}
Tensor Tensor::sin(SourceLoc loc) const {
  return tessera::sin(*this, loc);
}
Tensor Tensor::cos(SourceLoc loc) const {
  return tessera::cos(*this, loc);
}
Tensor Tensor::tanh(SourceLoc loc) const {
  return tessera::tanh(*this, loc);
}
Tensor Tensor::sigmoid(SourceLoc loc) const {
  return tessera::sigmoid(*this, loc);
}
Tensor Tensor::relu(SourceLoc loc) const {
  return tessera::relu(*this, loc);
}
Tensor operator-(const Tensor& a) {
  return neg(a);
}
Tensor operator~(const Tensor& a) {
  return bitwise_not(a);
}

}  // namespace tessera
