#include "compile/capture.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <unordered_map>

#include "compile/joint.h"
#include "ir/coverage.h"
#include "tessera/autograd.h"
#include "tessera/detail/boxing.h"
#include "tessera/detail/local_state.h"
#include "tessera/env.h"
#include "tessera/ops.h"
#include "tessera/tl.h"
#include "tl/jit.h"
#include "tl/launch_op.h"
#include "tl/variants.h"

namespace tessera::compile_detail {

using namespace tessera::compiler;

namespace {

[[noreturn]] void graph_break(const std::string& cause, SourceLoc loc) {
  std::ostringstream os;
  os << "graph break: " << cause;
  throw GraphBreakError(os.str(), loc);
}

// What a segmented trace (run_segmented) does where a whole-graph trace breaks.
class BreakHandler {
 public:
  virtual ~BreakHandler() = default;
  /** The real tensor a traced one stands for (an argument, an earlier segment's result), or null
   * when it is not bound. */
  virtual const Tensor* bound(const Tensor& traced) = 0;
  /** A bound tensor became the current graph's next input. */
  virtual void input_added(const Tensor& real) = 0;
  /** Runs `op` (its `nargs` arguments on `stack`) on real tensors, the graph so far first; its
   * results go back on the stack as traced tensors bound to them. */
  virtual void run_eagerly(const OperatorHandle& op, Stack& stack, size_t nargs) = 0;
};

class Tracer final : public DispatchMode {
 public:
  Tracer(Graph& g, bool grad_inputs) : g_(&g), grad_inputs_(grad_inputs) {}

  /** A segmented trace: data reads and operators that cannot be traced go to `b`, and tensors
   * bound to real ones (the arguments, earlier segments' results) become the graph's inputs. */
  void set_breaks(BreakHandler* b) { breaks_ = b; }
  /** Starts tracing into a new graph (the next segment): the earlier graph's values are gone. */
  void start(Graph& g) {
    g_ = &g;
    by_impl_.clear();
    storages_.clear();
    keep_.clear();
  }
  /** The values made in this graph that a tensor outside the trace still refers to (the user's
   * function holds it), each with the traced tensors that are it, by value id. */
  std::map<int, std::vector<Tensor>> held_values() const {
    std::unordered_map<const TensorImpl*, uint32_t> own;  // references the tracer holds
    for (const Tensor& t : keep_) ++own[t.impl()];
    std::map<int, std::vector<Tensor>> held;
    for (const Tensor& t : keep_) {
      const int id = by_impl_.at(t.impl());
      if (g_->values[static_cast<size_t>(id)].producer < 0) continue;
      if (t.impl()->use_count() > own[t.impl()]) held[id].push_back(t);
    }
    return held;
  }
  /** Whether an operator's shape function is running (its node half built: no segment may end
   * now, so a read of data fails and the operator runs eagerly instead). */
  bool in_shape_function() const { return in_shape_function_ > 0; }
  /** The traced tensors that are value `id`. */
  std::vector<Tensor> tensors_of(int id) const {
    std::vector<Tensor> out;
    for (const Tensor& t : keep_) {
      if (by_impl_.at(t.impl()) == id) out.push_back(t);
    }
    return out;
  }

  int add_tensor(const Tensor& t, int producer) {
    Value v;
    v.kind = Value::Kind::Tensor;
    v.tensor.dtype = t.dtype();
    v.tensor.device = t.device();
    for (const auto& s : t.sizes()) v.tensor.sizes.push_back(g_->env->expr_of(s));
    for (const auto& s : t.strides()) v.tensor.strides.push_back(g_->env->expr_of(s));
    v.tensor.offset = g_->env->expr_of(t.storage_offset());
    v.tensor.storage = storage_of(t);
    v.producer = producer;
    const int id = g_->add_value(std::move(v));
    by_impl_[t.impl()] = id;
    keep_.push_back(t);
    return id;
  }

  int value_of(const Tensor& t) {
    if (auto it = by_impl_.find(t.impl()); it != by_impl_.end()) return it->second;
    if (breaks_ && !t.has_data()) {
      if (const Tensor* real = breaks_->bound(t)) {  // a new input of this segment
        const int id = add_tensor(t, -1);
        g_->inputs.push_back(id);
        breaks_->input_added(*real);
        return id;
      }
    }
    if (!t.has_data()) {
      // Autograd hands out aliases of traced tensors (a saved result, an input returned as is):
      // a new TensorImpl with a traced one's storage and geometry is that value.
      const int id = alias_of(t);
      TS_CHECK(id >= 0, CompileError) << "a fake tensor from outside this trace reached the graph";
      by_impl_[t.impl()] = id;
      keep_.push_back(t);
      return id;
    }
    // A real tensor the function closes over: an implicit input, guarded by identity.
    const int id = add_tensor(t, -1);
    g_->captured.push_back(t);
    g_->captured_values.push_back(id);
    return id;
  }

  Arg arg_of(const IValue& v) {
    Arg a;
    if (v.is_tensor()) {
      if (!v.to_tensor().defined()) {
        a.kind = Arg::Kind::Constant;
        return a;
      }
      a.kind = Arg::Kind::Value;
      a.value = value_of(v.to_tensor());
    } else if (v.is_tensor_list()) {
      a.kind = Arg::Kind::ValueList;
      for (const auto& t : v.to_tensor_list()) a.values.push_back(value_of(t));
    } else if (v.is_optional_tensor_list()) {
      a.kind = Arg::Kind::ValueList;
      a.optional_list = true;
      for (const auto& t : v.to_optional_tensor_list())
        a.values.push_back(t && t->defined() ? value_of(*t) : -1);
    } else if (v.is_symint() && v.to_symint().is_symbolic()) {
      a.kind = Arg::Kind::Sym;
      a.expr = g_->env->expr_of(v.to_symint());
    } else if (v.is_symint_list() && any_symbolic(v.to_symint_list())) {
      a.kind = Arg::Kind::SymList;
      for (const auto& s : v.to_symint_list()) a.exprs.push_back(g_->env->expr_of(s));
    } else {
      a.kind = Arg::Kind::Constant;
      a.constant = v;
    }
    return a;
  }

