#include "backend/cpu/emit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "backend/common/c_expr.h"
#include "backend/common/c_family.h"
#include "backend/cpu/toolchain.h"
#include "ir/access.h"
#include "ir/affine.h"
#include "ir/index_map.h"
#include "ir/materialize.h"
#include "ir/op_traits.h"
#include "ir/passes.h"
#include "runtime/allocator.h"
#include "tessera/env.h"

namespace tessera::backend::cpu {
namespace {

using namespace cfamily;

using ir::Op;
using ir::OpKind;
using ir::Region;
using ir::Type;
using ir::ValueId;

using ir::Storage;

class Emitter : ExprPrinter {
 public:
  explicit Emitter(const ir::Function& f, bool checked = false)
      : ExprPrinter(f, checked, /*reread_loads=*/true), affine_(f) {}

  Emitted run() {
    header();
    line("for (int64_t _p = _pb; _p < _pe; ++_p) {");
    ++indent_;
    line("int32_t _pid0, _pid1, _pid2;");
    line("trt::program_coords(_g, _p, _pid0, _pid1, _pid2);");
    line("(void)_pid0; (void)_pid1; (void)_pid2;");
    region(f_.body);
    --indent_;
    line("}");
    --indent_;
    line("}");
    check_stack();
    Emitted k;
    k.source = out_.str();
    k.work_per_program = std::max<int64_t>(work_, 1);
    k.sites = sites_;
    return k;
  }

 private:
  // The element of reduction input `in` at `ix`, written to its array first when the reduction
  // materializes it (fuse_into_reductions); `tmp` names a register for the value.
  void reduce_input(ValueId in, const std::vector<std::string>& ix, const std::string& tmp) {
    if (!plan_.fused_into_reduction(in)) {
      line(tmp + " = " + expr(in, ix) + ";");
      return;
    }
    line(tmp + " = " + op_expr(*f_.def(in), ix) + ";");
    line(name(in) + "[" + flat(f_.type(in).shape, ix) + "] = " + tmp + ";");
  }

  void header() {
    preamble("", "tessera/trt/cpu.h", /*cuda=*/false);
    out_ << "extern \"C\" TRT_EXPORT void tessera_kernel(const trt::Grid* _g, int64_t _pb, int64_t "
            "_pe, "
            "const trt::Arg* _a) {\n";
    indent_ = 1;
    declare_params("const trt::DebugCtx", /*aligned=*/true);
  }

  // Emits nested loops over `shape` (simd on the innermost) and calls body with index names.
  void loops(const SmallVector<int64_t, 4>& shape, bool simd,
             const std::function<void(const std::vector<std::string>&)>& body) {
    versioned([&] { plain_loops(shape, simd, body); });
  }

  // Emits `gen` with fast paths allowed. If one was taken under a uniform guard (a condition on
  // scalars, fixed for the whole loop nest), emits `if (guards) { fast } else { gen again with
  // fast paths off }`: the test runs once per nest, not per element. Nested calls emit plainly
  // inside the outermost one.
  void versioned(const std::function<void()>& gen) {
    if (fast_ != Fast::Unset) {
      gen();
      return;
    }
    const int64_t work0 = work_;
    std::ostringstream outer;
    out_.swap(outer);
    fast_ = Fast::On;
    guards_.clear();
    ++indent_;
    gen();
    --indent_;
    const std::string fast = out_.str();
    const std::vector<std::string> guards = guards_;
    out_.swap(outer);
    if (guards.empty()) {
      // Kernel one level deeper than needed: take the indentation back off.
      std::istringstream lines(fast);
      for (std::string l; std::getline(lines, l);)
        out_ << (l.size() >= 2 ? l.substr(2) : l) << "\n";
      fast_ = Fast::Unset;
      return;
    }
    std::string cond;
    for (const auto& g : guards) cond += (cond.empty() ? "" : " && ") + g;
    line("if (" + cond + ") {");
    out_ << fast;
    line("} else {");
    fast_ = Fast::Off;
    work_ = work0;  // both versions do the same work; count it once
    ++indent_;
    gen();
    --indent_;
    line("}");
    fast_ = Fast::Unset;
  }

  void plain_loops(const SmallVector<int64_t, 4>& shape, bool simd,
                   const std::function<void(const std::vector<std::string>&)>& body) {
    std::vector<std::string> idx;
    int64_t n = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      const std::string i = fresh("_i");
      idx.push_back(i);
      n *= shape[d];
      if (simd && d + 1 == shape.size()) line("#pragma omp simd");
      line("for (int32_t " + i + " = 0; " + i + " < " + std::to_string(shape[d]) + "; ++" + i +
           ") {");
      ++indent_;
    }
    work_ += n * work_scale_;
    for (size_t d = 0; d < shape.size(); ++d) extents_[idx[d]] = shape[d];
    body(idx);
    for (size_t d = 0; d < shape.size(); ++d) {
      extents_.erase(idx[d]);
      --indent_;
      line("}");
    }
  }

  // ---- masks proven true for a whole loop nest ------------------------------------------------
  //
  // A bounds mask such as `offsets < n` is an integer comparison of expressions affine in the
  // loop indices. Over the loop nest's box its extremes lie at corners, so one uniform test
  // decides whether it holds everywhere; when it does (every block but the last, usually), the
  // versioned loop runs without the mask: plain vector loads and stores, no blends.

  struct Affine {
    std::map<std::string, int64_t> coef;  // loop index -> coefficient
    std::string base = "0";               // a uniform int64 expression
    std::optional<int64_t> base_value;    // base's value when known at compile time
  };

  int64_t spread(const Affine& a, bool max) const {
    int64_t s = 0;
    for (const auto& [i, c] : a.coef) {
      const int64_t far = c * (extents_.at(i) - 1);
      if ((far > 0) == max) s += far;
    }
    return s;
  }

  static Affine combine(const Affine& a, const Affine& b, int64_t sign) {
    Affine r = a;
    for (const auto& [i, c] : b.coef) {
      if ((r.coef[i] += sign * c) == 0) r.coef.erase(i);
    }
    r.base = "(" + a.base + (sign > 0 ? " + " : " - ") + b.base + ")";
    r.base_value.reset();
    if (a.base_value && b.base_value) r.base_value = *a.base_value + sign * *b.base_value;
    return r;
  }

