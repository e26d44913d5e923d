// The reference interpreter of the tile IR: values as arrays of 64-bit slots (ints as their
// dtype's bits, floats as double holding a value of their dtype, pointers as addresses with the
// parameter each derives from).
#include "backend/interp/interpret.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "core/dtype_visit.h"
#include "ir/builder.h"
#include "ir/index_map.h"
#include "ir/op_traits.h"

namespace tessera::backend::interp {
namespace {

using namespace tessera::ir;

union Slot {
  int64_t i;
  double f;
};

struct Val {
  const Type* type = nullptr;
  std::vector<Slot> d;
  std::vector<int16_t> prov;  ///< pointers: the parameter each element derives from (-1: unknown)
};

class Interp {
 public:
  Interp(const Function& f, const trt::Grid& g, const trt::Arg* args, const InterpretOptions& o)
      : f_(f), g_(g), args_(args), o_(o), vals_(f.num_values()) {}

  void run_program(int64_t p) {
    pid_[0] = static_cast<int32_t>(p % g_.x);
    const int64_t q = p / g_.x;
    pid_[1] = static_cast<int32_t>(q % g_.y);
    pid_[2] = static_cast<int32_t>(q / g_.y);
    for (size_t i = 0; i < f_.params.size(); ++i) {
      const Param& prm = f_.params[i];
      if (prm.value == kNoValue) continue;
      Val& v = init(prm.value, 1);
      const Type& t = f_.type(prm.value);
      if (t.ptr) {
        v.d[0].i = static_cast<int64_t>(reinterpret_cast<uintptr_t>(args_[i].p));
        v.prov.assign(1, static_cast<int16_t>(i));
      } else if (t.is_float()) {
        v.d[0].f = eval::round_float(args_[i].f, t.elem);
      } else {
        v.d[0].i = eval::wrap_int(args_[i].i, t.elem);
      }
    }
    region(f_.body);
  }

 private:
  Val& init(ValueId id, size_t n) {
    Val& v = vals_[static_cast<size_t>(id)];
    v.type = &f_.type(id);
    v.d.assign(n, Slot{0});
    v.prov.clear();
    return v;
  }
  const Val& val(ValueId id) const { return vals_[static_cast<size_t>(id)]; }
  static size_t numel(const Type& t) { return t.is_scalar() ? 1 : static_cast<size_t>(t.numel()); }

  void region(const Region& r) {
    for (const Op* op : r.ops) this->op(*op);
  }

  // An operand's element `k`, broadcasting a one-element value.
  static const Slot& at(const Val& v, size_t k) { return v.d.size() == 1 ? v.d[0] : v.d[k]; }
  static int16_t prov_at(const Val& v, size_t k) {
    if (v.prov.empty()) return -1;
    return v.prov.size() == 1 ? v.prov[0] : v.prov[k];
  }