  void handle(const OperatorHandle& op, Stack& stack) override {
    const auto& schema = op.schema();
    const size_t nargs = schema.arguments().size();
    const SourceLoc loc = UserLocGuard::current();
    if (loc.known()) g_->env->last_loc = loc;
    IValue* args = &stack[stack.size() - nargs];
    if (tl::is_kernel_launch(op)) {
      // A kernel launch (DESIGN.md D12): recorded as a kernel node instead of run.
      const tl::LaunchView launch = tl::launch_of(stack);
      on_launch(*launch.launcher, ArrayRef<tl::KernelArg>(launch.args.data(), launch.args.size()));
      stack.resize(stack.size() - nargs);
      return;
    }
    if (op.has_tag(kTagDataDependent)) {
      if (breaks_) return breaks_->run_eagerly(op, stack, nargs);
      graph_break("reading tensor data (" + op.name() + ")", loc);
    }
    if (op.has_tag(kTagTritonOp) && !grad_inputs_) {
      // Trace into the body: its operators and kernel launches become the graph's nodes. The
      // body is the op's fake kernel; run it with this mode visible again.
      ModeGuard again(this, ModeKind::Dispatch);
      const KernelFunction& k = op.entry().kernel(DeviceType::Meta);
      k.boxed(op.entry(), k.functor, stack);
      return;
    }
    Node n;
    n.kind = op.has_tag(kTagCustomOp) ? Node::Kind::Extern : Node::Kind::Op;
    n.op = op;
    n.loc = loc;
    for (size_t i = 0; i < nargs; ++i) {
      Arg a = arg_of(args[i]);
      a.name = schema.arguments()[i].name;
      if (schema.arguments()[i].is_written() && a.kind == Arg::Kind::Value)
        n.writes.push_back(a.value);
      n.args.push_back(std::move(a));
    }
    // The shape function runs, with this mode hidden: kernels its body launches record nothing.
    std::vector<IValue> saved;
    const size_t base = stack.size() - nargs;
    if (breaks_) saved.assign(args, args + nargs);
    auto eagerly = [&] {  // a segmented trace runs it on real tensors between two segments
      stack.resize(base);
      for (IValue& v : saved) stack.push_back(std::move(v));
      breaks_->run_eagerly(op, stack, nargs);
    };
    try {
      ++in_shape_function_;
      op.redispatch(stack);
      --in_shape_function_;
    } catch (const DataError&) {
      --in_shape_function_;
      if (!breaks_) throw;
      return eagerly();  // a shape function that reads its inputs' values
    } catch (const NotImplementedError& e) {
      --in_shape_function_;
      if (breaks_) return eagerly();
      if (op.has_tag(kTagCustomOp)) {
        graph_break("the custom operator " + op.name() +
                        " has no fake kernel to compute its result shapes "
                        "(register one with register_fake)",
                    loc);
      }
      graph_break(std::string("the operator cannot run on fake tensors: ") + e.message(), loc);
    }
    const size_t nret = schema.returns().size();
    const int index = static_cast<int>(g_->nodes.size());
    for (size_t i = 0; i < nret; ++i) {
      const IValue& r = stack[stack.size() - nret + i];
      if (r.is_tensor() && r.to_tensor().defined()) {
        const Tensor& t = r.to_tensor();
        auto it = by_impl_.find(t.impl());
        n.outputs.push_back(it != by_impl_.end() ? it->second : add_tensor(t, index));
        n.constant_outputs.emplace_back();
      } else {
        TS_CHECK(!r.is_tensor_list(), NotImplementedError)
            << "[" << op.name()
            << "] operators returning tensor lists are not supported by the graph compiler yet";
        n.outputs.push_back(-1);
        n.constant_outputs.push_back(r);
      }
    }
    g_->nodes.push_back(std::move(n));
  }

  // A kernel launch (DESIGN D12): a kernel node with one variant per config, its exact write
  // set from the IR, and its grid as expressions of the symbolic sizes.
  void on_launch(const tl::Launcher& launch, ArrayRef<tl::KernelArg> args) {
    const tl::JITFunction& fn = launch.function();
    const SourceLoc loc = launch.location();
    if (loc.known()) g_->env->last_loc = loc;
    Node n;
    n.kind = Node::Kind::Kernel;
    n.kernel = &fn;
    n.loc = loc;
    // The same arguments with symbolic integers replaced by their values while tracing: the
    // launch is bound and its specializations compiled now, for the IR's write set.
    std::vector<tl::KernelArg> hinted(args.begin(), args.end());
    std::vector<bool> symbolic(args.size(), false);
    for (size_t i = 0; i < args.size(); ++i) {
      n.args.push_back(launch_arg(args[i], loc, hinted[i]));
      symbolic[i] = n.args.back().kind == Arg::Kind::Sym;
    }
    // An autotuned or heuristic launch: one variant per config, heuristics evaluated now (a
    // heuristic that reads a size specializes it, with a guard). All variants are compiled in one
    // batch; the tuning itself happens on the first call with real tensors, once per key.
    const tl::VariantSource* tuned = tl::variant_source(launch);
    std::vector<tl::Variant> cands(1);
    if (tuned) cands = *tuned->variants(args, loc);
    std::vector<std::vector<tl::KernelArg>> cand_args;
    SmallVector<tl::KernelArg, 16> with;
    for (const auto& c : cands) {
      tl::with_variant(ArrayRef<tl::KernelArg>(hinted.data(), hinted.size()), c, loc, with);
      cand_args.emplace_back(with.begin(), with.end());
    }
    tl::PreparedVariants prepared(fn, std::move(cand_args), loc, /*tolerate_failures=*/tuned);
    prepared.build();
    const std::vector<int> param_of = param_positions(fn, args);
    for (size_t j = 0; j < prepared.size(); ++j) {
      if (!prepared.kernel(j)) continue;
      mark_writes(n, fn, prepared, j, args, hinted);
      const tl::Grid grid = symbolic_grid(launch, *prepared.kernel(j), args, symbolic, param_of);
      Node::Variant v;
      v.cand = cands[j];
      for (int d = 0; d < 3; ++d) v.grid[d] = g_->env->expr_of(grid.dims[d]);
      mark_coverage(n, fn, prepared, j, args, hinted, param_of, v.grid, n.variants.empty());
      n.variants.push_back(std::move(v));
    }
    if (n.variants.empty()) {
      std::string all;
      for (size_t c = 0; c < cands.size(); ++c)
        all += "\n  candidate " + std::to_string(c) + ": " + prepared.error(c);
      TS_ERROR(CompileError) << "[kernel " << fn.name()
                             << "] every autotuning config failed:" << all;
    }
    for (int d = 0; d < 3; ++d) n.grid[d] = n.variants[0].grid[d];
    if (tuned) {
      n.tuned = tuned->shared();
    } else {
      n.variants.clear();
    }
    g_->nodes.push_back(std::move(n));
  }