  // The affine form (ir/affine.h) of an int32/int64 value at loop indices `idx`, or nullopt.
  // `checks` receives the uniform condition under which a 32-bit form is the value itself: that
  // it fits int32 over the loop nest (then no wrapping step changed it; ir/affine.h says why).
  std::optional<Affine> affine(ValueId v, const std::vector<std::string>& idx,
                               std::vector<std::string>& checks) {
    const Type& t = f_.type(v);
    if (t.ptr || (t.elem != DType::Int32 && t.elem != DType::Int64)) return std::nullopt;
    const ir::AffineForm* form = affine_.form(v);
    if (!form) return std::nullopt;
    Affine r;
    for (size_t d = 0; d < form->coef.size(); ++d) {
      const std::string& i = idx.at(d);
      if (form->coef[d] == 0 || i == "0") continue;
      if (!extents_.count(i)) return std::nullopt;  // an index expression, not a loop index
      if ((r.coef[i] += form->coef[d]) == 0) r.coef.erase(i);
    }
    r.base = uniform(form->base);
    r.base_value = form->base_value;
    if (t.elem == DType::Int32 && !form->exact) {
      const int64_t lo = spread(r, false), hi = spread(r, true);
      if (r.base_value) {  // known at compile time: decide now
        if (*r.base_value + lo < INT32_MIN || *r.base_value + hi > INT32_MAX) return std::nullopt;
      } else {
        checks.push_back("trt::fits_i32(" + r.base + ", " + std::to_string(lo) + ", " +
                         std::to_string(hi) + ")");
      }
    }
    return r;
  }

  std::string uniform(int32_t node) const { return uniform_expr(affine_, node); }

  // Adds uniform conditions to the versioned loop nest's guard (versioned()), each once.
  void add_guards(const std::vector<std::string>& conds) {
    for (const auto& c : conds) {
      if (std::find(guards_.begin(), guards_.end(), c) == guards_.end()) guards_.push_back(c);
    }
  }

  // "true" when the comparison `op` holds over the whole loop nest: at once if that is known at
  // compile time, else under a guard added for versioned(). nullopt when it cannot be shown.
  std::optional<std::string> mask_always_true(const Op& op, const std::vector<std::string>& idx) {
    if (extents_.empty() || fast_ == Fast::Off) return std::nullopt;
    const auto k = static_cast<int>(op.sub);  // ==, !=, <, <=, >, >=
    if (k < 2) return std::nullopt;
    std::vector<std::string> checks;
    auto a = affine(op.operands[0], idx, checks);
    auto b = a ? affine(op.operands[1], idx, checks) : std::nullopt;
    if (!b) return std::nullopt;
    const Affine d = combine(*a, *b, -1);  // a - b
    const bool upper = k == 2 || k == 3;   // a - b < 0 or <= 0: its maximum decides
    const int64_t far = spread(d, upper);
    const char* rel = k == 2 ? " < 0" : k == 3 ? " <= 0" : k == 4 ? " > 0" : " >= 0";
    if (d.base_value && checks.empty()) {
      const int64_t e = *d.base_value + far;
      const bool holds = k == 2 ? e < 0 : k == 3 ? e <= 0 : k == 4 ? e > 0 : e >= 0;
      if (holds) return std::string("true");
      return std::nullopt;
    }
    if (fast_ != Fast::On) return std::nullopt;
    checks.push_back("(" + d.base + " + " + std::to_string(far) + "LL" + rel + ")");
    add_guards(checks);
    return std::string("true");
  }

  // ---- expressions --------------------------------------------------------------------------

  // The CPU's additions to the shared expressions: divisions by a uniform divisor, the checked
  // mode's int32 wrap reports and bounds checks, masks proven true over a loop nest.
  std::string op_expr(const Op& op, const Index& idx) override {
    const Type& t = f_.type(op.result());
    switch (op.kind) {
      case OpKind::Binary: {
        const auto k = static_cast<ir::BinaryKind>(op.sub);
        if (k == ir::BinaryKind::Div) {
          if (auto q = div_by_uniform(op, t, idx)) return *q;
        }
        if (k == ir::BinaryKind::Rem) {
          if (auto r = rem_identity(op, idx)) return *r;
        }
        break;
      }
      case OpKind::Compare:
        if (auto always = mask_always_true(op, idx)) return *always;
        break;
      default:
        break;
    }
    return ExprPrinter::op_expr(op, idx);
  }

  // The rank-0 value a tile is a splat of (through Broadcast and ExpandDims), or kNoValue.
  ValueId uniform_source(ValueId v) const {
    for (;;) {
      if (f_.type(v).is_scalar()) return v;
      if (plan_.storage(v) != Storage::Inline) return ir::kNoValue;
      const Op* op = f_.def(v);
      if (!op) return ir::kNoValue;
      if (op->kind == OpKind::Splat || op->kind == OpKind::Broadcast ||
          op->kind == OpKind::ExpandDims) {
        v = op->operands[0];
        continue;
      }
      return ir::kNoValue;
    }
  }

  // Float `/` is Triton's (within 2 ulp, as div.full.f32; docs/kernels.md): a tile divided by one
  // scalar for the whole tile is a multiplication by its reciprocal, about 3x faster than a
  // vector division. That is within 1.5 ulp while the reciprocal is a normal float, so a runtime
  // divisor guards a versioned loop (versioned()); a constant one is checked here.
  // `x % m` with x affine over the loop nest (x = B + offsets, B uniform) and m uniform is
  // x - (B - B % m) where the nest does not straddle a multiple of m (x >= 0 and
  // 0 <= B % m + offsets < m): tutorial 03's `(pid_m * BM + arange(0, BM)) % M` in every block
  // but the last, a broadcast bias's `(pid * BLOCK + arange(0, BLOCK)) % N` in a fused kernel
  // over rows of N in every block within a row. Under that uniform guard (versioned()), the
  // remainder disappears and the access is affine (vector loads instead of a division per
  // element); the other version keeps it.
  std::optional<std::string> rem_identity(const Op& op, const Index& idx) {
    if (!rem_is_identity(op, idx)) return std::nullopt;
    const std::string shift = rem_shift(op, idx);
    return "((" + std::string(register_type(f_.type(op.result()).elem)) + ")(" +
           expr(op.operands[0], idx) + " - " + shift + "))";
  }
  // m as an int64 expression: a scalar (splat or broadcast to the tile) or a constant tile.
  std::optional<std::string> uniform_divisor(ValueId v) {
    if (const ValueId m = uniform_source(v); m != ir::kNoValue) return "(int64_t)" + expr(m, {});
    const Op* d = f_.def(v);
    if (d && d->kind == OpKind::Constant && f_.type(v).is_int())
      return int_literal(d->ival, DType::Int64);
    return std::nullopt;
  }
  bool rem_is_identity(const Op& op, const Index& idx) override {
    const Type& t = f_.type(op.result());
    if (fast_ != Fast::On || !t.is_int() || t.elem == DType::Bool || t.ptr) return false;
    const auto m = uniform_divisor(op.operands[1]);
    if (!m) return false;
    std::vector<std::string> checks;
    const auto a = affine(op.operands[0], idx, checks);
    if (!a) return false;
    for (std::string& c : rem_no_straddle_guards(a->base, *m, spread(*a, false), spread(*a, true)))
      checks.push_back(std::move(c));
    add_guards(checks);
    return true;
  }
  std::string rem_shift(const Op& op, const Index& idx) override {
    std::vector<std::string> checks;  // (rem_is_identity added them)
    const auto a = affine(op.operands[0], idx, checks);
    return rem_shift_expr(a->base, *uniform_divisor(op.operands[1]));
  }

