// The kernel language's functions and operators: Triton's semantics (semantic.py) over the tile
// IR builder. Type promotion, broadcasting and every user-facing check live here, so errors name
// the kernel and the user's line.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

#include "ir/passes.h"
#include "runtime/disk_cache.h"
#include "tessera/detail/hash.h"
#include "tl/trace.h"

namespace tessera::tl {
namespace {

using ir::BinaryKind;
using ir::CmpKind;
using ir::Type;
using ir::UnaryKind;
using ir::ValueId;

TraceContext& ctx(SourceLoc loc) {
  TraceContext& c = TraceContext::current(loc);
  c.at(loc);
  return c;
}

ValueId val(TraceContext& c, const Operand& o) {
  return c.value(o.tile, o.loc);
}

std::string shape_str(ArrayRef<int64_t> s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

bool is_pow2(int64_t v) {
  return v > 0 && (v & (v - 1)) == 0;
}

// Kinds for Triton's scalar promotion rule: bool < uint < int < float.
int kind_rank(const Type& t) {
  if (t.elem == DType::Bool) return 0;
  if (is_floating_point(t.elem)) return 3;
  if (!is_signed(t.elem)) return 1;
  return 2;
}

int int_width(DType d) {
  return static_cast<int>(itemsize(d)) * 8;
}

DType integer_promote(SourceLoc loc, TraceContext& c, DType a, DType b) {
  (void)loc;
  (void)c;
  const bool as = is_signed(a) || a == DType::Bool, bs = is_signed(b) || b == DType::Bool;
  const int aw = a == DType::Bool ? 1 : int_width(a), bw = b == DType::Bool ? 1 : int_width(b);
  if (as == bs) return aw >= bw ? a : b;
  if (!as) return aw >= bw ? a : b;
  return bw >= aw ? b : a;
}

// Triton's computation_type_impl.
DType computation_type(TraceContext& c, SourceLoc loc, const Type& a, const Type& b,
                       bool div_or_mod) {
  const bool a_scalar = a.is_scalar(), b_scalar = b.is_scalar();
  if (a_scalar != b_scalar) {
    const Type& s = a_scalar ? a : b;
    const Type& t = a_scalar ? b : a;
    if (kind_rank(s) <= kind_rank(t)) {
      if (div_or_mod && (t.elem == DType::Float16 || t.elem == DType::BFloat16))
        return DType::Float32;
      return t.elem;
    }
  }
  if (a.elem == DType::Float64 || b.elem == DType::Float64) return DType::Float64;
  if (a.elem == DType::Float32 || b.elem == DType::Float32) return DType::Float32;
  if (a.elem == DType::Float16 || b.elem == DType::Float16) {
    return div_or_mod ? DType::Float32 : DType::Float16;
  }
  if (a.elem == DType::BFloat16 || b.elem == DType::BFloat16) {
    if (div_or_mod) return DType::Float32;
    return (a.elem == DType::BFloat16 && b.elem == DType::BFloat16) ? DType::BFloat16
                                                                    : DType::Float32;
  }
  if (is_float8(a.elem) || is_float8(b.elem)) {
    c.fail(loc, std::string("arithmetic on float8 values (") + ir::elem_name(a.elem) + ", " +
                    ir::elem_name(b.elem) +
                    "): cast them to a wider type first (.to(tl::float32))");
  }
  if (div_or_mod && a.elem != DType::Bool && b.elem != DType::Bool &&
      is_signed(a.elem) != is_signed(b.elem)) {
    c.fail(loc, std::string("cannot use / or % with ") + ir::elem_name(a.elem) + " and " +
                    ir::elem_name(b.elem) +
                    " because they have different signedness; cast them to "
                    "the same signedness");
  }
  return integer_promote(loc, c, a.elem, b.elem);
}

// Broadcast shapes as Triton (and NumPy) do: a scalar splats; a lower rank gets leading
// dimensions of size 1; then dimensions must be equal or 1.
SmallVector<int64_t, 4> broadcast_shape(TraceContext& c, SourceLoc loc, const Type& a,
                                        const Type& b, const char* what) {
  if (a.is_scalar()) return b.shape;
  if (b.is_scalar()) return a.shape;
  const size_t rank = std::max(a.rank(), b.rank());
  auto padded = [rank](const Type& t) {
    SmallVector<int64_t, 4> s(rank - t.rank(), 1);
    s.append(t.shape.begin(), t.shape.end());
    return s;
  };
  const SmallVector<int64_t, 4> as = padded(a), bs = padded(b);
  SmallVector<int64_t, 4> out = as;
  for (size_t i = 0; i < out.size(); ++i) {
    if (as[i] == bs[i]) continue;
    if (as[i] == 1) {
      out[i] = bs[i];
    } else if (bs[i] != 1) {
      c.fail(loc, std::string(what) + ": shape mismatch: " + shape_str(a.shape) + " and " +
                      shape_str(b.shape) + " cannot be broadcast (dimension " + std::to_string(i) +
                      (a.rank() != b.rank() ? " after aligning the last dimensions" : "") + ")");
    }
  }
  return out;
}

ValueId to_shape(TraceContext& c, ValueId v, ArrayRef<int64_t> shape) {
  return c.builder().broadcast(v, shape);
}

ValueId cast_value(TraceContext& c, ValueId v, DType d) {
  return c.builder().cast(v, d);
}

ValueId to_bool(TraceContext& c, ValueId v) {
  const Type t = c.type(v);
  if (t.elem == DType::Bool && !t.ptr) return v;
  if (t.ptr) c.fail(c.loc(), "a pointer cannot be used as a condition");
  const ValueId zero = c.builder().constant(0, t.scalar_type());
  return c.builder().compare(CmpKind::NE, v, to_shape(c, zero, t.shape));
}

Tile pointer_arith(TraceContext& c, SourceLoc loc, bool subtract, ValueId x, ValueId y,
                   const char* op) {
  const Type tx = c.type(x), ty = c.type(y);
  if (tx.ptr && ty.ptr) {
    c.fail(loc, std::string("invalid operands for ") + op + ": " + tx.str() + " and " + ty.str());
  }
  if (subtract && ty.ptr)
    c.fail(loc, std::string("invalid operands for ") + op + ": " + tx.str() + " and " + ty.str());
  const ValueId p = tx.ptr ? x : y;
  ValueId off = tx.ptr ? y : x;
  const Type& toff = c.type(off);
  if (!toff.is_int() || toff.elem == DType::Bool) {
    c.fail(loc, std::string("pointer arithmetic needs an integer offset, got ") + toff.str());
  }
  const auto shape = broadcast_shape(c, loc, c.type(p), toff, op);
  if (subtract) off = c.builder().unary(UnaryKind::Neg, off);
  return c.tile(c.builder().addptr(to_shape(c, p, shape), to_shape(c, off, shape)));
}

Tile arith(BinaryKind k, const Operand& a, const Operand& b, const char* op) {
  TraceContext& c = ctx(a.loc);
  ValueId x = val(c, a), y = val(c, b);
  const Type tx = c.type(x), ty = c.type(y);
  if (tx.ptr || ty.ptr) {
    if (k == BinaryKind::Add || k == BinaryKind::Sub)
      return pointer_arith(c, a.loc, k == BinaryKind::Sub, x, y, op);
    c.fail(a.loc, std::string("invalid operands for ") + op + ": " + tx.str() + " and " + ty.str());
  }
  const bool bitwise = k == BinaryKind::And || k == BinaryKind::Or || k == BinaryKind::Xor;
  const bool int_only = k == BinaryKind::Shl || k == BinaryKind::Shr || k == BinaryKind::UMulHi;
  if (bitwise && (tx.is_float() || ty.is_float())) {
    c.fail(a.loc, std::string("bitwise operator ") + op + " needs integer operands, got " +
                      tx.str() + " and " + ty.str());
  }
  if (int_only &&
      (!tx.is_int() || !ty.is_int() || tx.elem == DType::Bool || ty.elem == DType::Bool)) {
    c.fail(a.loc,
           std::string(op) + " needs integer operands, got " + tx.str() + " and " + ty.str());
  }
  // div_rn takes floats; the math library's functions take a float and promote the other side
  // (`tl::pow(x, 2)`).
  const bool libm = ir::is_math_binary(k);
  if ((k == BinaryKind::DivRn && (!tx.is_float() || !ty.is_float())) ||
      (libm && !tx.is_float() && !ty.is_float())) {
    c.fail(a.loc, std::string(op) + " needs floating point operands, got " + tx.str() + " and " +
                      ty.str());
  }
  const DType ct = computation_type(c, a.loc, tx, ty, k == BinaryKind::Div || k == BinaryKind::Rem);
  const auto shape = broadcast_shape(c, a.loc, tx, ty, op);
  x = to_shape(c, cast_value(c, x, ct), shape);
  y = to_shape(c, cast_value(c, y, ct), shape);
  return c.tile(c.builder().binary(k, x, y));
}

Tile compare(CmpKind k, const Operand& a, const Operand& b, const char* op) {
  TraceContext& c = ctx(a.loc);
  ValueId x = val(c, a), y = val(c, b);
  const Type tx = c.type(x), ty = c.type(y);
  const auto shape = broadcast_shape(c, a.loc, tx, ty, op);
  if (tx.ptr || ty.ptr) {
    if (tx != ty && !(tx.ptr && ty.ptr && tx.elem == ty.elem)) {
      c.fail(a.loc, std::string("cannot compare ") + tx.str() + " with " + ty.str());
    }
  } else {
    const DType ct = computation_type(c, a.loc, tx, ty, false);
    x = cast_value(c, x, ct);
    y = cast_value(c, y, ct);
  }
  return c.tile(c.builder().compare(k, to_shape(c, x, shape), to_shape(c, y, shape)));
}

Tile float_unary(UnaryKind k, const Operand& x, const char* name) {
  TraceContext& c = ctx(x.loc);
  const ValueId v = val(c, x);
  const Type& t = c.type(v);
  if (!t.is_float() || is_float8(t.elem)) {
    c.fail(x.loc, std::string("tl::") + name +
                      " expects a floating point argument (fp16, bf16, fp32, fp64), got " +
                      t.str());
  }
  return c.tile(c.builder().unary(k, v));
}

int64_t constant_int(TraceContext& c, const Operand& o, const char* what) {
  const ValueId v = val(c, o);
  const ir::Op* k = c.function().constant(v);
  const Type& t = c.type(v);
  if (!k || !t.is_scalar() || t.is_float()) {
    c.fail(o.loc, std::string(what) +
                      " must be a constexpr integer (a tl::Const parameter, a C++ "
                      "number or arithmetic on them), got a runtime " +
                      t.str());
  }
  return k->ival;
}

SmallVector<int64_t, 4> constant_shape(TraceContext& c, std::initializer_list<Operand> shape,
                                       const char* what) {
  SmallVector<int64_t, 4> out;
  for (const auto& o : shape) {
    const int64_t d = constant_int(c, o, what);
    if (!is_pow2(d)) {
      c.fail(o.loc,
             std::string(what) + ": tile dimensions must be powers of 2, got " + std::to_string(d));
    }
    out.push_back(d);
  }
  return out;
}

Tile reduce(ir::ReduceKind k, const Operand& x, std::optional<int> axis, const char* name) {
  TraceContext& c = ctx(x.loc);
  ValueId v = val(c, x);
  Type t = c.type(v);
  if (t.ptr) c.fail(x.loc, std::string("tl::") + name + " of pointers");
  if (t.is_scalar()) {
    if (axis)
      c.fail(x.loc, std::string("tl::") + name + " with an axis needs a tile, got a scalar");
    return c.tile(v);
  }
  if (is_float8(t.elem))
    c.fail(x.loc, std::string("tl::") + name + " of float8 values: cast them first");
  if (k == ir::ReduceKind::Xor && (!t.is_int() || t.elem == DType::Bool)) {
    c.fail(x.loc, std::string("tl::") + name + " needs integers, got " + t.str());
  }
  if (k == ir::ReduceKind::Sum) {
    if (t.elem == DType::Bool)
      v = cast_value(c, v, DType::Int32);
    else if (is_integral(t.elem) && int_width(t.elem) < 32)
      v = cast_value(c, v, is_signed(t.elem) ? DType::Int32 : DType::UInt32);
    else if (t.elem == DType::BFloat16)
      v = cast_value(c, v, DType::Float32);
  }
  t = c.type(v);
  if (axis) {
    const int64_t r = t.rank();
    int64_t a = *axis;
    if (a < -r || a >= r) {
      c.fail(x.loc, std::string("tl::") + name + ": axis " + std::to_string(a) +
                        " is out of range for a tile of shape " + shape_str(t.shape));
    }
    if (a < 0) a += r;
    return c.tile(c.builder().reduce(k, v, a));
  }
  for (int64_t a = t.rank() - 1; a >= 0; --a) v = c.builder().reduce(k, v, a);
  return c.tile(v);
}

// Region SSA for Vars: see range() and if_() below.
struct LiveVars {
  std::vector<int32_t> index;
  std::vector<ValueId> saved;
};

LiveVars snapshot(TraceContext& c) {
  LiveVars lv;
  auto& vars = c.vars();
  for (size_t i = 0; i < vars.size(); ++i) {
    if (vars[i].alive) {
      lv.index.push_back(static_cast<int32_t>(i));
      lv.saved.push_back(vars[i].value);
    }
  }
  return lv;
}

// Traces `body` into region `r` with each live Var reading its placeholder, then yields the Vars
// the body assigned; returns their indices in `lv` (the loop-carried ones).
std::vector<size_t> trace_loop_body(TraceContext& c, ir::Region& r, const LiveVars& lv,
                                    const std::vector<ValueId>& placeholders,
                                    FunctionRef<void()> body, SourceLoc loc) {
  ir::Builder& b = c.builder();
  ir::Builder::InsertionGuard g(b);
  b.set_insertion_region(&r);
  for (size_t k = 0; k < lv.index.size(); ++k) c.var(lv.index[k]).value = placeholders[k];
  c.push_scope();
  body();
  c.pop_scope();
  c.at(loc);
  std::vector<size_t> carried;
  std::vector<ValueId> yields;
  for (size_t k = 0; k < lv.index.size(); ++k) {
    if (c.var(lv.index[k]).value != placeholders[k]) {
      carried.push_back(k);
      yields.push_back(c.var(lv.index[k]).value);
    }
  }
  b.yield(yields);
  return carried;
}

void if_impl(const Operand& cond, FunctionRef<void()> then_body,
             const FunctionRef<void()>* else_body, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  ValueId cv = val(c, cond);
  if (!c.type(cv).is_scalar()) {
    c.fail(loc, "tl::if_ needs a scalar condition, got a tile of shape " +
                    shape_str(c.type(cv).shape) + " (use tl::where for elementwise choices)");
  }
  cv = to_bool(c, cv);
  ir::Builder& b = c.builder();
  ir::Op* op = b.create_if(cv);
  const LiveVars lv = snapshot(c);
  std::vector<std::vector<ValueId>> branch_vals(2);
  for (int branch = 0; branch < 2; ++branch) {
    ir::Builder::InsertionGuard g(b);
    b.set_insertion_region(&op->regions[static_cast<size_t>(branch)]);
    c.push_scope();
    if (branch == 0) {
      then_body();
    } else if (else_body) {
      (*else_body)();
    }
    c.pop_scope();
    for (size_t k = 0; k < lv.index.size(); ++k) {
      auto& var = c.var(lv.index[k]);
      branch_vals[static_cast<size_t>(branch)].push_back(var.value);
      var.value = lv.saved[k];
    }
  }
  c.at(loc);
  std::vector<size_t> written;
  for (size_t k = 0; k < lv.index.size(); ++k) {
    if (branch_vals[0][k] != lv.saved[k] || branch_vals[1][k] != lv.saved[k]) written.push_back(k);
  }
  for (int branch = 0; branch < 2; ++branch) {
    ir::Builder::InsertionGuard g(b);
    b.set_insertion_region(&op->regions[static_cast<size_t>(branch)]);
    std::vector<ValueId> ys;
    for (size_t k : written) ys.push_back(branch_vals[static_cast<size_t>(branch)][k]);
    b.yield(ys);
  }
  for (size_t k : written) {
    auto& var = c.var(lv.index[k]);
    const ValueId r = c.function().new_value(var.type, op);
    op->results.push_back(r);
    var.value = r;
  }
  b.insert(op);
}

}  // namespace

// ---- Tile ---------------------------------------------------------------------------------------

// A handle remembers the scope (region) it was declared in, so that assigning to it from a
// nested region can be refused: region results are carried by tl::Var only.
Tile::Tile() {
  if (TraceContext* c = TraceContext::current_or_null()) {
    trace_ = c->id();
    scope_ = c->scope();
  }
}

Tile::Tile(const Tile& o) : id_(o.id_), trace_(o.trace_), scope_(o.scope_) {
  if (TraceContext* c = TraceContext::current_or_null()) {
    trace_ = o.id_ >= 0 ? o.trace_ : c->id();
    scope_ = c->scope();
  }
}

Tile& Tile::operator=(const Tile& o) {
  TraceContext* c = TraceContext::current_or_null();
  if (c && trace_ == c->id() && scope_ != c->scope() && c->scope_active(scope_)) {
    c->fail(c->loc(),
            "a tl::Tile declared outside this tl::range / tl::if_ region is assigned inside "
            "it; declare it as a tl::Var to carry a value out of the region");
  }
  id_ = o.id_;
  trace_ = o.trace_;
  return *this;
}

DType Tile::dtype() const {
  return TraceContext::current({}).type(id_).elem;
}
bool Tile::is_ptr() const {
  return TraceContext::current({}).type(id_).ptr;
}
std::vector<int64_t> Tile::shape() const {
  const auto& s = TraceContext::current({}).type(id_).shape;
  return std::vector<int64_t>(s.begin(), s.end());
}
int64_t Tile::rank() const {
  return TraceContext::current({}).type(id_).rank();
}
bool Tile::is_constant() const {
  TraceContext& c = TraceContext::current({});
  return c.function().constant(c.value(*this, {})) != nullptr;
}

int64_t Tile::int_value(SourceLoc loc) const {
  TraceContext& c = TraceContext::current(loc);
  return constant_int(c, Operand(*this, loc), "the value");
}

double Tile::float_value(SourceLoc loc) const {
  TraceContext& c = TraceContext::current(loc);
  const ValueId v = c.value(*this, loc);
  const ir::Op* k = c.function().constant(v);
  if (!k || !c.type(v).is_scalar()) c.fail(loc, "expected a constexpr number, got a runtime value");
  return c.type(v).is_float() ? k->fval : static_cast<double>(k->ival);
}

Tile::operator bool() const {
  TraceContext& c = TraceContext::current({});
  const ValueId v = c.value(*this, c.loc());
  const ir::Op* k = c.function().constant(v);
  if (!k || !c.type(v).is_scalar()) {
    c.fail(c.loc(),
           "a runtime value is used as a C++ condition (if/for/while/?:); branches on runtime "
           "values are tl::if_, loops tl::range, elementwise choices tl::where");
  }
  return c.type(v).is_float() ? k->fval != 0 : k->ival != 0;
}

Tile Tile::to(DType dtype, SourceLoc loc) const {
  TraceContext& c = TraceContext::current(loc);
  const ValueId v = c.value(*this, loc);
  if (c.type(v).ptr && (dtype == DType::Int64 || dtype == DType::UInt64)) {
    Type t = c.type(v);
    t.ptr = false;
    t.elem = dtype;
    return c.tile(c.builder().bitcast_to(v, t));  // the address
  }
  return cast(Operand(*this, loc), dtype, loc);
}

Tile Tile::to(PointerType p, SourceLoc loc) const {
  TraceContext& c = TraceContext::current(loc);
  const ValueId v = c.value(*this, loc);
  const Type& from = c.type(v);
  if (!from.ptr && from.elem != DType::Int64 && from.elem != DType::UInt64) {
    c.fail(loc, "a cast to a pointer takes an int64 address or a pointer, got " + from.str());
  }
  Type t = from;
  t.ptr = true;
  t.elem = p.elem;
  return c.tile(c.builder().bitcast_to(v, t));
}

DType Tile::dtype_value(SourceLoc loc) const {
  TraceContext& c = TraceContext::current(loc);
  const ValueId v = c.value(*this, loc);
  const auto& dv = c.dtype_values();
  const ir::Op* k = c.function().constant(v);
  if (!k || std::find(dv.begin(), dv.end(), v) == dv.end()) {
    c.fail(loc,
           "dtype_value() of a value that is not a dtype constexpr (pass tl::meta(\"NAME\", "
           "tl::float16))");
  }
  return static_cast<DType>(k->ival);
}

Tile Tile::operator[](std::initializer_list<IndexSpec> index) const {
  TraceContext& c = TraceContext::current({});
  ValueId v = c.value(*this, c.loc());
  const int64_t rank = c.type(v).rank();
  int64_t kept = 0;
  for (IndexSpec s : index) kept += s == IndexSpec::All ? 1 : 0;
  if (kept != rank) {
    c.fail(c.loc(), "subscript x[{...}] names " + std::to_string(kept) +
                        " existing dimensions (tl::_) "
                        "but the tile has " +
                        std::to_string(rank));
  }
  int64_t axis = 0;
  for (IndexSpec s : index) {
    if (s == IndexSpec::NewAxis) {
      v = c.type(v).is_scalar() ? c.builder().splat(v, {1}) : c.builder().expand_dims(v, axis);
    }
    ++axis;
  }
  return c.tile(v);
}

// ---- Operand and Var ----------------------------------------------------------------------------

Operand::Operand(const Tile& t, SourceLoc l) : tile(t), loc(l) {}
Operand::Operand(const Var& v, SourceLoc l) : tile(v.get()), loc(l) {}

Tile Operand::literal_int(int64_t v, bool unsigned64) {
  TraceContext& c = TraceContext::current({});
  DType d = DType::Int32;
  if (unsigned64 && v < 0)
    d = DType::UInt64;
  else if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
    d = DType::Int64;
  return c.tile(c.builder().constant_int(v, Type::scalar(d)));
}

Tile Operand::literal_float(double v) {
  TraceContext& c = TraceContext::current({});
  return c.tile(c.builder().constant_float(v, Type::scalar(DType::Float32)));
}

Tile Operand::literal_bool(bool v) {
  TraceContext& c = TraceContext::current({});
  return c.tile(c.builder().constant_int(v, Type::scalar(DType::Bool)));
}

Var::Var(Operand init) {
  TraceContext& c = ctx(init.loc);
  index_ = c.new_var(val(c, init), init.loc);
  trace_ = c.id();
}

Var& Var::operator=(Operand value) {
  TraceContext& c = ctx(value.loc);
  if (!value.loc.known()) value.loc = c.loc();  // plain `var = tile`: the line that made the tile
  if (trace_ != c.id()) c.fail(value.loc, "a tl::Var from another kernel trace was assigned");
  auto& var = c.var(index_);
  if (!var.alive) c.fail(value.loc, "assignment to a tl::Var whose region has ended");
  const ValueId v = val(c, value);
  const Type& t = c.type(v);
  if (t != var.type) {
    if (var.scope != c.scope()) {
      std::ostringstream os;
      os << "the tl::Var declared at " << var.loc << " holds " << var.type.str()
         << " but is assigned " << t.str()
         << " inside a tl::range / tl::if_ region; values carried "
         << "across a region keep their type (convert with .to(...) or tl::broadcast_to)";
      c.fail(value.loc, os.str());
    }
    var.type = t;
  }
  var.value = v;
  return *this;
}

Tile Var::get() const {
  TraceContext& c = TraceContext::current({});
  if (trace_ != c.id()) c.fail(c.loc(), "a tl::Var from another kernel trace was read");
  const auto& var = c.var(index_);
  if (!var.alive) c.fail(c.loc(), "read of a tl::Var whose region has ended");
  return c.tile(var.value);
}

// ---- creation
// -------------------------------------------------------------------------------------

Tile program_id(int axis, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  if (axis < 0 || axis > 2)
    c.fail(loc, "program_id axis must be 0, 1 or 2, got " + std::to_string(axis));
  return c.tile(c.builder().program_id(axis));
}

Tile num_programs(int axis, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  if (axis < 0 || axis > 2)
    c.fail(loc, "num_programs axis must be 0, 1 or 2, got " + std::to_string(axis));
  return c.tile(c.builder().num_programs(axis));
}

Tile arange(Operand start, Operand end, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const int64_t s = constant_int(c, start, "arange's start");
  const int64_t e = constant_int(c, end, "arange's end");
  const int64_t n = e - s;
  if (n <= 0)
    c.fail(loc, "arange's end (" + std::to_string(e) + ") must be greater than its start (" +
                    std::to_string(s) + ")");
  if (!is_pow2(n)) c.fail(loc, "arange's range must be a power of 2, got " + std::to_string(n));
  if (n > (int64_t(1) << 20))
    c.fail(loc, "arange's range must be at most 1048576, got " + std::to_string(n));
  if (s < std::numeric_limits<int32_t>::min() || e > std::numeric_limits<int32_t>::max()) {
    c.fail(loc, "arange's bounds must fit in int32");
  }
  return c.tile(c.builder().arange(s, e));
}

Tile full(std::initializer_list<Operand> shape, Operand value, DType dtype, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const auto s = constant_shape(c, shape, "tl::full's shape");
  const ValueId v = val(c, value);
  if (!c.type(v).is_scalar()) c.fail(loc, "tl::full's value must be a scalar");
  return c.tile(c.builder().splat(cast_value(c, v, dtype), s));
}

Tile zeros(std::initializer_list<Operand> shape, DType dtype, SourceLoc loc) {
  return full(shape, Operand(0, loc), dtype, loc);
}

Tile cast(Operand x, DType dtype, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = val(c, x);
  if (c.type(v).ptr) c.fail(loc, "cast of a pointer to " + std::string(ir::elem_name(dtype)));
  return c.tile(cast_value(c, v, dtype));
}

Tile expand_dims(Operand x, int axis, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = val(c, x);
  const int64_t r = c.type(v).rank();
  if (axis < -(r + 1) || axis > r) {
    c.fail(loc, "expand_dims axis " + std::to_string(axis) +
                    " is out of range for a tile of rank " + std::to_string(r));
  }
  const int64_t a = axis < 0 ? axis + r + 1 : axis;
  if (r == 0) return c.tile(c.builder().splat(v, {1}));
  return c.tile(c.builder().expand_dims(v, a));
}

Tile broadcast_to(Operand x, std::initializer_list<Operand> shape, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = val(c, x);
  const auto s = constant_shape(c, shape, "broadcast_to's shape");
  Type target = c.type(v).with_shape(s);
  const auto out = broadcast_shape(c, loc, c.type(v), target, "broadcast_to");
  if (SmallVector<int64_t, 4>(out) != s) {
    c.fail(loc, "cannot broadcast " + shape_str(c.type(v).shape) + " to " + shape_str(s));
  }
  return c.tile(to_shape(c, v, s));
}

namespace {

// The hint's values, one per dimension of `t` (one value for a scalar or a 1-D tile).
SmallVector<int64_t, 4> hint_values(TraceContext& c, SourceLoc loc, const Type& t,
                                    std::initializer_list<Operand> list, const char* what) {
  SmallVector<int64_t, 4> n;
  for (const Operand& o : list) n.push_back(constant_int(c, o, what));
  const size_t rank = std::max<size_t>(1, t.rank());
  if (n.size() != rank) {
    c.fail(loc, std::string(what) + ": " + std::to_string(n.size()) + " value(s) for a " +
                    (t.is_scalar() ? std::string("scalar") : "rank-" + std::to_string(t.rank())) +
                    " tile; give one per dimension, as Triton");
  }
  if (!t.is_int() || t.elem == DType::Bool || t.ptr) {
    c.fail(loc, std::string(what) + " needs integers, got " + t.str() +
                    (t.ptr ? " (hints on pointers are not supported yet: hint the offsets)" : ""));
  }
  for (int64_t v : n) {
    if (v <= 0) c.fail(loc, std::string(what) + " needs positive values, got " + std::to_string(v));
  }
  return n;
}

// The check of a hint: evaluated where asserts are, and a warning when false (report_false_hint).
void hint_assert(const Tile& cond, const std::string& message, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  c.builder().assert_(to_bool(c, c.value(cond, loc)), message, /*hint=*/true);
}

// The first value of the run of consecutive values (along `axis`) that each element belongs to:
// an inclusive scan over segments (first, last, run start, whole segment one run).
Tile run_starts(const Tile& x64, int axis, SourceLoc loc) {
  const Tile ones = Operand(x64, loc) == Operand(x64, loc);
  auto combine = [loc](const std::vector<Tile>& a, const std::vector<Tile>& b) {
    const Tile joined = Operand(Operand(b[0], loc) - Operand(a[1], loc), loc) == Operand(1, loc);
    const Tile b_joins = Operand(b[3], loc) & Operand(joined, loc);
    const Tile whole = Operand(a[3], loc) & Operand(b_joins, loc);
    return std::vector<Tile>{a[0], b[1], where(b_joins, a[2], b[2], loc), whole};
  };
  return associative_scan(std::vector<Tile>{x64, x64, x64, ones}, axis, combine, false, loc)[2];
}

}  // namespace

Tile multiple_of(Operand x, std::initializer_list<Operand> n_list, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = val(c, x);
  const Type t = c.type(v);
  const auto n = hint_values(c, loc, t, n_list, "tl::multiple_of");
  const std::string msg = "multiple_of(" + std::to_string(n[0]) + (n.size() > 1 ? ", ..." : "") +
                          ") hint does not hold";
  if (t.is_scalar()) {
    hint_assert(Operand(Operand(x) % Operand(n[0], loc), loc) == Operand(0, loc), msg, loc);
    return c.tile(v);
  }
  // In int64, so that x + 1 at the type's maximum is no overflow of the check's own.
  const Tile x64 = cast(Operand(c.tile(v), loc), DType::Int64, loc);
  for (size_t d = 0; d < n.size(); ++d) {
    if (n[d] == 1) continue;
    const Tile start = run_starts(x64, static_cast<int>(d), loc);
    hint_assert(Operand(Operand(start, loc) % Operand(n[d], loc), loc) == Operand(0, loc), msg,
                loc);
  }
  return c.tile(v);
}

Tile multiple_of(Operand x, Operand n_op, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  return multiple_of(x, {Operand(constant_int(c, n_op, "tl::multiple_of's n"), loc)}, loc);
}

namespace {
// A group hint (`what`: "max_contiguous", "max_constancy") over aligned groups of n[d] elements
// along each dimension d: `holds(g, lo, d)` is the condition on the tile reshaped so the group is
// its own dimension d + 1 (`g`), given each group's smallest value (`lo`).
template <class Holds>
Tile group_hint(Operand x, std::initializer_list<Operand> n_list, const char* what, Holds holds,
                SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = val(c, x);
  const Type t = c.type(v);
  const std::string name = std::string("tl::") + what;
  const auto n = hint_values(c, loc, t, n_list, name.c_str());
  if (t.is_scalar()) return c.tile(v);
  for (size_t d = 0; d < n.size(); ++d) {
    if (n[d] == 1) continue;
    if (t.shape[d] % n[d] != 0) {
      c.fail(loc, name + ": dimension " + std::to_string(d) + " of " + t.str() +
                      " does not divide into groups of " + std::to_string(n[d]));
    }
    SmallVector<int64_t, 4> groups = t.shape;
    groups[d] /= n[d];
    groups.insert(groups.begin() + static_cast<std::ptrdiff_t>(d) + 1, n[d]);
    const Tile g = c.tile(c.builder().reshape(v, groups));
    const Tile lo = min(Operand(g, loc), static_cast<int>(d) + 1, true, loc);
    hint_assert(holds(g, lo, d, n[d]),
                std::string(what) + "(" + std::to_string(n[d]) + (n.size() > 1 ? ", ..." : "") +
                    ") hint does not hold",
                loc);
  }
  return c.tile(v);
}
}  // namespace

Tile max_contiguous(Operand x, std::initializer_list<Operand> n_list, SourceLoc loc) {
  // x - (the group's smallest value) == the position in the group.
  auto holds = [loc](const Tile& g, const Tile& lo, size_t d, int64_t n) {
    TraceContext& c = ctx(loc);
    SmallVector<int64_t, 4> pos_shape(static_cast<size_t>(g.rank()), 1);
    pos_shape[d + 1] = n;
    const Tile pos = c.tile(c.builder().reshape(
        c.value(arange(Operand(0, loc), Operand(n, loc), loc), loc), pos_shape));
    return Tile(Operand(Operand(g, loc) - Operand(lo, loc), loc) == Operand(pos, loc));
  };
  return group_hint(x, n_list, "max_contiguous", holds, loc);
}

Tile max_contiguous(Operand x, Operand n_op, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  return max_contiguous(x, {Operand(constant_int(c, n_op, "tl::max_contiguous's n"), loc)}, loc);
}

Tile max_constancy(Operand x, std::initializer_list<Operand> n_list, SourceLoc loc) {
  // One value per group: each element equals its group's smallest.
  auto holds = [loc](const Tile& g, const Tile& lo, size_t, int64_t) {
    return Tile(Operand(g, loc) == Operand(lo, loc));
  };
  return group_hint(x, n_list, "max_constancy", holds, loc);
}

Tile max_constancy(Operand x, Operand n_op, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  return max_constancy(x, {Operand(constant_int(c, n_op, "tl::max_constancy's n"), loc)}, loc);
}

void assume(Operand cond, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = val(c, cond);
  if (c.type(v).ptr) c.fail(loc, "tl::assume of a pointer (assume a comparison)");
  const ir::Op* k = c.function().constant(v);
  if (k && c.type(v).is_scalar() && (c.type(v).is_float() ? k->fval == 0 : k->ival == 0))
    c.fail(loc, "tl::assume of a condition that is false when traced");
  hint_assert(c.tile(v), "tl::assume's condition does not hold", loc);
}

Tile zeros_like(Operand x, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = val(c, x);
  const Type& t = c.type(v);
  if (t.ptr) c.fail(loc, "tl::zeros_like of a pointer");
  const ValueId z = c.builder().constant(0, Type::scalar(t.elem));
  return c.tile(t.is_scalar() ? z : c.builder().splat(z, t.shape));
}

namespace {
ValueId tile_operand(TraceContext& c, const Operand& x, const char* what, SourceLoc loc) {
  const ValueId v = val(c, x);
  if (!c.type(v).is_block())
    c.fail(loc, std::string(what) + " needs a tile, got " + c.type(v).str());
  return v;
}
}  // namespace

Tile reshape(Operand x, std::initializer_list<Operand> shape, bool can_reorder, SourceLoc loc) {
  (void)can_reorder;  // the CPU keeps row-major order either way
  TraceContext& c = ctx(loc);
  const ValueId v = tile_operand(c, x, "tl::reshape", loc);
  const auto s = constant_shape(c, shape, "tl::reshape's shape");
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  if (n != c.type(v).numel()) {
    c.fail(loc, "tl::reshape: " + shape_str(c.type(v).shape) + " has " +
                    std::to_string(c.type(v).numel()) + " elements, " + shape_str(s) + " has " +
                    std::to_string(n));
  }
  return c.tile(c.builder().reshape(v, s));
}

Tile gather(Operand src, Operand index, int axis, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId s = tile_operand(c, src, "tl::gather", loc);
  const ValueId i = tile_operand(c, index, "tl::gather", loc);
  const Type& ts = c.type(s);
  const Type& ti = c.type(i);
  const int rank = static_cast<int>(ts.rank());
  const int ax = axis < 0 ? axis + rank : axis;
  if (ts.ptr) c.fail(loc, "tl::gather of a pointer tile");
  if (!ti.is_int() || ti.elem == DType::Bool || ti.ptr)
    c.fail(loc, "tl::gather's index must be an integer tile, got " + ti.str());
  if (ti.rank() != ts.rank())
    c.fail(loc, "tl::gather: the index " + ti.str() + " and the source " + ts.str() +
                    " must have the same rank");
  if (ax < 0 || ax >= rank)
    c.fail(loc, "tl::gather: axis " + std::to_string(axis) + " of " + ts.str());
  for (int d = 0; d < rank; ++d) {
    if (d != ax && ti.shape[static_cast<size_t>(d)] != ts.shape[static_cast<size_t>(d)]) {
      c.fail(loc, "tl::gather: the index " + ti.str() + " and the source " + ts.str() +
                      " differ in dimension " + std::to_string(d) + " (only the axis may)");
    }
  }
  return c.tile(c.builder().gather(s, i, ax));
}

Tile flip(Operand x, int dim, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = tile_operand(c, x, "tl::flip", loc);
  const int rank = static_cast<int>(c.type(v).rank());
  const int d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank) {
    c.fail(loc, "tl::flip: dimension " + std::to_string(dim) + " of a rank-" +
                    std::to_string(rank) + " tile");
  }
  return c.tile(c.builder().flip(v, d));
}

Tile ravel(Operand x, bool can_reorder, SourceLoc loc) {
  (void)can_reorder;
  TraceContext& c = ctx(loc);
  const ValueId v = tile_operand(c, x, "tl::ravel", loc);
  return c.tile(c.builder().reshape(v, {c.type(v).numel()}));
}

Tile interleave(Operand a, Operand b, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const Tile j = join(a, b, loc);  // [..., n, 2]
  SmallVector<int64_t, 4> shape = c.type(c.value(j, loc)).shape;
  const int64_t last = shape.back();
  shape.pop_back();
  shape.back() *= last;
  return c.tile(c.builder().reshape(c.value(j, loc), shape));
}

Tile softmax(Operand x, int axis, bool keep_dims, SourceLoc loc) {
  (void)keep_dims;  // the result has x's shape (Triton's keep_dims concerns its reductions)
  TraceContext& c = ctx(loc);
  const ValueId v = tile_operand(c, x, "tl::softmax", loc);
  const Type t = c.type(v);
  if (!t.is_float()) c.fail(loc, "tl::softmax expects floats, got " + t.str());
  const int rank = static_cast<int>(t.rank());
  const int ax = axis < 0 ? axis + rank : axis;
  if (ax < 0 || ax >= rank) {
    c.fail(loc, "tl::softmax: axis " + std::to_string(axis) + " of a rank-" + std::to_string(rank) +
                    " tile");
  }
  const Tile z = Operand(x) - Operand(max(x, ax, true, loc), loc);
  const Tile num = exp(Operand(z, loc), loc);
  return Operand(num, loc) / Operand(sum(Operand(num, loc), ax, true, loc), loc);
}

namespace {
// One compare-and-swap step of a bitonic network over the last dimension (n elements, `outer`
// rows), at distance 2^j: element p meets p + 2^j within each block of 2^(j+1). Exact: values are
// selected, never combined, so every dtype and every bit (signed zeros, NaN payloads) survives.
// Ascending pairs, or descending where `flip` (an i1 tile of shape [A, 1], A the number of pairs
// per 2^j, or a scalar constant) is true.
ValueId compare_and_swap(TraceContext& c, ValueId v, ValueId flip, int64_t j) {
  ir::Builder& b = c.builder();
  const Type t = c.type(v);
  const int64_t d = int64_t{1} << j, a = t.numel() / (2 * d);
  // [A, 2, D] -> [A, D, 2]: the pair's two elements in the last dimension.
  const ValueId pairs = b.permute(b.reshape(v, {a, 2, d}), {0, 2, 1});
  const ValueId lo = b.extract(pairs, 0), hi = b.extract(pairs, 1);
  ValueId swap = b.compare(CmpKind::GT, lo, hi);
  swap = b.binary(BinaryKind::Xor, swap, b.broadcast(flip, {a, d}));
  const ValueId joined = b.join(b.select(swap, hi, lo), b.select(swap, lo, hi));
  return b.reshape(b.permute(joined, {0, 2, 1}), t.shape);
}

// Bitonic sort of the last dimension of v (a power of two): runs of 2^s sorted in alternating
// directions, merged, s = 1 .. log2(n); the last merge in the requested direction.
ValueId bitonic_sort(TraceContext& c, ValueId v, bool descending, SourceLoc loc, const char* what) {
  ir::Builder& b = c.builder();
  const Type t = c.type(v);
  if (t.ptr) c.fail(loc, std::string(what) + " of a pointer tile " + t.str());
  if (t.rank() == 0) c.fail(loc, std::string(what) + " of a scalar");
  const int64_t n = t.shape.back();
  if (n <= 0 || (n & (n - 1)) != 0) {
    c.fail(loc, std::string(what) +
                    " sorts along the last dimension, whose size must be a power "
                    "of two, got " +
                    t.str());
  }
  int log_n = 0;
  while ((int64_t{1} << log_n) < n) ++log_n;
  const Type i1 = Type::scalar(DType::Bool);
  for (int s = 1; s <= log_n; ++s) {
    for (int j = s - 1; j >= 0; --j) {
      ValueId flip;
      if (s == log_n) {
        flip = b.constant_int(descending ? 1 : 0, i1);
      } else {
        // A block of 2^s holds 2^(s-j-1) pairs of distance 2^j; odd blocks sort descending.
        const int64_t a = t.numel() >> (j + 1);
        const Tile idx = c.tile(b.arange(0, a));
        const Tile odd = ((Operand(idx, loc) >> Operand(s - j - 1, loc)) & Operand(1, loc)) != 0;
        flip = b.reshape(c.value(odd, loc), {a, 1});
      }
      v = compare_and_swap(c, v, flip, j);
    }
  }
  return v;
}
}  // namespace

Tile sort(Operand x, int dim, bool descending, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = tile_operand(c, x, "tl::sort", loc);
  const int rank = static_cast<int>(c.type(v).rank());
  if (dim != -1 && dim != rank - 1) {
    c.fail(loc, "tl::sort sorts along the last dimension only (as Triton), got dim " +
                    std::to_string(dim) + " of a rank-" + std::to_string(rank) + " tile");
  }
  return c.tile(bitonic_sort(c, v, descending, loc, "tl::sort"));
}

Tile topk(Operand x, int64_t k, int dim, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = tile_operand(c, x, "tl::topk", loc);
  const Type t = c.type(v);
  const int rank = static_cast<int>(t.rank());
  if (dim != -1 && dim != rank - 1) {
    c.fail(loc, "tl::topk selects along the last dimension only (as Triton), got dim " +
                    std::to_string(dim) + " of a rank-" + std::to_string(rank) + " tile");
  }
  const int64_t n = rank > 0 ? t.shape.back() : 0;
  if (k <= 0 || (k & (k - 1)) != 0 || k > n) {
    c.fail(loc, "tl::topk: k must be a power of two no larger than the last dimension, got k = " +
                    std::to_string(k) + " for " + t.str());
  }
  // Sorted descending, the first run of k holds the k largest, and position p of every later run
  // is no larger than position p of the first: the maximum over the runs is the first run.
  const ValueId sorted = bitonic_sort(c, v, true, loc, "tl::topk");
  SmallVector<int64_t, 4> groups = t.shape;
  groups.back() = n / k;
  groups.push_back(k);
  const Tile g = c.tile(c.builder().reshape(sorted, groups));
  return max(g, rank - 1, false, loc);
}

namespace {
// The C type an extern function sees for a dtype (bool, integers, float32, float64), or null.
const char* extern_c_type(DType d) {
  switch (d) {
    case DType::Bool:
      return "bool";
    case DType::Int8:
      return "int8_t";
    case DType::Int16:
      return "int16_t";
    case DType::Int32:
      return "int32_t";
    case DType::Int64:
      return "int64_t";
    case DType::UInt8:
      return "uint8_t";
    case DType::UInt16:
      return "uint16_t";
    case DType::UInt32:
      return "uint32_t";
    case DType::UInt64:
      return "uint64_t";
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
    default:
      return nullptr;
  }
}

bool narrow_float(DType d) {
  return d == DType::Float16 || d == DType::BFloat16 || is_float8(d);
}

// The unsigned integer type of a narrow float's width (its bits).
DType bits_type(DType d) {
  return itemsize(d) == 2 ? DType::UInt16 : DType::UInt8;
}

bool is_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') return false;
  }
  return true;
}