  // One launch argument as a node argument; `hinted` gets symbolic integers' traced values.
  Arg launch_arg(const tl::KernelArg& k, SourceLoc loc, tl::KernelArg& hinted) {
    Arg a;
    switch (k.kind) {
      case tl::KernelArg::Kind::Tensor:
        if (!k.tensor->defined()) break;
        a.kind = Arg::Kind::Value;
        a.value = value_of(*k.tensor);
        break;
      case tl::KernelArg::Kind::Int:
        if (k.sym.is_symbolic()) {
          a.kind = Arg::Kind::Sym;
          a.expr = g_->env->expr_of(k.sym);
          hinted = tl::KernelArg(g_->env->hint(a.expr), loc);
        } else {
          a.constant = IValue(k.sym.expect_int());
        }
        break;
      case tl::KernelArg::Kind::Float:
        a.constant = IValue(k.f);
        break;
      case tl::KernelArg::Kind::Bool:
        a.constant = IValue(k.i != 0);
        break;
      case tl::KernelArg::Kind::DType:
        a.constant = IValue(k.dtype);
        break;
      case tl::KernelArg::Kind::Meta:
        a.role = Arg::Role::Meta;
        a.name = std::string(k.meta.name);
        switch (k.meta.kind) {
          case tl::MetaArg::Kind::Int:
            a.constant = IValue(k.meta.i);
            break;
          case tl::MetaArg::Kind::Float:
            a.constant = IValue(k.meta.f);
            break;
          case tl::MetaArg::Kind::Bool:
            a.constant = IValue(k.meta.i != 0);
            break;
          case tl::MetaArg::Kind::DType:
            a.constant = IValue(k.meta.dtype);
            break;
        }
        break;
      case tl::KernelArg::Kind::Option:
        a.role = Arg::Role::Option;
        a.option = k.option.kind;
        a.name = k.option.name();
        a.constant = IValue(k.option.value);
        break;
    }
    return a;
  }

  // Positional arguments -> parameters (as the binding assigns them), for symbolic grid meta.
  static std::vector<int> param_positions(const tl::JITFunction& fn, ArrayRef<tl::KernelArg> args) {
    const auto& params = fn.params();
    std::vector<int> param_of(args.size(), -1);
    std::vector<bool> set(params.size(), false);
    size_t pos = 0;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].kind == tl::KernelArg::Kind::Option) continue;
      if (args[i].kind == tl::KernelArg::Kind::Meta) {
        for (size_t p = 0; p < params.size(); ++p) {
          if (params[p].name == args[i].meta.name) set[p] = true;
        }
        continue;
      }
      while (pos < set.size() && set[pos]) ++pos;
      if (pos < set.size()) {
        param_of[i] = static_cast<int>(pos);
        set[pos] = true;
      }
    }
    return param_of;
  }

  // The exact write set from variant j's IR (the node's is the union over variants); a written
  // argument must not overlap itself.
  void mark_writes(Node& n, const tl::JITFunction& fn, const tl::PreparedVariants& prepared,
                   size_t j, ArrayRef<tl::KernelArg> args,
                   const std::vector<tl::KernelArg>& hinted) {
    const auto& kernel = *prepared.kernel(j);
    const auto& params = fn.params();
    for (size_t p = 0; p < params.size(); ++p) {
      const Tensor* bound = prepared.param_tensor(j, p);
      if (!bound) continue;
      if (p < kernel.read.size() && kernel.read[p]) {
        for (size_t i = 0; i < args.size(); ++i) {
          if (args[i].kind == tl::KernelArg::Kind::Tensor && hinted[i].tensor == bound)
            n.args[i].read = true;
        }
      }
      if (p >= kernel.written.size() || !kernel.written[p]) continue;
      for (size_t i = 0; i < args.size(); ++i) {
        if (args[i].kind != tl::KernelArg::Kind::Tensor || hinted[i].tensor != bound) continue;
        Arg& a = n.args[i];
        if (a.written) continue;
        a.written = true;
        n.writes.push_back(a.value);
        const Tensor& t = *args[i].tensor;
        for (int64_t d = 0; d < t.dim(); ++d) {
          const int64_t size = g_->env->hint(g_->env->expr_of(t.sizes()[d]));
          const int64_t stride = g_->env->hint(g_->env->expr_of(t.strides()[d]));
          if (size > 1 && stride == 0) {
            TS_ERROR(CompileError)
                << "[kernel " << fn.name() << "] stores through parameter '" << params[p].name
                << "', whose tensor overlaps itself (dimension " << d
                << " is expanded): clone it before the launch";
          }
        }
      }
    }
  }

  // What variant j's stores cover of each written tensor (ir/coverage): a condition on the sizes
  // under which every element is stored, and-ed over the variants (the dead-fill proof).
  void mark_coverage(Node& n, const tl::JITFunction& fn, const tl::PreparedVariants& prepared,
                     size_t j, ArrayRef<tl::KernelArg> args,
                     const std::vector<tl::KernelArg>& hinted, const std::vector<int>& param_of,
                     const sym::ExprPtr (&grid)[3], bool first) {
    const auto& kernel = *prepared.kernel(j);
    if (!kernel.function) return;
    const auto& params = fn.params();
    const std::vector<ir::StoreCoverage> cover = ir::store_coverage(*kernel.function);
    // As traced (what the fused kernels' hooks see), not as optimized.
    const std::vector<bool>& direct = kernel.direct_stores;
    const std::vector<bool>& direct_loads = kernel.direct_loads;
    for (size_t p = 0; p < params.size(); ++p) {
      const Tensor* bound = prepared.param_tensor(j, p);
      for (size_t i = 0; bound && i < args.size(); ++i) {
        if (args[i].kind != tl::KernelArg::Kind::Tensor || hinted[i].tensor != bound) continue;
        Arg& a = n.args[i];
        a.direct_load = (first || a.direct_load) && p < direct_loads.size() && direct_loads[p];
      }
    }
    std::vector<bool> seen(n.args.size(), false);
    for (size_t p = 0; p < params.size() && p < cover.size(); ++p) {
      const Tensor* bound = prepared.param_tensor(j, p);
      if (!bound) continue;
      for (size_t i = 0; i < args.size(); ++i) {
        if (args[i].kind != tl::KernelArg::Kind::Tensor || hinted[i].tensor != bound) continue;
        Arg& a = n.args[i];
        if (!a.written || seen[i]) continue;
        seen[i] = true;
        std::string why;
        sym::ExprPtr limit = nullptr;
        sym::ExprPtr c = cover_condition(cover[p], a, n.args, param_of, grid, why, limit);
        if (!c && a.cover_note.empty()) {
          a.cover_note =
              "kernel " + fn.name() + " stores through '" + params[p].name + "', but " + why;
        }
        auto& ctx = g_->env->ctx;
        a.covers = first ? c : (c && a.covers ? ctx.logical_and(a.covers, c) : nullptr);
        a.cover_limit = first || !a.cover_limit ? limit
                        : limit                 ? ctx.logical_and(a.cover_limit, limit)
                                                : a.cover_limit;
        a.direct = (first || a.direct) && p < direct.size() && direct[p];
      }
    }
  }

  // The condition under which a proven coverage holds every element of the tensor `a`: dense,
  // and N <= min(G * tile, bound) for its N elements; `limit`: N within the offsets' width.
  sym::ExprPtr cover_condition(const ir::StoreCoverage& c, const Arg& a,
                               const std::vector<Arg>& all, const std::vector<int>& param_of,
                               const sym::ExprPtr (&grid)[3], std::string& why,
                               sym::ExprPtr& limit) {
    if (!c.proven) {
      why = c.why_not;
      return nullptr;
    }
    auto& ctx = g_->env->ctx;
    const TensorInfo& t = g_->values[static_cast<size_t>(a.value)].tensor;
    if (!g_->contiguous(t)) {
      why = "the tensor is not contiguous";
      return nullptr;
    }
    sym::ExprPtr expected = ctx.constant(1);
    for (auto* size : t.sizes) expected = ctx.mul(expected, size);
    const sym::ExprPtr numel = expected;
    sym::ExprPtr ok = ctx.boolean(true);
    for (int d = 0; d < 3; ++d) {
      if (d != c.axis) ok = ctx.logical_and(ok, ctx.ge(grid[d], ctx.constant(1)));
    }
    const sym::ExprPtr programs = c.axis >= 0 ? grid[c.axis] : ctx.constant(1);
    ok = ctx.logical_and(ok, ctx.ge(ctx.mul(programs, ctx.constant(c.tile)), numel));
    if (c.bounded) {
      sym::ExprPtr bound = ctx.constant(c.bound_constant);
      if (c.bound_param >= 0) {
        const auto it = std::find(param_of.begin(), param_of.end(), c.bound_param);
        const Arg* b =
            it == param_of.end() ? nullptr : &all[static_cast<size_t>(it - param_of.begin())];
        if (b && b->kind == Arg::Kind::Sym) {
          bound = ctx.add(bound, b->expr);
        } else if (b && b->kind == Arg::Kind::Constant && b->constant.is_int()) {
          bound = ctx.add(bound, ctx.constant(b->constant.to_int()));
        } else {
          why = "its mask's bound is not an integer argument of the launch";
          return nullptr;
        }
      }
      ok = ctx.logical_and(ok, ctx.ge(bound, numel));
    }
    if (c.offset_bits < 64) {
      limit = ctx.le(numel, ctx.constant((int64_t(1) << (c.offset_bits - 1)) - 1));
      if (limit->kind == sym::Kind::BoolConst && limit->value) limit = nullptr;
    }
    return ctx.logical_or(ctx.eq(numel, ctx.constant(0)), ok);
  }

  // The grid, symbolically: a grid function sees symbolic integer arguments (reading one
  // specializes it, with a guard).
  static tl::Grid symbolic_grid(const tl::Launcher& launch, const tl::detail::CompiledKernel& k,
                                ArrayRef<tl::KernelArg> args, const std::vector<bool>& symbolic,
                                const std::vector<int>& param_of) {
    if (!launch.grid_fn()) return launch.grid();
    tl::Meta meta = k.meta;
    for (size_t i = 0; i < args.size(); ++i) {
      if (!symbolic[i] || param_of[i] < 0 ||
          static_cast<size_t>(param_of[i]) >= meta.entries.size())
        continue;
      meta.entries[static_cast<size_t>(param_of[i])].symbolic = args[i].sym;
      meta.entries[static_cast<size_t>(param_of[i])].is_symbolic = true;
    }
    return (*launch.grid_fn())(meta);
  }

 private:
  int storage_of(const Tensor& t) {
    auto [it, fresh] = storages_.emplace(t.impl()->storage(), static_cast<int>(storages_.size()));
    return it->second;
  }

  // The latest traced value with `t`'s storage, dtype and geometry, or -1.
  int alias_of(const Tensor& t) {
    auto st = storages_.find(t.impl()->storage());
    if (st == storages_.end()) return -1;
    auto same = [&](const std::vector<sym::ExprPtr>& e, SymIntArrayRef v) {
      if (e.size() != v.size()) return false;
      for (size_t i = 0; i < e.size(); ++i) {
        if (e[i] != g_->env->expr_of(v[i])) return false;
      }
      return true;
    };
    for (size_t v = g_->values.size(); v-- > 0;) {
      const Value& val = g_->values[v];
      if (val.kind != Value::Kind::Tensor || val.tensor.storage != st->second) continue;
      if (val.tensor.dtype == t.dtype() && same(val.tensor.sizes, t.sizes()) &&
          same(val.tensor.strides, t.strides()) &&
          val.tensor.offset == g_->env->expr_of(t.storage_offset()))
        return static_cast<int>(v);
    }
    return -1;
  }

  Graph* g_;
  int in_shape_function_ = 0;
  bool grad_inputs_;
  BreakHandler* breaks_ = nullptr;
  std::unordered_map<const TensorImpl*, int> by_impl_;
  std::unordered_map<const StorageImpl*, int> storages_;
  std::vector<Tensor> keep_;
};