  std::optional<std::string> div_by_uniform(const Op& op, const Type& t,
                                            const std::vector<std::string>& idx) {
    if (t.elem == DType::Float64 || !is_floating_point(t.elem) ||
        f_.type(op.operands[0]).is_scalar()) {
      return std::nullopt;
    }
    const ValueId d = uniform_source(op.operands[1]);
    if (d == ir::kNoValue) return std::nullopt;
    const Op* dop = f_.def(d);
    const std::string a = expr(op.operands[0], idx);
    if (dop && dop->kind == OpKind::Constant) {
      const double r = 1.0 / static_cast<double>(static_cast<float>(dop->fval));
      if (!(std::fabs(r) >= 0x1p-126 && std::fabs(r) <= 0x1p126)) return std::nullopt;
      return round_to(
          t.elem,
          "(" + a + " * " + float_literal(static_cast<double>(static_cast<float>(r)), true) + ")");
    }
    if (fast_ == Fast::Unset) return std::nullopt;  // not inside a loop nest
    const std::string dv = expr(d, {});
    if (fast_ == Fast::Off) return std::nullopt;
    const std::string guard = "trt::recip_ok(" + dv + ")";
    add_guards({guard});
    return round_to(t.elem, "(" + a + " * (1.0f / " + dv + "))");
  }

  // ---- statements ---------------------------------------------------------------------------

  void declare_array(ValueId v) {
    const Type& t = f_.type(v);
    on_stack(t, t.numel(), loc_of(v));
    line("alignas(64) " + type_str(t) + " " + name(v) + "[" + std::to_string(t.numel()) + "];");
  }

  void region(const Region& r) {
    for (const Op* op : r.ops) this->op(*op);
  }

  void op(const Op& op) {
    switch (op.kind) {
      case OpKind::Yield:
        return;  // the parent For/If handles it
      case OpKind::Store:
        return store(op);
      case OpKind::For:
        return for_op(op);
      case OpKind::If:
        return if_op(op);
      case OpKind::Reduce:
        return reduce(op);
      case OpKind::Dot:
        return dot(op);
      case OpKind::Atomic:
      case OpKind::AtomicCas:
        return atomic(op);
      case OpKind::While:
        return while_op(op);
      case OpKind::ReduceFn:
      case OpKind::ScanFn:
        return reduce_fn(op);
      case OpKind::Assert:
        if (checked_) return assert_op(op);
        return;  // device_assert is checked in the debug mode only, as Triton's
      case OpKind::Print:
        return print(op);
      default:
        break;
    }
    for (ValueId v : op.results) {
      const Storage s = plan_.storage(v);
      if (s == Storage::Scalar) {
        line(type_str(f_.type(v)) + " const " + name(v) + " = " + op_expr(op, {}) + ";");
      } else if (s == Storage::Array) {
        declare_array(v);
        if (plan_.fused_into_reduction(v)) continue;  // the reduction writes it
        loops(f_.type(v).shape, true, [&](const std::vector<std::string>& idx) {
          line(name(v) + "[" + flat(f_.type(v).shape, idx) + "] = " + op_expr(op, idx) + ";");
        });
      }
    }
  }

  void store(const Op& op) {
    const Type& pt = f_.type(op.operands[0]);
    loops(pt.shape, true, [&](const std::vector<std::string>& idx) { line(store_stmt(op, idx)); });
  }

  // a @ b + acc: i-k-j loops, the j loop vectorized, one fused multiply-add per term (the same
  // rounding the interpreter and GPUs use); float32 inputs are rounded to tf32 unless ieee.
  void dot(const Op& op) {
    const ValueId out = op.result(), a = op.operands[0], b = op.operands[1], acc = op.operands[2];
    const Type& at = f_.type(a);
    const Type& ot = f_.type(out);
    const int64_t M = at.shape[0], K = at.shape[1], N = ot.shape[1];
    const bool fl = ot.is_float();
    const auto precision = static_cast<ir::DotPrecision>(op.sub);
    const bool tf32 = at.elem == DType::Float32 && precision == ir::DotPrecision::TF32;
    const bool tf32x3 = at.elem == DType::Float32 && precision == ir::DotPrecision::TF32x3;
    const std::string rt = register_type(ot.elem);
    const auto into = dots_in_place_.find(out);
    if (into != dots_in_place_.end()) {
      // The loop's accumulator is updated where it lives (for_op checked that nothing else reads
      // it): no copy of it into the result and back each iteration.
      alias(out, into->second);
    } else {
      declare_array(out);
    }
    // tf32: each operand is rounded once into a local array (the loops below read every element
    // of b once per 4 rows of a, and every element of a once per 16 columns of b).
    std::string rounded_a, rounded_b;
    if (tf32) {
      for (auto [v, rows, cols, name_out] :
           {std::tuple{a, M, K, &rounded_a}, std::tuple{b, K, N, &rounded_b}}) {
        *name_out = fresh("_tf");
        on_stack(Type::scalar(DType::Float32), rows * cols, loc_of(v));
        line("alignas(64) float " + *name_out + "[" + std::to_string(rows * cols) + "];");
        const std::string r = fresh("_r"), q = fresh("_q");
        line("for (int32_t " + r + " = 0; " + r + " < " + std::to_string(rows) + "; ++" + r + ")");
        line("  #pragma omp simd");
        line("  for (int32_t " + q + " = 0; " + q + " < " + std::to_string(cols) + "; ++" + q +
             ") " + *name_out + "[" + r + " * " + std::to_string(cols) + " + " + q +
             "] = trt::to_tf32((float)(" + expr(v, {r, q}) + "));");
      }
    }
    auto in = [&](ValueId v, const std::string& i, const std::string& j) {
      if (tf32) {
        const bool is_a = v == a;
        return (is_a ? rounded_a : rounded_b) + "[" + i + " * " + std::to_string(is_a ? K : N) +
               " + " + j + "]";
      }
      return "(" + rt + ")(" + expr(v, {i, j}) + ")";
    };
    // tf32x3 splits the raw inputs inside each multiply-add (trt::fma_tf32x3).
    const std::string fma = tf32x3 ? "trt::fma_tf32x3(" : "trt::fma(";
    const std::string i = fresh("_i"), j = fresh("_j"), k = fresh("_k"), x = fresh("_x");
    const std::string at_ij = name(out) + "[" + i + " * " + std::to_string(N) + " + " + j + "]";
    if (into == dots_in_place_.end()) {
      line("for (int32_t " + i + " = 0; " + i + " < " + std::to_string(M) + "; ++" + i + ")");
      line("  for (int32_t " + j + " = 0; " + j + " < " + std::to_string(N) + "; ++" + j + ") " +
           at_ij + " = " + expr(acc, {i, j}) + ";");
    }
    if (blocked_dot(op)) return dot_blocked(op, rounded_a, rounded_b, tf32x3);
    line("for (int32_t " + i + " = 0; " + i + " < " + std::to_string(M) + "; ++" + i + ") {");
    ++indent_;
    line("for (int32_t " + k + " = 0; " + k + " < " + std::to_string(K) + "; ++" + k + ") {");
    ++indent_;
    line(rt + " const " + x + " = " + in(a, i, k) + ";");
    line("#pragma omp simd");
    line("for (int32_t " + j + " = 0; " + j + " < " + std::to_string(N) + "; ++" + j + ")");
    if (fl) {
      line("  " + at_ij + " = " + fma + x + ", " + in(b, k, j) + ", " + at_ij + ");");
    } else {
      line("  " + at_ij + " = (" + rt + ")(" + at_ij + " + " + x + " * " + in(b, k, j) + ");");
    }
    --indent_;
    line("}");
    --indent_;
    line("}");
    work_ += M * N * K * work_scale_;
  }

