#include "compile/graph.h"

#include <map>
#include <set>
#include <sstream>

#include "tessera/tl.h"

namespace tessera::compiler {

int Graph::add_value(Value v) {
  values.push_back(std::move(v));
  return static_cast<int>(values.size() - 1);
}

bool Graph::touches(const Node& n, int s) const {
  for (const Arg& a : n.args) {
    if (a.kind == Arg::Kind::Value && a.value >= 0 && storage_of(a.value) == s) return true;
    if (a.kind == Arg::Kind::ValueList) {
      for (int x : a.values) {
        if (x >= 0 && storage_of(x) == s) return true;
      }
    }
  }
  for (int w : n.writes) {
    if (storage_of(w) == s) return true;
  }
  return false;
}

void Graph::insert_nodes(size_t at, std::vector<Node> added) {
  const int n = static_cast<int>(added.size());
  for (Value& v : values) {
    if (v.producer >= static_cast<int>(at)) v.producer += n;
  }
  nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(at),
               std::make_move_iterator(added.begin()), std::make_move_iterator(added.end()));
}

size_t Graph::next_toucher(size_t from, int s) const {
  size_t j = from + 1;
  while (j < nodes.size() && (nodes[j].dead || !touches(nodes[j], s))) ++j;
  return j;
}

bool Graph::contiguous(const TensorInfo& t) const {
  auto& ctx = env->ctx;
  sym::ExprPtr expected = ctx.constant(1);
  for (size_t d = t.sizes.size(); d-- > 0;) {
    if (t.sizes[d]->constant() == 1) continue;
    if (t.strides[d] != expected) return false;
    expected = ctx.mul(expected, t.sizes[d]);
  }
  return true;
}

size_t Graph::live_nodes() const {
  size_t n = 0;
  for (const auto& node : nodes) n += !node.dead;
  return n;
}

std::string Graph::str() const {
  std::ostringstream os;
  auto& ctx = env->ctx;
  auto value_str = [&](int id) {
    if (id < 0) return std::string("None");
    return "%" + std::to_string(id);
  };
  auto type_str = [&](int id) {
    const Value& v = values[static_cast<size_t>(id)];
    if (v.kind == Value::Kind::Int) return std::string("int");
    std::string s = std::string(dtype_name(v.tensor.dtype)) + "[";
    for (size_t i = 0; i < v.tensor.sizes.size(); ++i)
      s += (i ? ", " : "") + ctx.str(v.tensor.sizes[i]);
    return s + "]";
  };
  auto arg_str = [&](const Arg& a) {
    std::string s = a.role == Arg::Role::Positional ? "" : a.name + "=";
    switch (a.kind) {
      case Arg::Kind::Value:
        s += value_str(a.value) + (a.written ? "!" : "");
        break;
      case Arg::Kind::ValueList: {
        s += "[";
        for (size_t i = 0; i < a.values.size(); ++i) s += (i ? ", " : "") + value_str(a.values[i]);
        s += "]";
        break;
      }
      case Arg::Kind::Sym:
        s += ctx.str(a.expr);
        break;
      case Arg::Kind::SymList: {
        s += "[";
        for (size_t i = 0; i < a.exprs.size(); ++i) s += (i ? ", " : "") + ctx.str(a.exprs[i]);
        s += "]";
        break;
      }
      case Arg::Kind::Constant: {
        std::ostringstream c;
        c << a.constant;
        s += c.str();
        break;
      }
    }
    return s;
  };
  os << "graph " << name << "(";
  bool first = true;
  for (int in : inputs) {
    if (in < 0) continue;
    os << (first ? "" : ", ") << value_str(in) << ": " << type_str(in);
    first = false;
  }
  for (int c : captured_values) {
    os << (first ? "" : ", ") << value_str(c) << ": " << type_str(c) << " (captured)";
    first = false;
  }
  os << ") {\n";
  for (const auto& n : nodes) {
    if (n.dead) continue;
    os << "  ";
    std::vector<std::string> outs;
    for (int o : n.outputs) {
      if (o >= 0) outs.push_back(value_str(o) + ": " + type_str(o));
    }
    for (size_t i = 0; i < outs.size(); ++i) os << (i ? ", " : "") << outs[i];
    if (!outs.empty()) os << " = ";
    if (n.kind == Node::Kind::Kernel) {
      if (n.tuned) {
        os << "kernel " << n.kernel->name() << " tuned over {";
        for (size_t v = 0; v < n.variants.size(); ++v) {
          const auto& var = n.variants[v];
          os << (v ? "; " : "");
          for (size_t m = 0; m < var.cand.meta.size(); ++m)
            os << (m ? ", " : "") << var.cand.meta[m].first << "=" << var.cand.meta[m].second.str();
          if (var.cand.has_options) {
            os << ", num_warps=" << var.cand.num_warps << ", num_stages=" << var.cand.num_stages;
            if (var.cand.maxnreg) os << ", maxnreg=" << var.cand.maxnreg;
          }
          os << ": [" << ctx.str(var.grid[0]) << ", " << ctx.str(var.grid[1]) << ", "
             << ctx.str(var.grid[2]) << "]";
        }
        os << "}(";
      } else {
        os << "kernel " << n.kernel->name() << "[" << ctx.str(n.grid[0]) << ", "
           << ctx.str(n.grid[1]) << ", " << ctx.str(n.grid[2]) << "](";
      }
    } else {
      os << (n.kind == Node::Kind::Extern ? "extern " : "") << n.op.name() << "(";
    }
    for (size_t i = 0; i < n.args.size(); ++i) os << (i ? ", " : "") << arg_str(n.args[i]);
    os << ")";
    if (!n.writes.empty()) {
      os << "  writes";
      for (int w : n.writes) os << " " << value_str(w);
    }
    if (n.loc.known()) os << "  # " << n.loc;
    if (!n.note.empty()) os << (n.loc.known() ? "; " : "  # ") << n.note;
    os << "\n";
  }
  os << "  return";
  for (size_t i = 0; i < outputs.size(); ++i) {
    os << (i ? ", " : " ");
    if (outputs[i] >= 0) {
      os << value_str(outputs[i]);
    } else {
      os << constant_outputs[i];
    }
  }
  os << "\n}\n";
  for (size_t i = 0; i < arenas.size(); ++i) {
    const Arena& a = arenas[i];
    os << "arena " << i << " on " << a.device.str() << ": " << ctx.str(a.bytes) << " bytes for "
       << a.values << " allocations (" << ctx.str(a.unplanned_bytes) << " one by one)\n";
  }
  // Guards on symbolic sizes.
  for (const auto& g : env->guards)
    os << "guard " << ctx.str(g.condition) << "  # " << g.why << ", " << g.loc << "\n";
  return os.str();
}

