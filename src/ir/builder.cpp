#include "ir/builder.h"

#include <cmath>
#include <type_traits>

#include "core/dtype_visit.h"
#include "tessera/trt/scalar.h"
#include "tessera/trt/scalar_ops.h"

namespace tessera::ir {
namespace {

// A constant's value: ints (and bools) as int64 bits, floats as double.
struct Num {
  bool is_float;
  int64_t i;
  double f;
};

Num num_of(const Op& c, const Type& t) {
  if (t.is_float()) return Num{true, 0, c.fval};
  return Num{false, c.ival, 0};
}

template <class T>
int64_t as_bits(T v) {
  if constexpr (std::is_same_v<T, bool>)
    return v ? 1 : 0;
  else
    return static_cast<int64_t>(v);
}

int64_t wrap_int(int64_t v, DType d) {
  return visit_dtype<kIntsAndBool>(d, "const", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>)
      return int64_t(v != 0);
    else
      return as_bits(static_cast<T>(v));
  });
}

double round_float(double v, DType d) {
  switch (d) {
    case DType::Float64:
      return v;
    case DType::Float32:
      return static_cast<float>(v);
    case DType::Float16:
      return static_cast<float>(Half(static_cast<float>(v)));
    case DType::BFloat16:
      return static_cast<float>(BFloat16(static_cast<float>(v)));
    case DType::Float8_e4m3fn:
      return static_cast<float>(Float8_e4m3fn(static_cast<float>(v)));
    case DType::Float8_e5m2:
      return static_cast<float>(Float8_e5m2(static_cast<float>(v)));
    default:
      return v;
  }
}

template <class T>
T int_op(BinaryKind k, T a, T b) {
  // Unsigned arithmetic wraps; types narrower than int would be promoted to (signed) int, where
  // 65533 * 65533 overflows: those compute in unsigned int.
  using U0 = typename trt::make_unsigned_t_<T>::type;
  using U = std::conditional_t<(sizeof(U0) < sizeof(unsigned)), unsigned, U0>;
  switch (k) {
    case BinaryKind::Add:
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    case BinaryKind::Sub:
      return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
    case BinaryKind::Mul:
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    case BinaryKind::Div:
      return trt::idiv(a, b);
    case BinaryKind::Rem:
      return trt::irem(a, b);
    case BinaryKind::Max:
      return a > b ? a : b;
    case BinaryKind::Min:
      return a < b ? a : b;
    case BinaryKind::And:
      return static_cast<T>(a & b);
    case BinaryKind::Or:
      return static_cast<T>(a | b);
    case BinaryKind::Xor:
      return static_cast<T>(a ^ b);
    case BinaryKind::Shl:
      return trt::shl(a, b);
    case BinaryKind::Shr:
      return trt::shr(a, b);
    case BinaryKind::UMulHi:
      return trt::umulhi(a, b);
    case BinaryKind::DivRn:
      return trt::idiv(a, b);
    default:
      break;  // the math functions: floats only (the verifier's rule)
  }
  return 0;
}

int64_t fold_int(BinaryKind k, int64_t a, int64_t b, DType d) {
  if (d == DType::Bool) {
    const bool x = a != 0, y = b != 0;
    switch (k) {
      case BinaryKind::And:
      case BinaryKind::Mul:
      case BinaryKind::Min:
        return x && y;
      case BinaryKind::Or:
      case BinaryKind::Max:
      case BinaryKind::Add:
        return x || y;
      case BinaryKind::Xor:
      case BinaryKind::Sub:
        return x != y;
      default:
        return 0;
    }
  }
  return visit_dtype<kInts>(d, "const", [&]<class T>() {
    return as_bits(int_op<T>(k, static_cast<T>(a), static_cast<T>(b)));
  });
}