  // Register blocking for float dots: the runtime's micro-kernel (trt::dot_block, a 4 x 16 block
  // of the result in registers across the k loop, 2.6x the simple loop on AVX-512, and 3x the same
  // loop written into the kernel, where the compiler kept the block on the stack) on row-major
  // arrays of the register type: operands stored so already are read in place, others (a load used
  // once, a conversion such as `p.to(float16)`) are packed first. The same multiply-adds in the
  // same order per element: the result does not change.
  static bool blocked_dot(const Op& op, const ir::Function& f) {
    const Type& ot = f.type(op.result());
    return ot.is_float() && ot.shape[0] % 4 == 0 && ot.shape[1] % 16 == 0;
  }
  bool blocked_dot(const Op& op) const { return blocked_dot(op, f_); }
  // Whether dot_block takes its 64-byte-vector path (TESSERA_CPU_DOT512; where the kernel
  // compiler targets AVX-512): on Intel CPUs with AVX-512 by default, whose two 512-bit FMA units
  // run it at twice the 32-byte kernel (GCC's tuning for them vectorizes plain loops with 32
  // bytes); AMD's split a 512-bit FMA into halves, and there it measured 0.72x the 32-byte kernel.
  static bool dot512() {
    if (knobs().cpu_dot512 >= 0) return knobs().cpu_dot512 == 1;
    return intel_avx512();
  }

  void dot_blocked(const Op& op, const std::string& packed_a, const std::string& packed_b,
                   bool tf32x3) {
    const ValueId out = op.result(), a = op.operands[0], b = op.operands[1];
    const int64_t M = f_.type(a).shape[0], K = f_.type(a).shape[1], N = f_.type(out).shape[1];
    const DType et = f_.type(out).elem;
    const std::string rt = register_type(et);
    const std::string pa = packed_a.empty() ? dot_operand(a, M, K, et) : packed_a;
    const std::string pb = packed_b.empty() ? dot_operand(b, K, N, et) : packed_b;
    line("trt::dot_block<" + rt + ", " + std::to_string(M) + ", " + std::to_string(N) + ", " +
         std::to_string(K) + ", " + (tf32x3 ? "true" : "false") + ", " +
         (dot512() ? "true" : "false") + ">(" + pa + ", " + pb + ", " + name(out) + ");");
    work_ += M * N * K * work_scale_;
  }

  // A dot operand as a row-major array of `rt`: its own array when it has one of that type, else a
  // packed copy.
  std::string dot_operand(ValueId v, int64_t rows, int64_t cols, DType et) {
    const std::string rt = register_type(et);
    const bool is_acc = std::any_of(dots_in_place_.begin(), dots_in_place_.end(),
                                    [&](const auto& d) { return d.second == v; });
    if (plan_.storage(v) == Storage::Array && type_str(f_.type(v)) == rt && !is_acc) return name(v);
    const std::string packed = fresh("_pk"), r = fresh("_r"), q = fresh("_q");
    on_stack(Type::scalar(et), rows * cols, loc_of(v));
    line("alignas(64) " + rt + " " + packed + "[" + std::to_string(rows * cols) + "];");
    line("for (int32_t " + r + " = 0; " + r + " < " + std::to_string(rows) + "; ++" + r + ")");
    line("  #pragma omp simd");
    line("  for (int32_t " + q + " = 0; " + q + " < " + std::to_string(cols) + "; ++" + q + ") " +
         packed + "[" + r + " * " + std::to_string(cols) + " + " + q + "] = (" + rt + ")(" +
         expr(v, {r, q}) + ");");
    return packed;
  }

  // argmax/argmin: a scalar scan along the axis keeping the first best index (a NaN wins).
  void arg_reduce(const Op& op) {
    const ValueId out = op.result(), in = op.operands[0];
    const Type& it = f_.type(in);
    const Type& ot = f_.type(out);
    const bool is_max = static_cast<ir::ReduceKind>(op.sub) == ir::ReduceKind::ArgMax;
    const auto axis = static_cast<size_t>(op.ival);
    const bool fl = is_floating_point(it.elem);
    const std::string rt = register_type(it.elem);
    if (ot.is_scalar()) {
      line("int32_t " + name(out) + ";");
    } else {
      declare_array(out);
    }
    loops(ot.shape, false, [&](const std::vector<std::string>& idx) {
      const std::string best = fresh("_best"), bi = fresh("_bi"), k = fresh("_k"), x = fresh("_x");
      std::vector<std::string> first = idx, at = idx;
      first.insert(first.begin() + static_cast<std::ptrdiff_t>(axis), "0");
      at.insert(at.begin() + static_cast<std::ptrdiff_t>(axis), k);
      line(rt + " " + best + " = " + expr(in, first) + ";");
      line("int32_t " + bi + " = 0;");
      line("for (int32_t " + k + " = 1; " + k + " < " + std::to_string(it.shape[axis]) + "; ++" +
           k + ") {");
      ++indent_;
      line(rt + " const " + x + " = " + expr(in, at) + ";");
      std::string better = "(" + x + (is_max ? " > " : " < ") + best + ")";
      if (fl)
        better = "(" + better + " || (" + x + " != " + x + " && " + best + " == " + best + "))";
      line("if (" + better + ") { " + best + " = " + x + "; " + bi + " = " + k + "; }");
      --indent_;
      line("}");
      line((ot.is_scalar() ? name(out) : name(out) + "[" + flat(ot.shape, idx) + "]") + " = " + bi +
           ";");
      work_ += it.shape[axis] * work_scale_;
    });
  }

