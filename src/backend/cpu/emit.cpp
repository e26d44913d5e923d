#include "backend/cpu/emit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "backend/common/c_family.h"
#include "ir/access.h"
#include "ir/index_map.h"
#include "ir/op_traits.h"
#include "ir/passes.h"

namespace tessera::backend::cpu {
namespace {

using namespace cfamily;

using ir::Op;
using ir::OpKind;
using ir::Region;
using ir::Type;
using ir::ValueId;

enum class Storage : uint8_t { Inline, Scalar, Array };

// Index expressions for ir/index_map.h's maps.
struct CIndexAlgebra {
  using Index = std::string;
  Index zero() const { return "0"; }
  Index constant(int64_t c) const { return std::to_string(c); }
  Index mul_add(const Index& acc, int64_t n, const Index& i) const {
    return "(" + acc + " * " + std::to_string(n) + " + " + i + ")";
  }
  Index div_mod(const Index& flat, int64_t stride, int64_t n) const {
    return "((" + flat + " / " + std::to_string(stride) + ") % " + std::to_string(n) + ")";
  }
  Index minus(const Index& i, int64_t c) const { return "(" + i + " - " + std::to_string(c) + ")"; }
};

class Emitter {
 public:
  explicit Emitter(const ir::Function& f, bool checked = false) : f_(f), checked_(checked) {
    if (checked_) prov_ = ir::pointer_provenance(f_);
  }

  Emitted run() {
    const size_t n = f_.num_values();
    storage_.assign(n, Storage::Inline);
    fused_.assign(n, false);
    uses_.assign(n, {});
    def_region_.assign(n, nullptr);
    def_pos_.assign(n, -1);
    analyze(f_.body);
    for (const auto& p : f_.params) {
      if (p.value != ir::kNoValue) storage_[static_cast<size_t>(p.value)] = Storage::Scalar;
    }
    classify(f_.body);
    place_loads(f_.body);
    fuse_into_reductions(f_.body);

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
    Emitted k;
    k.source = out_.str();
    k.work_per_program = std::max<int64_t>(work_, 1);
    k.sites = sites_;
    return k;
  }

 private:
  // ---- analysis ---------------------------------------------------------------------------

  void analyze(const Region& r) {
    for (ValueId a : r.args) def_region_[static_cast<size_t>(a)] = &r;
    for (size_t i = 0; i < r.ops.size(); ++i) {
      const Op* op = r.ops[i];
      for (ValueId v : op->operands) uses_[static_cast<size_t>(v)].push_back({op, &r});
      for (ValueId res : op->results) {
        def_region_[static_cast<size_t>(res)] = &r;
        def_pos_[static_cast<size_t>(res)] = static_cast<int>(i);
      }
      for (const auto& sub : op->regions) analyze(sub);
    }
  }

  static bool cheap(const Op& op) {
    if (op.kind == OpKind::Unary) return ir::unary_traits(static_cast<ir::UnaryKind>(op.sub)).cheap;
    return ir::traits(op.kind).has(ir::kCheap);
  }

  bool single_local_use(ValueId v) const {
    const auto& u = uses_[static_cast<size_t>(v)];
    return u.size() == 1 && u[0].region == def_region_[static_cast<size_t>(v)];
  }

  void classify(const Region& r) {
    for (ValueId a : r.args) {
      storage_[static_cast<size_t>(a)] = f_.type(a).is_scalar() ? Storage::Scalar : Storage::Array;
    }
    for (const Op* op : r.ops) {
      for (const auto& sub : op->regions) classify(sub);
      for (ValueId v : op->results) {
        const Type& t = f_.type(v);
        Storage s;
        if (op->kind == OpKind::For || op->kind == OpKind::If) {
          s = t.is_scalar() ? Storage::Scalar : Storage::Array;
        } else if (t.is_scalar()) {
          s = op->kind == OpKind::Constant ? Storage::Inline : Storage::Scalar;
        } else if (cheap(*op)) {
          s = Storage::Inline;
        } else if (op->kind == OpKind::Unary || op->kind == OpKind::Load) {
          s = single_local_use(v) ? Storage::Inline : Storage::Array;
        } else {
          s = Storage::Array;  // Reduce
        }
        storage_[static_cast<size_t>(v)] = s;
      }
    }
  }