// Installs the tracer for the duration of a trace.
struct TraceScope {
  TraceScope(Tracer& t) : mode(&t, ModeKind::Dispatch) {}
  ModeGuard mode;
};

// The sizes of tensor argument i's fake (the k-th tensor argument): static, or symbolic (sizes
// >= 2 of dense unaliased tensors under `.dynamic` or `.dynamic_dims`), equal sizes sharing one
// symbol (duck sizing). Records the sizes and symbols in the leaf's guard.
SymDimVector fake_sizes(const Tensor& t, size_t i, size_t k, bool static_only,
                        const CaptureOptions& opts, ShapeEnv& env, std::map<int64_t, SymInt>& duck,
                        Guards& guards, LeafGuard& lg) {
  const auto sizes = t.impl()->int_sizes();
  SymDimVector fsizes;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const bool dyn = !static_only && sizes[d] >= 2 &&
                     (opts.dynamic == true ||
                      opts.dynamic_dims->count({static_cast<int>(k), static_cast<int>(d)}));
    lg.sizes.push_back(dyn ? -1 : sizes[d]);
    if (!dyn) {
      lg.size_symbol.push_back(-1);
      fsizes.push_back(sizes[d]);
      continue;
    }
    auto it = duck.find(sizes[d]);
    if (it == duck.end()) {
      SymInt s = env.create_symbol(leaf_name(i) + ".size(" + std::to_string(d) + ")", sizes[d]);
      it = duck.emplace(sizes[d], s).first;
      guards.symbol_sources.push_back({i, static_cast<int>(d)});
    }
    const auto* node = dynamic_cast<SymExprNode*>(it->second.node().get());
    lg.size_symbol.push_back(node->expr()->symbol);
    fsizes.push_back(it->second);
  }
  return fsizes;
}