  void op(const Op& op) {
    switch (op.kind) {
      case OpKind::Constant: {
        const Type& t = f_.type(op.result());
        Val& v = init(op.result(), numel(t));
        for (auto& s : v.d) {
          if (t.is_float()) {
            s.f = op.fval;
          } else {
            s.i = op.ival;
          }
        }
        return;
      }
      case OpKind::ProgramId:
        init(op.result(), 1).d[0].i = pid_[op.ival];
        return;
      case OpKind::NumPrograms:
        init(op.result(), 1).d[0].i = op.ival == 0 ? g_.x : op.ival == 1 ? g_.y : g_.z;
        return;
      case OpKind::Arange: {
        Val& v = init(op.result(), static_cast<size_t>(op.ival2 - op.ival));
        for (size_t k = 0; k < v.d.size(); ++k) v.d[k].i = op.ival + static_cast<int64_t>(k);
        return;
      }
      case OpKind::Splat: {
        const Val a = val(op.operands[0]);
        Val& v = init(op.result(), numel(f_.type(op.result())));
        for (auto& s : v.d) s = a.d[0];
        if (!a.prov.empty()) v.prov.assign(v.d.size(), a.prov[0]);
        return;
      }
      case OpKind::ExpandDims: {
        const Val a = val(op.operands[0]);
        Val& v = init(op.result(), a.d.size());
        v.d = a.d;
        v.prov = a.prov;
        return;
      }
      case OpKind::Broadcast:
      case OpKind::Permute:
      case OpKind::Reshape:
      case OpKind::Extract:
      case OpKind::Join:
      case OpKind::Cat:
      case OpKind::Flip:
        return reindex(op);
      case OpKind::Gather:
        return gather(op);
      case OpKind::Extern:  // refused when the kernel was generated (interp_backend.cpp)
        TS_INTERNAL_ASSERT(false) << "interpreter: an extern call";
        return;
      case OpKind::ReduceFn:
      case OpKind::ScanFn:
        return reduce_fn(op);
      case OpKind::Bitcast: {
        const Val a = val(op.operands[0]);
        const Type& st = f_.type(op.operands[0]);
        const Type& dt = f_.type(op.result());
        const DType s = st.elem, d = dt.elem;
        Val& v = init(op.result(), a.d.size());
        if (st.ptr || dt.ptr) {  // addresses: the same 64 bits
          v.d = a.d;
          // A pointer keeps its provenance; one made from an integer has none (unchecked).
          if (dt.ptr) v.prov.assign(v.d.size(), -1);
          if (dt.ptr && st.ptr) v.prov = a.prov;
          return;
        }
        for (size_t k = 0; k < v.d.size(); ++k) v.d[k] = from_bits(d, to_bits(s, a.d[k]));
        return;
      }
      case OpKind::Binary:
        return binary(op);
      case OpKind::Compare:
        return compare(op);
      case OpKind::Unary:
        return unary(op);
      case OpKind::Cast:
        return cast(op);
      case OpKind::Select: {
        const Val c = val(op.operands[0]), a = val(op.operands[1]), b = val(op.operands[2]);
        Val& v = init(op.result(), numel(f_.type(op.result())));
        const bool ptr = f_.type(op.result()).ptr;
        if (ptr) v.prov.resize(v.d.size());
        for (size_t k = 0; k < v.d.size(); ++k) {
          const bool pick = at(c, k).i != 0;
          v.d[k] = pick ? at(a, k) : at(b, k);
          if (ptr) v.prov[k] = pick ? prov_at(a, k) : prov_at(b, k);
        }
        return;
      }
      case OpKind::AddPtr: {
        const Val p = val(op.operands[0]), off = val(op.operands[1]);
        const Type& t = f_.type(op.result());
        Val& v = init(op.result(), numel(t));
        const auto size = static_cast<int64_t>(itemsize(t.elem));
        v.prov.resize(v.d.size());
        for (size_t k = 0; k < v.d.size(); ++k) {
          v.d[k].i = static_cast<int64_t>(static_cast<uint64_t>(at(p, k).i) +
                                          static_cast<uint64_t>(at(off, k).i * size));
          v.prov[k] = prov_at(p, k);
        }
        return;
      }
      case OpKind::Fma: {
        const Val a = val(op.operands[0]), b = val(op.operands[1]), c = val(op.operands[2]);
        const Type& t = f_.type(op.result());
        Val& v = init(op.result(), numel(t));
        for (size_t k = 0; k < v.d.size(); ++k) {
          const double r = t.elem == DType::Float64
                               ? trt::fma(at(a, k).f, at(b, k).f, at(c, k).f)
                               : static_cast<double>(trt::fma(static_cast<float>(at(a, k).f),
                                                              static_cast<float>(at(b, k).f),
                                                              static_cast<float>(at(c, k).f)));
          v.d[k].f = eval::round_float(r, t.elem);
        }
        return;
      }
      case OpKind::Dot: {
        const Val a = val(op.operands[0]), b = val(op.operands[1]), acc = val(op.operands[2]);
        const Type& at = f_.type(op.operands[0]);
        const Type& ot = f_.type(op.result());
        const auto M = static_cast<size_t>(at.shape[0]), K = static_cast<size_t>(at.shape[1]),
                   N = static_cast<size_t>(ot.shape[1]);
        const auto precision = static_cast<DotPrecision>(op.sub);
        const bool tf32 = at.elem == DType::Float32 && precision == DotPrecision::TF32;
        const bool tf32x3 = at.elem == DType::Float32 && precision == DotPrecision::TF32x3;
        Val& v = init(op.result(), M * N);
        for (size_t i = 0; i < M * N; ++i) v.d[i] = acc.d[i];
        auto in = [&](const Val& x, size_t idx) {
          const float f = static_cast<float>(x.d[idx].f);
          return tf32 ? trt::to_tf32(f) : f;
        };
        for (size_t i = 0; i < M; ++i) {
          for (size_t k = 0; k < K; ++k) {
            for (size_t j = 0; j < N; ++j) {
              Slot& o = v.d[i * N + j];
              if (ot.elem == DType::Float64) {
                o.f = trt::fma(a.d[i * K + k].f, b.d[k * N + j].f, o.f);
              } else if (tf32x3) {
                o.f = trt::fma_tf32x3(in(a, i * K + k), in(b, k * N + j), static_cast<float>(o.f));
              } else if (ot.is_float()) {
                o.f = trt::fma(in(a, i * K + k), in(b, k * N + j), static_cast<float>(o.f));
              } else {
                o.i = eval::binary_int(
                    BinaryKind::Add, o.i,
                    eval::binary_int(BinaryKind::Mul, a.d[i * K + k].i, b.d[k * N + j].i, ot.elem),
                    ot.elem);
              }
            }
          }
        }
        return;
      }
      case OpKind::Load:
        return load(op);
      case OpKind::Store:
        return store(op);
      case OpKind::Reduce:
        return reduce(op);
      case OpKind::For:
        return for_op(op);
      case OpKind::If: {
        const Region& r = op.regions[val(op.operands[0]).d[0].i != 0 ? 0 : 1];
        region(r);
        assign(op.results, r.ops.back()->operands);
        return;
      }
      case OpKind::Yield:
        return;  // the parent For/If/While reads it
      case OpKind::While: {
        const Region &cond = op.regions[0], &body = op.regions[1];
        assign(cond.args, op.operands);
        for (;;) {
          region(cond);
          if (val(cond.ops.back()->operands[0]).d[0].i == 0) break;
          assign(body.args, cond.args);
          region(body);
          assign(cond.args, body.ops.back()->operands);
        }
        assign(op.results, cond.args);
        return;
      }
      case OpKind::Atomic:
      case OpKind::AtomicCas:
        return atomic(op);
      case OpKind::Assert: {
        const Val& c = val(op.operands[0]);
        for (size_t k = 0; k < c.d.size(); ++k) {
          if (c.d[k].i != 0) continue;
          if (op.sub) {
            report_false_hint(o_.kernel, op.loc, op.text, pid_, static_cast<int64_t>(k),
                              *o_.counters);
          } else {
            report_assert_failure(o_.kernel, op.loc, op.text, pid_, static_cast<int64_t>(k),
                                  *o_.counters);
          }
        }
        return;
      }
      case OpKind::Print: {
        static std::mutex m;
        std::lock_guard<std::mutex> g(m);
        for (size_t k = 0; k < op.operands.size(); ++k) {
          const Val& v = val(op.operands[k]);
          const Type& t = f_.type(op.operands[k]);
          const std::string label =
              op.operands.size() > 1 ? " (operand " + std::to_string(k) + ")" : "";
          for (size_t e = 0; e < v.d.size(); ++e) {
            std::string ix = "(";
            size_t rem = e;
            std::vector<int64_t> idx(t.shape.size());
            for (size_t d = t.shape.size(); d-- > 0;) {
              idx[d] = static_cast<int64_t>(rem % static_cast<size_t>(t.shape[d]));
              rem /= static_cast<size_t>(t.shape[d]);
            }
            for (size_t d = 0; d < idx.size(); ++d) ix += (d ? ", " : "") + std::to_string(idx[d]);
            ix += ")";
            if (t.is_float()) {
              std::printf("pid (%d, %d, %d) idx %s %s%s: %.9g\n", pid_[0], pid_[1], pid_[2],
                          ix.c_str(), op.text.c_str(), label.c_str(), v.d[e].f);
            } else if (is_signed(t.elem) || t.elem == DType::Bool) {
              std::printf("pid (%d, %d, %d) idx %s %s%s: %lld\n", pid_[0], pid_[1], pid_[2],
                          ix.c_str(), op.text.c_str(), label.c_str(),
                          static_cast<long long>(v.d[e].i));
            } else {
              std::printf("pid (%d, %d, %d) idx %s %s%s: %llu\n", pid_[0], pid_[1], pid_[2],
                          ix.c_str(), op.text.c_str(), label.c_str(),
                          static_cast<unsigned long long>(v.d[e].i));
            }
          }
        }
        std::fflush(stdout);
        return;
      }
    }
    TS_INTERNAL_ASSERT(false) << "interpreter: unknown op " << op_name(op.kind);
  }