// The arguments broadcast together (numbers as literals), with their dtypes checked for extern
// functions.
// (`narrow_as_bits`: float16, bfloat16 and float8 arguments travel as their bits, unsigned
// integers of their width, as inline assembly sees them.)
std::vector<ValueId> extern_args(TraceContext& c, std::initializer_list<Operand> args,
                                 SourceLoc loc, const std::string& what,
                                 SmallVector<int64_t, 4>& shape, bool narrow_as_bits = false) {
  std::vector<ValueId> vals;
  for (const Operand& a : args) {
    ValueId v = val(c, a);
    if (narrow_as_bits && !c.type(v).ptr && narrow_float(c.type(v).elem))
      v = c.builder().bitcast(v, bits_type(c.type(v).elem));
    const Type& t = c.type(v);
    if (t.ptr || !extern_c_type(t.elem)) {
      c.fail(loc, what + " takes bool, integer, float32 and float64 arguments, got " + t.str() +
                      (t.is_float() && !t.ptr ? " (convert it with .to(tl::float32) first)" : ""));
    }
    shape = vals.empty() ? t.shape
                         : broadcast_shape(c, loc, Type{t.elem, false, shape}, t, what.c_str());
    vals.push_back(v);
  }
  if (vals.empty()) c.fail(loc, what + " needs at least one argument");
  for (ValueId& v : vals) v = to_shape(c, v, shape);
  return vals;
}
}  // namespace