double fold_float(BinaryKind k, double a, double b, DType d) {
  double r = 0;
  switch (k) {
    case BinaryKind::Add:
      r = a + b;
      break;
    case BinaryKind::Sub:
      r = a - b;
      break;
    case BinaryKind::Mul:
      r = a * b;
      break;
    case BinaryKind::Div:
    case BinaryKind::DivRn:
      r = a / b;
      break;
    case BinaryKind::Rem:
      r = std::fmod(a, b);
      break;
    case BinaryKind::Max:
      r = trt::fmax_num(a, b);
      break;
    case BinaryKind::Min:
      r = trt::fmin_num(a, b);
      break;
      // The runtime's functions, in the value's precision (as generated code computes them).
#define TESSERA_FOLD_MATH(kind, fn)                                                  \
  case BinaryKind::kind:                                                             \
    r = d == DType::Float64 ? trt::fn(a, b)                                          \
                            : trt::fn(static_cast<float>(a), static_cast<float>(b)); \
    break;
      TESSERA_IR_MATH_BINARY(TESSERA_FOLD_MATH)
#undef TESSERA_FOLD_MATH
    default:
      TS_INTERNAL_ASSERT(false) << "bitwise op on floats";
  }
  return round_float(r, d);
}

bool cmp(CmpKind k, auto a, auto b) {
  switch (k) {
    case CmpKind::EQ:
      return a == b;
    case CmpKind::NE:
      return a != b;
    case CmpKind::LT:
      return a < b;
    case CmpKind::LE:
      return a <= b;
    case CmpKind::GT:
      return a > b;
    case CmpKind::GE:
      return a >= b;
  }
  return false;
}

bool fold_cmp_num(CmpKind k, const Num& a, const Num& b, DType d) {
  if (a.is_float) return cmp(k, a.f, b.f);
  return visit_dtype<kIntsAndBool>(
      d, "cmp", [&]<class T>() { return cmp(k, static_cast<T>(a.i), static_cast<T>(b.i)); });
}

}  // namespace

double normalize_constant(double v, DType d) {
  if (is_floating_point(d)) return round_float(v, d);
  return static_cast<double>(wrap_int(static_cast<int64_t>(v), d));
}

double fold_binary(BinaryKind k, double a, double b, DType d) {
  if (is_floating_point(d)) return fold_float(k, a, b, d);
  return static_cast<double>(fold_int(k, static_cast<int64_t>(a), static_cast<int64_t>(b), d));
}

bool fold_compare(CmpKind k, double a, double b) {
  return cmp(k, a, b);
}

namespace eval {
int64_t wrap_int(int64_t v, DType d) {
  return ir::wrap_int(v, d);
}
double round_float(double v, DType d) {
  return ir::round_float(v, d);
}
int64_t binary_int(BinaryKind k, int64_t a, int64_t b, DType d) {
  return fold_int(k, a, b, d);
}
double binary_float(BinaryKind k, double a, double b, DType d) {
  return fold_float(k, a, b, d);
}
bool compare_int(CmpKind k, int64_t a, int64_t b, DType d) {
  return fold_cmp_num(k, Num{false, a, 0}, Num{false, b, 0}, d);
}
bool compare_float(CmpKind k, double a, double b) {
  return cmp(k, a, b);
}
}  // namespace eval

ValueId Builder::result(Op* op, Type t) {
  op->loc = loc_;
  const ValueId v = f_.new_value(std::move(t), op);
  op->results.push_back(v);
  insert(op);
  return v;
}

void Builder::insert(Op* op) {
  if (!op->loc.known()) op->loc = loc_;
  region_->ops.push_back(op);
}

ValueId Builder::constant_int(int64_t v, const Type& t) {
  TS_INTERNAL_ASSERT(!t.ptr && !is_floating_point(t.elem)) << "constant_int of type " << t.str();
  Op* op = f_.new_op(OpKind::Constant);
  op->ival = wrap_int(v, t.elem);
  return result(op, t);
}

ValueId Builder::constant_float(double v, const Type& t) {
  TS_INTERNAL_ASSERT(t.is_float()) << "constant_float of type " << t.str();
  Op* op = f_.new_op(OpKind::Constant);
  op->fval = round_float(v, t.elem);
  return result(op, t);
}