CompiledGraph Graph::data() const {
  auto& ctx = env->ctx;
  CompiledGraph g;
  g.name = name;
  g.text = str();
  g.inputs = inputs;
  g.outputs = outputs;
  for (size_t i = 0; i < values.size(); ++i) {
    const Value& v = values[i];
    CompiledGraph::Value out;
    out.id = static_cast<int>(i);
    out.is_tensor = v.kind == Value::Kind::Tensor;
    if (out.is_tensor) {
      out.dtype = v.tensor.dtype;
      out.device = v.tensor.device;
      for (auto* e : v.tensor.sizes) out.sizes.push_back(ctx.str(e));
      for (auto* e : v.tensor.strides) out.strides.push_back(ctx.str(e));
      out.storage = v.tensor.storage;
    } else if (v.expr) {
      out.expr = ctx.str(v.expr);
    }
    g.values.push_back(std::move(out));
  }
  std::vector<int> index(nodes.size(), -1);  // graph node -> index among the live ones
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.dead) continue;
    index[i] = static_cast<int>(g.nodes.size());
    CompiledGraph::Node out;
    out.kind = n.kind == Node::Kind::Kernel   ? CompiledGraph::Node::Kind::Kernel
               : n.kind == Node::Kind::Extern ? CompiledGraph::Node::Kind::Extern
                                              : CompiledGraph::Node::Kind::Op;
    out.target = n.kind == Node::Kind::Kernel ? n.kernel->name() : std::string(n.op.name());
    auto add_input = [&](int v, bool read) {
      if (v < 0 || values[static_cast<size_t>(v)].kind != Value::Kind::Tensor) return;
      out.inputs.push_back(v);
      if (read) out.reads.push_back(v);
    };
    for (const Arg& a : n.args) {
      const bool read = n.kind != Node::Kind::Kernel || a.read;
      if (a.kind == Arg::Kind::Value) add_input(a.value, read);
      if (a.kind == Arg::Kind::ValueList) {
        for (int v : a.values) add_input(v, read);
      }
    }
    out.writes = n.writes;
    for (int o : n.outputs) {
      if (o >= 0) out.outputs.push_back(o);
    }
    for (const auto& [op, loc] : n.fused_from) out.fused_from.push_back({op, loc});
    if (n.kind == Node::Kind::Kernel) {
      for (auto* e : n.grid) out.grid.push_back(ctx.str(e));
      out.variants = static_cast<int>(n.variants.size());
    }
    if (n.elide_when) out.elided_when = ctx.str(n.elide_when);
    if (n.out_variant) out.planned_from = n.planned_from;
    if (n.arena >= 0) {
      out.arena = n.arena;
      out.arena_offset = ctx.str(n.arena_offset);
    }
    out.loc = n.loc;
    out.note = n.note;
    g.nodes.push_back(std::move(out));
  }
  for (auto& v : g.values) {
    const int p = values[static_cast<size_t>(v.id)].producer;
    v.producer = p >= 0 ? index[static_cast<size_t>(p)] : -1;
  }
  for (const auto& guard : env->guards) g.guards.push_back(ctx.str(guard.condition));
  for (const Arena& a : arenas)
    g.arenas.push_back({a.device, ctx.str(a.bytes), ctx.str(a.unplanned_bytes), a.values});
  return g;
}