  // Copies values (simultaneously: a yield may swap carried values).
  void assign(const std::vector<ValueId>& to, const std::vector<ValueId>& from) {
    std::vector<Val> tmp;
    tmp.reserve(from.size());
    for (ValueId v : from) tmp.push_back(val(v));
    for (size_t k = 0; k < to.size(); ++k) {
      Val& dst = vals_[static_cast<size_t>(to[k])];
      dst = std::move(tmp[k]);
      dst.type = &f_.type(to[k]);
    }
  }

  void for_op(const Op& op) {
    const Region& body = op.regions[0];
    const DType it = f_.type(body.args[0]).elem;
    std::vector<ValueId> carried(body.args.begin() + 1, body.args.end());
    assign(carried, std::vector<ValueId>(op.operands.begin() + 3, op.operands.end()));
    int64_t iv = val(op.operands[0]).d[0].i;
    const int64_t ub = val(op.operands[1]).d[0].i, step = val(op.operands[2]).d[0].i;
    while (eval::compare_int(CmpKind::LT, iv, ub, it)) {
      init(body.args[0], 1).d[0].i = iv;
      region(body);
      assign(carried, body.ops.back()->operands);
      iv = eval::binary_int(BinaryKind::Add, iv, step, it);
    }
    assign(op.results, carried);
  }