ValueId Builder::constant(double v, const Type& t) {
  if (t.is_float()) return constant_float(v, t);
  return constant_int(static_cast<int64_t>(v), t);
}

ValueId Builder::program_id(int axis) {
  Op* op = f_.new_op(OpKind::ProgramId);
  op->ival = axis;
  return result(op, Type::scalar(DType::Int32));
}

ValueId Builder::num_programs(int axis) {
  Op* op = f_.new_op(OpKind::NumPrograms);
  op->ival = axis;
  return result(op, Type::scalar(DType::Int32));
}

ValueId Builder::arange(int64_t start, int64_t end) {
  Op* op = f_.new_op(OpKind::Arange);
  op->ival = start;
  op->ival2 = end;
  const int64_t n = end - start;
  return result(op, Type::scalar(DType::Int32).with_shape({n}));
}

ValueId Builder::splat(ValueId scalar, ArrayRef<int64_t> shape) {
  const Type& st = type(scalar);
  TS_INTERNAL_ASSERT(st.is_scalar()) << "splat of a block";
  if (const Op* c = f_.constant(scalar)) {
    Op* op = f_.new_op(OpKind::Constant);
    op->ival = c->ival;
    op->fval = c->fval;
    return result(op, st.with_shape(shape));
  }
  Op* op = f_.new_op(OpKind::Splat);
  op->operands = {scalar};
  return result(op, st.with_shape(shape));
}

ValueId Builder::broadcast(ValueId v, ArrayRef<int64_t> shape) {
  if (type(v).shape == SmallVector<int64_t, 4>(shape)) return v;
  if (type(v).is_scalar()) return splat(v, shape);
  // A lower rank gets leading dimensions of size 1 (NumPy's rule).
  while (static_cast<size_t>(type(v).rank()) < shape.size()) v = expand_dims(v, 0);
  const Type& t = type(v);
  if (t.shape == SmallVector<int64_t, 4>(shape)) return v;
  if (const Op* c = f_.constant(v)) {
    Op* op = f_.new_op(OpKind::Constant);
    op->ival = c->ival;
    op->fval = c->fval;
    return result(op, t.with_shape(shape));
  }
  Op* op = f_.new_op(OpKind::Broadcast);
  op->operands = {v};
  return result(op, t.with_shape(shape));
}

ValueId Builder::expand_dims(ValueId v, int64_t axis) {
  Type t = type(v);
  SmallVector<int64_t, 4> shape = t.shape;
  shape.insert(shape.begin() + axis, 1);
  if (const Op* c = f_.constant(v)) {
    Op* op = f_.new_op(OpKind::Constant);
    op->ival = c->ival;
    op->fval = c->fval;
    return result(op, t.with_shape(shape));
  }
  Op* op = f_.new_op(OpKind::ExpandDims);
  op->ival = axis;
  op->operands = {v};
  return result(op, t.with_shape(shape));
}

double Builder::fold_value(const Function& f, ValueId v) {
  const Op* c = f.constant(v);
  TS_INTERNAL_ASSERT(c) << "fold_value of a non-constant";
  return f.type(v).is_float() ? c->fval : static_cast<double>(c->ival);
}

ValueId Builder::binary(BinaryKind k, ValueId a, ValueId b) {
  const Type t = type(a);
  const Op* ca = f_.constant(a);
  const Op* cb = f_.constant(b);
  if (ca && cb) {
    const Num x = num_of(*ca, t), y = num_of(*cb, t);
    if (t.is_float()) return constant_float(fold_float(k, x.f, y.f, t.elem), t);
    return constant_int(fold_int(k, x.i, y.i, t.elem), t);
  }
  Op* op = f_.new_op(OpKind::Binary);
  op->sub = static_cast<uint8_t>(k);
  op->operands = {a, b};
  return result(op, t);
}