  void reduce(const Op& op) {
    const auto rk = static_cast<ir::ReduceKind>(op.sub);
    if (rk == ir::ReduceKind::ArgMax || rk == ir::ReduceKind::ArgMin) return arg_reduce(op);
    const ValueId out = op.result();
    const ValueId in = op.operands[0];
    const Type& it = f_.type(in);
    const Type& ot = f_.type(out);
    const auto k = static_cast<ir::ReduceKind>(op.sub);
    const int64_t axis = op.ival;
    const int64_t rank = it.rank();
    const std::string rt = register_type(ot.elem);
    const bool scalar_out = ot.is_scalar();
    if (scalar_out) {
      line(rt + " " + name(out) + ";");
    } else {
      declare_array(out);
    }
    auto dest = [&](const std::vector<std::string>& idx) {
      return scalar_out ? name(out) : name(out) + "[" + flat(ot.shape, idx) + "]";
    };
    const std::string init = reduce_init(k, ot);
    if (axis == rank - 1) {
      // Innermost-axis reductions index the axis as `j`, `(j + l)`: both range over [0, n), which
      // is all mask_always_true() needs to know.
      // Innermost axis: lanes that vectorize, combined in a fixed order (the same on every host).
      SmallVector<int64_t, 4> outer(it.shape.begin(), it.shape.end() - 1);
      const int64_t n = it.shape.back();
      loops(outer, false, [&](const std::vector<std::string>& idx) {
        const std::string lanes = fresh("_lanes"), j = fresh("_j"), l = fresh("_l");
        const std::string jl = "(" + j + " + " + l + ")";
        extents_[j] = n;
        extents_[jl] = n;
        line(rt + " " + lanes + "[16];");
        line("int32_t " + j + " = 0;");
        if (ot.elem == DType::Bool) {
          // No vector type for bool: 16 lanes in an array.
          line("for (int32_t " + l + " = 0; " + l + " < 16; ++" + l + ") " + lanes + "[" + l +
               "] = " + init + ";");
          line("for (; " + j + " + 16 <= " + std::to_string(n) + "; " + j + " += 16) {");
          ++indent_;
          std::vector<std::string> ix = idx;
          ix.push_back(jl);
          line("#pragma omp simd");
          line("for (int32_t " + l + " = 0; " + l + " < 16; ++" + l + ") " + lanes + "[" + l +
               "] = " + reduce_combine(k, ot, lanes + "[" + l + "]", expr(in, ix)) + ";");
          --indent_;
          line("}");
        } else {
          inner_reduce_vectors(k, ot, in, idx, n, init, lanes, j);
        }
        std::vector<std::string> tail = idx;
        tail.push_back(j);
        if (plan_.fused_into_reduction(in)) {
          line("for (; " + j + " < " + std::to_string(n) + "; ++" + j + ") {");
          ++indent_;
          const std::string t = fresh("_t");
          line(rt + " " + t + ";");
          reduce_input(in, tail, t);
          line(lanes + "[0] = " + reduce_combine(k, ot, lanes + "[0]", t) + ";");
          --indent_;
          line("}");
        } else {
          line("for (; " + j + " < " + std::to_string(n) + "; ++" + j + ") " + lanes +
               "[0] = " + reduce_combine(k, ot, lanes + "[0]", expr(in, tail)) + ";");
        }
        for (int width = 8; width >= 1; width /= 2) {
          line("for (int32_t " + l + " = 0; " + l + " < " + std::to_string(width) + "; ++" + l +
               ") " + lanes + "[" + l + "] = " +
               reduce_combine(k, ot, lanes + "[" + l + "]",
                              lanes + "[" + l + " + " + std::to_string(width) + "]") +
               ";");
        }
        line(dest(idx) + " = " + round_to(ot.elem, lanes + "[0]") + ";");
        extents_.erase(j);
        extents_.erase(jl);
        work_ += n * work_scale_;
      });
      return;
    }
    // Another axis: accumulate whole inner rows, in order along the axis.
    SmallVector<int64_t, 4> outer(it.shape.begin(), it.shape.begin() + axis);
    SmallVector<int64_t, 4> inner(it.shape.begin() + axis + 1, it.shape.end());
    loops(outer, false, [&](const std::vector<std::string>& oidx) {
      loops(inner, true, [&](const std::vector<std::string>& iidx) {
        std::vector<std::string> d = oidx;
        d.insert(d.end(), iidx.begin(), iidx.end());
        line(dest(d) + " = " + init + ";");
      });
      const std::string kk = fresh("_k");
      line("for (int32_t " + kk + " = 0; " + kk + " < " + std::to_string(it.shape[axis]) + "; ++" +
           kk + ") {");
      ++indent_;
      loops(inner, true, [&](const std::vector<std::string>& iidx) {
        std::vector<std::string> d = oidx, s = oidx;
        d.insert(d.end(), iidx.begin(), iidx.end());
        s.push_back(kk);
        s.insert(s.end(), iidx.begin(), iidx.end());
        line(dest(d) + " = " + reduce_combine(k, ot, dest(d), expr(in, s)) + ";");
      });
      --indent_;
      line("}");
      if (narrow_float(ot.elem)) {
        loops(inner, true, [&](const std::vector<std::string>& iidx) {
          std::vector<std::string> d = oidx;
          d.insert(d.end(), iidx.begin(), iidx.end());
          line(dest(d) + " = " + round_to(ot.elem, dest(d)) + ";");
        });
      }
    });
  }

  // The vector part of an innermost-axis reduction: blocks of 64 elements into four 16-lane
  // accumulators (independent dependency chains, in registers), then blocks of 16 into the first,
  // then the four folded pairwise into `lanes`; `j` is left at the first element not consumed.
  void inner_reduce_vectors(ir::ReduceKind k, const Type& ot, ValueId in,
                            const std::vector<std::string>& idx, int64_t n, const std::string& init,
                            const std::string& lanes, const std::string& j) {
    const std::string rt = register_type(ot.elem);
    const std::string vt = "trt::lanes16<" + rt + ">";
    const std::string acc = fresh("_acc"), x = fresh("_x"), l = fresh("_l");
    const int blocks = n >= 64 ? 4 : 1;
    for (int b = 0; b < blocks; ++b) {
      line(vt + " " + acc + "_" + std::to_string(b) + " = trt::splat16<" + rt + ">(" + init + ");");
    }
    std::vector<std::string> ix = idx;
    ix.push_back("(" + j + " + " + l + ")");
    extents_[ix.back()] = n;  // see reduce()
    // An input that is a tile stored contiguously along the row, of the accumulator's type (the
    // row a program loaded, exponentials a later step reads again): its vectors are loaded where
    // they are, not staged through a buffer first.
    const std::string direct = contiguous_array_read(in, ix, ot);
    // Or a load of consecutive elements read in place (its mask proven true over the row): a
    // copy into the buffer became 256-bit moves that the 512-bit loads after it could not
    // forward from (a softmax's row max, read again by its exp: 32% of the kernel's samples).
    const ValueId ld = direct.empty() ? contiguous_load(in, ix, ot) : ir::kNoValue;
    const bool direct_load = ld != ir::kNoValue;
    auto load_at = [&](const std::string& at) {
      std::vector<std::string> e = ix;
      e.back() = "(" + j + " + " + at + ")";
      return "trt::load16(" + expr(f_.def(ld)->operands[0], e) + ")";
    };
    if (direct.empty() && !direct_load)
      line("alignas(64) " + rt + " " + x + "[" + std::to_string(16 * blocks) + "];");
    auto step = [&](int width) {
      line("for (; " + j + " + " + std::to_string(width) + " <= " + std::to_string(n) + "; " + j +
           " += " + std::to_string(width) + ") {");
      ++indent_;
      if (direct.empty() && !direct_load) {
        line("#pragma omp simd");
        line("for (int32_t " + l + " = 0; " + l + " < " + std::to_string(width) + "; ++" + l +
             ") {");
        ++indent_;
        reduce_input(in, ix, x + "[" + l + "]");
        --indent_;
        line("}");
      }
      for (int b = 0; b < width / 16; ++b) {
        const std::string a = acc + "_" + std::to_string(b);
        const std::string at = std::to_string(16 * b);
        const std::string v = direct_load ? load_at(at)
                              : direct.empty()
                                  ? "trt::load16(" + x + " + " + at + ")"
                                  : "trt::load16(" + direct + " + " + j + " + " + at + ")";
        line(a + " = " + reduce_combine(k, ot, a, v, true) + ";");
      }
      --indent_;
      line("}");
    };
    if (blocks == 4) step(64);
    step(16);
    if (blocks == 4) {
      auto a = [&](int b) { return acc + "_" + std::to_string(b); };
      line(a(0) + " = " +
           reduce_combine(k, ot, reduce_combine(k, ot, a(0), a(1), true),
                          reduce_combine(k, ot, a(2), a(3), true), true) +
           ";");
    }
    line("__builtin_memcpy(" + lanes + ", &" + acc + "_0, sizeof " + lanes + ");");
    extents_.erase(ix.back());
  }

