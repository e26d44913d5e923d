/** \file
 * The graph compiler's entry point (DESIGN.md D7): `tessera::compile(fn, options)`.
 *
 *     Tensor add_fn(const Tensor& x, const Tensor& y) {...}   // launches add_kernel
 *     auto compiled = tessera::compile(add_fn, {.fullgraph = true});
 *     Tensor out = compiled(x, y);
 *
 * Semantics are `jax.jit`'s, with torch.compile's guards: the tensor arguments are the inputs;
 * on a cache miss `fn` runs once on fake tensors (no data, sizes that may be symbolic) under the
 * capture mode, which records every operator call and every kernel launch as a graph node; later
 * calls check the guards (dtype, device, sizes or their symbolic relations, strides, aliasing,
 * scalar arguments, every specialization the trace made) and replay the graph. C++ control flow
 * and other arguments are fixed by the trace, so `fn` must be a pure function of its arguments.
 *
 * Arguments and results may be tensors, integers, floats and bools, and `std::optional`,
 * `std::vector` and `std::tuple` of them. Sizes are static on the first call; a later call with
 * other sizes recompiles once with those dimensions symbolic, and then no more (as torch.compile's
 * automatic dynamic shapes). A function that reads tensor data (`item()`) runs in segments,
 * compiled graphs between the reads, traced on every call (docs/compile.md, "Graph breaks").
 * `TESSERA_LOGS=recompiles` explains each recompile, `graph` prints each graph, `graph_breaks`
 * each break.
 */
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/ivalue.h"
#include "tessera/tensor.h"

