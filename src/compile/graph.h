/** \file
 * The graph IR of a compiled function (DESIGN.md D7): plain data.
 *
 * Values are tensors (with symbolic metadata and the storage they live in) or symbolic integers.
 * Nodes are operator calls, opaque user operators (extern), tile-kernel launches and the inputs;
 * they run in order. A node's `writes` lists the tensors it mutates (in-place operators, written
 * `custom_op` arguments, the arguments a kernel's IR stores through): the functional view the
 * passes reason with, as storages and their versions.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compile/shape_env.h"
#include "tessera/compile.h"
#include "tessera/dispatch.h"
#include "tessera/ivalue.h"
#include "tl/variants.h"

namespace tessera::tl {
class JITFunction;
}

namespace tessera::compiler {

struct TensorInfo {
  DType dtype = DType::Float32;
  Device device;
  std::vector<sym::ExprPtr> sizes, strides;
  sym::ExprPtr offset = nullptr;
  int storage = -1;  ///< values with the same storage alias
};

struct Value {
  enum class Kind : uint8_t { Tensor, Int } kind = Kind::Tensor;
  TensorInfo tensor;
  sym::ExprPtr expr = nullptr;  ///< Int
  int producer = -1;            ///< node index, -1 for inputs
};

/** One argument of a node. */
struct Arg {
  enum class Kind : uint8_t { Value, ValueList, Sym, SymList, Constant } kind = Kind::Constant;
  /** Kernel launches: a positional argument, a `tl::meta`, or a launch option. */
  enum class Role : uint8_t { Positional, Meta, Option } role = Role::Positional;
  tl::LaunchOption::Kind option = tl::LaunchOption::Kind::NumWarps;  ///< Option
  int value = -1;                                                    ///< Value
  std::vector<int> values;          ///< ValueList (-1 for None entries)
  bool optional_list = false;       ///< ValueList of optional tensors
  sym::ExprPtr expr = nullptr;      ///< Sym: an integer computed at call start
  std::vector<sym::ExprPtr> exprs;  ///< SymList
  IValue constant;                  ///< Constant (scalars, strings, dtypes, None, ...)
  std::string name;                 ///< the schema's argument name, or the meta/option name
  bool written = false;             ///< kernel launches: the IR stores through it
  bool read = false;                ///< kernel launches: the IR loads (or atomically updates) it
  /** Kernel launches, written tensors: the condition under which the launch stores every element
   * (ir/coverage, for every variant), or null when not proven; `cover_note` says why not. */
  sym::ExprPtr covers = nullptr;
  /** With `covers`: the size limit of the kernel's offsets (32-bit offsets reach 2^31 - 1
   * elements), or null; a pass may guard on it. */
  sym::ExprPtr cover_limit = nullptr;
  std::string cover_note;
  /** Kernel launches, written tensors: every store through it is `pointer + offsets`
   * (ir::direct_stores, every variant): an epilogue can be fused into those stores. */
  bool direct = false;
  /** Kernel launches, read tensors: every load through it is `pointer + offsets`
   * (ir::direct_loads, every variant): a prologue can be fused into those loads. */
  bool direct_load = false;
};

struct Node {
  enum class Kind : uint8_t { Op, Extern, Kernel } kind = Kind::Op;
  OperatorHandle op;                        ///< Op, Extern
  const tl::JITFunction* kernel = nullptr;  ///< Kernel
  std::vector<Arg> args;
  sym::ExprPtr grid[3] = {nullptr, nullptr,
                          nullptr};  ///< Kernel (an autotuned one: its first candidate's)
  /** An autotuned or heuristic launch: the tuner, and per candidate its meta-parameters and grid.
   * The choice among them is made at run time, once per tuning key. */
  std::shared_ptr<const tl::VariantSource> tuned;
  struct Variant {
    tl::Variant cand;
    sym::ExprPtr grid[3] = {nullptr, nullptr, nullptr};
  };
  std::vector<Variant> variants;
  std::vector<int> outputs;              ///< value ids (tensors; -1 for non-tensor results)
  std::vector<IValue> constant_outputs;  ///< non-tensor results, per output position
  std::vector<int> writes;               ///< value ids of mutated tensors
  SourceLoc loc;
  std::string note;  ///< what a pass did to the node (printed with the graph)
  /** Operators a pass fused into this node (an epilogue), in order, with the user's line. */
  std::vector<std::pair<std::string, SourceLoc>> fused_from;
  /** A fill elided at run time (eliminate_dead_fills): in a call where `elide_when` holds,
   * `elided_op` runs instead of `op`, with the arguments but `elided_drop`. */
  sym::ExprPtr elide_when = nullptr;
  OperatorHandle elided_op;
  int elided_drop = -1;
  /** A generated kernel whose programs load every element of a dense input of the output's shape
   * before storing the output's same element: an output may take a dying input's memory. */
  bool in_place_ok = false;
  bool dead = false;
  /** An `aten::empty` the memory plan placed (plan_memory): its tensor is `arena_offset` bytes
   * into this call's arena `arena` (an index into Graph::arenas), not an allocation of its own. */
  int arena = -1;
  sym::ExprPtr arena_offset = nullptr;
  /** A planned allocation in place of a dying input of the pointwise operator after it (the
   * value it is stored over), or -1: its bytes still hold that input when it is made. */
  int arena_over = -1;
  /** The memory plan runs this operator as its `.out` overload (its last argument, an
   * allocation of the graph's); `op` is the overload, `planned_from` the operator called. */
  bool out_variant = false;
  std::string planned_from;
};