void Graph::verify() const {
  std::vector<bool> defined(values.size(), false);
  for (int in : inputs) {
    if (in >= 0) defined[static_cast<size_t>(in)] = true;
  }
  for (int c : captured_values) defined[static_cast<size_t>(c)] = true;
  auto use = [&](int v, const Node& n) {
    TS_INTERNAL_ASSERT(v < 0 ||
                       (v < static_cast<int>(values.size()) && defined[static_cast<size_t>(v)]))
        << "graph " << name << ": value %" << v << " used by "
        << (n.kernel ? "a kernel" : n.op.name()) << " before it is defined";
  };
  for (const auto& n : nodes) {
    if (n.dead) continue;
    for (const auto& a : n.args) {
      if (a.kind == Arg::Kind::Value) use(a.value, n);
      if (a.kind == Arg::Kind::ValueList) {
        for (int v : a.values) use(v, n);
      }
      if (a.kind == Arg::Kind::Sym) {
        TS_INTERNAL_ASSERT(a.expr != nullptr) << "a symbolic argument without an expression";
      }
    }
    for (int w : n.writes) use(w, n);
    if (n.kind == Node::Kind::Kernel) {
      for (auto* g : n.grid) TS_INTERNAL_ASSERT(g != nullptr) << "a kernel launch without a grid";
    }
    for (int o : n.outputs) {
      if (o >= 0) defined[static_cast<size_t>(o)] = true;
    }
  }
  for (int o : outputs) {
    TS_INTERNAL_ASSERT(o < 0 || defined[static_cast<size_t>(o)])
        << "graph " << name << ": output %" << o << " undefined";
  }
}

int Graph::eliminate_dead_code() {
  std::set<int> live_values, live_storages;
  auto mark = [&](int v) {
    if (v < 0) return;
    live_values.insert(v);
    const Value& val = values[static_cast<size_t>(v)];
    if (val.kind == Value::Kind::Tensor) live_storages.insert(val.tensor.storage);
  };
  for (int o : outputs) mark(o);
  // Writes to the inputs' (and captured tensors') memory are observable after the call.
  for (int in : inputs) {
    if (in >= 0) live_storages.insert(values[static_cast<size_t>(in)].tensor.storage);
  }
  for (int c : captured_values) live_storages.insert(values[static_cast<size_t>(c)].tensor.storage);
  int removed = 0;
  for (size_t i = nodes.size(); i-- > 0;) {
    Node& n = nodes[i];
    if (n.dead) continue;
    bool live = false;
    for (int o : n.outputs) live = live || (o >= 0 && live_values.count(o));
    for (int w : n.writes)
      live = live || live_storages.count(values[static_cast<size_t>(w)].tensor.storage);
    if (!live) {
      n.dead = true;
      ++removed;
      continue;
    }
    for (const auto& a : n.args) {
      if (a.kind == Arg::Kind::Value) mark(a.value);
      if (a.kind == Arg::Kind::ValueList) {
        for (int v : a.values) mark(v);
      }
    }
    for (int w : n.writes) mark(w);
  }
  return removed;
}