// Tensor argument i, which shares its storage with another argument: a view of the one fake
// storage made for that storage (static sizes).
Tensor shared_view(const Tensor& t, size_t i, const SymDimVector& fsizes, int64_t offset,
                   const CaptureOptions& opts, std::map<const StorageImpl*, Tensor>& shared_fakes) {
  const StorageImpl* st = t.impl()->storage();
  auto it = shared_fakes.find(st);
  if (it == shared_fakes.end()) {
    const int64_t elems = st->nbytes().expect_int() / static_cast<int64_t>(itemsize(t.dtype()));
    it = shared_fakes
             .emplace(st, detail::make_fake(SymDimVector{SymInt(elems)}, t.dtype(), t.device()))
             .first;
  }
  TS_CHECK(it->second.dtype() == t.dtype(), NotImplementedError)
      << "[" << opts.name << "] argument " << i
      << " shares memory with an argument of another dtype; the graph compiler does not "
         "support that yet";
  SymDimVector fstrides;
  for (const auto& st2 : t.impl()->int_strides()) fstrides.push_back(st2);
  return detail::make_view(it->second, fsizes, fstrides, offset);
}

// The traced stand-ins of the arguments (fake tensors with static or symbolic sizes; tensors
// sharing memory become views of one fake storage) and each leaf's guard.
std::vector<IValue> fake_arguments(const std::vector<IValue>& args, const CaptureOptions& opts,
                                   Graph& g, Guards& guards, Tracer& tracer, bool joint) {
  std::vector<IValue> fakes;
  ShapeEnv& env = *g.env;
  std::map<int64_t, SymInt> duck;  // equal sizes share a symbol (duck sizing)
  size_t tensor_index = 0;
  // The same tensor passed twice (`f(x, x)`: the same storage, offset, sizes and strides) is one
  // traced input: the later leaf's guard is a copy of the first's, which with the sharing guard
  // below requires the same tensor again, and its sizes may be symbolic. Other arguments sharing
  // memory are traced as views of one fake storage, with static sizes; the guards then require
  // the same sharing.
  std::vector<int> same_as(args.size(), -1);
  std::map<const StorageImpl*, int> storage_uses;
  for (size_t i = 0; i < args.size(); ++i) {
    const IValue& a = args[i];
    if (!a.is_tensor() || !a.to_tensor().defined() || !a.to_tensor().has_data()) continue;
    const TensorImpl* t = a.to_tensor().impl();
    for (size_t j = 0; j < i && same_as[i] < 0; ++j) {
      if (!args[j].is_tensor() || !args[j].to_tensor().defined() || same_as[j] >= 0) continue;
      const TensorImpl* u = args[j].to_tensor().impl();
      if (u->storage() == t->storage() && pack_key(u) == pack_key(t) && !t->has_symbolic_shape() &&
          !u->has_symbolic_shape() && u->int_offset() == t->int_offset() &&
          u->int_sizes().equals(t->int_sizes()) && u->int_strides().equals(t->int_strides()))
        same_as[i] = static_cast<int>(j);
    }
    if (same_as[i] < 0) ++storage_uses[t->storage()];
  }
  std::map<const StorageImpl*, Tensor> shared_fakes;
  for (size_t i = 0; i < args.size(); ++i) {
    const IValue& a = args[i];
    LeafGuard lg;
    if (!a.is_tensor() || !a.to_tensor().defined()) {
      lg.constant = a.is_tensor() ? IValue() : a;
      guards.leaves.push_back(lg);
      fakes.push_back(a);
      g.inputs.push_back(-1);
      continue;
    }
    const Tensor& t = a.to_tensor();
    TS_CHECK(t.has_data() && !t.impl()->has_symbolic_shape(), CompileError)
        << "[" << opts.name << "] argument " << i << " has no data (compile real tensors)";
    const size_t k = tensor_index++;
    if (same_as[i] >= 0) {  // the same tensor as an earlier argument: its input and its guard
      const auto first = static_cast<size_t>(same_as[i]);
      guards.leaves.push_back(guards.leaves[first]);
      g.inputs.push_back(g.inputs[first]);
      fakes.push_back(fakes[first]);
      continue;
    }
    lg.tensor = true;
    lg.dtype = t.dtype();
    lg.device = t.device();
    lg.dim = t.dim();
    lg.requires_grad = t.requires_grad();
    lg.offset = t.impl()->int_offset();
    lg.key = pack_key(t.impl());
    const bool aliased = storage_uses[t.impl()->storage()] > 1;
    const bool contiguous = t.is_contiguous();
    const SymDimVector fsizes =
        fake_sizes(t, i, k, aliased || !contiguous, opts, env, duck, guards, lg);
    lg.contiguous = contiguous && std::any_of(lg.size_symbol.begin(), lg.size_symbol.end(),
                                              [](int s) { return s >= 0; });
    if (!lg.contiguous) {
      for (const auto& st : t.impl()->int_strides()) lg.strides.push_back(st);
    }
    Tensor fake;
    if (aliased) {
      fake = shared_view(t, i, fsizes, lg.offset, opts, shared_fakes);
      if (joint && t.requires_grad()) fake.requires_grad_();
      guards.leaves.push_back(lg);
      g.inputs.push_back(tracer.add_tensor(fake, -1));
      fakes.emplace_back(fake);
      continue;
    }
    fake = lg.contiguous ? detail::make_fake(fsizes, t.dtype(), t.device())
                         : detail::make_fake(fsizes, t.dtype(), t.device(), t.strides());
    if (lg.offset != 0 || !lg.contiguous) {
      fake = detail::make_view(fake, fake.sizes(), lg.contiguous ? fake.strides() : t.strides(),
                               lg.offset);
    }
    if (joint && t.requires_grad()) fake.requires_grad_();
    guards.leaves.push_back(lg);
    g.inputs.push_back(tracer.add_tensor(fake, -1));
    fakes.emplace_back(fake);
  }
  for (size_t i = 0; i < guards.leaves.size(); ++i) {
    if (guards.leaves[i].tensor) guards.tensor_leaves.push_back(i);
  }
  // Aliasing among tensor arguments.
  for (size_t i = 0; i < args.size(); ++i) {
    for (size_t j = i + 1; j < args.size(); ++j) {
      if (!guards.leaves[i].tensor || !guards.leaves[j].tensor) continue;
      if (args[i].to_tensor().impl()->storage() == args[j].to_tensor().impl()->storage()) {
        guards.alias_pairs.push_back({i, j});
      }
    }
  }
  return fakes;
}

// The passes of a traced graph (also each half of a joint one), then its guards' program.
void optimize(Graph& g, bool fuse, bool fuse_builtins, bool plan_memory) {
  g.verify();
  g.eliminate_dead_code();
  g.eliminate_common_subexpressions();
  g.eliminate_dead_code();
  g.eliminate_dead_fills();
  if (fuse) {
    g.fuse_epilogues();
    if (fuse_builtins) {
      g.fuse_rows();
      g.fuse_pointwise();
    }
  }
  g.eliminate_dead_code();
  g.reuse_inputs_in_place();
  if (plan_memory) g.plan_memory();
  g.verify();
}

bool needs_grad(const Tensor& t) {
  return t.defined() && t.requires_grad();
}