  static uint64_t to_bits(DType d, Slot s) {
    switch (d) {
      case DType::Float32:
        return trt::f2u(static_cast<float>(s.f));
      case DType::Float64:
        return trt::d2u(s.f);
      case DType::Float16:
        return trt::float_to_half(static_cast<float>(s.f));
      case DType::BFloat16:
        return trt::float_to_bf16(static_cast<float>(s.f));
      case DType::Float8_e4m3fn:
        return trt::float_to_e4m3(static_cast<float>(s.f));
      case DType::Float8_e5m2:
        return trt::float_to_e5m2(static_cast<float>(s.f));
      default: {
        const size_t w = 8 * itemsize(d);
        return w == 64 ? static_cast<uint64_t>(s.i)
                       : static_cast<uint64_t>(s.i) & ((uint64_t(1) << w) - 1);
      }
    }
  }
  static Slot from_bits(DType d, uint64_t b) {
    Slot s{0};
    switch (d) {
      case DType::Float32:
        s.f = trt::u2f(static_cast<uint32_t>(b));
        break;
      case DType::Float64:
        s.f = trt::u2d(b);
        break;
      case DType::Float16:
        s.f = trt::half_to_float(static_cast<uint16_t>(b));
        break;
      case DType::BFloat16:
        s.f = trt::bf16_to_float(static_cast<uint16_t>(b));
        break;
      case DType::Float8_e4m3fn:
        s.f = trt::e4m3_to_float(static_cast<uint8_t>(b));
        break;
      case DType::Float8_e5m2:
        s.f = trt::e5m2_to_float(static_cast<uint8_t>(b));
        break;
      default:
        s.i = eval::wrap_int(static_cast<int64_t>(b), d);
        break;
    }
    return s;
  }

  void reduce_fn(const Op& op) {
    const bool scan = op.kind == OpKind::ScanFn, reverse = op.sub == 1;
    const Region& comb = op.regions[0];
    const size_t n_in = op.operands.size();
    const Type& it = f_.type(op.operands[0]);
    const auto axis = static_cast<size_t>(op.ival);
    size_t outer = 1, inner = 1;
    for (size_t d = 0; d < axis; ++d) outer *= static_cast<size_t>(it.shape[d]);
    for (size_t d = axis + 1; d < it.shape.size(); ++d) inner *= static_cast<size_t>(it.shape[d]);
    const auto len = static_cast<size_t>(it.shape[axis]);
    std::vector<Val> in;
    for (ValueId v : op.operands) in.push_back(val(v));
    std::vector<std::vector<Slot>> out(
        n_in, std::vector<Slot>(scan ? outer * len * inner : outer * inner));
    for (size_t o = 0; o < outer; ++o) {
      for (size_t i = 0; i < inner; ++i) {
        auto pos = [&](size_t j) { return (o * len + j) * inner + i; };
        const size_t first = reverse ? len - 1 : 0;
        std::vector<Slot> acc(n_in);
        for (size_t k = 0; k < n_in; ++k) {
          acc[k] = in[k].d[pos(first)];
          if (scan) out[k][pos(first)] = acc[k];
        }
        for (size_t step = 1; step < len; ++step) {
          const size_t j = reverse ? len - 1 - step : step;
          for (size_t k = 0; k < n_in; ++k) {
            init(comb.args[k], 1).d[0] = acc[k];
            init(comb.args[n_in + k], 1).d[0] = in[k].d[pos(j)];
          }
          region(comb);
          const Op& y = *comb.ops.back();
          for (size_t k = 0; k < n_in; ++k) acc[k] = val(y.operands[k]).d[0];
          if (scan) {
            for (size_t k = 0; k < n_in; ++k) out[k][pos(j)] = acc[k];
          }
        }
        if (!scan) {
          for (size_t k = 0; k < n_in; ++k) out[k][o * inner + i] = acc[k];
        }
      }
    }
    for (size_t k = 0; k < n_in; ++k) {
      Val& v = init(op.results[k], out[k].size());
      v.d = std::move(out[k]);
    }
  }

  // Shape ops: each result element is an operand element (ir/index_map.h says which).
  // src at each result coordinate with the axis coordinate taken from index; an index out of
  // range is an error naming the kernel and line (compiled code reads the nearest element).
  void gather(const Op& op) {
    const Type& t = f_.type(op.result());
    const Val src = val(op.operands[0]), index = val(op.operands[1]);
    const auto& in = f_.type(op.operands[0]).shape;
    const auto axis = static_cast<size_t>(op.ival);
    Val& v = init(op.result(), numel(t));
    std::vector<int64_t> idx(t.shape.size(), 0);
    for (size_t k = 0; k < v.d.size(); ++k) {
      const int64_t g = at(index, k).i;
      if (g < 0 || g >= in[axis]) {
        TS_ERROR(RuntimeError) << "[kernel " << o_.kernel << "] tl::gather index " << g
                               << " is outside [0, " << in[axis] << ") along axis " << axis
                               << " at " << op.loc.file << ":" << op.loc.line;
      }
      size_t s = 0;
      for (size_t d = 0; d < in.size(); ++d)
        s = s * static_cast<size_t>(in[d]) + static_cast<size_t>(d == axis ? g : idx[d]);
      v.d[k] = src.d.size() == 1 ? src.d[0] : src.d[s];
      for (size_t d = t.shape.size(); d-- > 0;) {
        if (++idx[d] < t.shape[d]) break;
        idx[d] = 0;
      }
    }
  }

