// Memory planning, the last pass of a graph (graph.h plan_memory; DESIGN.md D7).
//
// An intermediate that a graph allocates (`aten::empty`: fused kernels' outputs, fills a kernel
// overwrites, and operator results written through `.out` overloads) needs its bytes from its
// allocation to the last node that touches its storage. Those intervals are planned once per
// graph into one arena per device and call: a call then allocates each arena once (the caching
// allocators serve it) instead of every intermediate, and values whose lives do not overlap share
// bytes by construction rather than by the allocator's size classes.
//
// Static sizes: greedy placement by decreasing size (each block at the lowest offset that no block
// alive at the same time covers), the packing TFLite's and AOTInductor's planners use. Symbolic
// sizes cannot be ordered in general, so each allocation takes a slot whose occupant has died,
// preferring one provably large enough; a slot's size is the `max` of its occupants' sizes, and
// the offsets are the slots' sizes summed, all evaluated per call by the guards' program.

#include <algorithm>
#include <map>
#include <set>

#include "compile/graph.h"
#include "tessera/error.h"

namespace tessera::compiler {

Node empty_node(const TensorInfo& t, int value, const SourceLoc& loc) {
  Node e;
  e.kind = Node::Kind::Op;
  e.op = get_op("aten::empty");
  e.loc = loc;
  Arg size;
  size.kind = Arg::Kind::SymList;
  size.exprs = t.sizes;
  size.name = "size";
  Arg dtype;
  dtype.constant = IValue(t.dtype);
  dtype.name = "dtype";
  Arg device;
  device.constant = IValue(t.device);
  device.name = "device";
  e.args = {std::move(size), std::move(dtype), std::move(device)};
  e.outputs = {value};
  return e;
}

namespace {

// Arena offsets are multiples of this: the CPU allocator's alignment (a cache line, every
// vector width), and on CUDA the driver's allocation granule (cudaMalloc's 256 bytes).
int64_t arena_alignment(const Device& d) {
  return d.is_cpu() ? 64 : 256;
}

bool is_empty_factory(const Node& n) {
  if (n.kind != Node::Kind::Op || !n.op.valid()) return false;
  const std::string& name = n.op.name();
  return name == "aten::empty" || name == "aten::empty_like" || name == "aten::empty_strided";
}

// Whether `o` is `f` with a last keyword argument `Tensor(a!) out` that it returns.
bool matches_out(const FunctionSchema& f, const FunctionSchema& o) {
  const auto& fa = f.arguments();
  const auto& oa = o.arguments();
  if (oa.size() != fa.size() + 1 || o.returns().size() != 1) return false;
  for (size_t i = 0; i < fa.size(); ++i) {
    if (fa[i].name != oa[i].name || !(fa[i].type == oa[i].type) || oa[i].alias) return false;
  }
  const Argument& last = oa.back();
  return last.name == "out" && last.is_written() && last.type.is_tensor_like() && !last.type.list &&
         !last.type.optional && o.returns()[0].alias &&
         o.returns()[0].alias->set == last.alias->set;
}

// The `.out` overload of a functional operator: the same arguments, then a keyword-only
// `Tensor(a!) out` that it returns. PyTorch's names: `add.Tensor` -> `add.out`,
// `pow.Tensor_Tensor` -> `pow.Tensor_Tensor_out`, `sum.dim_IntList` -> `sum.IntList_out`.
// Null when there is none.
std::optional<OperatorHandle> out_overload(const OperatorHandle& op) {
  const FunctionSchema& f = op.schema();
  if (f.returns().size() != 1 || f.returns()[0].alias || !f.returns()[0].type.is_tensor_like() ||
      f.returns()[0].type.list || f.returns()[0].type.optional || f.is_mutable())
    return std::nullopt;
  std::vector<std::string> names = {f.base_name() + ".out"};
  if (!f.overload().empty()) {
    names.push_back(f.base_name() + "." + f.overload() + "_out");
    if (f.overload().rfind("dim_", 0) == 0)
      names.push_back(f.base_name() + "." + f.overload().substr(4) + "_out");
  }
  for (const std::string& name : names) {
    auto out = find_op(name);
    if (out && matches_out(f, out->schema())) return out;
  }
  return std::nullopt;
}

struct Block {
  size_t node;  // the allocation
  size_t last;  // the last node that touches its storage
  Device device;
  sym::ExprPtr bytes;  // rounded up to the arena's alignment
  int64_t static_bytes = -1;
  int64_t offset = 0;  // static plans
  int into = -1;       // in place of this (earlier) block: its bytes, its offset
};

}  // namespace

int Graph::plan_memory() {
  if (!env) return 0;
  auto& ctx = env->ctx;
  arenas.clear();
  std::set<int> pinned;  // storages of inputs, results and closed-over tensors
  for (int v : inputs) {
    if (v >= 0) pinned.insert(storage_of(v));
  }
  for (int v : outputs) {
    if (v >= 0) pinned.insert(storage_of(v));
  }
  for (int v : captured_values) pinned.insert(storage_of(v));
  auto plannable = [&](int v) {
    const TensorInfo& t = values[static_cast<size_t>(v)].tensor;
    return values[static_cast<size_t>(v)].kind == Value::Kind::Tensor && !pinned.count(t.storage) &&
           (t.device.is_cpu() || t.device.is_cuda()) && contiguous(t) && t.offset &&
           t.offset->constant() == 0;
  };

  // Operator results an `.out` overload can write: the graph allocates them (an `aten::empty`
  // before the node), so the plan covers them too (matmul, reductions, cat, ...).
  std::vector<std::pair<size_t, Node>> added;
  for (size_t k = 0; k < nodes.size(); ++k) {
    Node& n = nodes[k];
    if (n.dead || n.kind != Node::Kind::Op || n.elide_when || !n.writes.empty() ||
        n.outputs.size() != 1 || n.outputs[0] < 0 || is_empty_factory(n) ||
        (n.op.entry().tags() & (kTagRandom | kTagDataDependent)))
      continue;
    const int v = n.outputs[0];
    const TensorInfo t = values[static_cast<size_t>(v)].tensor;  // (add_value moves values)
    if (!plannable(v) || values[static_cast<size_t>(v)].producer != static_cast<int>(k)) continue;
    bool fresh = true;  // the result is no view of an argument
    for (const Arg& a : n.args) {
      if (a.kind == Arg::Kind::Value && a.value >= 0)
        fresh = fresh && storage_of(a.value) != t.storage;
      for (int x : a.values) fresh = fresh && (x < 0 || storage_of(x) != t.storage);
    }
    if (!fresh) continue;
    auto out = out_overload(n.op);
    if (!out) continue;
    const DeviceType dt = t.device.type();
    if (!(out->entry().has_kernel(dt) || out->entry().composite().valid())) continue;
    Value ev;
    ev.kind = Value::Kind::Tensor;
    ev.tensor = t;  // the same storage: the result is the allocation, written
    const int e = add_value(std::move(ev));
    Arg a;
    a.kind = Arg::Kind::Value;
    a.value = e;
    a.name = "out";
    n.args.push_back(std::move(a));
    n.writes = {e};
    n.note += (n.note.empty() ? "" : "; ") + std::string("as ") + out->name() +
              " into a planned allocation";
    n.planned_from = n.op.name();
    n.op = *out;
    n.out_variant = true;
    added.emplace_back(k, empty_node(t, e, n.loc));
  }
  for (auto it = added.rbegin(); it != added.rend(); ++it) {
    const int e = it->second.outputs[0];
    std::vector<Node> one;
    one.push_back(std::move(it->second));
    insert_nodes(it->first, std::move(one));
    values[static_cast<size_t>(e)].producer = static_cast<int>(it->first);
  }

  // The allocations to place, and how long each one's storage is used.
  std::map<int, size_t> last;  // storage -> the last node that touches it
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = nodes[k];
    if (n.dead) continue;
    auto use = [&](int v) {
      if (v >= 0 && values[static_cast<size_t>(v)].kind == Value::Kind::Tensor)
        last[storage_of(v)] = k;
    };
    for (const Arg& a : n.args) {
      if (a.kind == Arg::Kind::Value) use(a.value);
      for (int v : a.values) use(v);
    }
    for (int v : n.writes) use(v);
    for (int v : n.outputs) use(v);
  }
  std::vector<Block> blocks;
  for (size_t k = 0; k < nodes.size(); ++k) {
    Node& n = nodes[k];
    n.arena = -1;
    n.arena_offset = nullptr;
    n.arena_over = -1;
    if (n.dead || !is_empty_factory(n) || n.elide_when || n.outputs.size() != 1 || n.outputs[0] < 0)
      continue;
    const int v = n.outputs[0];
    if (!plannable(v) || values[static_cast<size_t>(v)].producer != static_cast<int>(k)) continue;
    const TensorInfo t = values[static_cast<size_t>(v)].tensor;
    sym::ExprPtr numel = ctx.constant(1);
    for (auto* s : t.sizes) numel = ctx.mul(numel, s);
    if (numel->constant() == 0) continue;
    const int64_t align = arena_alignment(t.device);
    sym::ExprPtr bytes =
        ctx.mul(ctx.ceildiv(ctx.mul(numel, ctx.constant(static_cast<int64_t>(itemsize(t.dtype)))),
                            ctx.constant(align)),
                ctx.constant(align));
    // The canonical form (contiguous: the same tensor from its sizes alone), whose sizes the
    // executor reads from its first argument.
    const SourceLoc loc = n.loc;
    const std::string note = n.note;
    n = empty_node(t, v, loc);
    n.note = note;
    Block b;
    b.node = k;
    b.last = last.at(t.storage);
    b.device = t.device;
    b.bytes = bytes;
    if (auto c = bytes->constant()) b.static_bytes = *c;
    blocks.push_back(b);
  }
  if (blocks.empty()) return 0;