/** An `aten::empty` node that allocates `value` (of geometry `t`, dense). */
Node empty_node(const TensorInfo& t, int value, const SourceLoc& loc);

/** One call's block of memory for the planned intermediates of a device (plan_memory). */
struct Arena {
  Device device;
  sym::ExprPtr bytes = nullptr;  ///< in this call's sizes
  int values = 0;                ///< how many planned allocations it holds
  /** What the same allocations would take one by one (their sizes summed), for the listing. */
  sym::ExprPtr unplanned_bytes = nullptr;
};

struct Graph {
  std::string name;
  IntrusivePtr<ShapeEnv> env;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;   ///< value ids of tensor inputs, in argument order (-1: not a tensor)
  std::vector<int> outputs;  ///< value ids of tensor results (-1: a constant result)
  std::vector<IValue> constant_outputs;
  std::vector<Tensor> captured;  ///< real tensors the function closed over (inputs after `inputs`)
  /** Kernels the passes derived (fused epilogues); kernel nodes point at them. */
  std::vector<std::shared_ptr<const tl::JITFunction>> derived;
  std::vector<int> captured_values;
  std::vector<Arena> arenas;  ///< plan_memory's, one per device with planned allocations

  int add_value(Value v);
  /** A readable listing (`TESSERA_LOGS=graph`). */
  std::string str() const;
  /** The graph as public data (`compiled.graph()`). */
  CompiledGraph data() const;
  /** Checks that every value is defined before use; an InternalError otherwise. */
  void verify() const;
  /** Removes nodes whose results are unused and whose writes nobody observes. */
  int eliminate_dead_code();
  /** Turns fills (`zeros_like`, `full`, ...) whose every element the next user, a kernel that
   * does not read them, stores into `empty`s; notes why where a fill stays. Returns how many. */
  int eliminate_dead_fills();
  /** Fuses a pointwise op that reads a kernel's output into the kernel's stores (the kernel then
   * writes the op's result; tl/fused.h), under the rules of research/graph_compiler.md §4; notes
   * why a candidate stays unfused. Returns how many were fused. */
  int fuse_epilogues();
  /** Fuses runs of built-in pointwise ops of one shape into generated kernels (tl/fused.h):
   * intermediate values never reach memory. Returns how many ops were fused. */
  int fuse_pointwise();
  /** Fuses reductions along the last dimension with the pointwise ops around them into generated
   * kernels that hold each row whole (softmax, layer norm written with built-in ops). Returns how
   * many ops were fused. */
  int fuse_rows();
  /** Lets the output of a generated kernel with one output take the memory of an input of the
   * same dtype and dense shape that no later node uses (its allocation goes): fewer allocations,
   * and the stores write cache lines the loads just brought in. Returns how many moved. */
  int reuse_inputs_in_place();
  /** Memory planning (DESIGN.md D7), the last pass: operator results that an `.out` overload
   * can write (`aten::matmul` -> `aten::matmul.out` into an `aten::empty`) are allocated by the
   * graph; then every `aten::empty` of an intermediate (not a result, an input or a closed-over
   * tensor, and no view of one) gets an offset in one arena per device and call, reusing the
   * bytes of values whose last use has passed: static sizes by greedy placement in size order,
   * symbolic ones in slots that each hold one value at a time and grow to the largest (`max`).
   * Only for graphs that replay without autograd recording (a saved tensor must keep its
   * bytes). Returns how many allocations were placed. */
  int plan_memory();
  /** Inserts nodes before position `at` (value producers after it move along). */
  void insert_nodes(size_t at, std::vector<Node> added);
  /** Merges repeated pure operator calls on the same (unchanged) values. */
  int eliminate_common_subexpressions();
  /** Nodes that will run. */
  size_t live_nodes() const;

  // ---- memory, for the passes ----
  int storage_of(int value) const { return values[static_cast<size_t>(value)].tensor.storage; }
  /** Whether node `n` reads or writes storage `s` (through any argument or write). */
  bool touches(const Node& n, int s) const;
  /** The first live node after `from` that touches storage `s`, or nodes.size(). */
  size_t next_toucher(size_t from, int s) const;
  /** Whether a tensor is contiguous: its strides are its sizes' row-major strides (size-1
   * dimensions aside). */
  bool contiguous(const TensorInfo& t) const;
};

}  // namespace tessera::compiler