// Whether grad mode decides what a trace records: a tensor argument or a closed-over tensor
// requires grad (returned). Records the closed-over tensors' flags and the mode in the guards.
bool guard_grad_mode(const std::vector<IValue>& args, const Graph& g, Guards& guards) {
  bool any = false;
  for (const IValue& a : args) any = any || (a.is_tensor() && needs_grad(a.to_tensor()));
  for (const Tensor& t : g.captured) {
    guards.captured_grad.emplace_back(t.impl(), (t.impl()->flags() & kTensorAutograd) != 0);
    any = any || needs_grad(t);
  }
  if (any) guards.grad_mode = grad_enabled() ? 1 : 0;
  return any;
}

// After the forward of a joint trace (nodes before `first_backward`): differentiates its
// results with respect to the inputs and closed-over tensors that require grad, on fake
// gradients, with the tracer still installed, so the backward formulas' operators become the
// graph's later nodes. Returns the backward's description (its graph still inside `g`), or null
// when no result is differentiable.
std::shared_ptr<BackwardGraph> trace_backward(Graph& g, Tracer& tracer,
                                              const std::vector<IValue>& fakes,
                                              const std::vector<IValue>& outs,
                                              std::vector<int>& grad_inputs,
                                              std::vector<int>& grads) {
  auto bw = std::make_shared<BackwardGraph>();
  bw->user_outputs = outs.size();
  std::vector<Tensor> diff, targets, seeds;
  std::set<int> seen;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].is_tensor() || !needs_grad(outs[i].to_tensor())) continue;
    const Tensor& t = outs[i].to_tensor();
    const int v = g.outputs[i];
    // An input returned as is keeps its own history; a result returned twice gets one gradient.
    if (g.values[static_cast<size_t>(v)].producer < 0 || !seen.insert(v).second) continue;
    bw->diff_outputs.push_back(i);
    diff.push_back(t);
    Tensor seed = detail::make_fake(t.sizes(), t.dtype(), t.device());
    grad_inputs.push_back(tracer.add_tensor(seed, -1));
    seeds.push_back(seed);
  }
  std::set<const TensorImpl*> taken;
  for (size_t i = 0; i < fakes.size(); ++i) {
    if (!fakes[i].is_tensor() || !needs_grad(fakes[i].to_tensor()) ||
        !taken.insert(fakes[i].to_tensor().impl()).second)
      continue;  // `f(x, x)`: one gradient, for the first position
    bw->grad_targets.push_back(static_cast<int>(i));
    targets.push_back(fakes[i].to_tensor());
  }
  for (size_t c = 0; c < g.captured.size(); ++c) {
    if (!needs_grad(g.captured[c])) continue;
    bw->grad_targets.push_back(-1 - static_cast<int>(c));
    targets.push_back(g.captured[c]);
  }
  if (diff.empty() || targets.empty()) return nullptr;
  TraceScope scope(tracer);
  const std::vector<Tensor> got = autograd::grad(diff, targets, seeds, /*retain_graph=*/false,
                                                 /*create_graph=*/false, /*allow_unused=*/true);
  for (const Tensor& t : got) grads.push_back(t.defined() ? tracer.value_of(t) : -1);
  return bw;
}

Captured capture_once(const Traced& fn, const std::vector<IValue>& args, const CaptureOptions& opts,
                      bool joint) {
  Captured captured;
  captured.graph = std::make_unique<Graph>();
  Graph& g = *captured.graph;
  Guards& guards = captured.guards;
  g.name = opts.name;
  g.env = IntrusivePtr<ShapeEnv>(new ShapeEnv());
  // Without a joint trace, triton_ops whose inputs require grad stay whole so that their
  // autograd formulas apply when the graph replays.
  bool grad_inputs = false;
  for (const IValue& a : args)
    grad_inputs = grad_inputs || (a.is_tensor() && needs_grad(a.to_tensor()));
  grad_inputs = grad_inputs && grad_enabled() && !joint;
  Tracer tracer(g, grad_inputs);
  const std::vector<IValue> fakes = fake_arguments(args, opts, g, guards, tracer, joint);
  std::vector<IValue> outs;
  try {
    TraceScope scope(tracer);
    outs = fn(fakes);
  } catch (const DataError& e) {
    // item(), data_ptr() and the like on a traced (fake) tensor: a graph break at that line.
    graph_break("reading tensor data (" + e.message() + ")", e.user_loc());
  }
  for (const IValue& o : outs) {
    if (o.is_tensor() && o.to_tensor().defined()) {
      g.outputs.push_back(tracer.value_of(o.to_tensor()));
      g.constant_outputs.emplace_back();
    } else {
      g.outputs.push_back(-1);
      g.constant_outputs.push_back(o.is_tensor() ? IValue() : o);
    }
  }
  std::shared_ptr<BackwardGraph> bw;
  std::vector<int> grad_inputs_v, grads;
  const size_t first_backward = g.nodes.size();
  if (joint) bw = trace_backward(g, tracer, fakes, outs, grad_inputs_v, grads);
  const bool grad = guard_grad_mode(args, g, guards);
  if (bw) {
    // The graph is the forward (returning what the backward reads after its results) and a
    // backward graph of its own; each is optimized alone, and both replay without autograd.
    bw->graph = split_backward(g, first_backward, grad_inputs_v, grads);
    optimize(*bw->graph, opts.fuse, true, opts.plan_memory);
    bw->guards.finish(*bw->graph);
    optimize(g, opts.fuse, true, opts.plan_memory);
    captured.backward = std::move(bw);
  } else {
    // Without a backward graph the replay is what autograd records: with grad, built-in ops stay
    // as called (fused kernels record nothing), unless no result needs a gradient.
    bool differentiable = !joint;  // a trace without autograd cannot tell
    for (const IValue& o : outs)
      differentiable = differentiable || (o.is_tensor() && needs_grad(o.to_tensor()));
    // (Memory planning neither: the tensors autograd saves must keep their bytes.)
    const bool records = grad && grad_enabled() && differentiable;
    optimize(g, opts.fuse, !records, opts.plan_memory && !records);
  }
  guards.finish(g);
  if (knobs().log_enabled("graph")) {
    log("graph", g.str());
    if (captured.backward) log("graph", captured.backward->graph->str());
  }
  return captured;
}