namespace {
// The SHA-256 of a file's bytes, remembered per path, size and modification time (a library
// traced into many kernels is read once).
std::string digest_of(const std::string& path, const struct stat& st) {
  static std::mutex m;
  static auto* seen = new std::map<std::string, std::pair<std::string, std::string>>();
  const std::string stamp = std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) +
                            "." + std::to_string(st.st_mtim.tv_nsec);
  {
    std::lock_guard<std::mutex> g(m);
    auto it = seen->find(path);
    if (it != seen->end() && it->second.first == stamp) return it->second.second;
  }
  const std::string d = runtime::disk::file_digest(path);
  if (d.empty()) return d;
  std::lock_guard<std::mutex> g(m);
  (*seen)[path] = {stamp, d};
  return d;
}

// An ExternCall's object list ("<sha256> <absolute path>" lines) of a library's files.
std::string object_list(TraceContext& c, SourceLoc loc, const std::string& what,
                        const std::vector<std::string>& paths, const std::string& source,
                        const char* backend) {
  if (paths.empty()) return {};
  if (!source.empty()) {
    c.fail(loc, what + " gives both " + backend + " source and " + backend +
                    " objects; give one (the objects' functions are declared from the symbols)");
  }
  std::string list;
  for (const std::string& p : paths) {
    char* real = p.empty() ? nullptr : ::realpath(p.c_str(), nullptr);
    struct stat st {};
    if (!real || ::stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
      const std::string why = !real ? std::strerror(errno) : "not a regular file";
      std::free(real);
      c.fail(loc, what + ": cannot read the " + backend + " object '" + p + "': " + why);
    }
    const std::string path(real);
    std::free(real);
    const std::string d = digest_of(path, st);
    if (d.empty() || path.find_first_of("\n\x1f") != std::string::npos) {
      c.fail(loc, what + ": cannot read the " + backend + " object '" + p + "'" +
                      (d.empty() ? std::string() : " (its path holds a newline)"));
    }
    list += (list.empty() ? "" : "\n") + d + " " + path;
  }
  return list;
}
}  // namespace