  void reindex(const Op& op) {
    const Type& t = f_.type(op.result());
    const auto& out = t.shape;
    const Val a = val(op.operands[0]);
    const Val b = op.operands.size() > 1 ? val(op.operands[1]) : Val{};
    const auto& in = f_.type(op.operands[0]).shape;
    Val& v = init(op.result(), numel(t));
    const bool ptr = t.ptr;
    if (ptr || !a.prov.empty()) v.prov.resize(v.d.size());
    const bool two = op.operands.size() > 1;
    const ir::OperandPick pick = two ? ir::operand_pick(f_, op) : ir::OperandPick{0, 0};
    ir::IntIndexAlgebra alg;
    std::vector<int64_t> idx(out.size(), 0);
    for (size_t k = 0; k < v.d.size(); ++k) {
      const size_t from_k = two && idx[pick.dim] >= pick.bound ? 1 : 0;
      const Val& from = from_k ? b : a;
      const std::vector<int64_t> src = ir::operand_index(f_, op, from_k, idx, alg);
      size_t s = 0;  // both operands of Join and Cat have one shape
      for (size_t d = 0; d < src.size(); ++d)
        s = s * static_cast<size_t>(in[d]) + static_cast<size_t>(src[d]);
      v.d[k] = from.d.size() == 1 ? from.d[0] : from.d[s];
      if (!v.prov.empty()) v.prov[k] = prov_at(from, s);
      for (size_t d = out.size(); d-- > 0;) {
        if (++idx[d] < out[d]) break;
        idx[d] = 0;
      }
    }
  }

  void binary(const Op& op) {
    const Val a = val(op.operands[0]), b = val(op.operands[1]);
    const Type& t = f_.type(op.result());
    const auto k = static_cast<BinaryKind>(op.sub);
    Val& v = init(op.result(), numel(t));
    const bool check = o_.check_overflow && t.elem == DType::Int32 &&
                       (k == BinaryKind::Add || k == BinaryKind::Sub || k == BinaryKind::Mul);
    for (size_t e = 0; e < v.d.size(); ++e) {
      if (t.is_float()) {
        v.d[e].f = eval::binary_float(k, at(a, e).f, at(b, e).f, t.elem);
      } else {
        v.d[e].i = eval::binary_int(k, at(a, e).i, at(b, e).i, t.elem);
      }
      if (check) {
        const int64_t x = at(a, e).i, y = at(b, e).i;
        const int64_t exact = k == BinaryKind::Add ? x + y : k == BinaryKind::Sub ? x - y : x * y;
        if (exact != v.d[e].i)
          report_int_overflow(o_.kernel, op.loc, pid_, static_cast<int64_t>(e), exact,
                              *o_.counters);
      }
    }
  }

  void compare(const Op& op) {
    const Val a = val(op.operands[0]), b = val(op.operands[1]);
    const Type& t = f_.type(op.operands[0]);
    const auto k = static_cast<CmpKind>(op.sub);
    Val& v = init(op.result(), numel(f_.type(op.result())));
    for (size_t e = 0; e < v.d.size(); ++e) {
      if (t.ptr) {
        v.d[e].i = eval::compare_int(k, at(a, e).i, at(b, e).i, DType::UInt64);
      } else if (t.is_float()) {
        v.d[e].i = eval::compare_float(k, at(a, e).f, at(b, e).f);
      } else {
        v.d[e].i = eval::compare_int(k, at(a, e).i, at(b, e).i, t.elem);
      }
    }
  }