  // In place: a pointwise operator writing a planned allocation of the same sizes and dtype as a
  // planned input whose last use it is stores its result over that input (each element is read
  // right before the same element is written: what `add(a, b, out=a)` does eagerly). The two
  // blocks become one.
  std::map<int, size_t> block_of;  // storage -> its block
  for (size_t b = 0; b < blocks.size(); ++b)
    block_of[storage_of(nodes[blocks[b].node].outputs[0])] = b;
  for (size_t b = 0; b < blocks.size(); ++b) {
    const size_t k = blocks[b].node + 1;  // the operator an `.out` allocation is made for
    if (k >= nodes.size()) continue;
    const Node& op = nodes[k];
    const int out = nodes[blocks[b].node].outputs[0];
    if (op.dead || !op.out_variant || !(op.op.entry().tags() & kTagPointwise) ||
        op.args.back().value != out)
      continue;
    const TensorInfo& ot = values[static_cast<size_t>(out)].tensor;
    for (const Arg& a : op.args) {
      if (a.kind != Arg::Kind::Value || a.value < 0 || a.value == out) continue;
      const TensorInfo& it = values[static_cast<size_t>(a.value)].tensor;
      auto found = block_of.find(it.storage);
      if (found == block_of.end()) continue;
      size_t root = found->second;
      while (blocks[root].into >= 0) root = static_cast<size_t>(blocks[root].into);
      const Block& in = blocks[root];
      bool alone = true;  // no other argument reads that memory (another view of it)
      for (const Arg& other : op.args) {
        if (other.kind == Arg::Kind::Value && other.value >= 0 && other.value != a.value &&
            storage_of(other.value) == it.storage)
          alone = false;
        for (int x : other.values) alone = alone && (x < 0 || storage_of(x) != it.storage);
      }
      if (!alone || blocks[found->second].last != k || in.device != blocks[b].device ||
          it.dtype != ot.dtype || it.sizes != ot.sizes || !contiguous(it) || !it.offset ||
          it.offset->constant() != 0 || in.bytes != blocks[b].bytes)
        continue;
      blocks[b].into = static_cast<int>(root);
      nodes[blocks[b].node].arena_over = a.value;
      blocks[root].last = std::max(blocks[root].last, blocks[b].last);
      Node& n = nodes[k];
      n.note += "; stored over %" + std::to_string(a.value) + " (its last use)";
      break;
    }
  }