int Graph::eliminate_dead_fills() {
  // Fill operators and the allocation that replaces each (the same arguments without the value).
  static const std::map<std::string, std::string, std::less<>> kFills = {
      {"aten::full", "aten::empty"},
      {"aten::zeros", "aten::empty"},
      {"aten::ones", "aten::empty"},
      {"aten::full_like", "aten::empty_like"},
      {"aten::zeros_like", "aten::empty_like"},
      {"aten::ones_like", "aten::empty_like"}};
  int elided = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& fill = nodes[i];
    if (fill.dead || fill.kind != Node::Kind::Op || fill.outputs.size() != 1 || fill.outputs[0] < 0)
      continue;
    const auto replacement = kFills.find(fill.op.name());
    if (replacement == kFills.end()) continue;
    const int v = fill.outputs[0];
    const int s = storage_of(v);
    // The next node that touches the filled memory.
    const size_t j = next_toucher(i, s);
    if (j == nodes.size() || nodes[j].kind != Node::Kind::Kernel) continue;
    Node& k = nodes[j];
    std::string why;
    sym::ExprPtr cover = nullptr;  // every written argument on the filled memory: all covered
    for (Arg& a : k.args) {
      if (!why.empty() || a.kind != Arg::Kind::Value || a.value < 0 || storage_of(a.value) != s)
        continue;
      if (a.value != v) {
        why = "kernel " + k.kernel->name() + " receives a view of it";
      } else if (a.read) {
        why = "kernel " + k.kernel->name() + " loads from it";
      } else if (!a.written) {
        why = "kernel " + k.kernel->name() + " does not store to it";
      } else if (!a.covers) {
        why = a.cover_note;
      } else if (env->ctx.statically_known(a.covers) == false) {
        why = "kernel " + k.kernel->name() + " does not store every element";
      } else {
        if (a.cover_limit && env->ctx.statically_known(a.covers) == true &&
            env->ctx.evaluate(a.cover_limit, env->hints()) != 0) {
          // A guard instead of a per-call decision: sizes past the offsets' width recompile.
          env->add_guard(a.cover_limit, k.loc,
                         "kernel " + k.kernel->name() + "'s 32-bit offsets, for its fill elision");
          a.cover_limit = nullptr;
        }
        sym::ExprPtr c = a.cover_limit ? env->ctx.logical_and(a.covers, a.cover_limit) : a.covers;
        cover = cover ? env->ctx.logical_and(cover, c) : c;
      }
    }
    if (!why.empty() || !cover) {
      fill.note = "fill kept: " +
                  (why.empty() ? "kernel " + k.kernel->name() + " does not store to it" : why);
      continue;
    }
    int drop = -1;
    for (size_t a = 0; a < fill.args.size(); ++a) {
      if (fill.args[a].name == "fill_value") drop = static_cast<int>(a);
    }
    const std::string by = "kernel " + k.kernel->name() + " stores every element";
    if (env->ctx.statically_known(cover) == true) {
      fill.note = "fill of " + fill.op.name() + " elided: " + by;
      if (drop >= 0) fill.args.erase(fill.args.begin() + drop);
      fill.op = get_op(replacement->second);
    } else {
      // Decided per call, by the sizes (a 32-bit kernel's offsets reach 2^31 - 1 elements).
      fill.note = "fill of " + fill.op.name() + " elided where " + env->ctx.str(cover) + ": " + by;
      fill.elide_when = cover;
      fill.elided_op = get_op(replacement->second);
      fill.elided_drop = drop;
    }
    ++elided;
  }
  return elided;
}