// A function traced in segments (run_segmented): the trace goes on past a data read. The graph
// traced so far runs on the real tensors (compiled, from the cache), its results that the
// function still holds are bound to their traced stand-ins, the read happens on real data, and
// the next segment starts with those stand-ins as its inputs. The segments of a call share one
// shape environment: the arguments' dimensions that `opts` makes dynamic are symbols in all of
// them (sizes computed from data are plain numbers).
class Segmenter final : public BreakHandler, public detail::TracedData {
 public:
  Segmenter(SegmentCache& cache, const CaptureOptions& opts, const std::vector<IValue>& args)
      : cache_(cache),
        opts_(opts),
        outer_(detail::local_state()),
        env_(new ShapeEnv()),
        graph_(new_graph()),
        tracer_(*graph_, grad_inputs(args)) {
    tracer_.set_breaks(this);
    static const std::set<std::pair<int, int>> none;
    if (!opts_.dynamic_dims) opts_.dynamic_dims = &none;
    Guards unused;
    fakes_ = fake_arguments(args, opts_, *graph_, unused, tracer_, false);
    inputs_ = args;
    for (size_t i = 0; i < args.size(); ++i) {
      if (fakes_[i].is_tensor() && fakes_[i].to_tensor().defined())
        bind(fakes_[i].to_tensor(), args[i].to_tensor());
    }
  }

  std::vector<IValue> run(const Traced& fn) {
    std::vector<IValue> outs;
    {
      TraceScope scope(tracer_);
      detail::TracedDataScope data(this);
      outs = fn(fakes_);
    }
    std::vector<Tensor> results;  // the last segment's outputs
    for (const IValue& o : outs) {
      if (o.is_tensor() && o.to_tensor().defined() && !o.to_tensor().has_data() &&
          !bound_.count(o.to_tensor().impl()))
        results.push_back(o.to_tensor());
    }
    flush(results, "the return", /*only=*/true);
    for (IValue& o : outs) {
      if (o.is_tensor() && o.to_tensor().defined() && !o.to_tensor().has_data())
        o = IValue(real_of(o.to_tensor()));
    }
    return outs;
  }

  // ---- BreakHandler ----
  const Tensor* bound(const Tensor& traced) override {
    auto it = bound_.find(traced.impl());
    return it == bound_.end() ? nullptr : &it->second.second;
  }
  void input_added(const Tensor& real) override { inputs_.emplace_back(real); }
  void run_eagerly(const OperatorHandle& op, Stack& stack, size_t nargs) override {
    const size_t base = stack.size() - nargs;
    const std::string at = op.name() + where();
    for (size_t i = base; i < stack.size(); ++i) stack[i] = realize(stack[i], at);
    {
      Outside out(*this);
      op.call(stack);
    }
    for (size_t i = base; i < stack.size(); ++i) {
      IValue& r = stack[i];
      if (r.is_tensor() && r.to_tensor().defined()) {
        r = IValue(wrap(r.to_tensor()));
      } else if (r.is_tensor_list()) {
        std::vector<Tensor> wrapped;
        for (const Tensor& t : r.to_tensor_list()) wrapped.push_back(t.defined() ? wrap(t) : t);
        r = IValue(std::move(wrapped));
      }
    }
  }

  // ---- TracedData ----
  Scalar item(const Tensor& traced, SourceLoc loc) override {
    check_not_in_shape_function("item");
    const Tensor real = real_of(traced, "item()" + where(loc));
    Outside out(*this);
    return real.item(loc);
  }
  void* data_ptr(const Tensor& traced) override {
    check_not_in_shape_function("data_ptr");
    return real_of(traced, "data_ptr()" + where()).data_ptr();
  }

 private:
  void check_not_in_shape_function(const char* what) const {
    TS_CHECK(!tracer_.in_shape_function(), DataError)
        << "[" << what << "] a shape function read a traced tensor's data";
  }

  // The state outside the trace (the tracer hidden, autograd on top), with this grad mode.
  struct Outside {
    explicit Outside(const Segmenter& s) : guard(with_grad(s.outer_), UserLocGuard::current()) {}
    static detail::LocalState with_grad(detail::LocalState st) {
      st.grad_enabled = grad_enabled();
      return st;
    }
    detail::LocalStateGuard guard;
  };

  static bool grad_inputs(const std::vector<IValue>& args) {
    bool any = false;
    for (const IValue& a : args) any = any || (a.is_tensor() && needs_grad(a.to_tensor()));
    return any && grad_enabled();
  }

  std::unique_ptr<Graph> new_graph() const {
    auto g = std::make_unique<Graph>();
    g->name = opts_.name;
    g->env = env_;
    return g;
  }

  static std::string where(SourceLoc loc = UserLocGuard::current()) {
    if (!loc.known()) return "";
    std::ostringstream os;
    os << " at " << loc;
    return os.str();
  }

  void bind(const Tensor& traced, const Tensor& real) { bound_[traced.impl()] = {traced, real}; }

  // A real tensor made between segments, as a traced stand-in bound to it.
  Tensor wrap(const Tensor& real) {
    // (as fake_arguments makes an argument's stand-in)
    Tensor fake = detail::make_fake(real.sizes(), real.dtype(), real.device(), real.strides());
    if (real.impl()->int_offset() != 0)
      fake = detail::make_view(fake, fake.sizes(), fake.strides(), real.storage_offset());
    if (real.requires_grad()) fake.requires_grad_();
    bind(fake, real);
    return fake;
  }

  IValue realize(const IValue& v, const std::string& at) {
    if (v.is_tensor() && v.to_tensor().defined() && !v.to_tensor().has_data())
      return IValue(real_of(v.to_tensor(), at));
    if (v.is_tensor_list()) {
      std::vector<Tensor> r;
      for (const Tensor& t : v.to_tensor_list())
        r.push_back(t.defined() && !t.has_data() ? real_of(t, at) : t);
      return IValue(std::move(r));
    }
    return v;
  }

  // The real tensor of a traced one: the graph so far runs when it has not been bound yet, or
  // when it writes some tensor (the bound one may be among them, or share its memory).
  Tensor real_of(const Tensor& traced, const std::string& at = "the return") {
    if (const Tensor* r = bound(traced)) {
      const auto& nodes = graph_->nodes;
      if (std::none_of(nodes.begin(), nodes.end(), [](const Node& n) { return !n.writes.empty(); }))
        return *r;
      flush({}, at, false);
      return *bound(traced);
    }
    tracer_.value_of(traced);  // (a fake from outside the trace is an error here)
    flush({traced}, at, false);
    const Tensor* r = bound(traced);
    TS_INTERNAL_ASSERT(r) << "a segment did not bind a value it computed";
    return *r;
  }