Tile extern_elementwise(const ExternLibrary& lib, std::initializer_list<Operand> args,
                        const std::vector<ExternSymbol>& symbols, bool is_pure, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const std::string what = "tl::extern_elementwise (library '" + lib.name + "')";
  SmallVector<int64_t, 4> shape;
  const std::vector<ValueId> vals = extern_args(c, args, loc, what, shape);
  auto signature = [](const std::vector<DType>& ds) {
    std::string s = "(";
    for (size_t i = 0; i < ds.size(); ++i) s += (i ? ", " : "") + std::string(dtype_name(ds[i]));
    return s + ")";
  };
  std::vector<DType> have;
  for (ValueId v : vals) have.push_back(c.type(v).elem);
  const ExternSymbol* pick = nullptr;
  for (const ExternSymbol& sym : symbols) {
    if (sym.args == have) pick = &sym;
  }
  if (!pick) {
    std::string known;
    for (const ExternSymbol& sym : symbols) {
      known += "\n  " + signature(sym.args) + " -> " + sym.symbol + " : " + dtype_name(sym.result);
    }
    c.fail(loc, what + ": no function for arguments " + signature(have) +
                    (known.empty() ? std::string("; none is given") : "; it has:" + known));
  }
  if (!is_identifier(pick->symbol)) {
    c.fail(loc, what + ": '" + pick->symbol + "' is not a C identifier");
  }
  if (!extern_c_type(pick->result)) {
    c.fail(loc, what + ": " + pick->symbol + " returns " + dtype_name(pick->result) +
                    "; extern functions return bool, integers, float32 or float64");
  }
  const std::string cpu_objects = object_list(c, loc, what, lib.cpu_objects, lib.cpu_source, "CPU");
  const std::string cuda_objects =
      object_list(c, loc, what, lib.cuda_objects, lib.cuda_source, "CUDA");
  const std::string text = ir::pack_extern(
      {lib.name, pick->symbol, lib.cpu_source, lib.cuda_source, cpu_objects, cuda_objects});
  return c.tile(c.builder().extern_call(text, vals, Type{pick->result, false, shape}, is_pure));
}

namespace {
// A C string literal of `s`.
std::string c_string(std::string_view s) {
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      q += '\\';
      q += ch;
    } else if (ch == '\n') {
      q += "\\n";
    } else if (ch == '\t') {
      q += "\\t";
    } else {
      q += ch;
    }
  }
  return q + "\"";
}
}  // namespace

std::vector<Tile> inline_asm_elementwise(std::string_view asm_text, std::string_view constraints,
                                         std::initializer_list<Operand> args,
                                         const std::vector<DType>& dtypes, bool is_pure, int pack,
                                         const std::vector<std::string>& cpu_bodies,
                                         SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const std::string what = "tl::inline_asm_elementwise";
  if (pack < 1 || pack > 16)
    c.fail(loc, what + ": pack = " + std::to_string(pack) + " must be 1 to 16");
  if (dtypes.empty()) c.fail(loc, what + " needs at least one result dtype");
  if (dtypes.size() > 1 && !is_pure) {
    c.fail(loc, what + ": impure assembly with " + std::to_string(dtypes.size()) +
                    " outputs is not supported (each output is its own call of the assembly, "
                    "which only pure assembly allows)");
  }
  if (!cpu_bodies.empty() && cpu_bodies.size() != dtypes.size()) {
    c.fail(loc, what + ": " + std::to_string(cpu_bodies.size()) + " C++ bodies for " +
                    std::to_string(dtypes.size()) + " outputs (one per output, or none)");
  }
  SmallVector<int64_t, 4> shape;
  const std::vector<ValueId> vals = extern_args(c, args, loc, what, shape, /*narrow_as_bits=*/true);
  // Triton's registers: a value narrower than 32 bits shares a 32-bit register with the next
  // ones of its pack (min(32 / bits, pack) per register), a wider one takes a register per element.
  struct Operand_ {
    DType elem;
    int bits, per_reg, regs;
  };
  auto layout = [&](DType d, const std::string& which) {
    Operand_ o{d, static_cast<int>(itemsize(d) * 8), 1, pack};
    o.per_reg = std::min(std::max(32 / o.bits, 1), pack);
    if (pack % o.per_reg != 0) {
      c.fail(loc, what + ": pack = " + std::to_string(pack) + " does not fill whole registers of " +
                      which + " (" + std::to_string(o.per_reg) + " " + dtype_name(d) +
                      " per register)");
    }
    o.regs = pack / o.per_reg;
    return o;
  };
  std::vector<Operand_> outs, ins;
  int out_regs = 0, total = 0;
  for (DType d : dtypes) {
    const DType e = narrow_float(d) ? bits_type(d) : d;
    if (!extern_c_type(e)) {
      c.fail(loc, what + ": a result is " + std::string(dtype_name(d)) +
                      "; it must be bool, an integer or a float");
    }
    outs.push_back(layout(e, "the result"));
    out_regs += outs.back().regs;
  }
  total = out_regs;
  for (ValueId v : vals) {
    ins.push_back(layout(c.type(v).elem, "an argument"));
    total += ins.back().regs;
  }
  // "=r,r,r": the outputs' registers, then each argument's.
  std::vector<std::string> cons;
  for (size_t at = 0; at <= constraints.size();) {
    const size_t end = std::min(constraints.find(',', at), constraints.size());
    std::string part(constraints.substr(at, end - at));
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    cons.push_back(part);
    at = end + 1;
  }
  bool outputs_ok = static_cast<int>(cons.size()) == total;
  for (int i = 0; outputs_ok && i < out_regs; ++i)
    outputs_ok = cons[static_cast<size_t>(i)].size() == 2 && cons[static_cast<size_t>(i)][0] == '=';
  if (!outputs_ok) {
    std::string per;
    for (size_t i = 0; i < ins.size(); ++i) per += (i ? ", " : "") + std::to_string(ins[i].regs);
    c.fail(loc, what + ": constraints \"" + std::string(constraints) + "\" must be " +
                    std::to_string(out_regs) + " output" + (out_regs == 1 ? "" : "s") +
                    " (\"=r\") then one per argument register (" + per + ")" +
                    (pack > 1 ? ", with pack = " + std::to_string(pack) : std::string()));
  }
  // Each register's C type, checked against what it holds (`bits` of one element, `per_reg` of
  // them side by side).
  struct Reg {
    const char* type;
    int bits;
    char letter;
  };
  auto reg = [&](const std::string& con, const Operand_& o, DType shown) -> Reg {
    const char letter = con.back();
    const Reg r = letter == 'r'   ? Reg{"uint32_t", 32, letter}
                  : letter == 'l' ? Reg{"uint64_t", 64, letter}
                  : letter == 'h' ? Reg{"unsigned short", 16, letter}
                  : letter == 'f' ? Reg{"float", 32, letter}
                  : letter == 'd' ? Reg{"double", 64, letter}
                                  : Reg{nullptr, 0, letter};
    const int width = o.bits * o.per_reg;
    const bool fl = o.per_reg == 1 && (o.elem == DType::Float32 || o.elem == DType::Float64);
    if (!r.type || (fl && width != r.bits) || (!fl && width > r.bits) ||
        ((letter == 'f' || letter == 'd') && !fl)) {
      c.fail(loc, what + ": constraint '" + con + "' cannot hold " +
                      (o.per_reg > 1 ? std::to_string(o.per_reg) + " x " : std::string()) +
                      dtype_name(shown));
    }
    return r;
  };
  // A register's value made of one element `v` of `o` (in every lane of a shared register).
  auto to_reg = [](const Reg& r, const Operand_& o, const std::string& v) -> std::string {
    if (r.letter == 'f' || r.letter == 'd') return "(" + std::string(r.type) + ")(" + v + ")";
    std::string bits;
    if (o.elem == DType::Float32) {
      bits = "(uint64_t)__float_as_uint(" + v + ")";
    } else if (o.elem == DType::Float64) {
      bits = "(uint64_t)__double_as_longlong(" + v + ")";
    } else {
      const uint64_t mask = o.bits == 64 ? ~uint64_t{0} : (uint64_t{1} << o.bits) - 1;
      bits = "((uint64_t)(" + v + ") & " + std::to_string(mask) + "ull)";
    }
    std::string lanes = bits;
    for (int l = 1; l < o.per_reg; ++l)
      lanes += " | (" + bits + " << " + std::to_string(l * o.bits) + ")";
    return "(" + std::string(r.type) + ")(" + lanes + ")";
  };
  std::string params, inputs, outputs, decls;
  size_t ci = 0;
  std::vector<Reg> first_reg;  // per output: its first register (the result is its first lane)
  std::vector<std::string> first_name;
  int rn = 0;
  for (size_t k = 0; k < outs.size(); ++k) {
    for (int j = 0; j < outs[k].regs; ++j, ++ci, ++rn) {
      const Reg r = reg(cons[ci], outs[k], dtypes[k]);
      const std::string name = "r" + std::to_string(rn);
      if (j == 0) {
        first_reg.push_back(r);
        first_name.push_back(name);
      }
      decls += "  " + std::string(r.type) + " " + name + ";\n";
      outputs += (rn ? ", " : "") + c_string(cons[ci]) + "(" + name + ")";
    }
  }
  for (size_t i = 0; i < vals.size(); ++i) {
    const std::string a = "a" + std::to_string(i);
    params += (i ? ", " : "") + std::string(extern_c_type(ins[i].elem)) + " " + a;
    for (int j = 0; j < ins[i].regs; ++j, ++ci) {
      const Reg r = reg(cons[ci], ins[i], ins[i].elem);
      inputs +=
          (inputs.empty() ? "" : ", ") + c_string(cons[ci]) + "(" + to_reg(r, ins[i], a) + ")";
    }
  }
  // Triton's (LLVM's) operand syntax $0, $1 ... is CUDA's %0, %1 ...; a literal % becomes %%.
  std::string ptx;
  for (size_t i = 0; i < asm_text.size(); ++i) {
    const char ch = asm_text[i];
    if (ch == '%') {
      ptx += "%%";
    } else if (ch == '$' && i + 1 < asm_text.size() &&
               std::isdigit(static_cast<unsigned char>(asm_text[i + 1]))) {
      ptx += '%';
    } else {
      ptx += ch;
    }
  }
  // One function per output, each running the whole assembly and returning its output (pure
  // assembly: identical statements the CUDA compiler may merge).
  std::vector<Tile> results;
  for (size_t k = 0; k < outs.size(); ++k) {
    const DType e = outs[k].elem;
    const std::string ret = extern_c_type(e);
    const std::string& r0 = first_name[k];
    std::string from_out;
    if (first_reg[k].letter == 'f' || first_reg[k].letter == 'd') {
      from_out = "(" + ret + ")" + r0;
    } else if (e == DType::Float32) {
      from_out = "__uint_as_float((uint32_t)" + r0 + ")";
    } else if (e == DType::Float64) {
      from_out = "__longlong_as_double((long long)" + r0 + ")";
    } else if (e == DType::Bool) {
      from_out = "(bool)(" + r0 + " & 1)";
    } else {
      from_out = "(" + ret + ")" + r0;  // (the low bits: the conversion truncates)
    }
    const std::string body = cpu_bodies.empty() ? std::string() : cpu_bodies[k];
    const std::string key = std::string(asm_text) + '\x1f' + std::string(constraints) + '\x1f' +
                            body + '\x1f' + params + '\x1f' + ret + '\x1f' + std::to_string(pack) +
                            '\x1f' + std::to_string(k) + '\x1f' + std::to_string(outs.size());
    const std::string symbol = "tessera_asm_" + sha256_hex(key).substr(0, 16);
    const std::string cuda = "__device__ __forceinline__ " + ret + " " + symbol + "(" + params +
                             ") {\n" + decls + "  asm" + (is_pure ? "" : " volatile") + "(" +
                             c_string(ptx) + " : " + outputs + " : " + inputs + ");\n  return " +
                             from_out + ";\n}";
    const std::string cpu = body.empty() ? std::string()
                                         : "static inline " + ret + " " + symbol + "(" + params +
                                               ") {\n" + body + "\n}";
    const std::string text = ir::pack_extern({"inline_asm", symbol, cpu, cuda, "", ""});
    const ValueId r = c.builder().extern_call(text, vals, Type{e, false, shape}, is_pure);
    results.push_back(c.tile(e == dtypes[k] ? r : c.builder().bitcast(r, dtypes[k])));
  }
  return results;
}

Tile inline_asm_elementwise(std::string_view asm_text, std::string_view constraints,
                            std::initializer_list<Operand> args, DType dtype, bool is_pure,
                            int pack, std::string_view cpu_body, SourceLoc loc) {
  std::vector<std::string> bodies;
  if (!cpu_body.empty()) bodies.emplace_back(cpu_body);
  return inline_asm_elementwise(asm_text, constraints, args, std::vector<DType>{dtype}, is_pure,
                                pack, bodies, loc)[0];
}