  // The array `in` reads at `ix` (whose last index is `(j + l)`) when that read is all its
  // element expression is, at flat offset j + l, in the accumulator's type; "" otherwise.
  std::string contiguous_array_read(ValueId in, const std::vector<std::string>& ix,
                                    const Type& ot) {
    if (plan_.fused_into_reduction(in) || f_.type(in).elem != ot.elem) return "";
    const std::string e = expr(in, ix);
    const size_t open = e.find('[');
    if (open == std::string::npos || e.compare(open, std::string::npos, "[" + ix.back() + "]") != 0)
      return "";
    const std::string arr = e.substr(0, open);
    for (char ch : arr) {
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') return "";
    }
    return arr;
  }

  // The load `in` is (through selects proven true) when it is an inline load whose elements along
  // the row (the last index of `ix`, `(j + l)`) are consecutive in memory, of the accumulator's
  // type without conversion, its mask (if any) proven true over the loop nest: then 16 lanes from
  // element j + at are one vector load (else kNoValue). The pointer must be a uniform base plus
  // integer offsets whose affine forms sum to coefficient 1 along the row (32-bit offsets under the
  // guard that they do not wrap, as for masks).
  ValueId contiguous_load(ValueId in, const std::vector<std::string>& ix, const Type& ot) {
    if (checked_ || fast_ != Fast::On) return ir::kNoValue;
    // Through selects whose condition is proven here (a max's `where(mask, x, -inf)`).
    while (plan_.storage(in) == Storage::Inline && f_.def(in) &&
           f_.def(in)->kind == OpKind::Select && expr(f_.def(in)->operands[0], ix) == "true")
      in = f_.def(in)->operands[1];
    if (plan_.storage(in) != Storage::Inline) return ir::kNoValue;
    const Op* ld = f_.def(in);
    const DType e = f_.type(in).elem;
    if (!ld || ld->kind != OpKind::Load || e != ot.elem ||
        !(e == DType::Float32 || e == DType::Float64 || e == DType::Int32 || e == DType::Int64))
      return ir::kNoValue;
    std::vector<std::string> checks;
    int64_t coef = 0;
    ValueId p = ld->operands[0];
    for (const Op* d = f_.def(p); d && d->kind == OpKind::AddPtr; d = f_.def(p)) {
      if (!f_.type(d->operands[1]).is_scalar()) {
        const auto a = affine(d->operands[1], ix, checks);
        if (!a) return ir::kNoValue;
        const auto c = a->coef.find(ix.back());
        coef += c == a->coef.end() ? 0 : c->second;
      }
      p = d->operands[0];
    }
    if (coef != 1 || uniform_source(p) == ir::kNoValue) return ir::kNoValue;
    if (ld->operands.size() > 1 && expr(ld->operands[1], ix) != "true") return ir::kNoValue;
    add_guards(checks);
    return in;
  }

  // Declares mutable storage for a carried or branch result value.
  void declare_var(ValueId v) {
    if (plan_.storage(v) == Storage::Array) {
      declare_array(v);
    } else {
      line(type_str(f_.type(v)) + " " + name(v) + ";");
    }
  }

  // dst = src elementwise (dst is Scalar or Array storage).
  void assign(ValueId dst, const std::string& dst_name, ValueId src) {
    const Type& t = f_.type(dst);
    if (t.is_scalar()) {
      line(dst_name + " = " + expr(src, {}) + ";");
      return;
    }
    loops(t.shape, true, [&](const std::vector<std::string>& idx) {
      line(dst_name + "[" + flat(t.shape, idx) + "] = " + expr(src, idx) + ";");
    });
  }

  // Whether the inline expression of `v` reads tiles only at its own element: elementwise ops
  // whose tile operands have `shape`, down to stored values and scalars (its `leaves`).
  bool elementwise_tree(ValueId v, const SmallVector<int64_t, 4>& shape,
                        std::vector<ValueId>& leaves) const {
    const Type& t = f_.type(v);
    if (t.is_scalar() || plan_.storage(v) != Storage::Inline) {
      leaves.push_back(v);
      return t.is_scalar() || t.shape == shape;
    }
    const Op* op = f_.def(v);
    if (!op || t.shape != shape) return false;
    const bool reads_tiles = std::any_of(op->operands.begin(), op->operands.end(),
                                         [&](ValueId o) { return f_.type(o).is_block(); });
    if (reads_tiles && !ir::traits(op->kind).has(ir::kElementwise)) return false;
    for (ValueId o : op->operands) {  // (a splat of a scalar, a range, a constant: no tiles)
      if (!elementwise_tree(o, shape, leaves)) return false;
    }
    return true;
  }

