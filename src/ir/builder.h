/** \file
 * Builds tile IR: owns an insertion point (restored by `InsertionGuard`, as LLVM's IRBuilder),
 * stamps every op with the current source location, and folds constants on creation. Operands
 * must already have matching types: promotion and broadcasting are the kernel language's job
 * (src/tl/language.cpp).
 */
#pragma once

#include <vector>

#include "ir/ir.h"

namespace tessera::ir {

class Builder {
 public:
  explicit Builder(Function& f) : f_(f), region_(&f.body) {}

  Function& function() { return f_; }
  const Type& type(ValueId v) const { return f_.type(v); }

  void set_loc(SourceLoc loc) { loc_ = loc; }
  SourceLoc loc() const { return loc_; }

  Region* insertion_region() const { return region_; }
  void set_insertion_region(Region* r) { region_ = r; }

  /** Restores the insertion region on scope exit. */
  class InsertionGuard {
   public:
    explicit InsertionGuard(Builder& b) : b_(b), saved_(b.region_) {}
    ~InsertionGuard() { b_.region_ = saved_; }

   private:
    Builder& b_;
    Region* saved_;
  };

  // ---- values -------------------------------------------------------------------------------
  ValueId constant_int(int64_t v, const Type& t);
  ValueId constant_float(double v, const Type& t);
  /** A constant of type `t` with the numeric value `v` (int or float as the type says). */
  ValueId constant(double v, const Type& t);
  ValueId program_id(int axis);
  ValueId num_programs(int axis);
  ValueId arange(int64_t start, int64_t end);
  ValueId splat(ValueId scalar, ArrayRef<int64_t> shape);
  ValueId broadcast(ValueId v, ArrayRef<int64_t> shape);
  ValueId expand_dims(ValueId v, int64_t axis);
  ValueId binary(BinaryKind k, ValueId a, ValueId b);
  ValueId compare(CmpKind k, ValueId a, ValueId b);
  ValueId unary(UnaryKind k, ValueId a);
  ValueId cast(ValueId a, DType to);
  /** An atomic read-modify-write (inserted now: it has side effects); returns the old values. */
  ValueId atomic(AtomicKind k, MemOrder o, ValueId ptr, ValueId v, ValueId mask);
  ValueId atomic_cas(MemOrder o, ValueId ptr, ValueId cmp, ValueId v);

 private:
  ValueId atomic_op(Op* op, ValueId ptr);

 public:
  /** Shape ops (see OpKind). */
  ValueId permute(ValueId v, ArrayRef<int64_t> perm);
  ValueId reshape(ValueId v, ArrayRef<int64_t> shape);
  ValueId join(ValueId a, ValueId b);
  ValueId extract(ValueId v, int64_t which);
  ValueId cat(ValueId a, ValueId b);
  /** `v` reversed along `axis` (a splat constant is its own reverse). */
  ValueId flip(ValueId v, int64_t axis);
  /** `src` gathered along `axis` at `index` (the result has index's shape). */
  ValueId gather(ValueId src, ValueId index, int64_t axis);
  /** A user function of the elements of `args` (all of `result`'s shape); `text`: pack_extern. */
  ValueId extern_call(std::string text, std::vector<ValueId> args, const Type& result, bool pure);
  ValueId bitcast(ValueId v, DType to);
  /** The same 64 bits as another type: an address as a pointer, a pointer as its address, or a
   * pointer to another element type. */
  ValueId bitcast_to(ValueId v, const Type& to);
  /** tl.reduce / tl.associative_scan with a combine region: the op with its region arguments and
   * results made; the caller traces the region and inserts the op. */
  Op* create_reduce_fn(const std::vector<ValueId>& inputs, int64_t axis, bool scan, bool reverse);
  /** device_assert / device_print (inserted now). */
  /** device_assert; `hint`: the check of a tl::multiple_of / max_contiguous promise. */
  void assert_(ValueId cond, std::string message, bool hint = false);
  void print(std::string prefix, const std::vector<ValueId>& values);
  /** A while loop with empty condition and body regions (the caller fills and inserts it). */
  Op* create_while();
  /** a [M, K] @ b [K, N] + acc [M, N]. */
  ValueId dot(ValueId a, ValueId b, ValueId acc, DotPrecision p);
  /** a * b + c with one rounding (floats of one type). */
  ValueId fma(ValueId a, ValueId b, ValueId c);
  ValueId select(ValueId cond, ValueId a, ValueId b);
  ValueId addptr(ValueId ptr, ValueId offset);
  ValueId load(ValueId ptr, ValueId mask = kNoValue, ValueId other = kNoValue);
  void store(ValueId ptr, ValueId value, ValueId mask = kNoValue);
  ValueId reduce(ReduceKind k, ValueId v, int64_t axis);

  // ---- structured control flow (the front end fills the regions) -----------------------------
  /** A For op with lb/ub/step and carried initial values; its region has the iv and one
   * argument per carried value. Results are created by `finish_for`. */
  Op* create_for(ValueId lb, ValueId ub, ValueId step);
  Op* create_if(ValueId cond);
  void yield(const std::vector<ValueId>& values);
  /** Appends an op to the insertion region. */
  void insert(Op* op);

  /** Folding helpers, exposed for canonicalization. */
  static double fold_value(const Function& f, ValueId v);

 private:
  ValueId result(Op* op, Type t);
  bool is_const(ValueId v) const { return f_.constant(v) != nullptr; }

  Function& f_;
  Region* region_;
  SourceLoc loc_;
};

/** Wraps/rounds `v` to the value a constant of element type `d` holds. */
double normalize_constant(double v, DType d);
/** Evaluates a binary op on constants with the element type's semantics. */
double fold_binary(BinaryKind k, double a, double b, DType d);
bool fold_compare(CmpKind k, double a, double b);

/** Scalar semantics on the IR's value representation (ints and bools as int64 bits of their
 * dtype, floats as double holding a value of their dtype): constant folding and the interpreter
 * share them, and they match the generated code (tessera/trt/scalar_ops.h). */
namespace eval {
int64_t wrap_int(int64_t v, DType d);
double round_float(double v, DType d);
int64_t binary_int(BinaryKind k, int64_t a, int64_t b, DType d);
double binary_float(BinaryKind k, double a, double b, DType d);
bool compare_int(CmpKind k, int64_t a, int64_t b, DType d);
bool compare_float(CmpKind k, double a, double b);
}  // namespace eval

}  // namespace tessera::ir