namespace {
// One dot_scaled operand as float32 of its logical [rows, K] shape (`k_axis`: which dimension of
// the stored operand is K), with its e8m0 scales ([other, K/32]) applied.
Tile decode_scaled(TraceContext& c, const Operand& x, const std::optional<Operand>& scale,
                   std::string_view format, int k_axis, bool fast_math, SourceLoc loc,
                   const char* side) {
  const ValueId v = tile_operand(c, x, "tl::dot_scaled", loc);
  const Type t = c.type(v);
  const std::string what = std::string("tl::dot_scaled: ") + side + " ";
  if (t.rank() != 2) c.fail(loc, what + "must be a 2-D tile, got " + t.str());
  Tile f;
  if (format == "e2m1") {
    if (t.elem != DType::UInt8 && t.elem != DType::Int8) {
      c.fail(loc, what + "in e2m1 holds two fp4 values per uint8, got " + t.str());
    }
    // Each nibble: sign, 2 exponent bits, 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
    const Tile u = c.tile(v).to(DType::Int32, loc) & Operand(0xff, loc);
    auto fp4 = [&](const Tile& n) {
      const Tile e = (Operand(n, loc) >> Operand(1, loc)) & Operand(3, loc);
      const Tile m = (Operand(n, loc) & Operand(1, loc)).to(DType::Float32, loc);
      const Tile normal =
          Operand(Operand(1.0f, loc) + Operand(m, loc) * Operand(0.5f, loc), loc) *
          Operand(exp2(Operand(e - Operand(1, loc), loc).tile.to(DType::Float32, loc), loc), loc);
      const Tile mag = where(Operand(e, loc) == Operand(0, loc),
                             Operand(m, loc) * Operand(0.5f, loc), normal, loc);
      return where(Operand(Operand(n, loc) & Operand(8, loc), loc) != Operand(0, loc),
                   -Operand(mag, loc), mag, loc);
    };
    const Tile lo = fp4(u & Operand(15, loc)), hi = fp4(Operand(u, loc) >> Operand(4, loc));
    // The low nibble first along K: join puts the pair last, then it moves next to K.
    const ValueId j = c.value(join(lo, hi, loc), loc);  // [r, c, 2]
    SmallVector<int64_t, 4> shape = t.shape;
    shape[static_cast<size_t>(k_axis)] *= 2;
    const ValueId pairs = k_axis == 1 ? j : c.builder().permute(j, {0, 2, 1});
    f = c.tile(c.builder().reshape(pairs, shape));
  } else if (format == "e4m3" || format == "e5m2") {
    const DType fp8 = format == "e4m3" ? DType::Float8_e4m3fn : DType::Float8_e5m2;
    if (t.elem != fp8 && t.elem != DType::UInt8 && t.elem != DType::Int8) {
      c.fail(loc, what + "in " + std::string(format) + " must be uint8 or " + dtype_name(fp8) +
                      ", got " + t.str());
    }
    f = (t.elem == fp8 ? c.tile(v) : bitcast(c.tile(v), fp8, loc)).to(DType::Float32, loc);
  } else if (format == "bf16" || format == "fp16") {
    const DType want = format == "bf16" ? DType::BFloat16 : DType::Float16;
    if (t.elem != want) {
      c.fail(loc, what + "in " + std::string(format) + " must be " + dtype_name(want) + ", got " +
                      t.str());
    }
    f = c.tile(v).to(DType::Float32, loc);
  } else {
    c.fail(loc, what + "format '" + std::string(format) +
                    "' is not one of e2m1, e4m3, e5m2, bf16, fp16");
  }
  if (!scale) return f;
  const ValueId sv = tile_operand(c, *scale, "tl::dot_scaled", loc);
  const Type st = c.type(sv);
  const auto fshape = c.type(c.value(f, loc)).shape;
  const int64_t k = fshape[static_cast<size_t>(k_axis)], other = fshape[1 - k_axis];
  if (st.rank() != 2 || (st.elem != DType::UInt8 && st.elem != DType::Int8) ||
      st.shape[0] != other || st.shape[1] * 32 != k) {
    c.fail(loc, what + "scale must be uint8 e8m0 of shape [" + std::to_string(other) + ", " +
                    std::to_string(k / 32) + "] (one per 32 elements of K), got " + st.str());
  }
  // 2^(s - 127) from the exponent bits (s = 0 is 2^-127, a subnormal: its own bits), NaN at 255.
  const Tile s32 = c.tile(sv).to(DType::Int32, loc) & Operand(0xff, loc);
  Tile factor = bitcast(Operand(s32, loc) << Operand(23, loc), DType::Float32, loc);
  factor = where(Operand(s32, loc) == Operand(0, loc), Operand(5.877471754111438e-39f, loc), factor,
                 loc);
  if (!fast_math) {
    factor = where(Operand(s32, loc) == Operand(255, loc), Operand(NAN, loc), factor, loc);
  }
  // [other, K/32] -> [other, K/32, 32] -> [other, K], then as the operand's [rows, K] / [K, cols].
  ir::Builder& b = c.builder();
  ValueId e = b.broadcast(b.expand_dims(c.value(factor, loc), 2), {other, k / 32, 32});
  e = b.reshape(e, {other, k});
  if (k_axis == 0) e = b.permute(e, {1, 0});
  return Operand(f, loc) * Operand(c.tile(e), loc);
}
}  // namespace

Tile dot_scaled(Operand lhs, std::optional<Operand> lhs_scale, std::string_view lhs_format,
                Operand rhs, std::optional<Operand> rhs_scale, std::string_view rhs_format,
                std::optional<Operand> acc, bool fast_math, bool lhs_k_pack, bool rhs_k_pack,
                DType out_dtype, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  if (!lhs_k_pack || !rhs_k_pack) {
    c.fail(loc, "tl::dot_scaled packs fp4 along K only (lhs_k_pack and rhs_k_pack true)");
  }
  const Tile a = decode_scaled(c, lhs, lhs_scale, lhs_format, 1, fast_math, loc, "lhs");
  const Tile b = decode_scaled(c, rhs, rhs_scale, rhs_format, 0, fast_math, loc, "rhs");
  // Triton's emulation: both upcast to bfloat16 (exact here: few mantissa bits times a power of
  // two), products accumulated in float32.
  DotOptions o;
  o.out_dtype = out_dtype;
  return dot(a.to(DType::BFloat16, loc), b.to(DType::BFloat16, loc), acc, o, loc);
}

std::pair<Tile, Tile> swizzle2d(Operand i, Operand j, Operand size_i, Operand size_j,
                                Operand size_g, SourceLoc loc) {
  // Triton's tl.swizzle2d, step by step.
  const Tile ij = Operand(Operand(i, loc) * size_j, loc) + j;  // the row-major index
  const Tile size_gj = Operand(size_g, loc) * size_j;          // elements per group of rows
  const Tile group_id = Operand(ij, loc) / Operand(size_gj, loc);
  const Tile off_i = Operand(group_id, loc) * size_g;  // the group's first row
  const Tile rows = minimum(Operand(size_i, loc) - Operand(off_i, loc), size_g, loc);  // last one
  const Tile in_group = Operand(ij, loc) % Operand(size_gj, loc);
  return {Operand(off_i, loc) + Operand(Operand(in_group, loc) % Operand(rows, loc), loc),
          Operand(in_group, loc) / Operand(rows, loc)};
}

Tile histogram(Operand x, int64_t num_bins, std::optional<Operand> mask, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = tile_operand(c, x, "tl::histogram", loc);
  const Type t = c.type(v);
  if (!t.is_int() || t.elem == DType::Bool || t.rank() != 1)
    c.fail(loc, "tl::histogram expects a 1-D integer tile, got " + t.str());
  if (num_bins <= 0 || (num_bins & (num_bins - 1)) != 0)
    c.fail(loc, "tl::histogram: num_bins must be a power of 2, got " + std::to_string(num_bins));
  // counts[b] = sum over lanes of (x == b) [& mask]: one compare per lane and bin.
  const Tile xs = c.tile(c.builder().expand_dims(v, 1));  // [n, 1]
  const Tile bins = c.tile(c.builder().expand_dims(
      c.value(arange(Operand(0, loc), Operand(num_bins, loc), loc), loc), 0));  // [1, bins]
  Tile hit = Operand(xs, loc) == Operand(bins, loc);
  if (mask) {
    const Tile m = c.tile(c.builder().expand_dims(val(c, *mask), 1));
    hit = Operand(hit, loc) & Operand(m, loc);
  }
  return sum(Operand(hit.to(DType::Int32, loc), loc), 0, false, loc);
}

Tile permute(Operand x, std::initializer_list<int> dims, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = tile_operand(c, x, "tl::permute", loc);
  const int64_t rank = c.type(v).rank();
  std::vector<int64_t> perm;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int d : dims) {
    const int64_t a = d < 0 ? d + rank : d;
    if (a < 0 || a >= rank || seen[static_cast<size_t>(a)]) {
      c.fail(loc, "tl::permute: the dims must be a permutation of 0.." + std::to_string(rank - 1));
    }
    seen[static_cast<size_t>(a)] = true;
    perm.push_back(a);
  }
  if (static_cast<int64_t>(perm.size()) != rank) {
    c.fail(loc, "tl::permute: " + std::to_string(perm.size()) + " dims for a tile of rank " +
                    std::to_string(rank));
  }
  return c.tile(c.builder().permute(v, perm));
}