  // Two-phase parallel assignment of `srcs` into the storage named by `dsts` (values may swap).
  void parallel_assign(const std::vector<ValueId>& dsts, const std::vector<ValueId>& srcs) {
    // A stored tile that is none of the destinations (a dot's result, say) is copied straight
    // into its destination in the second phase: writing destinations cannot change it. Others go
    // through a temporary, since they may read destinations (values may swap).
    auto direct = [&](size_t i) {
      return !f_.type(dsts[i]).is_scalar() && plan_.storage(srcs[i]) == Storage::Array &&
             std::find(dsts.begin(), dsts.end(), srcs[i]) == dsts.end();
    };
    auto already_there = [&](size_t i) {  // a dot that updated its accumulator in place
      const auto d = dots_in_place_.find(srcs[i]);
      return d != dots_in_place_.end() && d->second == dsts[i];
    };
    // A tile computed elementwise that reads its own destination only at the element it writes
    // (`acc = acc + x`) and no other destination updated in place is written in place, after the
    // temporaries (which read the old values) and before the copies: no temporary, no copy.
    std::vector<bool> in_place(dsts.size(), false);
    std::vector<std::vector<ValueId>> leaves(dsts.size());
    for (size_t i = 0; i < dsts.size(); ++i) {
      const Type& t = f_.type(dsts[i]);
      in_place[i] = !t.is_scalar() && !direct(i) && srcs[i] != dsts[i] &&
                    plan_.storage(srcs[i]) == Storage::Inline &&
                    elementwise_tree(srcs[i], t.shape, leaves[i]);
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < dsts.size(); ++i) {
        for (size_t k = 0; in_place[i] && k < dsts.size(); ++k) {
          if (k == i || !in_place[k]) continue;
          if (std::find(leaves[i].begin(), leaves[i].end(), dsts[k]) != leaves[i].end()) {
            in_place[i] = false;
            changed = true;
          }
        }
      }
    }
    std::vector<std::string> temps;
    for (size_t i = 0; i < dsts.size(); ++i) {
      const Type& t = f_.type(dsts[i]);
      const std::string tmp = direct(i) || in_place[i] ? name(srcs[i]) : fresh("_t");
      temps.push_back(tmp);
      if (direct(i) || in_place[i] || already_there(i)) continue;
      if (t.is_scalar()) {
        line(type_str(t) + " const " + tmp + " = " + expr(srcs[i], {}) + ";");
      } else {
        on_stack(t, t.numel(), loc_of(dsts[i]));
        line("alignas(64) " + type_str(t) + " " + tmp + "[" + std::to_string(t.numel()) + "];");
        assign(dsts[i], tmp, srcs[i]);
      }
    }
    for (size_t i = 0; i < dsts.size(); ++i) {
      if (in_place[i]) assign(dsts[i], name(dsts[i]), srcs[i]);
    }
    for (size_t i = 0; i < dsts.size(); ++i) {
      const Type& t = f_.type(dsts[i]);
      if (in_place[i] || already_there(i)) continue;
      if (t.is_scalar()) {
        line(name(dsts[i]) + " = " + temps[i] + ";");
      } else {
        loops(t.shape, true, [&](const std::vector<std::string>& idx) {
          const std::string f = flat(t.shape, idx);
          line(name(dsts[i]) + "[" + f + "] = " + temps[i] + "[" + f + "];");
        });
      }
    }
  }

  void for_op(const Op& op) {
    const Region& body = op.regions[0];
    const ValueId iv = body.args[0];
    // Carried values: the region argument and the op's result share one C++ variable.
    std::vector<ValueId> carried(body.args.begin() + 1, body.args.end());
    for (size_t k = 0; k < carried.size(); ++k) {
      declare_var(carried[k]);
      assign(carried[k], name(carried[k]), op.operands[3 + k]);
    }
    const std::string it = type_str(f_.type(iv));
    if (const int u = ir::LoopOptions::unpack(op.ival).loop_unroll_factor; u > 1)
      line("#pragma GCC unroll " + std::to_string(u));
    line("for (" + it + " " + name(iv) + " = " + expr(op.operands[0], {}) + "; " + name(iv) +
         " < " + expr(op.operands[1], {}) + "; " + name(iv) + " += " + expr(op.operands[2], {}) +
         ") {");
    ++indent_;
    const int64_t saved_scale = work_scale_;
    work_scale_ *= 8;
    plan_dots_in_place(carried, body);
    region(body);
    const Op& y = *body.ops.back();
    parallel_assign(carried, y.operands);
    work_scale_ = saved_scale;
    --indent_;
    line("}");
    for (size_t k = 0; k < op.results.size(); ++k) alias(op.results[k], carried[k]);
  }

  // A runtime while loop: the carried values live in the body's argument variables; the
  // condition region reads them through aliases.
  void while_op(const Op& op) {
    const Region &cond = op.regions[0], &body = op.regions[1];
    const std::vector<ValueId> carried(body.args.begin(), body.args.end());
    for (size_t k = 0; k < carried.size(); ++k) {
      declare_var(carried[k]);
      assign(carried[k], name(carried[k]), op.operands[k]);
    }
    line("for (;;) {");
    ++indent_;
    for (size_t k = 0; k < carried.size(); ++k) alias(cond.args[k], carried[k]);
    region(cond);
    line("if (!(" + expr(cond.ops.back()->operands[0], {}) + ")) break;");
    const int64_t saved_scale = work_scale_;
    work_scale_ *= 8;
    plan_dots_in_place(carried, body);
    region(body);
    parallel_assign(carried, body.ops.back()->operands);
    work_scale_ = saved_scale;
    --indent_;
    line("}");
    for (size_t k = 0; k < op.results.size(); ++k) alias(op.results[k], carried[k]);
  }

  // tl.reduce / tl.associative_scan with a combine region: a sequential fold along the axis (the
  // interpreter folds in the same order), the region emitted once inside the loop.
  void reduce_fn(const Op& op) {
    const bool scan = op.kind == OpKind::ScanFn, reverse = op.sub == 1;
    const Region& comb = op.regions[0];
    const size_t n_in = op.operands.size();
    const Type& it = f_.type(op.operands[0]);
    const auto axis = static_cast<size_t>(op.ival);
    const int64_t len = it.shape[axis];
    SmallVector<int64_t, 4> outer = it.shape;
    outer.erase(outer.begin() + static_cast<std::ptrdiff_t>(axis));
    for (ValueId r : op.results) {
      if (f_.type(r).is_scalar()) {
        line(type_str(f_.type(r)) + " " + name(r) + ";");
      } else {
        declare_array(r);
      }
    }
    loops(outer, false, [&](const std::vector<std::string>& idx) {
      const std::string j = fresh("_j");
      auto at = [&](const std::string& pos) {
        std::vector<std::string> ix = idx;
        ix.insert(ix.begin() + static_cast<std::ptrdiff_t>(axis), pos);
        return ix;
      };
      auto dest = [&](size_t k, const std::string& pos) {
        const Type& rt = f_.type(op.results[k]);
        if (rt.is_scalar()) return name(op.results[k]);
        return name(op.results[k]) + "[" + flat(rt.shape, scan ? at(pos) : idx) + "]";
      };
      const std::string first = reverse ? std::to_string(len - 1) : "0";
      std::vector<std::string> acc;
      for (size_t k = 0; k < n_in; ++k) {
        acc.push_back(fresh("_acc"));
        line(type_str(f_.type(op.operands[k]).scalar_type()) + " " + acc[k] + " = " +
             expr(op.operands[k], at(first)) + ";");
        if (scan) line(dest(k, first) + " = " + acc[k] + ";");
      }
      if (reverse) {
        line("for (int32_t " + j + " = " + std::to_string(len - 2) + "; " + j + " >= 0; --" + j +
             ") {");
      } else {
        line("for (int32_t " + j + " = 1; " + j + " < " + std::to_string(len) + "; ++" + j + ") {");
      }
      ++indent_;
      for (size_t k = 0; k < n_in; ++k) {
        const std::string ty = type_str(f_.type(comb.args[k]));
        line(ty + " const " + name(comb.args[k]) + " = " + acc[k] + ";");
        line(ty + " const " + name(comb.args[n_in + k]) + " = " + expr(op.operands[k], at(j)) +
             ";");
      }
      region(comb);
      const Op& y = *comb.ops.back();
      std::vector<std::string> tmp;
      for (size_t k = 0; k < n_in; ++k) {
        tmp.push_back(fresh("_y"));
        line(type_str(f_.type(comb.args[k])) + " const " + tmp[k] + " = " +
             expr(y.operands[k], {}) + ";");
      }
      for (size_t k = 0; k < n_in; ++k) {
        line(acc[k] + " = " + tmp[k] + ";");
        if (scan) line(dest(k, j) + " = " + acc[k] + ";");
      }
      --indent_;
      line("}");
      if (!scan) {
        for (size_t k = 0; k < n_in; ++k) line(dest(k, "") + " = " + acc[k] + ";");
      }
      work_ += len * work_scale_;
    });
  }