namespace tessera {

struct CompileOptions {
  /** Every graph break is a CompileError naming the cause and line (else: the function runs in
   * segments, compiled graphs between the breaks). */
  bool fullgraph = false;
  /** nullopt: automatic (static first, dynamic after a size changes); true: every dimension of
   * every tensor argument symbolic from the start; false: never (recompile per size). */
  std::optional<bool> dynamic = std::nullopt;
  /** Recompiles allowed before giving up (an error under fullgraph; else eager, warned once). */
  int recompile_limit = 8;
  /** (tensor argument position, dimension) pairs symbolic from the start (`mark_dynamic`). */
  std::vector<std::pair<int, int>> dynamic_dims = {};
  /** A name for logs and errors (default "compiled function"). */
  std::string name = {};
  /** Fuse: runs of built-in pointwise ops become generated kernels, and pointwise ops after a
   * user's kernel run inside it (its epilogue). False replays every op as called. */
  bool fuse = true;
  /** Memory planning: a call's intermediates share one block per device, planned once per graph
   * (values whose lives do not overlap share bytes), instead of one allocation each. False
   * allocates each one as eager does. (Graphs that autograd records as they replay are never
   * planned: a saved tensor keeps its own bytes.) */
  bool plan_memory = true;
  /** CUDA graphs: a graph on one GPU is captured on the second call of each size and replayed
   * from then on with one `cuGraphLaunch` (the arguments copied into its static inputs, the
   * results copied out). Graphs it cannot replay run as before (`TESSERA_LOGS=cuda_graphs` says
   * why). Off by default: the copies cost bandwidth, worth it where launches dominate. */
  bool cuda_graphs = false;
};

/** A compiled graph as data (`compiled.graph()`): what `TESSERA_LOGS=graph` prints, for tools and
 * tests that ask what a graph runs, reads and writes without parsing text. Sizes and strides are
 * printed symbolic expressions (`"s0"`, `"4096"`, `"s0*s1"`). */
struct CompiledGraph {
  struct Value {
    int id = -1;
    bool is_tensor = true;  ///< else a symbolic integer
    DType dtype = DType::Float32;
    Device device;
    std::vector<std::string> sizes, strides;  ///< tensors
    std::string expr;                         ///< integers
    int storage = -1;                         ///< tensors with the same storage alias each other
    int producer = -1;  ///< the index in `nodes` of the node that made it; -1 for inputs
  };
  struct Fused {
    std::string op;  ///< the operator fused into the node (e.g. "tessera::relu")
    SourceLoc loc;   ///< where the user called it
  };
  struct Node {
    enum class Kind { Op, Extern, Kernel } kind = Kind::Op;
    std::string target;        ///< the operator's name, or the kernel's (a fused one: "k+relu")
    std::vector<int> inputs;   ///< tensor arguments (value ids), in argument order
    std::vector<int> reads;    ///< those the node reads (a kernel: those its tile IR loads)
    std::vector<int> writes;   ///< tensors it mutates (value ids)
    std::vector<int> outputs;  ///< tensor results (value ids)
    std::vector<Fused> fused_from;  ///< operators fused into it, in order
    std::vector<std::string> grid;  ///< kernels: the launch grid (3 expressions)
    int variants = 0;               ///< autotuned kernels: how many candidates it chooses among
    /** A fill the dead-fill pass elides when this condition holds (else empty). */
    std::string elided_when;
    /** An allocation the memory plan placed: its arena (an index into `arenas`) and byte offset
     * there; -1 and "" for any other node. */
    int arena = -1;
    std::string arena_offset;
    /** An operator the memory plan runs as its `.out` overload (`target`, e.g.
     * "aten::add.out", writing an allocation of the plan): the operator called
     * ("aten::add.Tensor"); else "". */
    std::string planned_from;
    SourceLoc loc;     ///< where the user's function called it
    std::string note;  ///< what the passes did or declined to do
  };
  std::string name;
  std::vector<Value> values;        ///< indexed by id
  std::vector<Node> nodes;          ///< the nodes that run, in order
  std::vector<int> inputs;          ///< tensor arguments (value ids; -1: not a tensor)
  std::vector<int> outputs;         ///< tensor results (value ids; -1: a constant)
  std::vector<std::string> guards;  ///< symbolic-size guards, printed
  /** The memory plan: one block per device and call holding the planned intermediates. */
  struct Arena {
    Device device;
    std::string bytes;            ///< its size (an expression of the symbols where dynamic)
    std::string unplanned_bytes;  ///< the same allocations' sizes summed
    int values = 0;               ///< how many allocations it holds
  };
  std::vector<Arena> arenas;
  std::string text;  ///< the printed listing
  /** Training under compile (a call with grad enabled and an input that requires grad): the
   * compiled backward, whose inputs are the tensors the forward saves, then one gradient per
   * differentiable result, and whose outputs are the inputs' gradients. The forward's `outputs`
   * are the function's results (the first `user_outputs`), then the saved tensors. */
  std::shared_ptr<const CompiledGraph> backward;
  int user_outputs = -1;  ///< with `backward`: how many of `outputs` are the function's results