ValueId Builder::compare(CmpKind k, ValueId a, ValueId b) {
  const Type t = type(a);
  Type rt = t;
  rt.elem = DType::Bool;
  rt.ptr = false;
  const Op* ca = f_.constant(a);
  const Op* cb = f_.constant(b);
  if (ca && cb && !t.ptr) {
    return constant_int(fold_cmp_num(k, num_of(*ca, t), num_of(*cb, t), t.elem), rt);
  }
  Op* op = f_.new_op(OpKind::Compare);
  op->sub = static_cast<uint8_t>(k);
  op->operands = {a, b};
  return result(op, rt);
}

ValueId Builder::unary(UnaryKind k, ValueId a) {
  const Type t = type(a);
  if (const Op* c = f_.constant(a)) {
    // Fold only exact operations; transcendental results come from the runtime's math library.
    if (k == UnaryKind::Neg) {
      if (t.is_float()) return constant_float(-c->fval, t);
      return constant_int(fold_int(BinaryKind::Sub, 0, c->ival, t.elem), t);
    }
    if (k == UnaryKind::Not && !t.is_float()) {
      return constant_int(t.is_bool() ? !c->ival : ~c->ival, t);
    }
    if (k == UnaryKind::Abs && t.is_float()) return constant_float(std::fabs(c->fval), t);
  }
  Op* op = f_.new_op(OpKind::Unary);
  op->sub = static_cast<uint8_t>(k);
  op->operands = {a};
  return result(op, t);
}

ValueId Builder::cast(ValueId a, DType to) {
  Type t = type(a);
  if (t.elem == to) return a;
  Type rt = t;
  rt.elem = to;
  if (const Op* c = f_.constant(a)) {
    if (is_floating_point(to)) {
      const double v = t.is_float() ? c->fval
                                    : (t.elem == DType::UInt64
                                           ? static_cast<double>(static_cast<uint64_t>(c->ival))
                                           : static_cast<double>(c->ival));
      return constant_float(v, rt);
    }
    if (to == DType::Bool) return constant_int(t.is_float() ? c->fval != 0 : c->ival != 0, rt);
    if (t.is_float()) {
      const int64_t i = visit_dtype<kIntsAndBool>(
          to, "cast", [&]<class T>() { return as_bits(convert<T>(c->fval)); });
      return constant_int(i, rt);
    }
    return constant_int(c->ival, rt);
  }
  Op* op = f_.new_op(OpKind::Cast);
  op->operands = {a};
  return result(op, rt);
}

// An atomic op, inserted now (it has side effects); its result has the pointee type.
ValueId Builder::atomic_op(Op* op, ValueId ptr) {
  op->loc = loc_;
  Type t = type(ptr);
  t.ptr = false;
  const ValueId r = f_.new_value(t, op);
  op->results.push_back(r);
  insert(op);
  return r;
}

ValueId Builder::atomic(AtomicKind k, MemOrder o, ValueId ptr, ValueId v, ValueId mask) {
  Op* op = f_.new_op(OpKind::Atomic);
  op->sub = static_cast<uint8_t>(k);
  op->ival = static_cast<int64_t>(o);
  op->operands = {ptr, v};
  if (mask != kNoValue) op->operands.push_back(mask);
  return atomic_op(op, ptr);
}

ValueId Builder::atomic_cas(MemOrder o, ValueId ptr, ValueId cmp, ValueId v) {
  Op* op = f_.new_op(OpKind::AtomicCas);
  op->ival = static_cast<int64_t>(o);
  op->operands = {ptr, cmp, v};
  return atomic_op(op, ptr);
}

ValueId Builder::permute(ValueId v, ArrayRef<int64_t> perm) {
  const Type& t = type(v);
  SmallVector<int64_t, 4> shape;
  int64_t packed = 0;
  for (size_t d = 0; d < perm.size(); ++d) {
    shape.push_back(t.shape[static_cast<size_t>(perm[d])]);
    packed |= perm[d] << (4 * d);
  }
  Op* op = f_.new_op(OpKind::Permute);
  op->ival = packed;
  op->operands = {v};
  return result(op, t.with_shape(shape));
}