  void assert_op(const Op& op) {
    loops(f_.type(op.operands[0]).shape, false,
          [&](const std::vector<std::string>& idx) { line(assert_stmt(op, idx)); });
  }

  // device_print: one line per element (Triton's format), the program id first.
  void print(const Op& op) {
    for (size_t k = 0; k < op.operands.size(); ++k) {
      const ValueId v = op.operands[k];
      const PrintFormat pf = print_format(f_, op, k);
      loops(f_.type(v).shape, false, [&](const std::vector<std::string>& idx) {
        std::string ix = "(";
        std::string ixargs;
        for (size_t d = 0; d < idx.size(); ++d) {
          ix += std::string(d ? ", " : "") + "%d";
          ixargs += ", (int)(" + idx[d] + ")";
        }
        ix += ")";
        line("printf(\"pid (%d, %d, %d) idx " + ix + " " + pf.prefix + pf.label + ": " +
             pf.conversion + "\\n\", _pid0, _pid1, _pid2" + ixargs + ", " + pf.cast + expr(v, idx) +
             "));");
      });
    }
  }

  // Atomics: one lane at a time, in order; a masked-off lane does nothing and gives 0.
  void atomic(const Op& op) {
    const ValueId out = op.result();
    const Type& pt = f_.type(op.operands[0]);
    const std::string rt = register_type(pt.elem);
    const bool cas = op.kind == OpKind::AtomicCas;
    const bool masked = !cas && op.operands.size() > 2;
    if (pt.is_scalar()) {
      line(rt + " " + name(out) + ";");
    } else {
      declare_array(out);
    }
    loops(pt.shape, false, [&](const std::vector<std::string>& idx) {
      const std::string dst =
          pt.is_scalar() ? name(out) : name(out) + "[" + flat(pt.shape, idx) + "]";
      const std::string p = expr(op.operands[0], idx), v = expr(op.operands[1], idx);
      const std::string call =
          atomic_call(f_, op, p, v, cas ? v : "", cas ? expr(op.operands[2], idx) : "");
      const std::string cond = lane_guard(op, masked ? 2 : 0, "atomic", idx);
      if (!cond.empty()) {
        line("if (" + cond + ") " + dst + " = " + call + "; else " + dst + " = 0;");
      } else {
        line(dst + " = " + call + ";");
      }
      work_ += work_scale_;
    });
  }

  void if_op(const Op& op) {
    for (ValueId r : op.results) declare_var(r);
    line("if (" + expr(op.operands[0], {}) + ") {");
    for (int b = 0; b < 2; ++b) {
      if (b == 1) line("} else {");
      ++indent_;
      const Region& reg = op.regions[static_cast<size_t>(b)];
      region(reg);
      parallel_assign(op.results, reg.ops.back()->operands);
      --indent_;
    }
    line("}");
  }

  // `acc = tl.dot(a, b, acc)` in a loop: the dot may write the carried accumulator's array itself
  // when the accumulator is read by that dot alone and the dot's result only goes back into it
  // (the blocked kernel reads each element before writing it; operands are packed apart).
  void plan_dots_in_place(const std::vector<ValueId>& carried, const Region& body) {
    const Op& y = *body.ops.back();
    for (size_t k = 0; k < carried.size() && k < y.operands.size(); ++k) {
      const ValueId r = y.operands[k], acc = carried[k];
      const Op* d = f_.def(r);
      if (!d || d->kind != OpKind::Dot || d->operands[2] != acc || !blocked_dot(*d)) continue;
      if (uses_.def_region(r) != &body || uses_.uses(r).size() != 1) continue;
      if (uses_.uses(acc).size() != 1 || plan_.storage(acc) != Storage::Array ||
          plan_.storage(r) != Storage::Array)
        continue;
      dots_in_place_[r] = acc;
    }
  }

  // Makes `v` refer to the storage of `target` (a For result reads its carried variable).
  void alias(ValueId v, ValueId target) {
    const Type& t = f_.type(v);
    if (t.is_scalar()) {
      line(type_str(t) + " const " + name(v) + " = " + name(target) + ";");
    } else {
      line(type_str(t) + "* const " + name(v) + " = " + name(target) + ";");
    }
  }

  enum class Fast : uint8_t { Unset, On, Off };

  std::map<ValueId, ValueId> dots_in_place_;  // dot result -> the carried accumulator it updates

  Fast fast_ = Fast::Unset;
  std::vector<std::string> guards_;
  std::map<std::string, int64_t> extents_;  // loop index -> trip count, inside plain_loops
  const ir::AffineInfo affine_;
  int64_t work_ = 0;
  int64_t work_scale_ = 1;

  // A program's local arrays live on its thread's stack (8 MiB for the pool's workers and, by
  // default, the main thread); their total is bounded so that a kernel with tiles too large for
  // it is a CompileError, not a stack overflow (issue 19). Arrays of disjoint scopes are counted
  // as if alive together: an upper bound.
  static constexpr int64_t kMaxStackBytes = int64_t{6} << 20;
  int64_t stack_bytes_ = 0;
  int64_t largest_bytes_ = 0;
  std::string largest_;  // the largest array's type and source line

  void on_stack(const Type& t, int64_t numel, SourceLoc loc) {
    const int64_t bytes = numel * static_cast<int64_t>(itemsize(t.elem));
    stack_bytes_ += bytes;
    if (bytes > largest_bytes_) {
      largest_bytes_ = bytes;
      std::ostringstream os;
      os << t.str();
      if (loc.known()) os << " at " << loc;
      largest_ = os.str();
    }
  }
  SourceLoc loc_of(ValueId v) const {
    const Op* d = f_.def(v);
    return d ? d->loc : SourceLoc{};
  }
  void check_stack() const {
    if (stack_bytes_ <= kMaxStackBytes) return;
    TS_ERROR(CompileError) << "[kernel " << f_.name << "] its tiles need "
                           << runtime::format_bytes(static_cast<uint64_t>(stack_bytes_))
                           << " of local arrays on the CPU, more than a program's stack holds ("
                           << runtime::format_bytes(kMaxStackBytes) << "); the largest is "
                           << largest_ << ". Use smaller blocks (the tiles Triton accepts, 2^20 "
                           << "elements, fit one at a time)";
  }
};

}  // namespace

Emitted emit(const ir::Function& f, bool checked) {
  return Emitter(f, checked).run();
}

}  // namespace tessera::backend::cpu