  /** The nodes whose target is `target` (an operator or kernel name; an operator the memory
   * plan runs as its `.out` overload is found by the name called, with or without its overload:
   * "aten::add.Tensor" and "aten::add" find the node running "aten::add.out"). */
  std::vector<const Node*> find(const std::string& target) const;
  /** How many kernel launches (user kernels and generated ones) one call runs. */
  int kernel_launches() const;
};

namespace compile_detail {

/** Called with each tensor a compiled call places in its memory plan's arena (but those stored
 * over a dying input of a pointwise operator, whose bytes are that input), before any node
 * writes it; null (the default) for none. For tests and debugging: `testing::poison` there makes
 * an element a kernel skips visible, where the arena would hold what an earlier value left. */
void set_planned_allocation_hook(void (*hook)(Tensor&));

/** Flattens arguments and results to leaves (tensors and scalars as IValues) and back. */
template <class T, class = void>
struct Tree {
  static_assert(!sizeof(T), "compile: unsupported argument or result type");
};
template <>
struct Tree<Tensor> {
  static void flatten(const Tensor& t, std::vector<IValue>& out) { out.emplace_back(t); }
  static Tensor unflatten(const std::vector<IValue>& in, size_t& i) {
    const IValue& v = in.at(i++);
    return v.is_none() ? Tensor() : v.to_tensor();
  }
};
template <class T>
struct Tree<T, std::enable_if_t<std::is_arithmetic_v<T>>> {
  static void flatten(T v, std::vector<IValue>& out) {
    if constexpr (std::is_same_v<T, bool>) {
      out.emplace_back(v);
    } else if constexpr (std::is_integral_v<T>) {
      out.emplace_back(static_cast<int64_t>(v));
    } else {
      out.emplace_back(static_cast<double>(v));
    }
  }
  static T unflatten(const std::vector<IValue>& in, size_t& i) {
    const IValue& v = in.at(i++);
    if constexpr (std::is_same_v<T, bool>) {
      return v.to_bool();
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(v.to_int());
    } else {
      return static_cast<T>(v.to_double());
    }
  }
};
template <class T>
struct Tree<std::optional<T>> {
  static void flatten(const std::optional<T>& v, std::vector<IValue>& out) {
    out.emplace_back(v.has_value());
    if (v) Tree<T>::flatten(*v, out);
  }
  static std::optional<T> unflatten(const std::vector<IValue>& in, size_t& i) {
    if (!in.at(i++).to_bool()) return std::nullopt;
    return Tree<T>::unflatten(in, i);
  }
};
template <class T>
struct Tree<std::vector<T>> {
  static void flatten(const std::vector<T>& v, std::vector<IValue>& out) {
    out.emplace_back(static_cast<int64_t>(v.size()));
    for (const auto& e : v) Tree<T>::flatten(e, out);
  }
  static std::vector<T> unflatten(const std::vector<IValue>& in, size_t& i) {
    const int64_t n = in.at(i++).to_int();
    std::vector<T> r;
    for (int64_t k = 0; k < n; ++k) r.push_back(Tree<T>::unflatten(in, i));
    return r;
  }
};
template <class... T>
struct Tree<std::tuple<T...>> {
  static void flatten(const std::tuple<T...>& v, std::vector<IValue>& out) {
    std::apply([&](const auto&... e) { (Tree<std::decay_t<decltype(e)>>::flatten(e, out), ...); },
               v);
  }
  static std::tuple<T...> unflatten(const std::vector<IValue>& in, size_t& i) {
    return std::tuple<T...>{Tree<T>::unflatten(in, i)...};  // braces: left to right
  }
};
template <class A, class B>
struct Tree<std::pair<A, B>> {
  static void flatten(const std::pair<A, B>& v, std::vector<IValue>& out) {
    Tree<A>::flatten(v.first, out);
    Tree<B>::flatten(v.second, out);
  }
  static std::pair<A, B> unflatten(const std::vector<IValue>& in, size_t& i) {
    A a = Tree<A>::unflatten(in, i);
    B b = Tree<B>::unflatten(in, i);
    return {std::move(a), std::move(b)};
  }
};

/** The type-erased compiled function (cache of guarded graphs). */
class CompiledFunction;
using Traced = std::function<std::vector<IValue>(const std::vector<IValue>& args)>;
std::shared_ptr<CompiledFunction> make_compiled(CompileOptions options, Traced fn, SourceLoc loc);
std::vector<IValue> call_compiled(CompiledFunction& f, const std::vector<IValue>& args);

/** How many graphs the function has compiled, and how many times it fell back to eager. */
struct Stats {
  int graphs = 0;
  int recompiles = 0;
  bool eager = false;  ///< running eagerly (the recompile limit, or a break segments cannot serve)
  bool segmented = false;  ///< running in segments (a graph break without fullgraph)
  int cuda_graphs = 0;     ///< sizes replayed from a captured CUDA graph (`cuda_graphs`)
  std::string last_graph;  ///< the newest graph, printed
};
Stats stats(const CompiledFunction& f);
/** The compiled graphs, oldest first. */
std::vector<CompiledGraph> graphs(const CompiledFunction& f);
[[noreturn]] void no_graph_yet(const CompiledFunction& f);
/** Whether some compiled graph's guards accept `args` (benchmarks and tests). */
bool guards_pass(const CompiledFunction& f, const std::vector<IValue>& args);

template <class F>
struct FnSig : FnSig<decltype(&std::decay_t<F>::operator())> {};
template <class R, class... A>
struct FnSig<R (*)(A...)> {
  using Ret = R;
  using Args = std::tuple<std::decay_t<A>...>;
};
template <class R, class... A>
struct FnSig<R(A...)> : FnSig<R (*)(A...)> {};
template <class C, class R, class... A>
struct FnSig<R (C::*)(A...) const> : FnSig<R (*)(A...)> {};
template <class C, class R, class... A>
struct FnSig<R (C::*)(A...)> : FnSig<R (*)(A...)> {};

}  // namespace compile_detail

/** A compiled function: call it like the original. */
template <class R, class Args>
class Compiled;

template <class R, class... A>
class Compiled<R, std::tuple<A...>> {
 public:
  Compiled(std::shared_ptr<compile_detail::CompiledFunction> f) : f_(std::move(f)) {}  // NOLINT

