#include "compile/executor.h"

#include <atomic>
#include <optional>

#include "tessera/detail/boxing.h"
#include "tl/variants.h"

namespace tessera::compile_detail {

using namespace tessera::compiler;

Executor::Executor(const Graph& g, const Guards& guards) : graph_(g), guards_(guards) {
  plan_kernels();
  plan_lifetimes();
  for (const compiler::Arena& a : g.arenas) arena_bytes_.push_back(guards.ref_of(a.bytes));
  arena_offset_.resize(g.nodes.size());
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (!g.nodes[k].dead && g.nodes[k].arena >= 0)
      arena_offset_[k] = guards.ref_of(g.nodes[k].arena_offset);
  }
}

namespace {
std::atomic<void (*)(Tensor&)> g_planned_hook{nullptr};
}  // namespace

void set_planned_allocation_hook(void (*hook)(Tensor&)) {
  g_planned_hook.store(hook, std::memory_order_release);
}

Tensor Executor::arena_tensor(const Node& n, const Scratch& s,
                              ArrayRef<IntrusivePtr<StorageImpl>> arenas) const {
  const compiler::TensorInfo& t = graph_.values[static_cast<size_t>(n.outputs[0])].tensor;
  const auto& exprs = n.args[0].exprs;  // aten::empty(size, dtype, device)
  DimVector sizes(exprs.size());
  for (size_t d = 0; d < exprs.size(); ++d) sizes[d] = guards_.value_of(exprs[d], s);
  const int64_t offset = arena_offset_[static_cast<size_t>(&n - graph_.nodes.data())].get(s);
  Tensor out = detail::make_in_block(*arenas[static_cast<size_t>(n.arena)],
                                     static_cast<size_t>(offset), sizes, t.dtype);
  // (Not one stored over an input: its bytes are that input until the operator reads them.)
  if (auto hook = g_planned_hook.load(std::memory_order_acquire); hook && n.arena_over < 0)
    hook(out);
  return out;
}

void Executor::plan_lifetimes() {
  const Graph& g = graph_;
  std::vector<int> last(g.values.size(), -1);
  std::vector<bool> keep(g.values.size(), false);
  for (int v : g.inputs) {
    if (v >= 0) keep[static_cast<size_t>(v)] = true;
  }
  for (int v : g.outputs) {
    if (v >= 0) keep[static_cast<size_t>(v)] = true;
  }
  for (int v : g.captured_values) keep[static_cast<size_t>(v)] = true;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    if (n.dead) continue;
    auto use = [&](int v) {
      if (v >= 0) last[static_cast<size_t>(v)] = static_cast<int>(k);
    };
    for (const Arg& a : n.args) {
      if (a.kind == Arg::Kind::Value) use(a.value);
      if (a.kind == Arg::Kind::ValueList) {
        for (int v : a.values) use(v);
      }
    }
    for (int v : n.writes) use(v);
    for (int v : n.outputs) use(v);
  }
  drop_after_.assign(g.nodes.size(), {});
  for (size_t v = 0; v < last.size(); ++v) {
    if (last[v] >= 0 && !keep[v])
      drop_after_[static_cast<size_t>(last[v])].push_back(static_cast<int>(v));
  }
}

void Executor::plan_kernels() {
  static const Tensor undefined;
  const Graph& g = graph_;
  kernel_plans_.resize(g.nodes.size());
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    if (n.dead || n.kind != Node::Kind::Kernel) continue;
    KernelPlan& plan = kernel_plans_[k];
    for (const Arg& a : n.args) {
      const size_t i = plan.args.size();
      switch (a.role) {
        case Arg::Role::Meta: {
          const IValue& c = a.constant;
          plan.args.emplace_back(c.is_bool()    ? tl::meta(a.name, c.to_bool())
                                 : c.is_int()   ? tl::meta(a.name, c.to_int())
                                 : c.is_dtype() ? tl::meta(a.name, c.to_dtype())
                                                : tl::meta(a.name, c.to_double()),
                                 n.loc);
          continue;
        }
        case Arg::Role::Option:
          plan.args.emplace_back(tl::LaunchOption{a.option, a.constant.to_int()}, n.loc);
          continue;
        case Arg::Role::Positional:
          break;
      }
      switch (a.kind) {
        case Arg::Kind::Value:
          plan.args.emplace_back(undefined, n.loc);
          plan.tensors.emplace_back(i, a.value);
          break;
        case Arg::Kind::Sym:
          plan.args.emplace_back(SymInt(0), n.loc);
          plan.ints.emplace_back(i, guards_.ref_of(a.expr));
          break;
        case Arg::Kind::Constant: {
          const IValue& c = a.constant;
          if (c.is_bool()) {
            plan.args.emplace_back(c.to_bool(), n.loc);
          } else if (c.is_int()) {
            plan.args.emplace_back(c.to_int(), n.loc);
          } else if (c.is_double()) {
            plan.args.emplace_back(c.to_double(), n.loc);
          } else if (c.is_dtype()) {
            plan.args.emplace_back(c.to_dtype(), n.loc);
          } else {
            plan.args.emplace_back(undefined, n.loc);  // an undefined tensor argument
          }
          break;
        }
        default:
          TS_INTERNAL_ASSERT(false) << "a list argument to a kernel";
      }
    }
    for (int d = 0; d < 3; ++d) plan.grid[d] = guards_.ref_of(n.grid[d]);
    for (const auto& v : n.variants) {
      plan.variant_grids.push_back(
          {guards_.ref_of(v.grid[0]), guards_.ref_of(v.grid[1]), guards_.ref_of(v.grid[2])});
      plan.cands.push_back(v.cand);
    }
  }
}