  std::vector<Device> devices;
  for (const Block& b : blocks) {
    if (std::find(devices.begin(), devices.end(), b.device) == devices.end())
      devices.push_back(b.device);
  }
  auto overlap = [](const Block& a, const Block& b) {
    return a.node <= b.last && b.node <= a.last;
  };
  for (const Device& d : devices) {
    std::vector<Block*> mine;  // the blocks placed (not those in place of another)
    for (Block& b : blocks) {
      if (b.device == d && b.into < 0) mine.push_back(&b);
    }
    Arena arena;
    arena.device = d;
    arena.unplanned_bytes = ctx.constant(0);
    for (const Block& b : blocks) {
      if (b.device != d) continue;
      ++arena.values;
      arena.unplanned_bytes = ctx.add(arena.unplanned_bytes, b.bytes);
    }
    const int index = static_cast<int>(arenas.size());
    const bool all_static =
        std::all_of(mine.begin(), mine.end(), [](const Block* b) { return b->static_bytes >= 0; });
    if (all_static) {
      // Largest first; each at the lowest offset where no block alive at the same time lies.
      std::vector<Block*> order = mine;
      std::stable_sort(order.begin(), order.end(), [](const Block* a, const Block* b) {
        return a->static_bytes > b->static_bytes;
      });
      std::vector<Block*> placed;
      int64_t total = 0;
      for (Block* b : order) {
        std::vector<const Block*> live;
        for (const Block* p : placed) {
          if (overlap(*p, *b)) live.push_back(p);
        }
        std::sort(live.begin(), live.end(),
                  [](const Block* x, const Block* y) { return x->offset < y->offset; });
        int64_t at = 0;
        for (const Block* p : live) {
          if (at + b->static_bytes <= p->offset) break;  // fits in the gap before p
          at = std::max(at, p->offset + p->static_bytes);
        }
        b->offset = at;
        total = std::max(total, at + b->static_bytes);
        placed.push_back(b);
      }
      // The invariant the executor relies on: blocks alive at once do not share a byte.
      for (const Block* a : mine) {
        for (const Block* b : mine) {
          TS_INTERNAL_ASSERT(a == b || !overlap(*a, *b) ||
                             a->offset + a->static_bytes <= b->offset ||
                             b->offset + b->static_bytes <= a->offset)
              << "graph " << name << ": the memory plan overlaps nodes " << a->node << " and "
              << b->node;
        }
      }
      for (const Block* b : mine) {
        nodes[b->node].arena = index;
        nodes[b->node].arena_offset = ctx.constant(b->offset);
      }
      arena.bytes = ctx.constant(total);
    } else {
      // Slots in allocation order: a slot whose occupant died is taken, preferring one provably
      // large enough (it then keeps its size); a slot is as large as its largest occupant.
      struct Slot {
        sym::ExprPtr bytes;
        size_t free_after;
      };
      std::vector<Slot> slots;
      std::vector<size_t> slot_of(mine.size());
      for (size_t i = 0; i < mine.size(); ++i) {
        const Block& b = *mine[i];
        int pick = -1;
        for (size_t j = 0; j < slots.size(); ++j) {
          if (slots[j].free_after >= b.node) continue;
          const bool fits = ctx.statically_known(ctx.le(b.bytes, slots[j].bytes)) == true;
          if (fits) {
            pick = static_cast<int>(j);
            break;
          }
          if (pick < 0) pick = static_cast<int>(j);
        }
        if (pick < 0) {
          slots.push_back({b.bytes, b.last});
          slot_of[i] = slots.size() - 1;
          continue;
        }
        Slot& s = slots[static_cast<size_t>(pick)];
        if (ctx.statically_known(ctx.le(b.bytes, s.bytes)) != true)
          s.bytes = ctx.max(s.bytes, b.bytes);
        s.free_after = b.last;
        slot_of[i] = static_cast<size_t>(pick);
      }
      std::vector<sym::ExprPtr> offset(slots.size());
      sym::ExprPtr total = ctx.constant(0);
      for (size_t j = 0; j < slots.size(); ++j) {
        offset[j] = total;
        total = ctx.add(total, slots[j].bytes);
      }
      for (size_t i = 0; i < mine.size(); ++i) {
        nodes[mine[i]->node].arena = index;
        nodes[mine[i]->node].arena_offset = offset[slot_of[i]];
      }
      arena.bytes = total;
    }
    arenas.push_back(arena);
  }
  for (const Block& b : blocks) {
    Node& n = nodes[b.node];
    if (b.into >= 0) {  // (roots come first: an input is allocated before its consumer's output)
      const Node& root = nodes[blocks[static_cast<size_t>(b.into)].node];
      n.arena = root.arena;
      n.arena_offset = root.arena_offset;
    }
    n.note += (n.note.empty() ? "" : "; ") + std::string("arena ") + std::to_string(n.arena) +
              " + " + ctx.str(n.arena_offset);
  }
  return static_cast<int>(blocks.size());
}

}  // namespace tessera::compiler