  R operator()(const A&... args) const {
    std::vector<IValue> leaves;
    (compile_detail::Tree<A>::flatten(args, leaves), ...);
    std::vector<IValue> out = compile_detail::call_compiled(*f_, leaves);
    if constexpr (!std::is_void_v<R>) {
      size_t i = 0;
      return compile_detail::Tree<std::decay_t<R>>::unflatten(out, i);
    }
  }
  compile_detail::Stats stats() const { return compile_detail::stats(*f_); }
  /** The newest compiled graph as data; a CompileError when nothing was compiled yet (or the
   * function runs eagerly without having compiled). */
  CompiledGraph graph() const;
  /** Every compiled graph, oldest first (one per guard set). */
  std::vector<CompiledGraph> graphs() const { return compile_detail::graphs(*f_); }
  /** Only the guard check of a call (for benchmarks). */
  bool guards_pass(const A&... args) const {
    std::vector<IValue> leaves;
    (compile_detail::Tree<A>::flatten(args, leaves), ...);
    return compile_detail::guards_pass(*f_, leaves);
  }
  /** The guard check on already flattened arguments. */
  bool guards_pass_flat(const std::vector<IValue>& leaves) const {
    return compile_detail::guards_pass(*f_, leaves);
  }

 private:
  std::shared_ptr<compile_detail::CompiledFunction> f_;
};

template <class R, class... A>
CompiledGraph Compiled<R, std::tuple<A...>>::graph() const {
  std::vector<CompiledGraph> all = compile_detail::graphs(*f_);
  if (all.empty()) compile_detail::no_graph_yet(*f_);
  return std::move(all.back());
}

namespace compile_detail {
/** `fn` on flattened leaves: its arguments unflattened, its result flattened (compile and AOT
 * export trace this). */
template <class F>
Traced make_traced(F fn) {
  using S = FnSig<std::decay_t<F>>;
  using R = typename S::Ret;
  using Args = typename S::Args;
  return [fn = std::move(fn)](const std::vector<IValue>& leaves) -> std::vector<IValue> {
    size_t i = 0;
    Args args = Tree<Args>::unflatten(leaves, i);
    std::vector<IValue> out;
    if constexpr (std::is_void_v<R>) {
      std::apply(fn, args);
    } else {
      Tree<std::decay_t<R>>::flatten(std::apply(fn, args), out);
    }
    return out;
  };
}
}  // namespace compile_detail

/** Compiles `fn` (a function, function pointer or lambda). */
template <class F>
auto compile(F fn, CompileOptions options = {}, SourceLoc loc = SourceLoc::current()) {
  using S = compile_detail::FnSig<std::decay_t<F>>;
  return Compiled<typename S::Ret, typename S::Args>(compile_detail::make_compiled(
      std::move(options), compile_detail::make_traced(std::move(fn)), loc));
}

}  // namespace tessera