/** An autotuned launch: the tuner picks a candidate for the real arguments (tuning on its first
 * call for a key), then the candidate's kernel runs with its grid. */
void Executor::run_tuned(const Node& n, const KernelPlan& plan, ArrayRef<tl::KernelArg> args,
                         const Scratch& s, const Observer* observe) const {
  auto run = [&](size_t i) {
    SmallVector<tl::KernelArg, 16> a;
    tl::with_variant(args, plan.cands[i], n.loc, a);
    const auto& gr = plan.variant_grids[i];
    if (observe) {
      (*observe)(LaunchEvent{static_cast<size_t>(&n - graph_.nodes.data()), static_cast<int>(i),
                             ArrayRef<tl::KernelArg>(a.data(), a.size()), &plan.tensors, &plan.ints,
                             gr.data(), &plan.cands[i]});
    }
    const tl::Grid grid({SymInt(gr[0].get(s)), SymInt(gr[1].get(s)), SymInt(gr[2].get(s))}, n.loc);
    tl::Launcher(*n.kernel, tl::LaunchGrid(grid, n.loc))
        .run_kernel(ArrayRef<tl::KernelArg>(a.data(), a.size()));
  };
  n.tuned->run(args, plan.cands, run, n.loc);
}

void Executor::pending_builds(const std::vector<IValue>* args, const Scratch& s,
                              PendingBuilds& out) const {
  const Graph& g = graph_;
  if (!g.env) return;
  std::vector<const Tensor*> real(g.values.size(), nullptr);
  if (args) {
    for (size_t i = 0; i < g.inputs.size() && i < args->size(); ++i) {
      if (g.inputs[i] >= 0 && (*args)[i].is_tensor())
        real[static_cast<size_t>(g.inputs[i])] = &(*args)[i].to_tensor();
    }
  }
  for (size_t c = 0; c < g.captured.size(); ++c)
    real[static_cast<size_t>(g.captured_values[c])] = &g.captured[c];
  std::vector<const Tensor*> stand_in(g.values.size(), nullptr);
  auto tensor_of = [&](int v) -> const Tensor* {
    const size_t i = static_cast<size_t>(v);
    if (real[i]) return real[i];
    if (!stand_in[i]) {
      const compiler::TensorInfo& t = g.values[i].tensor;
      SymDimVector sizes, strides;
      // (sizes of intermediate values from the call's symbols: not all are guard slots)
      for (auto* e : t.sizes) sizes.emplace_back(g.env->ctx.evaluate(e, s.symbols));
      for (auto* e : t.strides) strides.emplace_back(g.env->ctx.evaluate(e, s.symbols));
      out.tensors.push_back(detail::make_fake(sizes, t.dtype, t.device,
                                              SymIntArrayRef(strides.data(), strides.size())));
      stand_in[i] = &out.tensors.back();
    }
    return stand_in[i];
  };
  for (const Node& n : g.nodes) {
    if (n.dead || n.kind != Node::Kind::Kernel || n.tuned) continue;
    const KernelPlan& plan = kernel_plans_[static_cast<size_t>(&n - g.nodes.data())];
    out.args.emplace_back(ArrayRef<tl::KernelArg>(plan.args.data(), plan.args.size()));
    SmallVector<tl::KernelArg, 16>& kargs = out.args.back();
    for (const auto& [i, v] : plan.tensors) kargs[i].tensor = tensor_of(v);
    for (const auto& [i, r] : plan.ints) kargs[i].sym = SymInt(r.get(s));
    out.launches.push_back(
        {&n.kernel->state(), ArrayRef<tl::KernelArg>(kargs.data(), kargs.size()), n.loc});
  }
}