ValueId Builder::reshape(ValueId v, ArrayRef<int64_t> shape) {
  const Type& t = type(v);
  if (t.shape == SmallVector<int64_t, 4>(shape)) return v;
  Op* op = f_.new_op(OpKind::Reshape);
  op->operands = {v};
  return result(op, t.with_shape(shape));
}

ValueId Builder::join(ValueId a, ValueId b) {
  const Type& t = type(a);
  SmallVector<int64_t, 4> shape = t.shape;
  shape.push_back(2);
  Op* op = f_.new_op(OpKind::Join);
  op->operands = {a, b};
  return result(op, t.with_shape(shape));
}

ValueId Builder::extract(ValueId v, int64_t which) {
  const Type& t = type(v);
  SmallVector<int64_t, 4> shape(t.shape.begin(), t.shape.end() - 1);
  Op* op = f_.new_op(OpKind::Extract);
  op->ival = which;
  op->operands = {v};
  return result(op, t.with_shape(shape));
}

ValueId Builder::cat(ValueId a, ValueId b) {
  const Type& t = type(a);
  SmallVector<int64_t, 4> shape = t.shape;
  shape[0] *= 2;
  Op* op = f_.new_op(OpKind::Cat);
  op->operands = {a, b};
  return result(op, t.with_shape(shape));
}

ValueId Builder::flip(ValueId v, int64_t axis) {
  const Type& t = type(v);
  if (f_.constant(v) || t.shape[static_cast<size_t>(axis)] == 1) return v;
  Op* op = f_.new_op(OpKind::Flip);
  op->operands = {v};
  op->ival = axis;
  return result(op, t);
}

ValueId Builder::gather(ValueId src, ValueId index, int64_t axis) {
  Op* op = f_.new_op(OpKind::Gather);
  op->operands = {src, index};
  op->ival = axis;
  return result(op, type(src).with_shape(type(index).shape));
}

ValueId Builder::extern_call(std::string text, std::vector<ValueId> args, const Type& result,
                             bool pure) {
  Op* op = f_.new_op(OpKind::Extern);
  op->operands = std::move(args);
  op->text = std::move(text);
  op->sub = pure ? 0 : 1;
  return this->result(op, result);
}

ValueId Builder::bitcast_to(ValueId v, const Type& to) {
  if (type(v) == to) return v;
  Op* op = f_.new_op(OpKind::Bitcast);
  op->operands = {v};
  return result(op, to);
}

ValueId Builder::bitcast(ValueId v, DType to) {
  Type t = type(v);
  if (t.elem == to) return v;
  t.elem = to;
  Op* op = f_.new_op(OpKind::Bitcast);
  op->operands = {v};
  return result(op, t);
}

Op* Builder::create_reduce_fn(const std::vector<ValueId>& inputs, int64_t axis, bool scan,
                              bool reverse) {
  Op* op = f_.new_op(scan ? OpKind::ScanFn : OpKind::ReduceFn);
  op->loc = loc_;
  op->ival = axis;
  op->sub = reverse ? 1 : 0;
  op->operands = inputs;
  op->regions.resize(1);
  for (int side = 0; side < 2; ++side) {
    for (ValueId v : inputs)
      op->regions[0].args.push_back(f_.new_value(Type::scalar(type(v).elem)));
  }
  for (ValueId v : inputs) {
    Type t = type(v);
    if (!scan) t.shape.erase(t.shape.begin() + axis);
    op->results.push_back(f_.new_value(t, op));
  }
  return op;
}

void Builder::assert_(ValueId cond, std::string message, bool hint) {
  Op* op = f_.new_op(OpKind::Assert);
  op->operands = {cond};
  op->sub = hint ? 1 : 0;
  op->text = std::move(message);
  op->loc = loc_;
  insert(op);
}