  // Ends the current segment: runs it with `extra` among its outputs (`only`: its outputs are
  // exactly those; else also every value the function still holds), binds the results and
  // starts the next segment.
  void flush(const std::vector<Tensor>& extra, const std::string& ends_at, bool only) {
    Graph& g = *graph_;
    // Stand-ins the function dropped: their real tensors go (a loop of breaks keeps no history).
    for (auto it = bound_.begin(); it != bound_.end();) {
      it = it->second.first.impl()->use_count() == 1 ? bound_.erase(it) : std::next(it);
    }
    std::map<int, std::vector<Tensor>> outs;
    for (const Tensor& t : extra) {
      const int id = tracer_.value_of(t);
      const Value& v = g.values[static_cast<size_t>(id)];
      if (v.producer >= 0) {
        outs[id] = tracer_.tensors_of(id);
        continue;
      }
      for (size_t i = 0; i < g.inputs.size(); ++i) {  // an input under another stand-in
        if (g.inputs[i] == id) bind(t, inputs_.at(i).to_tensor());
      }
    }
    if (!g.nodes.empty()) {
      if (!only) {
        for (auto& [id, ts] : tracer_.held_values()) outs.emplace(id, std::move(ts));
      }
      for (const auto& [id, ts] : outs) {
        g.outputs.push_back(id);
        g.constant_outputs.emplace_back();
      }
      std::vector<IValue> reals;
      {
        Outside out(*this);
        scalars_to_inputs(g);
        reals = cache_.run(std::move(graph_), site_++, inputs_, ends_at);
      }
      size_t k = 0;
      for (const auto& [id, ts] : outs) {
        const IValue& r = reals.at(k++);
        for (const Tensor& t : ts) bind(t, r.to_tensor());
      }
    }
    graph_ = new_graph();
    tracer_.start(*graph_);
    inputs_.clear();
  }

  // A 0-dim tensor holding `v`: written directly for float32 and float64 on the CPU (a call's
  // host time: no dispatch), else by `full`.
  static Tensor scalar_input(double v, DType dtype, Device device) {
    if (!device.is_cpu() || (dtype != DType::Float32 && dtype != DType::Float64))
      return full({}, v, TensorOptions(dtype).device(device));
    Tensor t = detail::make_empty({}, dtype, device);
    if (dtype == DType::Float32) {
      *static_cast<float*>(t.impl()->data()) = static_cast<float>(v);
    } else {
      *static_cast<double*>(t.impl()->data()) = v;
    }
    return t;
  }

  // The floating-point scalars of `x + s`, `x - s`, `x * s`, `x / s`, the comparisons
  // (`x > s`, ...) and `where(c, x, s)` on float tensors become inputs of the segment (0-dim
  // tensors of x's dtype, what eager converts them to: the Tensor overload then computes the same
  // values), not constants: a number the function reads (`x * a.sum().item<double>()`,
  // `x > threshold`) changes from call to call, and as a constant every new value would compile
  // the segment again.
  void scalars_to_inputs(Graph& g) {
    struct Lift {
      const char* scalar_op;
      const char* tensor_op;
      size_t x, s;   // the float tensor's argument, the scalar's
      bool to_bool;  // a comparison: the result is bool, not x's dtype
    };
    static const Lift kOps[] = {{"aten::add.Scalar", "aten::add.Tensor", 0, 1, false},
                                {"aten::sub.Scalar", "aten::sub.Tensor", 0, 1, false},
                                {"aten::mul.Scalar", "aten::mul.Tensor", 0, 1, false},
                                {"aten::div.Scalar", "aten::div.Tensor", 0, 1, false},
                                {"aten::eq.Scalar", "aten::eq.Tensor", 0, 1, true},
                                {"aten::ne.Scalar", "aten::ne.Tensor", 0, 1, true},
                                {"aten::lt.Scalar", "aten::lt.Tensor", 0, 1, true},
                                {"aten::le.Scalar", "aten::le.Tensor", 0, 1, true},
                                {"aten::gt.Scalar", "aten::gt.Tensor", 0, 1, true},
                                {"aten::ge.Scalar", "aten::ge.Tensor", 0, 1, true},
                                {"aten::where.ScalarOther", "aten::where.self", 1, 2, false}};
    int storages = 0;
    for (const Value& v : g.values)
      storages = std::max(storages, v.kind == Value::Kind::Tensor ? v.tensor.storage + 1 : 0);
    for (Node& n : g.nodes) {
      if (n.kind != Node::Kind::Op || n.outputs.size() != 1 || n.outputs[0] < 0) continue;
      const Lift* lift = nullptr;
      for (const Lift& l : kOps) {
        if (n.op.name() == l.scalar_op) lift = &l;
      }
      if (!lift || n.args.size() <= std::max(lift->x, lift->s)) continue;
      Arg& x = n.args[lift->x];
      Arg& c = n.args[lift->s];
      if (x.kind != Arg::Kind::Value || x.value < 0 || c.kind != Arg::Kind::Constant ||
          !c.constant.is_double())
        continue;
      const TensorInfo xt = g.values[static_cast<size_t>(x.value)].tensor;
      const DType result = g.values[static_cast<size_t>(n.outputs[0])].tensor.dtype;
      if (!is_floating_point(xt.dtype) || result != (lift->to_bool ? DType::Bool : xt.dtype))
        continue;
      Value v;
      v.kind = Value::Kind::Tensor;
      v.tensor.dtype = xt.dtype;
      v.tensor.device = xt.device;
      v.tensor.offset = g.env->ctx.constant(0);
      v.tensor.storage = storages++;
      const int id = g.add_value(std::move(v));
      g.inputs.push_back(id);
      inputs_.emplace_back(scalar_input(c.constant.to_double(), xt.dtype, xt.device));
      c.kind = Arg::Kind::Value;
      c.value = id;
      c.constant = IValue();
      n.op = *find_op(lift->tensor_op);
    }
  }

  SegmentCache& cache_;
  CaptureOptions opts_;
  detail::LocalState outer_;
  IntrusivePtr<ShapeEnv> env_;
  std::unique_ptr<Graph> graph_;
  Tracer tracer_;
  std::vector<IValue> fakes_, inputs_;
  /** Traced stand-in -> (the stand-in, kept alive so its address stays unique; its real tensor). */
  std::unordered_map<const TensorImpl*, std::pair<Tensor, Tensor>> bound_;
  size_t site_ = 0;
};

}  // namespace

void optimize_graph(Graph& g, bool fuse, bool fuse_builtins, bool plan_memory) {
  optimize(g, fuse, fuse_builtins, plan_memory);
}

std::vector<IValue> run_segmented(const Traced& fn, const std::vector<IValue>& args,
                                  SegmentCache& cache, const CaptureOptions& opts) {
  Segmenter s(cache, opts, args);
  return s.run(fn);
}

Captured capture(const Traced& fn, const std::vector<IValue>& args, const CaptureOptions& opts) {
  if (opts.joint && grad_enabled()) {
    try {
      return capture_once(fn, args, opts, true);
    } catch (const GraphBreakError&) {
      throw;
    } catch (const Error& e) {
      // What the joint trace cannot do (a formula that does not run on fake tensors, ...):
      // the forward is traced alone and autograd records it as it replays.
      log("graph_breaks", opts.name + ": the backward could not be traced (" + e.message() +
                              "); autograd records the forward's operators as they replay");
    }
  }
  return capture_once(fn, args, opts, false);
}

}  // namespace tessera::compile_detail