std::vector<IValue> Executor::run(const std::vector<IValue>& args, const Scratch& s,
                                  const Observer* observe, const OpObserver* after_op) const {
  const Graph& g = graph_;
  SmallVector<Tensor, 16> vals(g.values.size());
  Stack st;  // reused by every operator node
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (g.inputs[i] >= 0) vals[static_cast<size_t>(g.inputs[i])] = args[i].to_tensor();
  }
  for (size_t c = 0; c < g.captured.size(); ++c)
    vals[static_cast<size_t>(g.captured_values[c])] = g.captured[c];
  auto sym_value = [&](sym::ExprPtr e) { return guards_.value_of(e, s); };
  // The memory plan's arenas for this call (each allocated once; planned tensors view them).
  SmallVector<IntrusivePtr<StorageImpl>, 2> arenas(g.arenas.size());
  for (size_t i = 0; i < g.arenas.size(); ++i) {
    const int64_t bytes = arena_bytes_[i].get(s);
    if (bytes > 0)
      arenas[i] = StorageImpl::allocate(static_cast<size_t>(bytes), g.arenas[i].device);
  }
  // Values no later node uses go back to the allocator now (later nodes reuse their memory).
  auto drop = [&](const Node* n) {
    for (int v : drop_after_[static_cast<size_t>(n - g.nodes.data())])
      vals[static_cast<size_t>(v)] = Tensor();
  };
  for (const Node& n : g.nodes) {
    if (n.dead) continue;
    UserLocGuard loc(n.loc);
    if (n.kind == Node::Kind::Kernel) {
      const KernelPlan& plan = kernel_plans_[static_cast<size_t>(&n - g.nodes.data())];
      SmallVector<tl::KernelArg, 16> kargs(
          ArrayRef<tl::KernelArg>(plan.args.data(), plan.args.size()));
      for (const auto& [i, v] : plan.tensors) kargs[i].tensor = &vals[static_cast<size_t>(v)];
      for (const auto& [i, r] : plan.ints) kargs[i].sym = SymInt(r.get(s));
      if (n.tuned) {
        run_tuned(n, plan, ArrayRef<tl::KernelArg>(kargs.data(), kargs.size()), s, observe);
        drop(&n);
        continue;
      }
      if (observe) {
        (*observe)(LaunchEvent{static_cast<size_t>(&n - g.nodes.data()), -1,
                               ArrayRef<tl::KernelArg>(kargs.data(), kargs.size()), &plan.tensors,
                               &plan.ints, plan.grid});
      }
      tl::Grid grid(
          {SymInt(plan.grid[0].get(s)), SymInt(plan.grid[1].get(s)), SymInt(plan.grid[2].get(s))},
          n.loc);
      tl::Launcher(*n.kernel, tl::LaunchGrid(grid, n.loc))
          .run(ArrayRef<tl::KernelArg>(kargs.data(), kargs.size()));
      drop(&n);
      continue;
    }
    if (n.arena >= 0) {
      vals[static_cast<size_t>(n.outputs[0])] =
          arena_tensor(n, s, ArrayRef<IntrusivePtr<StorageImpl>>(arenas.data(), arenas.size()));
      drop(&n);
      continue;
    }
    st.clear();
    st.reserve(n.args.size());
    const bool elide = n.elide_when && sym_value(n.elide_when) != 0;
    for (const Arg& a : n.args) {
      if (elide && &a - n.args.data() == n.elided_drop) continue;
      switch (a.kind) {
        case Arg::Kind::Value:
          st.emplace_back(vals[static_cast<size_t>(a.value)]);
          break;
        case Arg::Kind::ValueList:
          if (a.optional_list) {
            std::vector<std::optional<Tensor>> l;
            for (int v : a.values)
              l.push_back(v < 0 ? std::nullopt
                                : std::optional<Tensor>(vals[static_cast<size_t>(v)]));
            st.emplace_back(std::move(l));
          } else {
            std::vector<Tensor> l;
            for (int v : a.values) l.push_back(vals[static_cast<size_t>(v)]);
            st.emplace_back(std::move(l));
          }
          break;
        case Arg::Kind::Sym:
          st.emplace_back(SymInt(sym_value(a.expr)));
          break;
        case Arg::Kind::SymList: {
          std::vector<SymInt> l;
          for (auto* e : a.exprs) l.emplace_back(sym_value(e));
          st.emplace_back(std::move(l));
          break;
        }
        case Arg::Kind::Constant:
          st.push_back(a.constant);
          break;
      }
    }
    (elide ? n.elided_op : n.op).call(st);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k] >= 0) vals[static_cast<size_t>(n.outputs[k])] = st[k].to_tensor();
    }
    if (after_op) (*after_op)(static_cast<size_t>(&n - g.nodes.data()));
    drop(&n);
  }
  std::vector<IValue> out;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    if (g.outputs[i] >= 0) {
      out.emplace_back(vals[static_cast<size_t>(g.outputs[i])]);
    } else {
      out.push_back(g.constant_outputs[i]);
    }
  }
  return out;
}

}  // namespace tessera::compile_detail