Tile trans(Operand x, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = tile_operand(c, x, "tl::trans", loc);
  const int64_t rank = c.type(v).rank();
  std::vector<int64_t> perm;
  for (int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
  return c.tile(c.builder().permute(v, perm));
}

Tile join(Operand a, Operand b, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  ValueId x = val(c, a), y = val(c, b);
  const Type tx = c.type(x), ty = c.type(y);
  if (tx.ptr != ty.ptr || (tx.ptr && tx.elem != ty.elem))
    c.fail(loc, "tl::join of " + tx.str() + " and " + ty.str());
  const auto shape = broadcast_shape(c, loc, tx, ty, "tl::join");
  if (!tx.ptr) {
    const DType ct = computation_type(c, loc, tx, ty, false);
    x = cast_value(c, x, ct);
    y = cast_value(c, y, ct);
  }
  return c.tile(c.builder().join(to_shape(c, x, shape), to_shape(c, y, shape)));
}

std::pair<Tile, Tile> split(Operand x, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = tile_operand(c, x, "tl::split", loc);
  const Type& t = c.type(v);
  if (t.shape.back() != 2) c.fail(loc, "tl::split needs a last dimension of 2, got " + t.str());
  return {c.tile(c.builder().extract(v, 0)), c.tile(c.builder().extract(v, 1))};
}

Tile cat(Operand a, Operand b, bool can_reorder, SourceLoc loc) {
  (void)can_reorder;  // the CPU keeps the order either way
  TraceContext& c = ctx(loc);
  ValueId x = tile_operand(c, a, "tl::cat", loc), y = tile_operand(c, b, "tl::cat", loc);
  const Type tx = c.type(x), ty = c.type(y);
  if (tx.shape != ty.shape)
    c.fail(loc, "tl::cat needs tiles of one shape, got " + tx.str() + " and " + ty.str());
  if (tx.ptr != ty.ptr || (tx.ptr && tx.elem != ty.elem))
    c.fail(loc, "tl::cat of " + tx.str() + " and " + ty.str());
  if (!tx.ptr) {
    const DType ct = computation_type(c, loc, tx, ty, false);
    x = cast_value(c, x, ct);
    y = cast_value(c, y, ct);
  }
  return c.tile(c.builder().cat(x, y));
}

Tile bitcast(Operand x, DType dtype, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = val(c, x);
  const Type& t = c.type(v);
  if (t.ptr || t.elem == DType::Bool || dtype == DType::Bool ||
      itemsize(t.elem) != itemsize(dtype)) {
    c.fail(loc, std::string("tl::bitcast from ") + t.str() + " to " + ir::elem_name(dtype) +
                    ": the element types must have the same width (and not be bool)");
  }
  return c.tile(c.builder().bitcast(v, dtype));
}

// ---- math ---------------------------------------------------------------------------------------

Tile where(Operand cond, Operand a, Operand b, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  ValueId k = to_bool(c, val(c, cond));
  ValueId x = val(c, a), y = val(c, b);
  const Type tx = c.type(x), ty = c.type(y);
  if (tx.ptr || ty.ptr) {
    if (tx != ty) c.fail(loc, "tl::where with pointer operands of different types");
  } else {
    const DType ct = computation_type(c, loc, tx, ty, false);
    x = cast_value(c, x, ct);
    y = cast_value(c, y, ct);
  }
  auto shape = broadcast_shape(c, loc, c.type(k), c.type(x), "tl::where");
  shape = broadcast_shape(c, loc, c.type(x).with_shape(shape), c.type(y), "tl::where");
  return c.tile(
      c.builder().select(to_shape(c, k, shape), to_shape(c, x, shape), to_shape(c, y, shape)));
}

Tile maximum(Operand a, Operand b, SourceLoc loc) {
  a.loc = loc;
  return arith(BinaryKind::Max, a, b, "tl::maximum");
}
Tile minimum(Operand a, Operand b, SourceLoc loc) {
  a.loc = loc;
  return arith(BinaryKind::Min, a, b, "tl::minimum");
}

Tile abs(Operand x, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = val(c, x);
  if (c.type(v).ptr || is_float8(c.type(v).elem)) c.fail(loc, "tl::abs of " + c.type(v).str());
  return c.tile(c.builder().unary(UnaryKind::Abs, v));
}

// Every float math function of the IR (ir.h's TESSERA_IR_MATH_FUNCTIONS) is a tl:: function of
// the same name over float_unary.
#define TESSERA_TL_MATH(kind, fn)                \
  Tile fn(Operand x, SourceLoc loc) {            \
    x.loc = loc;                                 \
    return float_unary(UnaryKind::kind, x, #fn); \
  }
TESSERA_IR_MATH_FUNCTIONS(TESSERA_TL_MATH)
#undef TESSERA_TL_MATH

Tile sqrt_rn(Operand x, SourceLoc loc) {
  x.loc = loc;
  return float_unary(UnaryKind::Sqrt, x, "sqrt_rn");  // tl::sqrt is correctly rounded already
}
Tile sigmoid(Operand x, SourceLoc loc) {
  x.loc = loc;
  Tile e = float_unary(UnaryKind::Exp, Operand(-x, loc), "sigmoid");
  return Operand(1, loc) / Operand(Operand(1, loc) + Operand(e, loc), loc);
}
Tile div_rn(Operand a, Operand b, SourceLoc loc) {
  a.loc = loc;
  return arith(BinaryKind::DivRn, a, b, "tl::div_rn");
}

// The binary math functions whose operands promote as arithmetic does (one may be an integer).
#define TESSERA_TL_MATH2(kind, fn)                    \
  Tile fn(Operand a, Operand b, SourceLoc loc) {      \
    a.loc = loc;                                      \
    return arith(BinaryKind::kind, a, b, "tl::" #fn); \
  }
TESSERA_TL_MATH2(Pow, pow)
TESSERA_TL_MATH2(Atan2, atan2)
TESSERA_TL_MATH2(Hypot, hypot)
TESSERA_TL_MATH2(Remainder, remainder)
TESSERA_TL_MATH2(FastPow, fast_pow)
TESSERA_TL_MATH2(FastDivide, fast_dividef)
#undef TESSERA_TL_MATH2

Tile nextafter(Operand a, Operand b, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  a.loc = b.loc = loc;
  for (const Operand* o : {&a, &b}) {
    const Type t = c.type(val(c, *o));
    if (t.elem != DType::Float32 && t.elem != DType::Float64) {
      c.fail(loc,
             "tl::nextafter takes float32 or float64 operands (a float16 or bfloat16 "
             "neighbour is not float32's), got " +
                 t.str());
    }
  }
  return arith(BinaryKind::Nextafter, a, b, "tl::nextafter");
}

Tile ldexp(Operand x, Operand n, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  x.loc = n.loc = loc;
  const Type tx = c.type(val(c, x)), tn = c.type(val(c, n));
  if (!tx.is_float() || is_float8(tx.elem)) {
    c.fail(loc,
           "tl::ldexp expects a floating point tile (fp16, bf16, fp32, fp64), got " + tx.str());
  }
  if (tn.is_float() || tn.elem == DType::Bool || tn.ptr) {
    c.fail(loc, "tl::ldexp's exponent must be an integer, got " + tn.str());
  }
  // The exponent travels converted to x's type (exact for every exponent that matters; the
  // runtime clamps the rest, where the result is 0 or infinite anyway).
  return arith(BinaryKind::Ldexp, x, Operand(n, loc).tile.to(tx.elem, loc), "tl::ldexp");
}

namespace {
// A float operand's type, or an error naming the function.
Type float_operand(TraceContext& c, const Operand& x, const char* name) {
  const Type t = c.type(val(c, x));
  if (!t.is_float() || is_float8(t.elem)) {
    c.fail(x.loc, std::string("tl::") + name +
                      " expects a floating point argument (fp16, bf16, fp32, fp64), got " +
                      t.str());
  }
  return t;
}
// The bits of a float tile as the signed integer of its width.
Tile float_bits(const Operand& x, const Type& t, SourceLoc loc) {
  const DType bits = t.elem == DType::Float64                                  ? DType::Int64
                     : (t.elem == DType::Float16 || t.elem == DType::BFloat16) ? DType::Int16
                                                                               : DType::Int32;
  return bitcast(x, bits, loc);
}
}  // namespace

Tile isnan(Operand x, SourceLoc loc) {
  float_operand(ctx(loc), x, "isnan");
  return Operand(x, loc) != Operand(x, loc);
}

Tile isinf(Operand x, SourceLoc loc) {
  float_operand(ctx(loc), x, "isinf");
  return Operand(abs(x, loc), loc) == Operand(INFINITY, loc);
}

Tile isfinite(Operand x, SourceLoc loc) {
  float_operand(ctx(loc), x, "isfinite");
  // x - x is 0 for finite x and NaN for infinities and NaNs.
  return Operand(Operand(x, loc) - Operand(x, loc), loc) == Operand(0.0f, loc);
}

Tile signbit(Operand x, SourceLoc loc) {
  const Type t = float_operand(ctx(loc), x, "signbit");
  return Operand(float_bits(x, t, loc), loc) < Operand(0, loc);
}

Tile copysign(Operand a, Operand b, SourceLoc loc) {
  const Type ta = float_operand(ctx(loc), a, "copysign");
  float_operand(ctx(loc), b, "copysign");
  // |a| with b's sign bit: bit operations, exact on every backend.
  const Tile mag = abs(a, loc);
  return where(signbit(b, loc), -Operand(mag, loc), mag, loc).to(ta.elem, loc);
}

namespace {
// ilogb and frexp's common part, by bit operations on float32 or float64 (a narrow type is
// converted first, exactly): the biased exponent field of x scaled into the normal range
// (subnormals multiplied by 2^24 or 2^54, exactly), the scale's log2, and the scaled bits.
struct Exponent {
  Tile bits, scaled_bits, field, scale, is_zero, is_special;
  DType ft, it;
};
Exponent exponent_of(const Operand& x, const Type& t, SourceLoc loc) {
  const bool dbl = t.elem == DType::Float64;
  const DType ft = dbl ? DType::Float64 : DType::Float32, it = dbl ? DType::Int64 : DType::Int32;
  const int mant = dbl ? 52 : 23;
  const int64_t mag_mask = dbl ? INT64_MAX : INT32_MAX, exp_max = dbl ? 0x7ff : 0xff;
  const Tile xf = Operand(x, loc).tile.to(ft, loc);
  const Tile bits = Operand(bitcast(xf, it, loc), loc) & Operand(mag_mask, loc);
  const Tile field = Operand(bits, loc) >> Operand(mant, loc);
  const Tile sub = Operand(field, loc) == Operand(0, loc);
  const double up = dbl ? 18014398509481984.0 : 16777216.0;  // 2^54, 2^24
  const Tile xs = where(sub, Operand(xf, loc) * Operand(up, loc), xf, loc);
  const Tile sbits = bitcast(xs, it, loc);
  const Tile sfield =
      Operand(Operand(sbits, loc) & Operand(mag_mask, loc), loc) >> Operand(mant, loc);
  return {bits,
          sbits,
          sfield,
          where(sub, Operand(dbl ? 54 : 24, loc), Operand(0, loc), loc),
          Operand(bits, loc) == Operand(0, loc),
          Operand(field, loc) == Operand(exp_max, loc),
          ft,
          it};
}
}  // namespace

Tile ilogb(Operand x, SourceLoc loc) {
  x.loc = loc;
  const Type t = float_operand(ctx(loc), x, "ilogb");
  const Exponent e = exponent_of(x, t, loc);
  const int bias = t.elem == DType::Float64 ? 1023 : 127;
  Tile r = (Operand(Operand(e.field, loc) - Operand(bias, loc), loc) - Operand(e.scale, loc))
               .to(DType::Int32, loc);
  // Infinity: INT_MAX; NaN and zero: INT_MIN (glibc's and CUDA's FP_ILOGBNAN, FP_ILOGB0).
  const int64_t mant_mask = t.elem == DType::Float64 ? (int64_t{1} << 52) - 1 : (1 << 23) - 1;
  const Tile is_inf =
      Operand(e.is_special, loc) &
      Operand(Operand(Operand(e.bits, loc) & Operand(mant_mask, loc), loc) == Operand(0, loc), loc);
  r = where(is_inf, Operand(INT32_MAX, loc), r, loc);
  r = where(Operand(Operand(e.is_special, loc) & Operand(~Operand(is_inf, loc), loc), loc) |
                Operand(e.is_zero, loc),
            Operand(INT32_MIN, loc), r, loc);
  return r.to(DType::Int32, loc);
}

std::pair<Tile, Tile> frexp(Operand x, SourceLoc loc) {
  x.loc = loc;
  const Type t = float_operand(ctx(loc), x, "frexp");
  const Exponent e = exponent_of(x, t, loc);
  const bool dbl = t.elem == DType::Float64;
  const int64_t field_mask = dbl ? int64_t{0x7ff} << 52 : int64_t{0xff} << 23;
  const int64_t half = dbl ? int64_t{1022} << 52 : int64_t{126} << 23;
  // The scaled value's exponent field replaced by that of [0.5, 1): sign and mantissa kept.
  const Tile mbits =
      Operand(Operand(e.scaled_bits, loc) & Operand(~field_mask, loc), loc) | Operand(half, loc);
  const Tile special = Operand(e.is_special, loc) | Operand(e.is_zero, loc);
  const Tile m = where(special, Operand(x, loc).tile.to(e.ft, loc), bitcast(mbits, e.ft, loc), loc);
  const Tile ex = where(
      special, Operand(0, loc),
      Operand(Operand(e.field, loc) - Operand(dbl ? 1022 : 126, loc), loc) - Operand(e.scale, loc),
      loc);
  return {m.to(t.elem, loc), ex.to(DType::Int32, loc)};
}

Tile fmod(Operand a, Operand b, SourceLoc loc) {
  float_operand(ctx(loc), a, "fmod");
  return Operand(a, loc) % Operand(b, loc);  // a float % is C's fmod, as Triton's
}

Tile fdim(Operand a, Operand b, SourceLoc loc) {
  float_operand(ctx(loc), a, "fdim");
  const Tile d = Operand(a, loc) - Operand(b, loc);
  // a - b where a > b, +0 where not, NaN when either is NaN (C's fdim).
  return where(Operand(Operand(a, loc) > Operand(b, loc), loc) | isnan(d, loc), d,
               Operand(0.0f, loc), loc)
      .to(d.dtype(), loc);
}
Tile umulhi(Operand a, Operand b, SourceLoc loc) {
  a.loc = loc;
  return arith(BinaryKind::UMulHi, a, b, "tl::umulhi");
}
Tile fma(Operand a, Operand b, Operand c, SourceLoc loc) {
  TraceContext& t = ctx(loc);
  ValueId x = val(t, a), y = val(t, b), z = val(t, c);
  const Type tx = t.type(x), ty = t.type(y), tz = t.type(z);
  if (!tx.is_float() || !ty.is_float() || !tz.is_float() || is_float8(tx.elem) ||
      is_float8(ty.elem) || is_float8(tz.elem)) {
    t.fail(loc, "tl::fma needs floating point operands (fp16, bf16, fp32, fp64), got " + tx.str() +
                    ", " + ty.str() + " and " + tz.str());
  }
  const DType ab = computation_type(t, loc, tx, ty, false);
  const Type tab = tx.is_scalar() && ty.is_scalar()
                       ? Type::scalar(ab)
                       : Type::scalar(ab).with_shape(broadcast_shape(t, loc, tx, ty, "tl::fma"));
  const DType ct = computation_type(t, loc, tab, tz, false);
  auto shape = broadcast_shape(t, loc, tab, tz, "tl::fma");
  x = to_shape(t, cast_value(t, x, ct), shape);
  y = to_shape(t, cast_value(t, y, ct), shape);
  z = to_shape(t, cast_value(t, z, ct), shape);
  return t.tile(t.builder().fma(x, y, z));
}
Tile clamp(Operand x, Operand lo, Operand hi, bool propagate_nan, SourceLoc loc) {
  x.loc = loc;
  TraceContext& t = ctx(loc);
  if (t.type(val(t, x)).ptr) t.fail(loc, "tl::clamp of a pointer");
  Tile r = minimum(Operand(maximum(x, lo, loc), loc), hi, loc);
  if (!propagate_nan) return r;
  return where(Operand(x != x, loc), x, Operand(r, loc), loc);
}

Tile dot(Operand a, Operand b, std::optional<Operand> acc, DotOptions o, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  ValueId x = val(c, a), y = val(c, b);
  const Type tx = c.type(x), ty = c.type(y);
  if (tx.rank() != 2 || ty.rank() != 2) {
    c.fail(loc, "tl::dot needs two 2-D tiles, got " + tx.str() + " and " + ty.str());
  }
  if (tx.shape[1] != ty.shape[0]) {
    c.fail(loc, "tl::dot: the inner dimensions differ (" + tx.str() + " @ " + ty.str() + ")");
  }
  for (int64_t d : {tx.shape[0], tx.shape[1], ty.shape[1]}) {
    if (d < 16) {
      c.fail(loc, "tl::dot needs every dimension >= 16 (as Triton on GPUs), got " + tx.str() +
                      " @ " + ty.str());
    }
  }
  if (tx.elem != ty.elem) {
    c.fail(loc, "tl::dot needs operands of one dtype, got " + tx.str() + " and " + ty.str() +
                    "; cast one first");
  }
  const DType in = tx.elem;
  const bool fl = is_floating_point(in);
  if (!fl && in != DType::Int8 && in != DType::UInt8) {
    c.fail(loc, std::string("tl::dot of ") + ir::elem_name(in) +
                    " operands: integer dot takes int8 or uint8");
  }
  DType out = o.out_dtype.value_or(in == DType::Float64 ? DType::Float64
                                   : fl                 ? DType::Float32
                                                        : DType::Int32);
  const bool ok = fl ? (out == DType::Float32 || (out == DType::Float64 && in == DType::Float64) ||
                        ((out == DType::Float16 || out == DType::BFloat16) && out == in))
                     : out == DType::Int32;
  if (!ok) {
    c.fail(loc, std::string("tl::dot: out_dtype ") + ir::elem_name(out) + " is not supported for " +
                    ir::elem_name(in) +
                    " operands (float32, or the operands' own fp16/bf16/fp64; int32 for int8)");
  }
  // Narrow outputs accumulate in float32 and round at the end.
  const DType acc_t = (out == DType::Float16 || out == DType::BFloat16) ? DType::Float32 : out;
  const SmallVector<int64_t, 4> shape{tx.shape[0], ty.shape[1]};
  ValueId z;
  if (acc) {
    z = val(c, *acc);
    const Type tz = c.type(z);
    if (tz.shape != shape)
      c.fail(loc, "tl::dot: acc must be " + shape_str(shape) + ", got " + tz.str());
    z = cast_value(c, z, acc_t);
  } else {
    z = to_shape(c, c.builder().constant(0, Type::scalar(acc_t)), shape);
  }
  ir::DotPrecision p = ir::DotPrecision::TF32;
  if (o.input_precision == "ieee") {
    p = ir::DotPrecision::IEEE;
  } else if (o.input_precision == "tf32x3") {
    p = ir::DotPrecision::TF32x3;
  } else if (o.input_precision != "tf32") {
    c.fail(loc, "tl::dot: input_precision must be \"tf32\", \"tf32x3\" or \"ieee\", got \"" +
                    o.input_precision + "\"");
  }
  ValueId r = c.builder().dot(x, y, z, p);
  if (acc_t != out) r = cast_value(c, r, out);
  return c.tile(r);
}

Tile cdiv(Operand a, Operand b, SourceLoc loc) {
  a.loc = loc;
  b.loc = loc;
  TraceContext& c = ctx(loc);
  for (const Operand* o : {&a, &b}) {
    const Type& t = c.type(val(c, *o));
    if (!t.is_int()) c.fail(loc, "tl::cdiv needs integers, got " + t.str());
  }
  Tile num = a + b;
  Tile num1 = Operand(num, loc) - Operand(1, loc);
  return Operand(num1, loc) / b;
}

// ---- memory
// ---------------------------------------------------------------------------------------

Tile load(Operand ptr, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId p = val(c, ptr);
  if (!c.type(p).ptr)
    c.fail(loc, "tl::load expects a pointer (or a tile of pointers), got " + c.type(p).str());
  if (c.load_hook) {
    const ValueId r = c.load_hook(p, ir::kNoValue, ir::kNoValue);
    if (r != ir::kNoValue) return c.tile(r);
  }
  return c.tile(c.builder().load(p));
}

Tile load(Operand ptr, Operand mask, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId p = val(c, ptr);
  const Type tp = c.type(p);
  if (!tp.ptr) c.fail(loc, "tl::load expects a pointer (or a tile of pointers), got " + tp.str());
  return load(ptr, mask, Operand(c.tile(c.builder().constant(0, Type::scalar(tp.elem))), loc), loc);
}

Tile load(Operand ptr, Operand mask, Operand other, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  ValueId p = val(c, ptr);
  const Type tp = c.type(p);
  if (!tp.ptr) c.fail(loc, "tl::load expects a pointer (or a tile of pointers), got " + tp.str());
  ValueId m = val(c, mask);
  const Type tm = c.type(m);
  if (tm.ptr) c.fail(loc, "tl::load's mask must be a boolean tile, got " + tm.str());
  if (tm.is_block() && tp.is_block() && tm.shape != tp.shape) {
    bool ok = tm.rank() == tp.rank();
    for (int64_t i = 0; ok && i < tm.rank(); ++i)
      ok = tm.shape[i] == tp.shape[i] || tm.shape[i] == 1 || tp.shape[i] == 1;
    if (!ok)
      c.fail(loc, "tl::load's mask shape " + shape_str(tm.shape) +
                      " does not match the pointer shape " + shape_str(tp.shape));
  }
  m = to_bool(c, m);
  const auto shape = broadcast_shape(c, loc, tp, c.type(m), "tl::load's mask");
  ValueId o = val(c, other);
  if (c.type(o).ptr) c.fail(loc, "tl::load's other must be a value, got " + c.type(o).str());
  o = cast_value(c, o, tp.elem);
  const auto oshape = broadcast_shape(c, loc, tp.with_shape(shape), c.type(o), "tl::load's other");
  if (SmallVector<int64_t, 4>(oshape) != shape) {
    c.fail(loc, "tl::load's other of shape " + shape_str(c.type(o).shape) +
                    " does not fit the pointer shape " + shape_str(shape));
  }
  p = to_shape(c, p, shape);
  m = to_shape(c, m, shape);
  o = to_shape(c, o, shape);
  if (c.load_hook) {
    const ValueId r = c.load_hook(p, m, o);
    if (r != ir::kNoValue) return c.tile(r);
  }
  return c.tile(c.builder().load(p, m, o));
}

namespace {
void store_impl(TraceContext& c, SourceLoc loc, ValueId p, ValueId v, ValueId m) {
  const Type tp = c.type(p);
  if (!tp.ptr) c.fail(loc, "tl::store expects a pointer (or a tile of pointers), got " + tp.str());
  if (c.type(v).ptr) c.fail(loc, "tl::store of a pointer value");
  auto shape = broadcast_shape(c, loc, tp, c.type(v), "tl::store's value");
  if (m != ir::kNoValue) {
    const Type tm = c.type(m);
    if (tm.is_block() && SmallVector<int64_t, 4>(shape) != tm.shape &&
        tm.rank() != static_cast<int64_t>(shape.size())) {
      c.fail(loc, "tl::store's mask shape " + shape_str(tm.shape) +
                      " does not match the pointer shape " + shape_str(shape));
    }
    m = to_bool(c, m);
    shape = broadcast_shape(c, loc, tp.with_shape(shape), c.type(m), "tl::store's mask");
    m = to_shape(c, m, shape);
  }
  v = to_shape(c, cast_value(c, v, tp.elem), shape);
  p = to_shape(c, p, shape);
  if (c.store_hook) v = c.store_hook(p, v, m);
  c.builder().store(p, v, m);
}
}  // namespace

void store(Operand ptr, Operand value, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  store_impl(c, loc, val(c, ptr), val(c, value), ir::kNoValue);
}

void store(Operand ptr, Operand value, Operand mask, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  store_impl(c, loc, val(c, ptr), val(c, value), val(c, mask));
}

// ---- reductions ---------------------------------------------------------------------------------

Tile sum(Operand x, SourceLoc loc) {
  x.loc = loc;
  return reduce(ir::ReduceKind::Sum, x, std::nullopt, "sum");
}
Tile sum(Operand x, int axis, SourceLoc loc) {
  x.loc = loc;
  return reduce(ir::ReduceKind::Sum, x, axis, "sum");
}
Tile max(Operand x, SourceLoc loc) {
  x.loc = loc;
  return reduce(ir::ReduceKind::Max, x, std::nullopt, "max");
}
Tile max(Operand x, int axis, SourceLoc loc) {
  x.loc = loc;
  return reduce(ir::ReduceKind::Max, x, axis, "max");
}
Tile min(Operand x, SourceLoc loc) {
  x.loc = loc;
  return reduce(ir::ReduceKind::Min, x, std::nullopt, "min");
}
Tile min(Operand x, int axis, SourceLoc loc) {
  x.loc = loc;
  return reduce(ir::ReduceKind::Min, x, axis, "min");
}

namespace {
// A reduction over `axis` that keeps it as a size-1 dimension.
Tile keep(ir::ReduceKind k, Operand x, int axis, bool keep_dims, const char* name, SourceLoc loc) {
  x.loc = loc;
  Tile r = reduce(k, x, axis, name);
  if (!keep_dims) return r;
  TraceContext& c = ctx(loc);
  const int64_t rank = c.type(val(c, x)).rank();
  return expand_dims(Operand(r, loc), axis < 0 ? static_cast<int>(axis + rank) : axis, loc);
}
}  // namespace

Tile sum(Operand x, int axis, bool keep_dims, SourceLoc loc) {
  return keep(ir::ReduceKind::Sum, x, axis, keep_dims, "sum", loc);
}
Tile max(Operand x, int axis, bool keep_dims, SourceLoc loc) {
  return keep(ir::ReduceKind::Max, x, axis, keep_dims, "max", loc);
}
Tile min(Operand x, int axis, bool keep_dims, SourceLoc loc) {
  return keep(ir::ReduceKind::Min, x, axis, keep_dims, "min", loc);
}
Tile xor_sum(Operand x, SourceLoc loc) {
  x.loc = loc;
  return reduce(ir::ReduceKind::Xor, x, std::nullopt, "xor_sum");
}
Tile xor_sum(Operand x, int axis, bool keep_dims, SourceLoc loc) {
  return keep(ir::ReduceKind::Xor, x, axis, keep_dims, "xor_sum", loc);
}
Tile argmax(Operand x, int axis, bool keep_dims, SourceLoc loc) {
  return keep(ir::ReduceKind::ArgMax, x, axis, keep_dims, "argmax", loc);
}
Tile argmin(Operand x, int axis, bool keep_dims, SourceLoc loc) {
  return keep(ir::ReduceKind::ArgMin, x, axis, keep_dims, "argmin", loc);
}

// ---- control flow
// ---------------------------------------------------------------------------------

void range(Operand lo, Operand hi, Operand step, FunctionRef<void(Tile)> body, SourceLoc loc) {
  range(lo, hi, step, body, RangeOptions{}, loc);
}

void range(Operand lo, Operand hi, Operand step, FunctionRef<void(Tile)> body, RangeOptions options,
           SourceLoc loc) {
  TraceContext& c = ctx(loc);
  if (options.num_stages < 0 || options.num_stages > 0xffff || options.loop_unroll_factor < 0 ||
      options.loop_unroll_factor > 0xffff) {
    c.fail(loc, "tl::range's num_stages and loop_unroll_factor must be in 0..65535");
  }
  ValueId l = val(c, lo), h = val(c, hi), s = val(c, step);
  for (auto [v, what] :
       {std::pair{l, "lower bound"}, std::pair{h, "upper bound"}, std::pair{s, "step"}}) {
    const Type& t = c.type(v);
    if (!t.is_scalar() || !t.is_int() || t.elem == DType::Bool) {
      c.fail(loc, std::string("tl::range's ") + what + " must be a scalar integer, got " + t.str());
    }
  }
  if (const ir::Op* k = c.function().constant(s); k && k->ival <= 0) {
    c.fail(loc, "tl::range's step must be positive, got " + std::to_string(k->ival));
  }
  DType it = integer_promote(loc, c, integer_promote(loc, c, c.type(l).elem, c.type(h).elem),
                             c.type(s).elem);
  if (itemsize(it) < 4) it = DType::Int32;
  ir::Builder& b = c.builder();
  l = cast_value(c, l, it);
  h = cast_value(c, h, it);
  s = cast_value(c, s, it);
  ir::Op* op = b.create_for(l, h, s);
  op->ival = ir::LoopOptions{options.num_stages, options.loop_unroll_factor, options.flatten,
                             options.warp_specialize, options.disallow_acc_multi_buffer}
                 .pack();
  ir::Region& region = op->regions[0];
  const ValueId iv = region.args[0];
  const LiveVars lv = snapshot(c);
  std::vector<ValueId> placeholders;
  for (size_t k = 0; k < lv.index.size(); ++k)
    placeholders.push_back(c.function().new_value(c.var(lv.index[k]).type));
  auto traced = [&] { body(c.tile(iv)); };
  const std::vector<size_t> carried = trace_loop_body(c, region, lv, placeholders, traced, loc);
  std::vector<bool> is_carried(lv.index.size(), false);
  for (size_t k : carried) is_carried[k] = true;
  for (size_t k = 0; k < lv.index.size(); ++k) {
    if (!is_carried[k]) {
      ir::replace_all_uses(region, placeholders[k], lv.saved[k]);
      c.var(lv.index[k]).value = lv.saved[k];
    }
  }
  for (size_t k : carried) {
    region.args.push_back(placeholders[k]);
    op->operands.push_back(lv.saved[k]);
    auto& var = c.var(lv.index[k]);
    const ValueId r = c.function().new_value(var.type, op);
    op->results.push_back(r);
    var.value = r;
  }
  b.insert(op);
}

void while_(FunctionRef<Tile()> cond, FunctionRef<void()> body, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  ir::Builder& b = c.builder();
  ir::Op* op = b.create_while();
  ir::Region &cond_region = op->regions[0], &body_region = op->regions[1];
  const LiveVars lv = snapshot(c);
  std::vector<ValueId> pc, pb;  // placeholders for the Vars in the condition and in the body
  for (size_t k = 0; k < lv.index.size(); ++k) {
    const auto& type = c.var(lv.index[k]).type;
    pc.push_back(c.function().new_value(type));
    pb.push_back(c.function().new_value(type));
  }
  {
    ir::Builder::InsertionGuard g(b);
    b.set_insertion_region(&cond_region);
    for (size_t k = 0; k < lv.index.size(); ++k) c.var(lv.index[k]).value = pc[k];
    c.push_scope();
    Tile t = cond();
    c.pop_scope();
    c.at(loc);
    for (size_t k = 0; k < lv.index.size(); ++k) {
      if (c.var(lv.index[k]).value != pc[k])
        c.fail(loc, "tl::while_'s condition assigns a tl::Var; assign it in the body");
    }
    ValueId cv = c.value(t, loc);
    if (!c.type(cv).is_scalar()) {
      c.fail(loc, "tl::while_ needs a scalar condition, got a tile of shape " +
                      shape_str(c.type(cv).shape));
    }
    b.yield({to_bool(c, cv)});
  }
  const std::vector<size_t> carried = trace_loop_body(c, body_region, lv, pb, body, loc);
  std::vector<bool> is_carried(lv.index.size(), false);
  for (size_t k : carried) is_carried[k] = true;
  for (size_t k = 0; k < lv.index.size(); ++k) {
    if (is_carried[k]) continue;
    ir::replace_all_uses(cond_region, pc[k], lv.saved[k]);
    ir::replace_all_uses(body_region, pb[k], lv.saved[k]);
    c.var(lv.index[k]).value = lv.saved[k];
  }
  for (size_t k : carried) {
    cond_region.args.push_back(pc[k]);
    body_region.args.push_back(pb[k]);
    op->operands.push_back(lv.saved[k]);
    auto& var = c.var(lv.index[k]);
    const ValueId r = c.function().new_value(var.type, op);
    op->results.push_back(r);
    var.value = r;
  }
  b.insert(op);
}

namespace {

ir::MemOrder mem_order(TraceContext& c, const AtomicOptions& o, SourceLoc loc) {
  if (o.scope != "gpu" && o.scope != "cta" && o.scope != "sys") {
    c.fail(loc, "atomic scope must be \"gpu\", \"cta\" or \"sys\", got \"" + o.scope + "\"");
  }
  if (o.sem == "acq_rel") return ir::MemOrder::AcqRel;
  if (o.sem == "acquire") return ir::MemOrder::Acquire;
  if (o.sem == "release") return ir::MemOrder::Release;
  if (o.sem == "relaxed") return ir::MemOrder::Relaxed;
  c.fail(loc, "atomic sem must be \"acq_rel\", \"acquire\", \"release\" or \"relaxed\", got \"" +
                  o.sem + "\"");
}

// Checks the pointer and broadcasts pointer, values (cast to the pointee type) and mask together.
ValueId atomic_pointer(TraceContext& c, const Operand& ptr, const char* name, bool int_only,
                       SourceLoc loc) {
  const ValueId p = val(c, ptr);
  const Type& t = c.type(p);
  if (!t.ptr) c.fail(loc, std::string("tl::") + name + " needs a pointer, got " + t.str());
  if (t.elem == DType::Bool || is_float8(t.elem) || (int_only && !is_integral(t.elem))) {
    c.fail(loc, std::string("tl::") + name + " of " + ir::elem_name(t.elem) +
                    " values is not supported" +
                    (int_only ? " (integers only)" : " (ints, fp16, bf16, fp32, fp64)"));
  }
  return p;
}

Tile atomic_rmw(ir::AtomicKind k, const char* name, Operand ptr, Operand v,
                std::optional<Operand> mask, const AtomicOptions& o, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const bool int_only =
      k == ir::AtomicKind::And || k == ir::AtomicKind::Or || k == ir::AtomicKind::Xor;
  ValueId p = atomic_pointer(c, ptr, name, int_only, loc);
  const ir::MemOrder order = mem_order(c, o, loc);
  ValueId x = val(c, v);
  auto shape = broadcast_shape(c, loc, c.type(p), c.type(x), name);
  ValueId m = ir::kNoValue;
  if (mask) {
    m = to_bool(c, val(c, *mask));
    shape = broadcast_shape(c, loc, c.type(p).with_shape(shape), c.type(m), name);
    m = to_shape(c, m, shape);
  }
  p = to_shape(c, p, shape);
  x = to_shape(c, cast_value(c, x, c.type(p).elem), shape);
  return c.tile(c.builder().atomic(k, order, p, x, m));
}

}  // namespace

Tile atomic_add(Operand ptr, Operand v, std::optional<Operand> mask, AtomicOptions o,
                SourceLoc loc) {
  return atomic_rmw(ir::AtomicKind::Add, "atomic_add", ptr, v, mask, o, loc);
}
Tile atomic_max(Operand ptr, Operand v, std::optional<Operand> mask, AtomicOptions o,
                SourceLoc loc) {
  return atomic_rmw(ir::AtomicKind::Max, "atomic_max", ptr, v, mask, o, loc);
}
Tile atomic_min(Operand ptr, Operand v, std::optional<Operand> mask, AtomicOptions o,
                SourceLoc loc) {
  return atomic_rmw(ir::AtomicKind::Min, "atomic_min", ptr, v, mask, o, loc);
}
Tile atomic_and(Operand ptr, Operand v, std::optional<Operand> mask, AtomicOptions o,
                SourceLoc loc) {
  return atomic_rmw(ir::AtomicKind::And, "atomic_and", ptr, v, mask, o, loc);
}
Tile atomic_or(Operand ptr, Operand v, std::optional<Operand> mask, AtomicOptions o,
               SourceLoc loc) {
  return atomic_rmw(ir::AtomicKind::Or, "atomic_or", ptr, v, mask, o, loc);
}
Tile atomic_xor(Operand ptr, Operand v, std::optional<Operand> mask, AtomicOptions o,
                SourceLoc loc) {
  return atomic_rmw(ir::AtomicKind::Xor, "atomic_xor", ptr, v, mask, o, loc);
}
Tile atomic_xchg(Operand ptr, Operand v, std::optional<Operand> mask, AtomicOptions o,
                 SourceLoc loc) {
  return atomic_rmw(ir::AtomicKind::Xchg, "atomic_xchg", ptr, v, mask, o, loc);
}
Tile atomic_cas(Operand ptr, Operand cmp, Operand v, AtomicOptions o, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  ValueId p = atomic_pointer(c, ptr, "atomic_cas", false, loc);
  const ir::MemOrder order = mem_order(c, o, loc);
  ValueId x = val(c, cmp), y = val(c, v);
  auto shape = broadcast_shape(c, loc, c.type(p), c.type(x), "atomic_cas");
  shape = broadcast_shape(c, loc, c.type(p).with_shape(shape), c.type(y), "atomic_cas");
  p = to_shape(c, p, shape);
  x = to_shape(c, cast_value(c, x, c.type(p).elem), shape);
  y = to_shape(c, cast_value(c, y, c.type(p).elem), shape);
  return c.tile(c.builder().atomic_cas(order, p, x, y));
}

// ---- reductions and scans with a combine function
// --------------------------------------------------

namespace {

std::vector<Tile> combine_op(const std::vector<Tile>& inputs, int axis, CombineFn combine,
                             bool scan, bool reverse, const char* name, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  if (inputs.empty()) c.fail(loc, std::string("tl::") + name + " needs at least one input");
  std::vector<ValueId> vs;
  for (const Tile& t : inputs) {
    const ValueId v = c.value(t, loc);
    const Type& ty = c.type(v);
    if (!ty.is_block() || ty.ptr)
      c.fail(loc, std::string("tl::") + name + " needs tiles of values, got " + ty.str());
    if (!vs.empty() && ty.shape != c.type(vs[0]).shape) {
      c.fail(loc, std::string("tl::") + name + ": the inputs' shapes differ (" +
                      shape_str(c.type(vs[0]).shape) + " and " + shape_str(ty.shape) + ")");
    }
    vs.push_back(v);
  }
  const int64_t rank = c.type(vs[0]).rank();
  int64_t a = axis;
  if (a < -rank || a >= rank) {
    c.fail(loc, std::string("tl::") + name + ": axis " + std::to_string(axis) +
                    " is out of range for rank " + std::to_string(rank));
  }
  if (a < 0) a += rank;
  ir::Builder& b = c.builder();
  ir::Op* op = b.create_reduce_fn(vs, a, scan, reverse);
  ir::Region& region = op->regions[0];
  {
    ir::Builder::InsertionGuard g(b);
    b.set_insertion_region(&region);
    c.push_scope();
    std::vector<Tile> lhs, rhs;
    for (size_t k = 0; k < vs.size(); ++k) {
      lhs.push_back(c.tile(region.args[k]));
      rhs.push_back(c.tile(region.args[vs.size() + k]));
    }
    const std::vector<Tile> out = combine(lhs, rhs);
    c.pop_scope();
    c.at(loc);
    if (out.size() != vs.size()) {
      c.fail(loc, std::string("tl::") + name + "'s combine function returned " +
                      std::to_string(out.size()) + " values for " + std::to_string(vs.size()) +
                      " inputs");
    }
    std::vector<ValueId> ys;
    for (size_t k = 0; k < out.size(); ++k) {
      const ValueId y = c.value(out[k], loc);
      if (!c.type(y).is_scalar())
        c.fail(loc, std::string("tl::") + name + "'s combine function must return scalars");
      ys.push_back(cast_value(c, y, c.type(vs[k]).elem));
    }
    b.yield(ys);
  }
  ir::walk(region, [&](const ir::Op* o) {
    if (o->kind == ir::OpKind::Load || o->has_side_effects()) {
      c.fail(loc, std::string("tl::") + name +
                      "'s combine function must be pure (no loads, stores, atomics or prints)");
    }
  });
  b.insert(op);
  std::vector<Tile> res;
  for (ValueId r : op->results) res.push_back(c.tile(r));
  return res;
}

}  // namespace

std::vector<Tile> reduce(const std::vector<Tile>& inputs, int axis, CombineFn combine,
                         bool keep_dims, SourceLoc loc) {
  std::vector<Tile> r = combine_op(inputs, axis, combine, false, false, "reduce", loc);
  if (keep_dims) {
    const int64_t rank = static_cast<int64_t>(inputs[0].rank());
    for (Tile& t : r)
      t = expand_dims(Operand(t, loc), axis < 0 ? static_cast<int>(axis + rank) : axis, loc);
  }
  return r;
}

Tile reduce(Operand input, int axis, FunctionRef<Tile(Tile, Tile)> combine, bool keep_dims,
            SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const Tile x = c.tile(val(c, input));
  auto fn = [&](const std::vector<Tile>& a, const std::vector<Tile>& b) {
    return std::vector<Tile>{combine(a[0], b[0])};
  };
  return reduce(std::vector<Tile>{x}, axis, fn, keep_dims, loc)[0];
}

std::vector<Tile> associative_scan(const std::vector<Tile>& inputs, int axis, CombineFn combine,
                                   bool reverse, SourceLoc loc) {
  return combine_op(inputs, axis, combine, true, reverse, "associative_scan", loc);
}

Tile associative_scan(Operand input, int axis, FunctionRef<Tile(Tile, Tile)> combine, bool reverse,
                      SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const Tile x = c.tile(val(c, input));
  auto fn = [&](const std::vector<Tile>& a, const std::vector<Tile>& b) {
    return std::vector<Tile>{combine(a[0], b[0])};
  };
  return associative_scan(std::vector<Tile>{x}, axis, fn, reverse, loc)[0];
}

namespace {
Tile cumulative(Operand x, int axis, bool reverse, bool product, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  ValueId v = val(c, x);
  const Type t = c.type(v);
  if (t.ptr || is_float8(t.elem))
    c.fail(loc, std::string("tl::") + (product ? "cumprod" : "cumsum") + " of " + t.str());
  // The accumulation type of tl::sum.
  if (t.elem == DType::Bool) {
    v = cast_value(c, v, DType::Int32);
  } else if (is_integral(t.elem) && int_width(t.elem) < 32) {
    v = cast_value(c, v, is_signed(t.elem) ? DType::Int32 : DType::UInt32);
  } else if (t.elem == DType::BFloat16 || t.elem == DType::Float16) {
    v = cast_value(c, v, DType::Float32);
  }
  auto fn = [&](Tile a, Tile b) {
    return product ? Tile(Operand(a, loc) * Operand(b, loc))
                   : Tile(Operand(a, loc) + Operand(b, loc));
  };
  return associative_scan(Operand(c.tile(v), loc), axis, fn, reverse, loc);
}
}  // namespace

Tile cumsum(Operand x, int axis, bool reverse, SourceLoc loc) {
  return cumulative(x, axis, reverse, false, loc);
}
Tile cumprod(Operand x, int axis, bool reverse, SourceLoc loc) {
  return cumulative(x, axis, reverse, true, loc);
}

// ---- assertions and printing
// -----------------------------------------------------------------------

void static_assert_(Operand cond, std::string_view message, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = val(c, cond);
  const ir::Op* k = c.function().constant(v);
  if (!k || !c.type(v).is_scalar()) {
    c.fail(loc, "tl::static_assert_ needs a constexpr condition, got a runtime " + c.type(v).str() +
                    " (use tl::device_assert for runtime checks)");
  }
  const bool holds = c.type(v).is_float() ? k->fval != 0 : k->ival != 0;
  if (!holds)
    c.fail(loc, "static_assert failed" +
                    (message.empty() ? std::string() : ": " + std::string(message)));
}

void device_assert(Operand cond, std::string_view message, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const ValueId v = val(c, cond);
  if (c.type(v).ptr) c.fail(loc, "tl::device_assert of a pointer");
  c.builder().assert_(to_bool(c, v),
                      message.empty() ? std::string("assertion failed") : std::string(message));
}

void device_print(std::string_view prefix, std::initializer_list<Operand> values, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  std::vector<ValueId> vs;
  for (const auto& o : values) {
    const ValueId v = val(c, o);
    if (c.type(v).ptr) c.fail(loc, "tl::device_print of a pointer");
    vs.push_back(v);
  }
  c.builder().print(std::string(prefix), vs);
}

void device_print(std::string_view prefix, Operand value, SourceLoc loc) {
  device_print(prefix, {value}, loc);
}

// ---- random numbers: Philox 4x32 written in the language itself (tessera/detail/philox.h) ------

std::array<Tile, 4> randint4x(Operand seed, Operand offset, int n_rounds, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const Type ts = c.type(val(c, seed)), to = c.type(val(c, offset));
  if (!ts.is_scalar() || !ts.is_int() || ts.elem == DType::Bool) {
    c.fail(loc, "tl::rand*: the seed must be a scalar integer, got " + ts.str());
  }
  if (to.ptr || !to.is_int() || to.elem == DType::Bool) {
    c.fail(loc, "tl::rand*: the offsets must be integers, got " + to.str());
  }
  if (n_rounds < 1 || n_rounds > 64)
    c.fail(loc, "tl::rand*: n_rounds must be in [1, 64], got " + std::to_string(n_rounds));
  auto u32 = [&](Operand x) { return cast(x, DType::UInt32, loc); };
  auto lit = [&](uint32_t v) {
    return cast(Operand(static_cast<int64_t>(v), loc), DType::UInt32, loc);
  };
  const Tile s64 = cast(seed, DType::Int64, loc);
  Tile k0 = u32(Operand(s64, loc)), k1 = u32(Operand(Operand(s64, loc) >> Operand(32, loc), loc));
  // Counter (lo32(offset), hi32(offset), 0, 0); the high word of an int32 offset is 0, as Triton.
  Tile c0 = u32(offset);
  Tile c1 = to.elem == DType::Int64 || to.elem == DType::UInt64
                ? u32(Operand(Operand(offset) >> Operand(32, loc), loc))
                : Operand(c0, loc) * Operand(0, loc);
  Tile c2 = Operand(c0, loc) * Operand(0, loc), c3 = c2;
  const Tile mul_a = lit(0xD2511F53u), mul_b = lit(0xCD9E8D57u), key_a = lit(0x9E3779B9u),
             key_b = lit(0xBB67AE85u);
  for (int r = 0; r < n_rounds; ++r) {
    const Tile n0 = umulhi(mul_b, c2, loc) ^ c1 ^ k0;
    const Tile n2 = umulhi(mul_a, c0, loc) ^ c3 ^ k1;
    const Tile n1 = Operand(mul_b, loc) * Operand(c2, loc);
    const Tile n3 = Operand(mul_a, loc) * Operand(c0, loc);
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 = Operand(k0, loc) + Operand(key_a, loc);
    k1 = Operand(k1, loc) + Operand(key_b, loc);
  }
  return {c0, c1, c2, c3};
}

Tile randint(Operand seed, Operand offset, int n_rounds, SourceLoc loc) {
  return randint4x(seed, offset, n_rounds, loc)[0];
}

namespace {
// Triton's uint32_to_uniform_float: the bits as int32, negative values folded (-x - 1, written
// ~x so that INT32_MIN is no overflow), times 4.656613e-10 (about 1/INT32_MAX) in float32.
Tile uniform_float(const Tile& bits, SourceLoc loc) {
  const Tile x = bitcast(Operand(bits, loc), DType::Int32, loc);
  const Tile folded = where(Operand(x, loc) < Operand(0, loc), ~Operand(x, loc), x, loc);
  return Operand(cast(Operand(folded, loc), DType::Float32, loc), loc) *
         Operand(4.656613e-10f, loc);
}
}  // namespace

Tile rand(Operand seed, Operand offset, int n_rounds, SourceLoc loc) {
  return uniform_float(randint(seed, offset, n_rounds, loc), loc);
}

Tile randn(Operand seed, Operand offset, int n_rounds, SourceLoc loc) {
  // Triton's pair_uniform_to_normal on the first two outputs, in float32: u1 clamped to 1e-7,
  // the cosine branch.
  const auto r = randint4x(seed, offset, n_rounds, loc);
  const Tile u1 = maximum(Operand(1.0e-7f, loc), uniform_float(r[0], loc), loc);
  const Tile u2 = uniform_float(r[1], loc);
  const Tile th = Operand(6.283185307179586f, loc) * Operand(u2, loc);
  const Tile rad =
      sqrt(Operand(Operand(-2.0f, loc) * Operand(log(Operand(u1, loc), loc), loc), loc), loc);
  return Operand(rad, loc) * Operand(cos(Operand(th, loc), loc), loc);
}

void static_range(Operand lo_op, Operand hi_op, Operand step_op, FunctionRef<void(Tile)> body,
                  SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const int64_t lo = constant_int(c, lo_op, "tl::static_range's start"),
                hi = constant_int(c, hi_op, "tl::static_range's end"),
                step = constant_int(c, step_op, "tl::static_range's step");
  if (step == 0) c.fail(loc, "tl::static_range: the step must not be 0");
  for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) body(Operand(i, loc).tile);
}

void static_range(Operand lo, Operand hi, FunctionRef<void(Tile)> body, SourceLoc loc) {
  static_range(lo, hi, Operand(1, loc), body, loc);
}

void range(Operand lo, Operand hi, FunctionRef<void(Tile)> body, SourceLoc loc) {
  range(lo, hi, Operand(1, loc), body, loc);
}

void if_(Operand cond, FunctionRef<void()> then_body, SourceLoc loc) {
  if_impl(cond, then_body, nullptr, loc);
}

void if_(Operand cond, FunctionRef<void()> then_body, FunctionRef<void()> else_body,
         SourceLoc loc) {
  if_impl(cond, then_body, &else_body, loc);
}

// ---- operators
// ------------------------------------------------------------------------------------

Tile operator+(Operand a, Operand b) {
  return arith(BinaryKind::Add, a, b, "+");
}
Tile operator-(Operand a, Operand b) {
  return arith(BinaryKind::Sub, a, b, "-");
}
Tile operator*(Operand a, Operand b) {
  return arith(BinaryKind::Mul, a, b, "*");
}
Tile operator/(Operand a, Operand b) {
  return arith(BinaryKind::Div, a, b, "/");
}
Tile operator%(Operand a, Operand b) {
  return arith(BinaryKind::Rem, a, b, "%");
}
Tile operator&(Operand a, Operand b) {
  return arith(BinaryKind::And, a, b, "&");
}
Tile operator|(Operand a, Operand b) {
  return arith(BinaryKind::Or, a, b, "|");
}
Tile operator^(Operand a, Operand b) {
  return arith(BinaryKind::Xor, a, b, "^");
}
Tile operator<<(Operand a, Operand b) {
  return arith(BinaryKind::Shl, a, b, "<<");
}
Tile operator>>(Operand a, Operand b) {
  return arith(BinaryKind::Shr, a, b, ">>");
}
Tile operator==(Operand a, Operand b) {
  return compare(CmpKind::EQ, a, b, "==");
}
Tile operator!=(Operand a, Operand b) {
  return compare(CmpKind::NE, a, b, "!=");
}
Tile operator<(Operand a, Operand b) {
  return compare(CmpKind::LT, a, b, "<");
}
Tile operator<=(Operand a, Operand b) {
  return compare(CmpKind::LE, a, b, "<=");
}
Tile operator>(Operand a, Operand b) {
  return compare(CmpKind::GT, a, b, ">");
}
Tile operator>=(Operand a, Operand b) {
  return compare(CmpKind::GE, a, b, ">=");
}

Tile operator-(Operand a) {
  TraceContext& c = ctx(a.loc);
  const ValueId v = val(c, a);
  const Type& t = c.type(v);
  if (t.ptr || t.elem == DType::Bool || is_float8(t.elem))
    c.fail(a.loc, "unary minus of " + t.str());
  return c.tile(c.builder().unary(UnaryKind::Neg, v));
}

Tile operator~(Operand a) {
  TraceContext& c = ctx(a.loc);
  const ValueId v = val(c, a);
  const Type& t = c.type(v);
  if (t.ptr || t.is_float())
    c.fail(a.loc, "bitwise not (~) needs an integer or boolean operand, got " + t.str());
  return c.tile(c.builder().unary(UnaryKind::Not, v));
}

}  // namespace tessera::tl