  // A load stays inline only if the one place it is evaluated (the first non-inline consumer up
  // a chain of single uses) comes before any op that may write memory.
  void place_loads(const Region& r) {
    for (size_t i = 0; i < r.ops.size(); ++i) {
      const Op* op = r.ops[i];
      for (const auto& sub : op->regions) place_loads(sub);
      if (op->kind != OpKind::Load || op->results.empty()) continue;
      const ValueId v0 = op->result();
      if (storage_[static_cast<size_t>(v0)] != Storage::Inline) continue;
      ValueId v = v0;
      const Op* root = nullptr;
      bool ok = true;
      while (ok) {
        if (!single_local_use(v)) {
          ok = false;
          break;
        }
        const Op* user = uses_[static_cast<size_t>(v)][0].user;
        if (!user->results.empty() && user->kind != OpKind::For && user->kind != OpKind::If &&
            storage_[static_cast<size_t>(user->result())] == Storage::Inline) {
          v = user->result();
          continue;
        }
        root = user;
        break;
      }
      if (ok) {
        for (size_t j = i + 1; j < r.ops.size() && r.ops[j] != root; ++j) {
          if (r.ops[j]->has_side_effects()) ok = false;
        }
      }
      if (!ok) storage_[static_cast<size_t>(v0)] = Storage::Array;
    }
  }

  // An array computed by an elementwise op and then reduced along its innermost axis is written
  // by the reduction's loop instead of a loop of its own (one pass over the tile, not two), when
  // nothing between the two ops reads the array or has side effects.
  void fuse_into_reductions(const Region& r) {
    for (size_t i = 0; i < r.ops.size(); ++i) {
      const Op* red = r.ops[i];
      for (const auto& sub : red->regions) fuse_into_reductions(sub);
      if (red->kind != OpKind::Reduce) continue;
      const ValueId in = red->operands[0];
      const Type& it = f_.type(in);
      if (red->ival != it.rank() - 1 || it.elem == DType::Bool ||
          f_.type(red->result()).elem != it.elem)
        continue;
      if (storage_[static_cast<size_t>(in)] != Storage::Array ||
          def_region_[static_cast<size_t>(in)] != &r)
        continue;
      const Op* prod = f_.def(in);
      if (!prod || prod->kind == OpKind::For || prod->kind == OpKind::If ||
          prod->kind == OpKind::Reduce || prod->results.size() != 1) {
        continue;
      }
      bool ok = true;
      for (int j = def_pos_[static_cast<size_t>(in)] + 1; ok && j < static_cast<int>(i); ++j) {
        const Op* mid = r.ops[static_cast<size_t>(j)];
        if (mid->has_side_effects() || !mid->regions.empty()) ok = false;
        for (ValueId u : mid->operands) ok = ok && u != in;
      }
      if (ok) fused_[static_cast<size_t>(in)] = true;
    }
  }

  // The element of reduction input `in` at `ix`, written to its array first when the reduction
  // materializes it (fuse_into_reductions); `tmp` names a register for the value.
  void reduce_input(ValueId in, const std::vector<std::string>& ix, const std::string& tmp) {
    if (!fused_[static_cast<size_t>(in)]) {
      line(tmp + " = " + expr(in, ix) + ";");
      return;
    }
    line(tmp + " = " + op_expr(*f_.def(in), ix) + ";");
    line(name(in) + "[" + flat(f_.type(in).shape, ix) + "] = " + tmp + ";");
  }

  // ---- output helpers -----------------------------------------------------------------------

  void line(const std::string& s) {
    out_ << std::string(static_cast<size_t>(indent_) * 2, ' ') << s << "\n";
  }

  std::string name(ValueId v) const { return "v" + std::to_string(v); }

  std::string fresh(const char* prefix) { return std::string(prefix) + std::to_string(counter_++); }

  void header() {
    out_ << "// Generated by tessera for kernel '" << f_.name << "'.\n";
    out_ << "// Specialization:";
    for (const auto& p : f_.params) {
      out_ << " " << p.name << "=";
      if (p.value == ir::kNoValue) {
        out_ << "constexpr";
      } else {
        out_ << f_.type(p.value).str() << (p.divisible_by_16 ? ":16" : "");
      }
    }
    out_ << "\n#include \"tessera/trt/cpu.h\"\n\n";
    out_ << "extern \"C\" TRT_EXPORT void tessera_kernel(const trt::Grid* _g, int64_t _pb, int64_t "
            "_pe, "
            "const trt::Arg* _a) {\n";
    indent_ = 1;
    if (checked_) {
      line("const trt::DebugCtx* const _dbg = (const trt::DebugCtx*)_a[" +
           std::to_string(f_.params.size()) + "].p;");
    }
    for (size_t i = 0; i < f_.params.size(); ++i) {
      const auto& p = f_.params[i];
      if (p.value == ir::kNoValue) continue;
      const Type& t = f_.type(p.value);
      const std::string ty = type_str(t);
      std::string src;
      if (t.ptr) {
        src = "(" + ty + ")_a[" + std::to_string(i) + "].p";
        if (p.divisible_by_16)
          src = "(" + ty + ")__builtin_assume_aligned(_a[" + std::to_string(i) + "].p, 16)";
      } else if (t.is_float()) {
        src = "(" + ty + ")_a[" + std::to_string(i) + "].f";
      } else {
        src = "(" + ty + ")_a[" + std::to_string(i) + "].i";
      }
      line(ty + " const " + name(p.value) + " = " + src + ";  // " + p.name);
    }
  }