  void unary(const Op& op) {
    const Val a = val(op.operands[0]);
    const Type& t = f_.type(op.result());
    const auto k = static_cast<UnaryKind>(op.sub);
    const DType d = t.elem;
    Val& v = init(op.result(), numel(t));
    for (size_t e = 0; e < v.d.size(); ++e) {
      const Slot x = at(a, e);
      if (!t.is_float()) {
        switch (k) {
          case UnaryKind::Neg:
            v.d[e].i = eval::binary_int(BinaryKind::Sub, 0, x.i, d);
            break;
          case UnaryKind::Not:
            v.d[e].i = d == DType::Bool ? (x.i == 0) : eval::wrap_int(~x.i, d);
            break;
          case UnaryKind::Abs:
            v.d[e].i = is_signed(d) && x.i < 0 ? eval::binary_int(BinaryKind::Sub, 0, x.i, d) : x.i;
            break;
          default:
            TS_INTERNAL_ASSERT(false) << "interpreter: " << unary_name(k) << " of an integer";
        }
        continue;
      }
      double r = 0;
      const bool dbl = d == DType::Float64;
      const float xf = static_cast<float>(x.f);
      switch (k) {
        case UnaryKind::Neg:
          r = -x.f;
          break;
        case UnaryKind::Abs:
          r = std::fabs(x.f);
          break;
#define TESSERA_INTERP_MATH(kind, fn)                          \
  case UnaryKind::kind:                                        \
    r = dbl ? trt::fn(x.f) : static_cast<double>(trt::fn(xf)); \
    break;
          TESSERA_IR_MATH_FUNCTIONS(TESSERA_INTERP_MATH)
#undef TESSERA_INTERP_MATH
        case UnaryKind::Not:
          TS_INTERNAL_ASSERT(false) << "interpreter: not of a float";
      }
      v.d[e].f = eval::round_float(r, d);
    }
  }

  void cast(const Op& op) {
    const Val a = val(op.operands[0]);
    const DType s = f_.type(op.operands[0]).elem, d = f_.type(op.result()).elem;
    Val& v = init(op.result(), a.d.size());
    const bool sf = is_floating_point(s), df = is_floating_point(d);
    for (size_t e = 0; e < v.d.size(); ++e) {
      const Slot x = a.d[e];
      if (d == DType::Bool) {
        v.d[e].i = sf ? (x.f != 0) : (x.i != 0);
      } else if (sf && !df) {
        v.d[e].i = visit_dtype<kInts>(d, "cast", [&]<class T>() {
          const T r = s == DType::Float64 ? trt::f2i<T>(x.f) : trt::f2i<T>(static_cast<float>(x.f));
          return static_cast<int64_t>(r);
        });
      } else if (df) {
        // From an integer: the source's value converted as C does; from a float: to float first
        // (the generated code's register type), then rounded to a narrow type.
        double src = x.f;
        if (!sf) {
          src = s == DType::UInt64 ? static_cast<double>(static_cast<uint64_t>(x.i))
                                   : static_cast<double>(x.i);
          if (d != DType::Float64) {
            src = s == DType::UInt64 ? static_cast<float>(static_cast<uint64_t>(x.i))
                                     : static_cast<float>(x.i);
          }
        } else if (d != DType::Float64) {
          src = static_cast<float>(x.f);
        }
        v.d[e].f = eval::round_float(src, d);
      } else {
        v.d[e].i = eval::wrap_int(x.i, d);
      }
    }
  }

  // ---- memory ---------------------------------------------------------------------------------

  bool in_bounds(const Op& op, const char* what, int16_t prov, uintptr_t addr, size_t lane) {
    if (o_.bounds.empty() || prov < 0 || static_cast<size_t>(prov) >= o_.bounds.size()) return true;
    const PointerBounds& b = o_.bounds[static_cast<size_t>(prov)];
    if (!b.known) return true;
    const size_t size = itemsize(f_.type(op.operands[0]).elem);
    if (addr >= b.lo && addr + size <= b.hi) return true;
    report_out_of_bounds(o_.kernel, what, op.loc, pid_, static_cast<int64_t>(lane),
                         f_.params[static_cast<size_t>(prov)].name, b, addr, *o_.counters);
    return false;
  }

  // Memory is read and written with relaxed atomics of the element's width: programs run in
  // parallel, and a kernel whose programs store to one element (a race Triton allows: some
  // writer wins) must stay defined here, as it is on a GPU.
  template <class U>
  static U load_bits(const char* p) {
    return __atomic_load_n(reinterpret_cast<const U*>(p), __ATOMIC_RELAXED);
  }
  template <class U>
  static void store_bits(char* p, U v) {
    __atomic_store_n(reinterpret_cast<U*>(p), v, __ATOMIC_RELAXED);
  }

  static Slot read(DType d, const char* p) {
    Slot s{0};
    switch (d) {
      case DType::Float32:
        s.f = trt::u2f(load_bits<uint32_t>(p));
        return s;
      case DType::Float64: {
        const uint64_t b = load_bits<uint64_t>(p);
        std::memcpy(&s.f, &b, 8);
        return s;
      }
      case DType::Float16:
        s.f = trt::half_to_float(load_bits<uint16_t>(p));
        return s;
      case DType::BFloat16:
        s.f = trt::bf16_to_float(load_bits<uint16_t>(p));
        return s;
      case DType::Float8_e4m3fn:
        s.f = trt::e4m3_to_float(load_bits<uint8_t>(p));
        return s;
      case DType::Float8_e5m2:
        s.f = trt::e5m2_to_float(load_bits<uint8_t>(p));
        return s;
      case DType::Bool:
        s.i = load_bits<uint8_t>(p) != 0;
        return s;
      default:
        s.i = visit_dtype<kInts>(d, "load", [&]<class T>() {
          using U = std::make_unsigned_t<T>;
          return static_cast<int64_t>(static_cast<T>(load_bits<U>(p)));
        });
        return s;
    }
  }