int Graph::reuse_inputs_in_place() {
  std::set<int> pinned;  // storages of the inputs, results and closed-over tensors
  for (int v : inputs) {
    if (v >= 0) pinned.insert(storage_of(v));
  }
  for (int v : outputs) {
    if (v >= 0) pinned.insert(storage_of(v));
  }
  for (int v : captured_values) pinned.insert(storage_of(v));
  auto dense = [&](const TensorInfo& t) {
    return contiguous(t) && t.offset && t.offset->constant() == 0;
  };
  int moved = 0;
  for (size_t k = 0; k < nodes.size(); ++k) {
    Node& n = nodes[k];
    if (n.dead || n.kind != Node::Kind::Kernel || !n.in_place_ok) continue;
    // One output only: its stores are then one loop that reads each input element (a load the
    // emitter keeps inline) right before writing the same element. With two, the first output's
    // stores could overwrite an input the second's loop still reads.
    int written = 0;
    for (const Arg& a : n.args) written += a.kind == Arg::Kind::Value && a.written;
    if (written != 1) continue;
    std::set<int> taken;
    for (Arg& out : n.args) {
      if (out.kind != Arg::Kind::Value || !out.written) continue;
      const int e = out.value;
      const int p = values[static_cast<size_t>(e)].producer;
      if (p < 0 || nodes[static_cast<size_t>(p)].op.name() != "aten::empty") continue;
      const TensorInfo& et = values[static_cast<size_t>(e)].tensor;
      for (const Arg& in : n.args) {
        if (in.kind != Arg::Kind::Value || !in.read || in.written) continue;
        const int i = in.value;
        const TensorInfo& it = values[static_cast<size_t>(i)].tensor;
        const int s = it.storage;
        if (taken.count(i) || pinned.count(s) || it.dtype != et.dtype || it.sizes != et.sizes ||
            !dense(it) || !dense(et) || next_toucher(k, s) != nodes.size())
          continue;
        // Nothing else of that memory is read here (a view of it as another input).
        bool alone = true;
        for (const Arg& other : n.args) {
          if (other.kind == Arg::Kind::Value && other.value != i && other.value >= 0 &&
              storage_of(other.value) == s)
            alone = false;
        }
        // The allocation's result is used by this kernel only before it (and after, as i).
        for (size_t j = static_cast<size_t>(p) + 1; j < k && alone; ++j)
          alone = nodes[j].dead || !touches(nodes[j], et.storage);
        if (!alone) continue;
        // e becomes i: the kernel stores into i's memory, and every later use reads it there.
        for (size_t j = k; j < nodes.size(); ++j) {
          Node& m = nodes[j];
          for (Arg& a : m.args) {
            if (a.kind == Arg::Kind::Value && a.value == e) a.value = i;
            for (int& v : a.values) v = v == e ? i : v;
          }
          for (int& w : m.writes) w = w == e ? i : w;
        }
        for (int& o : outputs) {
          if (o == e) {
            o = i;
            pinned.insert(s);  // a result now: no later kernel may take this memory
          }
        }
        nodes[static_cast<size_t>(p)].dead = true;
        n.note += (n.note.empty() ? "" : "; ") + std::string("output %") + std::to_string(e) +
                  " stored in place of %" + std::to_string(i);
        taken.insert(i);
        ++moved;
        break;
      }
    }
  }
  return moved;
}

int Graph::eliminate_common_subexpressions() {
  std::set<int> written;  // storages any node writes
  for (const auto& n : nodes) {
    if (n.dead) continue;
    for (int w : n.writes) written.insert(values[static_cast<size_t>(w)].tensor.storage);
  }
  std::map<int, int> version;  // storage -> writes so far
  std::map<std::string, size_t> seen;
  std::map<int, int> remap;  // value -> replacement
  auto resolve = [&](int v) {
    auto it = remap.find(v);
    return it == remap.end() ? v : it->second;
  };
  int merged = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& n = nodes[i];
    if (n.dead) continue;
    for (auto& a : n.args) {
      if (a.kind == Arg::Kind::Value) a.value = resolve(a.value);
      if (a.kind == Arg::Kind::ValueList) {
        for (int& v : a.values) v = resolve(v);
      }
    }
    for (int& w : n.writes) w = resolve(w);
    const bool pure = n.kind == Node::Kind::Op && n.writes.empty() &&
                      !(n.op.entry().tags() & (kTagRandom | kTagFactory | kTagDataDependent));
    bool outputs_written = false;
    for (int o : n.outputs) {
      if (o >= 0 && written.count(values[static_cast<size_t>(o)].tensor.storage))
        outputs_written = true;
    }
    if (pure && !outputs_written) {
      std::ostringstream key;
      key << n.op.name();
      for (const auto& a : n.args) {
        key << "|" << static_cast<int>(a.kind) << ":";
        switch (a.kind) {
          case Arg::Kind::Value: {
            key << a.value;
            if (a.value >= 0)
              key << "@" << version[values[static_cast<size_t>(a.value)].tensor.storage];
            break;
          }
          case Arg::Kind::ValueList:
            for (int v : a.values)
              key << v
                  << (v >= 0 ? "@" + std::to_string(
                                         version[values[static_cast<size_t>(v)].tensor.storage])
                             : "")
                  << ",";
            break;
          case Arg::Kind::Sym:
            key << a.expr;
            break;
          case Arg::Kind::SymList:
            for (auto* e : a.exprs) key << e << ",";
            break;
          case Arg::Kind::Constant:
            key << a.constant;
            break;
        }
      }
      auto [it, fresh] = seen.emplace(key.str(), i);
      if (!fresh) {
        const Node& first = nodes[it->second];
        for (size_t k = 0; k < n.outputs.size(); ++k) {
          if (n.outputs[k] >= 0) remap[n.outputs[k]] = first.outputs[k];
        }
        n.dead = true;
        ++merged;
        continue;
      }
    }
    for (int w : n.writes) ++version[values[static_cast<size_t>(w)].tensor.storage];
  }
  for (int& o : outputs) o = o >= 0 ? resolve(o) : o;
  return merged;
}

}  // namespace tessera::compiler