void Builder::print(std::string prefix, const std::vector<ValueId>& values) {
  Op* op = f_.new_op(OpKind::Print);
  op->operands = values;
  op->text = std::move(prefix);
  op->loc = loc_;
  insert(op);
}

Op* Builder::create_while() {
  Op* op = f_.new_op(OpKind::While);
  op->loc = loc_;
  op->regions.resize(2);
  return op;
}

ValueId Builder::dot(ValueId a, ValueId b, ValueId acc, DotPrecision p) {
  Op* op = f_.new_op(OpKind::Dot);
  op->sub = static_cast<uint8_t>(p);
  op->operands = {a, b, acc};
  return result(op, type(acc));
}

ValueId Builder::fma(ValueId a, ValueId b, ValueId c) {
  const Type t = type(a);
  const Op* ca = f_.constant(a);
  const Op* cb = f_.constant(b);
  const Op* cc = f_.constant(c);
  if (ca && cb && cc) {
    const double r = t.elem == DType::Float64
                         ? std::fma(ca->fval, cb->fval, cc->fval)
                         : static_cast<double>(std::fma(static_cast<float>(ca->fval),
                                                        static_cast<float>(cb->fval),
                                                        static_cast<float>(cc->fval)));
    return constant_float(round_float(r, t.elem), t);
  }
  Op* op = f_.new_op(OpKind::Fma);
  op->operands = {a, b, c};
  return result(op, t);
}

ValueId Builder::select(ValueId cond, ValueId a, ValueId b) {
  if (const Op* c = f_.constant(cond)) return c->ival ? a : b;
  Op* op = f_.new_op(OpKind::Select);
  op->operands = {cond, a, b};
  return result(op, type(a));
}

ValueId Builder::addptr(ValueId ptr, ValueId offset) {
  Op* op = f_.new_op(OpKind::AddPtr);
  op->operands = {ptr, offset};
  return result(op, type(ptr));
}

ValueId Builder::load(ValueId ptr, ValueId mask, ValueId other) {
  Op* op = f_.new_op(OpKind::Load);
  op->operands = {ptr};
  if (mask != kNoValue) op->operands.push_back(mask);
  if (other != kNoValue) op->operands.push_back(other);
  Type t = type(ptr);
  t.ptr = false;
  return result(op, t);
}

void Builder::store(ValueId ptr, ValueId value, ValueId mask) {
  Op* op = f_.new_op(OpKind::Store);
  op->operands = {ptr, value};
  if (mask != kNoValue) op->operands.push_back(mask);
  op->loc = loc_;
  insert(op);
}

ValueId Builder::reduce(ReduceKind k, ValueId v, int64_t axis) {
  Type t = type(v);
  SmallVector<int64_t, 4> shape = t.shape;
  shape.erase(shape.begin() + axis);
  Op* op = f_.new_op(OpKind::Reduce);
  op->sub = static_cast<uint8_t>(k);
  op->ival = axis;
  op->operands = {v};
  if (k == ReduceKind::ArgMax || k == ReduceKind::ArgMin) t = Type::scalar(DType::Int32);
  return result(op, t.with_shape(shape));
}

Op* Builder::create_for(ValueId lb, ValueId ub, ValueId step) {
  Op* op = f_.new_op(OpKind::For);
  op->loc = loc_;
  op->operands = {lb, ub, step};
  op->regions.resize(1);
  op->regions[0].args.push_back(f_.new_value(type(lb)));
  return op;
}

Op* Builder::create_if(ValueId cond) {
  Op* op = f_.new_op(OpKind::If);
  op->loc = loc_;
  op->operands = {cond};
  op->regions.resize(2);
  return op;
}

void Builder::yield(const std::vector<ValueId>& values) {
  Op* op = f_.new_op(OpKind::Yield);
  op->operands = values;
  op->loc = loc_;
  insert(op);
}

}  // namespace tessera::ir