  static void write(DType d, char* p, Slot s) {
    switch (d) {
      case DType::Float32:
        store_bits<uint32_t>(p, trt::f2u(static_cast<float>(s.f)));
        return;
      case DType::Float64: {
        uint64_t b;
        std::memcpy(&b, &s.f, 8);
        store_bits<uint64_t>(p, b);
        return;
      }
      case DType::Float16:
        store_bits<uint16_t>(p, trt::float_to_half(static_cast<float>(s.f)));
        return;
      case DType::BFloat16:
        store_bits<uint16_t>(p, trt::float_to_bf16(static_cast<float>(s.f)));
        return;
      case DType::Float8_e4m3fn:
        store_bits<uint8_t>(p, trt::float_to_e4m3(static_cast<float>(s.f)));
        return;
      case DType::Float8_e5m2:
        store_bits<uint8_t>(p, trt::float_to_e5m2(static_cast<float>(s.f)));
        return;
      case DType::Bool:
        store_bits<uint8_t>(p, s.i != 0 ? 1 : 0);
        return;
      default:
        visit_dtype<kInts>(d, "store", [&]<class T>() {
          using U = std::make_unsigned_t<T>;
          store_bits<U>(p, static_cast<U>(static_cast<T>(s.i)));
          return 0;
        });
        return;
    }
  }

  void atomic(const Op& op) {
    const Val p = val(op.operands[0]), x = val(op.operands[1]);
    const bool cas = op.kind == OpKind::AtomicCas;
    const Val* mask = !cas && op.operands.size() > 2 ? &val(op.operands[2]) : nullptr;
    const Val* nv = cas ? &val(op.operands[2]) : nullptr;
    const DType d = f_.type(op.operands[0]).elem;
    const int kind = op.sub, order = static_cast<int>(op.ival);
    Val& v = init(op.result(), numel(f_.type(op.result())));
    for (size_t k = 0; k < v.d.size(); ++k) {
      v.d[k] = Slot{0};
      if (mask && at(*mask, k).i == 0) continue;
      const auto addr = static_cast<uintptr_t>(at(p, k).i);
      if (!in_bounds(op, "atomic", prov_at(p, k), addr, k)) continue;
      void* ptr = reinterpret_cast<void*>(addr);
      const Slot a = at(x, k);
      Slot r{0};
      switch (d) {
        case DType::Float32:
          r.f =
              cas ? trt::u2f(trt::atomic_cas_bits(
                        static_cast<uint32_t*>(ptr), trt::f2u(static_cast<float>(a.f)),
                        trt::f2u(static_cast<float>(at(*nv, k).f)), order))
                  : trt::atomic_f32(kind, static_cast<float*>(ptr), static_cast<float>(a.f), order);
          break;
        case DType::Float64:
          r.f = cas ? trt::u2d(trt::atomic_cas_bits(static_cast<uint64_t*>(ptr), trt::d2u(a.f),
                                                    trt::d2u(at(*nv, k).f), order))
                    : trt::atomic_f64(kind, static_cast<double*>(ptr), a.f, order);
          break;
        case DType::Float16:
        case DType::BFloat16: {
          const bool bf = d == DType::BFloat16;
          if (cas) {
            auto to = [&](double f) {
              return bf ? trt::float_to_bf16(static_cast<float>(f))
                        : trt::float_to_half(static_cast<float>(f));
            };
            const uint16_t old =
                trt::atomic_cas_bits(static_cast<uint16_t*>(ptr), to(a.f), to(at(*nv, k).f), order);
            r.f = bf ? trt::bf16_to_float(old) : trt::half_to_float(old);
          } else {
            r.f = trt::atomic_f16(kind, static_cast<uint16_t*>(ptr), static_cast<float>(a.f), order,
                                  bf);
          }
          break;
        }
        default:
          r.i = visit_dtype<kInts>(d, "atomic", [&]<class T>() {
            T* tp = static_cast<T*>(ptr);
            const T old = cas ? trt::atomic_cas_bits(tp, static_cast<T>(a.i),
                                                     static_cast<T>(at(*nv, k).i), order)
                              : trt::atomic_int<T>(kind, tp, static_cast<T>(a.i), order);
            return static_cast<int64_t>(old);
          });
      }
      v.d[k] = r;
    }
  }