  // Row-major flat index of `idx` into an array of `shape`.
  static std::string flat(const SmallVector<int64_t, 4>& shape,
                          const std::vector<std::string>& idx) {
    std::string s;
    int64_t stride = 1;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      const std::string& i = idx[static_cast<size_t>(d)];
      if (i != "0" && shape[d] != 1) {
        std::string term = stride == 1 ? i : i + " * " + std::to_string(stride);
        s = s.empty() ? term : term + " + " + s;
      }
      stride *= shape[d];
    }
    return s.empty() ? "0" : s;
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
    std::optional<int64_t> constant() const { return coef.empty() ? base_value : std::nullopt; }
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

  // The affine form of an int32/int64 value at `idx`, or nullopt. `checks` receives the uniform
  // conditions under which no 32-bit step of it wraps (then 64-bit evaluation agrees with it).
  std::optional<Affine> affine(ValueId v, const std::vector<std::string>& idx,
                               std::vector<std::string>& checks) {
    const Type& t = f_.type(v);
    if (t.elem != DType::Int32 && t.elem != DType::Int64) return std::nullopt;
    const Storage st = storage_[static_cast<size_t>(v)];
    if (st == Storage::Array) return std::nullopt;
    Affine r;
    const Op* op = f_.def(v);
    if (st == Storage::Scalar || !op) {
      r.base = "(int64_t)" + name(v);
      return r;
    }
    switch (op->kind) {
      case OpKind::Constant:
        r.base = int_literal(op->ival, DType::Int64);
        r.base_value = op->ival;
        return r;
      case OpKind::Arange: {
        const std::string& i = idx.at(0);
        r.base = int_literal(op->ival, DType::Int64);
        r.base_value = op->ival;
        if (i != "0") {
          if (!extents_.count(i)) return std::nullopt;
          r.coef[i] = 1;
        }
        return r;
      }
      case OpKind::Splat:
        return affine(op->operands[0], {}, checks);
      case OpKind::Broadcast:
      case OpKind::ExpandDims:
      case OpKind::Permute:
        return affine(op->operands[0], source_index(*op, idx), checks);
      case OpKind::Binary: {
        const auto k = static_cast<ir::BinaryKind>(op->sub);
        if (k != ir::BinaryKind::Add && k != ir::BinaryKind::Sub && k != ir::BinaryKind::Mul)
          return std::nullopt;
        auto a = affine(op->operands[0], idx, checks);
        auto b = a ? affine(op->operands[1], idx, checks) : std::nullopt;
        if (!b) return std::nullopt;
        if (k == ir::BinaryKind::Mul) {
          if (!a->coef.empty() && !b->coef.empty()) return std::nullopt;
          if (!b->coef.empty()) std::swap(a, b);
          if (!a->coef.empty() && !b->constant()) return std::nullopt;  // index * runtime value
          r.coef = a->coef;
          for (auto& [i, c] : r.coef) c *= *b->constant();
          r.base = "(" + a->base + " * " + b->base + ")";
          if (a->base_value && b->base_value) r.base_value = *a->base_value * *b->base_value;
        } else {
          r = combine(*a, *b, k == ir::BinaryKind::Add ? 1 : -1);
        }
        break;
      }
      default:
        return std::nullopt;
    }
    if (t.elem == DType::Int32) {
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
    for (const auto& c : checks) {
      if (std::find(guards_.begin(), guards_.end(), c) == guards_.end()) guards_.push_back(c);
    }
    return std::string("true");
  }

  // ---- expressions --------------------------------------------------------------------------

  std::string expr(ValueId v, const std::vector<std::string>& idx) {
    switch (storage_[static_cast<size_t>(v)]) {
      case Storage::Scalar:
        return name(v);
      case Storage::Array:
        return name(v) + "[" + flat(f_.type(v).shape, idx) + "]";
      case Storage::Inline:
        break;
    }
    const Op* op = f_.def(v);
    TS_INTERNAL_ASSERT(op) << "inline value without a defining op";
    return op_expr(*op, idx);
  }

  std::string op_expr(const Op& op, const std::vector<std::string>& idx) {
    const Type& t = f_.type(op.result());
    auto operand = [&](size_t i, const std::vector<std::string>& ix) {
      return expr(op.operands[i], ix);
    };
    switch (op.kind) {
      case OpKind::Constant:
        if (t.is_float()) return float_literal(op.fval, t.elem != DType::Float64);
        return int_literal(op.ival, t.elem);
      case OpKind::ProgramId:
        return "_pid" + std::to_string(op.ival);
      case OpKind::NumPrograms:
        return std::string("((int32_t)_g->") + "xyz"[op.ival] + ")";
      case OpKind::Arange:
        return "((int32_t)(" + std::to_string(op.ival) + " + " + idx.at(0) + "))";
      case OpKind::Splat:
        return operand(0, {});
      case OpKind::Broadcast:
      case OpKind::ExpandDims:
      case OpKind::Permute:
      case OpKind::Reshape:
      case OpKind::Extract:
        return operand(0, source_index(op, idx));
      case OpKind::Join:
      case OpKind::Cat: {
        const ir::OperandPick pick = ir::operand_pick(f_, op);
        return "(" + idx[pick.dim] + " < " + std::to_string(pick.bound) + " ? " +
               operand(0, source_index(op, idx, 0)) + " : " + operand(1, source_index(op, idx, 1)) +
               ")";
      }
      case OpKind::Bitcast:
        return from_bits(t.elem, to_bits(f_.type(op.operands[0]).elem, operand(0, idx)));
      case OpKind::Binary: {
        const auto k = static_cast<ir::BinaryKind>(op.sub);
        if (k == ir::BinaryKind::Div) {
          if (auto q = div_by_uniform(op, t, idx)) return *q;
        }
        if (checked_ && t.elem == DType::Int32 &&
            (k == ir::BinaryKind::Add || k == ir::BinaryKind::Sub || k == ir::BinaryKind::Mul)) {
          // The checked mode reports int32 results that wrapped (offsets past 2^31).
          const int kind = k == ir::BinaryKind::Add ? 0 : k == ir::BinaryKind::Sub ? 1 : 2;
          const std::string ln =
              t.is_scalar() ? std::string("0") : "(int64_t)(" + flat(t.shape, idx) + ")";
          return "trt::dbg_arith32(_dbg, " + std::to_string(site(op, "overflow")) + ", " +
                 std::to_string(kind) + ", " + operand(0, idx) + ", " + operand(1, idx) +
                 ", _pid0, _pid1, _pid2, " + ln + ")";
        }
        return binary(k, t, operand(0, idx), operand(1, idx));
      }
      case OpKind::Compare: {
        if (auto always = mask_always_true(op, idx)) return *always;
        return "(" + operand(0, idx) + " " + compare_operator(static_cast<ir::CmpKind>(op.sub)) +
               " " + operand(1, idx) + ")";
      }
      case OpKind::Unary:
        return unary(static_cast<ir::UnaryKind>(op.sub), t, operand(0, idx));
      case OpKind::Cast:
        return cast_expr(f_.type(op.operands[0]), t, operand(0, idx));
      case OpKind::Select:
        return "(" + operand(0, idx) + " ? " + operand(1, idx) + " : " + operand(2, idx) + ")";
      case OpKind::Fma:
        return round_to(t.elem, "trt::fma(" + operand(0, idx) + ", " + operand(1, idx) + ", " +
                                    operand(2, idx) + ")");
      case OpKind::AddPtr:
        return "(" + operand(0, idx) + " + " + offset_expr(op.operands[1], idx) + ")";
      case OpKind::Load: {
        const std::string v = load_conv(t.elem, "*" + operand(0, idx));
        const std::string other = op.operands.size() > 2 ? operand(2, idx) : "0";
        if (checked_) {
          std::string cond = check(op, "load", idx);
          if (op.operands.size() > 1) cond = "(" + operand(1, idx) + " && " + cond + ")";
          return "(" + cond + " ? " + v + " : " + other + ")";
        }
        if (op.operands.size() == 1) return v;
        return "(" + operand(1, idx) + " ? " + v + " : " + other + ")";
      }
      default:
        TS_INTERNAL_ASSERT(false) << "no inline expression for " << ir::op_name(op.kind);
    }
    return "";
  }

  // The rank-0 value a tile is a splat of (through Broadcast and ExpandDims), or kNoValue.
  ValueId uniform_source(ValueId v) const {
    for (;;) {
      if (f_.type(v).is_scalar()) return v;
      if (storage_[static_cast<size_t>(v)] != Storage::Inline) return ir::kNoValue;
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
    if (std::find(guards_.begin(), guards_.end(), guard) == guards_.end()) guards_.push_back(guard);
    return round_to(t.elem, "(" + a + " * (1.0f / " + dv + "))");
  }

  // The index into operand `k` of view-like `op` for the result index `idx` (ir/index_map.h).
  std::vector<std::string> source_index(const Op& op, const std::vector<std::string>& idx,
                                        size_t k = 0) const {
    CIndexAlgebra alg;
    return ir::operand_index(f_, op, k, idx, alg);
  }

  // A pointer offset as a 64-bit expression. Chains of +, - and * over signed integers of at most
  // 32 bits are evaluated in 64 bits, so the compiler sees addresses affine in the loop index and
  // emits contiguous vector loads and stores instead of gathers; the result differs from 32-bit
  // wrapping arithmetic only where that arithmetic overflows, which addresses memory outside
  // the tensor anyway (docs/decisions.md, "pointer offsets").
  std::string offset_expr(ValueId v, const std::vector<std::string>& idx) {
    const Type& t = f_.type(v);
    const bool narrow_signed =
        is_signed(t.elem) && !is_floating_point(t.elem) && t.elem != DType::Int64;
    const Op* op = f_.def(v);
    if (narrow_signed && op && storage_[static_cast<size_t>(v)] == Storage::Inline) {
      switch (op->kind) {
        case OpKind::Constant:
          return int_literal(op->ival, DType::Int64);
        case OpKind::Arange:
          return "((int64_t)" + std::to_string(op->ival) + " + " + idx.at(0) + ")";
        case OpKind::Splat:
          return offset_expr(op->operands[0], {});
        case OpKind::Broadcast:
        case OpKind::ExpandDims:
          return offset_expr(op->operands[0], source_index(*op, idx));
        case OpKind::Binary: {
          const auto k = static_cast<ir::BinaryKind>(op->sub);
          const char* sym = k == ir::BinaryKind::Add   ? " + "
                            : k == ir::BinaryKind::Sub ? " - "
                            : k == ir::BinaryKind::Mul ? " * "
                                                       : nullptr;
          if (sym)
            return "(" + offset_expr(op->operands[0], idx) + sym +
                   offset_expr(op->operands[1], idx) + ")";
          break;
        }
        default:
          break;
      }
    }
    return "(int64_t)(" + expr(v, idx) + ")";
  }

  // ---- statements ---------------------------------------------------------------------------

  void declare_array(ValueId v) {
    const Type& t = f_.type(v);
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
      const Storage s = storage_[static_cast<size_t>(v)];
      if (s == Storage::Scalar) {
        line(type_str(f_.type(v)) + " const " + name(v) + " = " + op_expr(op, {}) + ";");
      } else if (s == Storage::Array) {
        declare_array(v);
        if (fused_[static_cast<size_t>(v)]) continue;  // the reduction writes it
        loops(f_.type(v).shape, true, [&](const std::vector<std::string>& idx) {
          line(name(v) + "[" + flat(f_.type(v).shape, idx) + "] = " + op_expr(op, idx) + ";");
        });
      }
    }
  }

  void store(const Op& op) {
    const Type& pt = f_.type(op.operands[0]);
    loops(pt.shape, true, [&](const std::vector<std::string>& idx) {
      const std::string value = store_conv(pt.elem, expr(op.operands[1], idx));
      const std::string dst = "*" + expr(op.operands[0], idx) + " = " + value + ";";
      std::string cond = op.operands.size() > 2 ? expr(op.operands[2], idx) : "";
      if (checked_) {
        // The value first (its loads check themselves, whether or not the store is in bounds).
        const std::string v = fresh("_v");
        line("{ " + std::string(storage_type(pt.elem)) + " const " + v + " = " + value + ";");
        cond = cond.empty() ? check(op, "store", idx)
                            : "(" + cond + " && " + check(op, "store", idx) + ")";
        line("  if (" + cond + ") *" + expr(op.operands[0], idx) + " = " + v + "; }");
        return;
      }
      if (!cond.empty()) {
        line("if (" + cond + ") { " + dst + " }");
      } else {
        line(dst);
      }
    });
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
    declare_array(out);
    auto in = [&](ValueId v, const std::string& i, const std::string& j) {
      std::string e = "(" + rt + ")(" + expr(v, {i, j}) + ")";
      return tf32 ? "trt::to_tf32(" + e + ")" : e;
    };
    // tf32x3 splits the raw inputs inside each multiply-add (trt::fma_tf32x3).
    const std::string fma = tf32x3 ? "trt::fma_tf32x3(" : "trt::fma(";
    const std::string i = fresh("_i"), j = fresh("_j"), k = fresh("_k"), x = fresh("_x");
    const std::string at_ij = name(out) + "[" + i + " * " + std::to_string(N) + " + " + j + "]";
    line("for (int32_t " + i + " = 0; " + i + " < " + std::to_string(M) + "; ++" + i + ")");
    line("  for (int32_t " + j + " = 0; " + j + " < " + std::to_string(N) + "; ++" + j + ") " +
         at_ij + " = " + expr(acc, {i, j}) + ";");
    if (fl && M % 4 == 0 && N % 16 == 0) return dot_blocked(op, in, fma, i, k, x);
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

  // Register blocking for float dots: a 4 x 16 block of the result stays in registers across the
  // k loop (2.6x the simple loop on AVX-512), with the same multiply-adds in the same order per
  // element, so the result does not change.
  template <class In>
  void dot_blocked(const Op& op, In in, const std::string& fma, const std::string& i,
                   const std::string& k, const std::string& x) {
    const ValueId out = op.result(), a = op.operands[0], b = op.operands[1];
    const int64_t M = f_.type(a).shape[0], K = f_.type(a).shape[1], N = f_.type(out).shape[1];
    const std::string rt = register_type(f_.type(out).elem), sN = std::to_string(N);
    const std::string j0 = fresh("_j0"), l = fresh("_l"), cb = fresh("_c"), bv = fresh("_b");
    auto cell = [&](int r) {
      return name(out) + "[(" + i + " + " + std::to_string(r) + ") * " + sN + " + " + j0 + " + " +
             l + "]";
    };
    auto acc = [&](int r) { return cb + "[" + std::to_string(r) + "][" + l + "]"; };
    auto lanes = [&](const std::string& body) {
      line("#pragma omp simd");
      line("for (int32_t " + l + " = 0; " + l + " < 16; ++" + l + ") " + body);
    };
    line("for (int32_t " + i + " = 0; " + i + " < " + std::to_string(M) + "; " + i + " += 4) {");
    ++indent_;
    line("for (int32_t " + j0 + " = 0; " + j0 + " < " + sN + "; " + j0 + " += 16) {");
    ++indent_;
    line(rt + " " + cb + "[4][16];");
    for (int r = 0; r < 4; ++r) lanes(acc(r) + " = " + cell(r) + ";");
    line("for (int32_t " + k + " = 0; " + k + " < " + std::to_string(K) + "; ++" + k + ") {");
    ++indent_;
    for (int r = 0; r < 4; ++r) {
      line(rt + " const " + x + std::to_string(r) + " = " +
           in(a, "(" + i + " + " + std::to_string(r) + ")", k) + ";");
    }
    lanes("{");
    ++indent_;
    line(rt + " const " + bv + " = " + in(b, k, "(" + j0 + " + " + l + ")") + ";");
    for (int r = 0; r < 4; ++r)
      line(acc(r) + " = " + fma + x + std::to_string(r) + ", " + bv + ", " + acc(r) + ");");
    --indent_;
    line("}");
    --indent_;
    line("}");
    for (int r = 0; r < 4; ++r) lanes(cell(r) + " = " + acc(r) + ";");
    --indent_;
    line("}");
    --indent_;
    line("}");
    work_ += M * N * K * work_scale_;
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
        if (fused_[static_cast<size_t>(in)]) {
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
    line("alignas(64) " + rt + " " + x + "[" + std::to_string(16 * blocks) + "];");
    std::vector<std::string> ix = idx;
    ix.push_back("(" + j + " + " + l + ")");
    extents_[ix.back()] = n;  // see reduce()
    auto step = [&](int width) {
      line("for (; " + j + " + " + std::to_string(width) + " <= " + std::to_string(n) + "; " + j +
           " += " + std::to_string(width) + ") {");
      ++indent_;
      line("#pragma omp simd");
      line("for (int32_t " + l + " = 0; " + l + " < " + std::to_string(width) + "; ++" + l + ") {");
      ++indent_;
      reduce_input(in, ix, x + "[" + l + "]");
      --indent_;
      line("}");
      for (int b = 0; b < width / 16; ++b) {
        const std::string a = acc + "_" + std::to_string(b);
        line(a + " = " +
             reduce_combine(k, ot, a, "trt::load16(" + x + " + " + std::to_string(16 * b) + ")",
                            true) +
             ";");
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

  // Declares mutable storage for a carried or branch result value.
  void declare_var(ValueId v) {
    if (storage_[static_cast<size_t>(v)] == Storage::Array) {
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

  // Two-phase parallel assignment of `srcs` into the storage named by `dsts` (values may swap).
  void parallel_assign(const std::vector<ValueId>& dsts, const std::vector<ValueId>& srcs) {
    std::vector<std::string> temps;
    for (size_t i = 0; i < dsts.size(); ++i) {
      const Type& t = f_.type(dsts[i]);
      const std::string tmp = fresh("_t");
      temps.push_back(tmp);
      if (t.is_scalar()) {
        line(type_str(t) + " const " + tmp + " = " + expr(srcs[i], {}) + ";");
      } else {
        line("alignas(64) " + type_str(t) + " " + tmp + "[" + std::to_string(t.numel()) + "];");
        assign(dsts[i], tmp, srcs[i]);
      }
    }
    for (size_t i = 0; i < dsts.size(); ++i) {
      const Type& t = f_.type(dsts[i]);
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
    line("for (" + it + " " + name(iv) + " = " + expr(op.operands[0], {}) + "; " + name(iv) +
         " < " + expr(op.operands[1], {}) + "; " + name(iv) + " += " + expr(op.operands[2], {}) +
         ") {");
    ++indent_;
    const int64_t saved_scale = work_scale_;
    work_scale_ *= 8;
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

  // The checked mode: a site number per checked op.
  int site(const Op& op, const char* what) {
    auto it = site_of_.find(&op);
    if (it != site_of_.end()) return it->second;
    sites_.push_back(CheckSite{what, op.loc, op.text});
    return site_of_[&op] = static_cast<int>(sites_.size() - 1);
  }
  // The lane index of `idx` in the pointer tile of `op`.
  std::string lane(const Op& op, const std::vector<std::string>& idx) const {
    const Type& t = f_.type(op.operands[0]);
    return t.is_scalar() ? std::string("0") : "(int64_t)(" + flat(t.shape, idx) + ")";
  }
  // A bounds check of the pointer lane of a load, store or atomic (true when in bounds).
  std::string check(const Op& op, const char* what, const std::vector<std::string>& idx) {
    const std::string p = expr(op.operands[0], idx);
    const uint64_t mask = prov_.at(static_cast<size_t>(op.operands[0]));
    return "trt::dbg_ok(_dbg, " + std::to_string(site(op, what)) + ", " + std::to_string(mask) +
           "ULL, " + p + ", sizeof(*" + p + "), _pid0, _pid1, _pid2, " + lane(op, idx) + ")";
  }
  void assert_op(const Op& op) {
    const Type& t = f_.type(op.operands[0]);
    const int s = site(op, "assert");
    loops(t.shape, false, [&](const std::vector<std::string>& idx) {
      const std::string ln =
          t.is_scalar() ? std::string("0") : "(int64_t)(" + flat(t.shape, idx) + ")";
      line("if (!(" + expr(op.operands[0], idx) + ")) _dbg->report_assert(_dbg->ctx, " +
           std::to_string(s) + ", _pid0, _pid1, _pid2, " + ln + ");");
    });
  }

  // device_print: one line per element (Triton's format), the program id first.
  void print(const Op& op) {
    std::string prefix;
    for (char ch : op.text) {
      if (ch == '"' || ch == '\\') prefix += '\\';
      if (ch == '%') prefix += '%';
      prefix += ch;
    }
    for (size_t k = 0; k < op.operands.size(); ++k) {
      const ValueId v = op.operands[k];
      const Type& t = f_.type(v);
      const bool fl = t.is_float();
      const std::string fmt =
          fl ? "%.9g" : (is_signed(t.elem) || t.elem == DType::Bool ? "%lld" : "%llu");
      const std::string arg =
          fl ? "(double)("
             : (is_signed(t.elem) || t.elem == DType::Bool ? "(long long)("
                                                           : "(unsigned long long)(");
      const std::string label =
          op.operands.size() > 1 ? " (operand " + std::to_string(k) + ")" : "";
      loops(t.shape, false, [&](const std::vector<std::string>& idx) {
        std::string ix = "(";
        std::string ixargs;
        for (size_t d = 0; d < idx.size(); ++d) {
          ix += std::string(d ? ", " : "") + "%d";
          ixargs += ", (int)(" + idx[d] + ")";
        }
        ix += ")";
        line("printf(\"pid (%d, %d, %d) idx " + ix + " " + prefix + label + ": " + fmt +
             "\\n\", _pid0, _pid1, _pid2" + ixargs + ", " + arg + expr(v, idx) + "));");
      });
    }
  }

  // Atomics: one lane at a time, in order; a masked-off lane does nothing and gives 0.
  void atomic(const Op& op) {
    const ValueId out = op.result();
    const Type& pt = f_.type(op.operands[0]);
    const DType d = pt.elem;
    const std::string rt = register_type(d), st = storage_type(d);
    const std::string order = std::to_string(op.ival);
    const bool cas = op.kind == OpKind::AtomicCas;
    const bool masked = !cas && op.operands.size() > 2;
    if (pt.is_scalar()) {
      line(rt + " " + name(out) + ";");
    } else {
      declare_array(out);
    }
    const std::string kind = std::to_string(op.sub);
    loops(pt.shape, false, [&](const std::vector<std::string>& idx) {
      const std::string dst =
          pt.is_scalar() ? name(out) : name(out) + "[" + flat(pt.shape, idx) + "]";
      const std::string p = expr(op.operands[0], idx), v = expr(op.operands[1], idx);
      std::string call;
      if (cas) {
        const std::string c = expr(op.operands[1], idx), nv = expr(op.operands[2], idx);
        if (d == DType::Float32) {
          call = "trt::u2f(trt::atomic_cas_bits((uint32_t*)" + p + ", trt::f2u(" + c +
                 "), trt::f2u(" + nv + "), " + order + "))";
        } else if (d == DType::Float64) {
          call = "trt::u2d(trt::atomic_cas_bits((uint64_t*)" + p + ", trt::d2u(" + c +
                 "), trt::d2u(" + nv + "), " + order + "))";
        } else if (d == DType::Float16 || d == DType::BFloat16) {
          const std::string to = d == DType::Float16 ? "trt::float_to_half" : "trt::float_to_bf16";
          const std::string from =
              d == DType::Float16 ? "trt::half_to_float" : "trt::bf16_to_float";
          call = from + "(trt::atomic_cas_bits(" + p + ", " + to + "(" + c + "), " + to + "(" + nv +
                 "), " + order + "))";
        } else {
          call = "trt::atomic_cas_bits(" + p + ", (" + st + ")(" + c + "), (" + st + ")(" + nv +
                 "), " + order + ")";
        }
      } else if (d == DType::Float32) {
        call = "trt::atomic_f32(" + kind + ", " + p + ", " + v + ", " + order + ")";
      } else if (d == DType::Float64) {
        call = "trt::atomic_f64(" + kind + ", " + p + ", " + v + ", " + order + ")";
      } else if (d == DType::Float16 || d == DType::BFloat16) {
        call = "trt::atomic_f16(" + kind + ", " + p + ", " + v + ", " + order + ", " +
               (d == DType::BFloat16 ? "true" : "false") + ")";
      } else {
        call = "trt::atomic_int<" + st + ">(" + kind + ", " + p + ", (" + st + ")(" + v + "), " +
               order + ")";
      }
      std::string cond = masked ? expr(op.operands[2], idx) : "";
      if (checked_)
        cond = cond.empty() ? check(op, "atomic", idx)
                            : "(" + cond + " && " + check(op, "atomic", idx) + ")";
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

  const ir::Function& f_;
  bool checked_ = false;
  std::vector<uint64_t> prov_;  // checked mode: per value, the pointer parameters it derives from
  std::vector<CheckSite> sites_;
  std::map<const Op*, int> site_of_;
  Fast fast_ = Fast::Unset;
  std::vector<std::string> guards_;
  std::map<std::string, int64_t> extents_;  // loop index -> trip count, inside plain_loops
  std::vector<Storage> storage_;
  std::vector<bool> fused_;  // arrays written by the reduction that consumes them
  struct Use {
    const Op* user;
    const Region* region;
  };
  std::vector<std::vector<Use>> uses_;
  std::vector<const Region*> def_region_;
  std::vector<int> def_pos_;
  std::ostringstream out_;
  int indent_ = 0;
  int counter_ = 0;
  int64_t work_ = 0;
  int64_t work_scale_ = 1;
};

}  // namespace

Emitted emit(const ir::Function& f, bool checked) {
  return Emitter(f, checked).run();
}

}  // namespace tessera::backend::cpu
