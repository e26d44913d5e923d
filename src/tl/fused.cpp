#include "tl/fused.h"

#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "tl/jit.h"
#include "tl/op_tiles.h"
#include "tl/trace.h"

namespace tessera::tl {

namespace detail {
struct JITAccess {
  static std::unique_ptr<JITFunction> make(std::unique_ptr<KernelState> s) {
    return std::unique_ptr<JITFunction>(new JITFunction(std::move(s)));
  }
};
}  // namespace detail

namespace {

using ir::OpKind;
using ir::ValueId;

// The offsets of a pointer value from the parameter `target`, at the pointer's shape: nullopt
// when it is not `target` plus offsets (another parameter, a loaded or selected pointer).
std::optional<ValueId> offsets_from(TraceContext& c, ValueId p, ValueId target) {
  ir::Builder& b = c.builder();
  if (p == target) return b.constant_int(0, ir::Type::scalar(DType::Int32));
  const ir::Op* op = c.function().def(p);
  if (!op) return std::nullopt;
  const ir::Type t = c.type(p);  // a copy: new values reallocate the table
  switch (op->kind) {
    case OpKind::Splat: {
      auto o = offsets_from(c, op->operands[0], target);
      return o ? std::optional<ValueId>(b.splat(*o, t.shape)) : std::nullopt;
    }
    case OpKind::Broadcast: {
      auto o = offsets_from(c, op->operands[0], target);
      return o ? std::optional<ValueId>(b.broadcast(*o, t.shape)) : std::nullopt;
    }
    case OpKind::ExpandDims: {
      auto o = offsets_from(c, op->operands[0], target);
      return o ? std::optional<ValueId>(b.expand_dims(*o, op->ival)) : std::nullopt;
    }
    case OpKind::AddPtr: {
      auto o = offsets_from(c, op->operands[0], target);
      if (!o) return std::nullopt;
      return c.value(c.tile(*o) + c.tile(op->operands[1]), {});
    }
    default:
      return std::nullopt;
  }
}

// An index map's integer: a constant, or the next Int parameter.
Tile fused_int(const FusedInt& v, const Tile* ints, size_t& next) {
  if (v.param) return ints[next++];
  const bool narrow = v.value >= INT32_MIN && v.value <= INT32_MAX;
  return full({}, v.value, narrow ? DType::Int32 : DType::Int64);
}

Tile index_map(const Tile& i, const EpilogueSpec::Input& in, const Tile* ints, size_t& next) {
  auto get = [&](const FusedInt& v) { return fused_int(v, ints, next); };
  if (in.identity) return i;
  const size_t rank = in.sizes.size();
  std::vector<Tile> sizes, strides;
  for (const auto& s : in.sizes) sizes.push_back(get(s));
  for (const auto& s : in.strides) strides.push_back(get(s));
  if (rank == 1) return i * strides[0];
  Tile idx = i, at;
  for (size_t k = rank - 1; k >= 1; --k) {
    const Tile digit = idx % sizes[k];
    idx = idx / sizes[k];
    at = k == rank - 1 ? digit * strides[k] : at + digit * strides[k];
  }
  return at + idx * strides[0];
}

}  // namespace

namespace {

// A derived kernel's state: the base's parameters, then one pointer per extra input, then the
// index maps' integers.
std::unique_ptr<detail::KernelState> derived_state(const detail::KernelState& from,
                                                   const EpilogueSpec& spec, const char* prefix) {
  auto s = std::make_unique<detail::KernelState>();
  s->name = spec.name;
  s->params = from.params;
  s->loc = from.loc;
  for (size_t k = 0; k < spec.inputs.size(); ++k)
    s->params.push_back(
        {prefix + std::string("_in") + std::to_string(k), JITFunction::ParamSpec::Kind::Pointer});
  size_t nints = 0;
  for (const auto& in : spec.inputs) {
    for (const auto* list : {&in.sizes, &in.strides}) {
      for (const auto& v : *list) {
        if (v.param)
          s->params.push_back({prefix + std::string("_i") + std::to_string(nints++),
                               JITFunction::ParamSpec::Kind::Int});
      }
    }
  }
  s->no_specialize = from.no_specialize;
  s->no_specialize.resize(s->params.size(), false);
  return s;
}

using Hook = std::function<ValueId(ValueId, ValueId, ValueId)>;

// Traces the base kernel's body under a derived kernel's hook; the hook before it comes back when
// the trace leaves, thrown or not.
void trace_base(const detail::KernelState& base, const Tile* params, Hook& hook, Hook& outer) {
  struct Restore {
    Hook& hook;
    Hook& outer;
    ~Restore() { hook = std::move(outer); }
  } restore{hook, outer};
  if (base.closure) {
    base.closure(params);
  } else {
    base.invoke(base.body, params);
  }
}

// A Scalar as a 0-d tile of `dtype` (eager's scalar_tensor).
Tile scalar_tile(const Scalar& v, DType dtype) {
  if (v.is_floating_point() && is_floating_point(dtype)) {
    // The value in the op's compute type, exactly (a float literal is float32, Triton's rule:
    // 0.1 in a float64 chain would be off by 1e-9).
    TraceContext& c = TraceContext::current({});
    return c.tile(c.builder().constant_float(v.to_double(), ir::Type::scalar(dtype)));
  }
  return v.is_floating_point() ? full({}, v.to_double(), dtype)
         : v.is_bool()         ? full({}, v.to_bool(), dtype)
                               : full({}, v.to_int(), dtype);
}

// The op of a fused epilogue or prologue on its operands: -1 `value`, k the extra input k loaded
// at `i` (masked by `m` when given).
Tile apply_fused(TraceContext& c, const EpilogueSpec& spec, const Tile& value, const Tile& i,
                 ValueId m, const Tile* inputs, const Tile* ints) {
  std::vector<Tile> loaded;
  size_t next = 0;
  for (size_t k = 0; k < spec.inputs.size(); ++k) {
    const Tile at = index_map(i, spec.inputs[k], ints, next);
    loaded.push_back(m == ir::kNoValue ? load(inputs[k] + at) : load(inputs[k] + at, c.tile(m)));
  }
  std::vector<Tile> operands;
  for (int o : spec.operands) {
    if (o >= 0) {
      operands.push_back(loaded[static_cast<size_t>(o)]);
    } else if (o == -1) {
      operands.push_back(value);
    } else {
      operands.push_back(scalar_tile(spec.constants[static_cast<size_t>(-2 - o)], spec.compute));
    }
  }
  const void* extra = nullptr;
  if (spec.op == ops_detail::PwOp::Add || spec.op == ops_detail::PwOp::Sub) extra = &spec.alpha;
  return op_tiles::pointwise_tile(spec.op, spec.compute,
                                  ArrayRef<Tile>(operands.data(), operands.size()), extra);
}

}  // namespace

std::unique_ptr<JITFunction> make_epilogue_kernel(const JITFunction& base, EpilogueSpec spec) {
  const detail::KernelState& from = base.state();
  auto s = derived_state(from, spec, "epilogue");
  const size_t nbase = from.params.size();
  const detail::KernelState* base_state = &from;
  s->closure = [spec = std::move(spec), base_state, nbase](const Tile* params) {
    TraceContext& c = TraceContext::current({});
    const ValueId target = c.value(params[spec.target], {});
    const Tile* inputs = params + nbase;
    const Tile* ints = inputs + spec.inputs.size();
    // Epilogues of epilogues: the base kernel's own hook (installed by its closure, below) runs
    // first, then this one.
    auto outer = std::move(c.store_hook);
    c.store_hook = [&c, &spec, &outer, target, inputs, ints](ValueId p, ValueId v,
                                                             ValueId m) -> ValueId {
      const auto offs = offsets_from(c, p, target);
      if (!offs) return outer ? outer(p, v, m) : v;  // a store through another parameter
      const DType elem = c.type(v).elem;
      const Tile r = apply_fused(c, spec, c.tile(v), c.tile(*offs), m, inputs, ints);
      const ValueId out = c.value(r.to(elem), {});
      return outer ? outer(p, out, m) : out;
    };
    trace_base(*base_state, params, c.store_hook, outer);
  };
  return detail::JITAccess::make(std::move(s));
}

std::unique_ptr<JITFunction> make_prologue_kernel(const JITFunction& base, EpilogueSpec spec) {
  const detail::KernelState& from = base.state();
  auto s = derived_state(from, spec, "prologue");
  const size_t nbase = from.params.size();
  const detail::KernelState* base_state = &from;
  s->closure = [spec = std::move(spec), base_state, nbase](const Tile* params) {
    TraceContext& c = TraceContext::current({});
    const ValueId target = c.value(params[spec.target], {});
    const Tile* inputs = params + nbase;
    const Tile* ints = inputs + spec.inputs.size();
    bool busy = false;  // the hook's own loads are plain loads
    auto outer = std::move(c.load_hook);
    c.load_hook = [&c, &spec, &outer, &busy, target, inputs, ints](ValueId p, ValueId m,
                                                                   ValueId o) -> ValueId {
      if (busy) return ir::kNoValue;
      const auto offs = offsets_from(c, p, target);
      if (!offs) return outer ? outer(p, m, o) : ir::kNoValue;  // another parameter
      busy = true;
      const DType elem = c.type(p).elem;
      // X itself: through the prologue fused before this one on the same parameter, if any.
      const ValueId earlier = outer ? outer(p, m, o) : ir::kNoValue;
      const Tile x = earlier != ir::kNoValue ? c.tile(earlier)
                     : m == ir::kNoValue     ? load(c.tile(p))
                                             : load(c.tile(p), c.tile(m));
      Tile r = apply_fused(c, spec, x, c.tile(*offs), m, inputs, ints).to(elem);
      if (m != ir::kNoValue) r = where(c.tile(m), r, c.tile(o));  // `other` where masked off
      busy = false;
      return c.value(r, {});
    };
    trace_base(*base_state, params, c.load_hook, outer);
  };
  return detail::JITAccess::make(std::move(s));
}

namespace {

// A reduction step along the row: masked-off lanes take the identity; max and min return NaN
// when the row holds one, as eager's.
Tile reduce_row(PointwiseSpec::Reduce op, const Tile& v, const Tile& mask, const Tile& count,
                DType acc) {
  using R = PointwiseSpec::Reduce;
  const Tile x = v.to(acc);
  switch (op) {
    case R::Sum:
      return sum(where(mask, x, zeros({}, acc)));
    case R::Mean:
      return sum(where(mask, x, zeros({}, acc))) / count.to(acc);
    case R::MaxOfRow:
      return max(where(mask, x, full({}, -INFINITY, acc)));
    case R::Max:
    case R::Min: {
      const bool is_max = op == R::Max;
      const Tile r = is_max ? max(where(mask, x, full({}, -INFINITY, acc)))
                            : min(where(mask, x, full({}, INFINITY, acc)));
      const Tile nan = max(where(mask & (x != x), 1, 0)) > 0;
      return where(nan, full({}, NAN, acc), r);
    }
    case R::None:
      break;
  }
  return v;
}

// A pointwise step on its operands, in its compute dtype, rounded to its result dtype.
Tile apply_step(const PointwiseSpec::Step& st, const std::vector<Tile>& operands) {
  const void* extra = nullptr;
  if (st.op == ops_detail::PwOp::Add || st.op == ops_detail::PwOp::Sub) extra = &st.alpha;
  if (st.op == ops_detail::PwOp::Clamp) extra = &st.clamp;
  return op_tiles::pointwise_tile(st.op, st.compute,
                                  ArrayRef<Tile>(operands.data(), operands.size()), extra)
      .to(st.result);
}

// How many Int parameters an input's index map (and a split input's last stride) reads.
size_t int_params(const PointwiseSpec::Input& in) {
  size_t n = 0;
  if (!in.identity) {
    for (const auto* list : {&in.sizes, &in.strides})
      for (const auto& v : *list) n += v.param ? 1 : 0;
  }
  if (in.split && in.last_stride.param) ++n;
  return n;
}

// Rows longer than one block: passes over the row in blocks of BLOCK elements. A step's level is
// the number of reductions its value depends on; pass p computes the element steps of level <= p
// that it needs (inputs loaded again, cheap steps computed again), accumulates the reductions of
// level-p operands in carried tiles (then reduces them once), and stores the level-p element
// outputs. Per-row values (reductions, steps on them, per-row inputs) exist from their pass on.
// Softmax: a pass for the max, one for the sum of exponentials, one for the output.
void looped_rows(const PointwiseSpec& spec, const Tile* outs, const Tile* ins, const Tile& row_len,
                 const Tile* ints, const Tile& block, const Tile& pid) {
  using R = PointwiseSpec::Reduce;
  using K = PointwiseSpec::Operand::Kind;
  const size_t ns = spec.steps.size(), ni = spec.inputs.size();
  std::vector<int> level(ns, 0);
  for (size_t s = 0; s < ns; ++s) {
    int l = 0;
    for (const auto& o : spec.steps[s].operands)
      if (o.kind == K::Step) l = std::max(l, level[o.index]);
    level[s] = spec.steps[s].reduce != R::None ? l + 1 : l;
  }
  std::vector<size_t> int_base(ni, 0);
  for (size_t k = 1; k < ni; ++k) int_base[k] = int_base[k - 1] + int_params(spec.inputs[k - 1]);
  // Per-row inputs once; per-row steps when their reductions are done.
  std::vector<std::optional<Tile>> row_in(ni), row_val(ns);
  for (size_t k = 0; k < ni; ++k) {
    if (!spec.inputs[k].row) continue;
    size_t next = int_base[k];
    row_in[k] = load(ins[k] + index_map(pid, spec.inputs[k], ints, next));
  }
  auto constant = [](const PointwiseSpec::Operand& o) { return scalar_tile(o.value, o.dtype); };
  std::function<Tile(size_t)> row_value = [&](size_t s) -> Tile {
    if (row_val[s]) return *row_val[s];
    const auto& st = spec.steps[s];
    std::vector<Tile> operands;
    for (const auto& o : st.operands) {
      operands.push_back(o.kind == K::Input  ? *row_in[o.index]
                         : o.kind == K::Step ? row_value(o.index)
                                             : constant(o));
    }
    row_val[s] = apply_step(st, operands);
    return *row_val[s];
  };
  int passes = 0;
  for (size_t s = 0; s < ns; ++s) {
    const auto& st = spec.steps[s];
    if (st.reduce != R::None) passes = std::max(passes, level[s]);  // the pass of its operand + 1
    if (!st.row) passes = std::max(passes, level[s] + 1);
  }
  for (int p = 0; p < passes; ++p) {
    std::vector<size_t> reductions, outputs;
    for (size_t s = 0; s < ns; ++s)
      if (spec.steps[s].reduce != R::None && level[s] == p + 1) reductions.push_back(s);
    for (size_t k = 0; k < spec.outputs.size(); ++k) {
      const size_t s = spec.outputs[k];
      if (!spec.steps[s].row && level[s] == p) outputs.push_back(k);
    }
    if (reductions.empty() && outputs.empty()) continue;
    std::deque<Var> acc, nan;  // per reduction: its carried tile, and max/min's NaN flags
    for (size_t r : reductions) {
      const auto& st = spec.steps[r];
      const double init = st.reduce == R::Sum || st.reduce == R::Mean ? 0.0
                          : st.reduce == R::Min                       ? INFINITY
                                                                      : -INFINITY;
      acc.emplace_back(full({block}, init, st.compute));
      nan.emplace_back(zeros({block}, DType::Int32));
    }
    range(0, row_len, block, [&](Tile start) {
      const Tile j = start + arange(0, block);
      const Tile mask = j < row_len;
      const Tile offs = pid * row_len + j;
      std::vector<std::optional<Tile>> in(ni), ev(ns);
      auto input = [&](size_t k) -> Tile {
        if (row_in[k]) return *row_in[k];
        if (in[k]) return *in[k];
        const auto& sp = spec.inputs[k];
        size_t next = int_base[k];
        if (sp.split) {
          const Tile at = index_map(pid, sp, ints, next);
          in[k] = load(ins[k] + (at + j * fused_int(sp.last_stride, ints, next)), mask);
        } else {
          in[k] = load(ins[k] + index_map(offs, sp, ints, next), mask);
        }
        return *in[k];
      };
      std::function<Tile(size_t)> value = [&](size_t s) -> Tile {
        const auto& st = spec.steps[s];
        if (st.row) return row_value(s);
        if (ev[s]) return *ev[s];
        std::vector<Tile> operands;
        for (const auto& o : st.operands) {
          operands.push_back(o.kind == K::Input  ? input(o.index)
                             : o.kind == K::Step ? value(o.index)
                                                 : constant(o));
        }
        ev[s] = apply_step(st, operands);
        return *ev[s];
      };
      for (size_t i = 0; i < reductions.size(); ++i) {
        const auto& st = spec.steps[reductions[i]];
        const auto& o = st.operands[0];
        const Tile x = (o.kind == K::Input ? input(o.index) : value(o.index)).to(st.compute);
        switch (st.reduce) {
          case R::Sum:
          case R::Mean:
            acc[i] = Tile(acc[i]) + where(mask, x, zeros({}, st.compute));
            break;
          case R::Min:
            acc[i] = minimum(acc[i], where(mask, x, full({}, INFINITY, st.compute)));
            nan[i] = maximum(nan[i], where(mask & (x != x), 1, 0));
            break;
          default:
            acc[i] = maximum(acc[i], where(mask, x, full({}, -INFINITY, st.compute)));
            if (st.reduce == R::Max) nan[i] = maximum(nan[i], where(mask & (x != x), 1, 0));
            break;
        }
      }
      for (size_t k : outputs) {
        const Tile v = value(spec.outputs[k]).to(outs[k].dtype());
        store(outs[k] + offs, v, mask);
      }
    });
    for (size_t i = 0; i < reductions.size(); ++i) {
      const auto& st = spec.steps[reductions[i]];
      Tile r;
      switch (st.reduce) {
        case R::Sum:
          r = sum(acc[i]);
          break;
        case R::Mean:
          r = sum(acc[i]) / row_len.to(st.compute);
          break;
        case R::Min:
          r = min(acc[i]);
          break;
        default:
          r = max(acc[i]);
          break;
      }
      if (st.reduce == R::Max || st.reduce == R::Min)
        r = where(max(nan[i]) > 0, full({}, NAN, st.compute), r);
      row_val[reductions[i]] = r.to(st.result);
    }
  }
  for (size_t k = 0; k < spec.outputs.size(); ++k) {
    const size_t s = spec.outputs[k];
    if (spec.steps[s].row) store(outs[k] + pid, row_value(s).to(outs[k].dtype()));
  }
}

}  // namespace

std::unique_ptr<JITFunction> make_pointwise_kernel(PointwiseSpec spec) {
  using Kind = JITFunction::ParamSpec::Kind;
  auto s = std::make_unique<detail::KernelState>();
  s->name = spec.name;
  const size_t ncols = spec.column_sums.size();
  TS_INTERNAL_ASSERT(ncols == 0 || (spec.row_block > 0 && !spec.looped))
      << "make_pointwise_kernel: column sums need rows held whole";
  for (size_t k = 0; k < spec.outputs.size(); ++k)
    s->params.push_back({"out" + std::to_string(k), Kind::Pointer});
  for (size_t k = 0; k < ncols; ++k)
    s->params.push_back({"col" + std::to_string(k), Kind::Pointer});
  for (size_t k = 0; k < spec.inputs.size(); ++k)
    s->params.push_back({"in" + std::to_string(k), Kind::Pointer});
  s->params.push_back({"n", Kind::Int});
  const bool rows = spec.row_block > 0;
  if (rows) s->params.push_back({"N", Kind::Int});
  if (ncols) s->params.push_back({"R", Kind::Int});
  size_t nints = 0;  // as the closure reads them: each input's sizes, strides, last stride
  for (const auto& in : spec.inputs) {
    for (size_t k = int_params(in); k > 0; --k)
      s->params.push_back({"i" + std::to_string(nints++), Kind::Int});
  }
  s->params.push_back({"BLOCK", Kind::Constexpr});
  if (ncols) s->params.push_back({"ROWS", Kind::Constexpr});
  s->no_specialize.assign(s->params.size(), false);
  s->closure = [spec = std::move(spec), nints, rows, ncols](const Tile* params) {
    const Tile* outs = params;
    const Tile* cols = outs + spec.outputs.size();
    const Tile* ins = cols + ncols;
    const Tile& n = ins[spec.inputs.size()];
    const Tile* row_len = rows ? &n + 1 : nullptr;
    const Tile* row_count = ncols ? &n + 2 : nullptr;
    const Tile* ints = &n + (rows ? 2 : 1) + (ncols ? 1 : 0);
    const Tile& block = ints[nints];
    Tile pid = program_id(0);
    if (spec.wide) pid = pid.to(DType::Int64);
    if (rows && spec.looped) return looped_rows(spec, outs, ins, *row_len, ints, block, pid);
    // One row (rows) or block (flat) of the space: loads, steps, stores. `live`: the row exists
    // (column sums: a program's last rows may not).
    auto one = [&](const Tile& pid, const std::optional<Tile>& live) {
      Tile offs, mask, j;  // the elements' indices in the space, which exist, the index in the row
      if (rows) {
        j = arange(0, block);
        mask = j < *row_len;
        if (live) mask = mask & *live;
        offs = pid * *row_len + j;
      } else {
        offs = pid * block + arange(0, block);
        mask = offs < n;
      }
      std::vector<Tile> loaded;
      size_t next = 0;
      for (size_t k = 0; k < spec.inputs.size(); ++k) {
        const auto& in = spec.inputs[k];
        if (in.split) {
          const Tile at = index_map(pid, in, ints, next);
          loaded.push_back(load(ins[k] + (at + j * fused_int(in.last_stride, ints, next)), mask));
          continue;
        }
        if (in.row) {
          const Tile at = ins[k] + index_map(pid, in, ints, next);
          loaded.push_back(live ? load(at, *live) : load(at));
          continue;
        }
        loaded.push_back(load(ins[k] + index_map(offs, in, ints, next), mask));
      }
      std::vector<Tile> steps;
      for (const auto& st : spec.steps) {
        std::vector<Tile> operands;
        for (const auto& o : st.operands) {
          switch (o.kind) {
            case PointwiseSpec::Operand::Kind::Input:
              operands.push_back(loaded[o.index]);
              break;
            case PointwiseSpec::Operand::Kind::Step:
              operands.push_back(steps[o.index]);
              break;
            case PointwiseSpec::Operand::Kind::Constant:
              operands.push_back(scalar_tile(o.value, o.dtype));
              break;
          }
        }
        if (st.reduce != PointwiseSpec::Reduce::None) {
          steps.push_back(
              reduce_row(st.reduce, operands[0], mask, *row_len, st.compute).to(st.result));
          continue;
        }
        steps.push_back(apply_step(st, operands));
      }
      for (size_t k = 0; k < spec.outputs.size(); ++k) {
        const auto& st = spec.steps[spec.outputs[k]];
        const Tile v = steps[spec.outputs[k]].to(outs[k].dtype());
        if (!st.row) {
          store(outs[k] + offs, v, mask);
        } else if (live) {
          store(outs[k] + pid, v, *live);
        } else {
          store(outs[k] + pid, v);
        }
      }
      return std::make_pair(std::move(steps), mask);
    };
    if (ncols == 0) {
      one(pid, std::nullopt);
      return;
    }
    // Column sums: program p holds rows [p * ROWS, (p + 1) * ROWS), adds each column-summed
    // step's row into an accumulator, and stores the sums at cols[k] + p * N (a second pass adds
    // the programs' partial sums).
    const Tile& rows_per_program = ints[nints + 1];  // ROWS, after BLOCK
    const Tile j = arange(0, block);
    std::vector<std::unique_ptr<Var>> acc;
    for (size_t k = 0; k < ncols; ++k)
      acc.push_back(std::make_unique<Var>(zeros({block}, cols[k].dtype())));
    range(0, rows_per_program, 1, [&](Tile r) {
      const Tile row = pid * rows_per_program + (spec.wide ? r.to(DType::Int64) : r);
      auto [steps, mask] = one(row, row < *row_count);
      for (size_t k = 0; k < ncols; ++k) {
        const Tile v = steps[spec.column_sums[k]].to(cols[k].dtype());
        *acc[k] = *acc[k] + where(mask, v, zeros({}, cols[k].dtype()));
      }
    });
    for (size_t k = 0; k < ncols; ++k)
      store(cols[k] + (pid * *row_len + j), Tile(*acc[k]), j < *row_len);
  };
  return detail::JITAccess::make(std::move(s));
}

}  // namespace tessera::tl