  void load(const Op& op) {
    const Val p = val(op.operands[0]);
    const Val* mask = op.operands.size() > 1 ? &val(op.operands[1]) : nullptr;
    const Val* other = op.operands.size() > 2 ? &val(op.operands[2]) : nullptr;
    const Type& t = f_.type(op.result());
    // (copies: `mask` and `other` may alias the result's slot only if the IR were malformed)
    const Val m = mask ? *mask : Val{}, o = other ? *other : Val{};
    Val& v = init(op.result(), numel(t));
    for (size_t k = 0; k < v.d.size(); ++k) {
      if (mask && at(m, k).i == 0) {
        v.d[k] = other ? at(o, k) : Slot{0};
        continue;
      }
      const auto addr = static_cast<uintptr_t>(at(p, k).i);
      if (!in_bounds(op, "load", prov_at(p, k), addr, k)) {
        v.d[k] = other ? at(o, k) : Slot{0};
        continue;
      }
      v.d[k] = read(t.elem, reinterpret_cast<const char*>(addr));
    }
  }

  void store(const Op& op) {
    const Val& p = val(op.operands[0]);
    const Val& x = val(op.operands[1]);
    const Val* mask = op.operands.size() > 2 ? &val(op.operands[2]) : nullptr;
    const DType d = f_.type(op.operands[0]).elem;
    const size_t n = numel(f_.type(op.operands[0]));
    for (size_t k = 0; k < n; ++k) {
      if (mask && at(*mask, k).i == 0) continue;
      const auto addr = static_cast<uintptr_t>(at(p, k).i);
      if (!in_bounds(op, "store", prov_at(p, k), addr, k)) continue;
      write(d, reinterpret_cast<char*>(addr), at(x, k));
    }
  }

  void reduce(const Op& op) {
    const Val a = val(op.operands[0]);
    const Type& it = f_.type(op.operands[0]);
    const Type& ot = f_.type(op.result());
    const auto k = static_cast<ReduceKind>(op.sub);
    const auto axis = static_cast<size_t>(op.ival);
    size_t outer = 1, inner = 1;
    for (size_t d = 0; d < axis; ++d) outer *= static_cast<size_t>(it.shape[d]);
    for (size_t d = axis + 1; d < it.shape.size(); ++d) inner *= static_cast<size_t>(it.shape[d]);
    const auto len = static_cast<size_t>(it.shape[axis]);
    Val& v = init(op.result(), outer * inner);
    if (k == ReduceKind::ArgMax || k == ReduceKind::ArgMin) {
      const bool fl = it.is_float(), is_max = k == ReduceKind::ArgMax;
      for (size_t o = 0; o < outer; ++o) {
        for (size_t i = 0; i < inner; ++i) {
          Slot best = a.d[(o * len) * inner + i];
          int64_t bi = 0;
          for (size_t j = 1; j < len; ++j) {
            const Slot x = a.d[(o * len + j) * inner + i];
            bool better;
            if (fl) {
              better = (is_max ? x.f > best.f : x.f < best.f) ||
                       (std::isnan(x.f) && !std::isnan(best.f));
            } else {
              better = eval::compare_int(is_max ? CmpKind::GT : CmpKind::LT, x.i, best.i, it.elem);
            }
            if (better) {
              best = x;
              bi = static_cast<int64_t>(j);
            }
          }
          v.d[o * inner + i].i = bi;
        }
      }
      return;
    }
    const DType d = ot.elem;
    const bool fl = is_floating_point(d);
    for (size_t o = 0; o < outer; ++o) {
      for (size_t i = 0; i < inner; ++i) {
        Slot acc = a.d[(o * len) * inner + i];
        if (fl && k == ReduceKind::Max) acc.f = trt::fmax_num(std::nan(""), acc.f);
        if (fl && k == ReduceKind::Min) acc.f = trt::fmin_num(std::nan(""), acc.f);
        for (size_t j = 1; j < len; ++j) {
          const Slot x = a.d[(o * len + j) * inner + i];
          if (fl) {
            acc.f = k == ReduceKind::Sum   ? acc.f + x.f
                    : k == ReduceKind::Max ? trt::fmax_num(acc.f, x.f)
                                           : trt::fmin_num(acc.f, x.f);
          } else {
            acc.i = eval::binary_int(reduce_traits(k).combine, acc.i, x.i, d);
          }
        }
        if (fl) acc.f = eval::round_float(acc.f, d);  // sums: accumulated in double, rounded once
        v.d[o * inner + i] = acc;
      }
    }
  }

  const Function& f_;
  const trt::Grid& g_;
  const trt::Arg* args_;
  const InterpretOptions& o_;
  std::vector<Val> vals_;
  int32_t pid_[3] = {0, 0, 0};
};

}  // namespace

void interpret(const ir::Function& f, const trt::Grid& grid, int64_t pid_begin, int64_t pid_end,
               const trt::Arg* args, const InterpretOptions& options) {
  Interp in(f, grid, args, options);
  for (int64_t p = pid_begin; p < pid_end; ++p) in.run_program(p);
}

}  // namespace tessera::backend::interp
