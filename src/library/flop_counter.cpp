// FlopCounterMode: declared formulas per operator, derived counts from launched kernels' IR.
#include "tessera/flop_counter.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>

#include "ir/cost.h"
#include "ir/ir.h"
#include "tessera/autograd.h"
#include "tl/launch_op.h"

namespace tessera {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

namespace {

struct FlopSlot {
  FlopFormula shapes;
  RawFlopFormula raw;
};

std::vector<Shape> tensor_shapes(const IValue* v, size_t n) {
  std::vector<Shape> out;
  auto add = [&](const Tensor& t) {
    if (!t.defined()) return;
    Shape s;
    for (const auto& d : t.sizes()) s.push_back(d.expect_int());
    out.push_back(std::move(s));
  };
  for (size_t i = 0; i < n; ++i) {
    if (v[i].is_tensor()) {
      add(v[i].to_tensor());
    } else if (v[i].is_tensor_list()) {
      for (const auto& t : v[i].to_tensor_list()) add(t);
    }
  }
  return out;
}

void set_slot(std::string_view op, FlopSlot s) {
  get_op(op).entry().set_flop_slot(std::make_shared<FlopSlot>(std::move(s)));
}

// tessera's built-in formulas. matmul: two FLOPs per multiply-add (linear decomposes into
// matmul, so it is counted there). Norms, per element: layer_norm 5 (mean, center, square,
// variance, scale) plus 1 for a weight and 1 for a bias; rms_norm 3 (square, mean, scale) plus 1
// for a weight.
void register_builtin_flop_formulas() {
  auto matmul = [](const std::vector<Shape>& in, const std::vector<Shape>& out) -> int64_t {
    const Shape& a = in.at(0);
    const int64_t k = a.empty() ? 1 : a.back();
    return 2 * numel(out.at(0)) * k;
  };
  set_slot("aten::matmul", {matmul, nullptr});
  set_slot("aten::matmul.out", {[=](const std::vector<Shape>& in, const std::vector<Shape>&) {
                                  return matmul({in.at(0)}, {in.at(2)});
                                },
                                nullptr});
  set_slot("aten::layer_norm", {nullptr, [](const Stack& in, const Stack&) -> int64_t {
                                  const int64_t n = in[0].to_tensor().numel().expect_int();
                                  const int64_t affine =
                                      (in[2].is_none() ? 0 : 1) + (in[3].is_none() ? 0 : 1);
                                  return (5 + affine) * n;
                                }});
  set_slot("aten::rms_norm", {nullptr, [](const Stack& in, const Stack&) -> int64_t {
                                const int64_t n = in[0].to_tensor().numel().expect_int();
                                return (3 + (in[2].is_none() ? 0 : 1)) * n;
                              }});
}

void ensure_builtin_formulas() {
  static std::once_flag once;
  std::call_once(once, register_builtin_flop_formulas);
}

std::vector<std::string>& scope_stack() {
  thread_local std::vector<std::string> s;
  return s;
}

std::string human(double v) {
  if (v < 1000) return std::to_string(static_cast<int64_t>(std::llround(v)));
  static const char* kSuffix[] = {"K", "M", "G", "T", "P"};
  int i = -1;
  while (v >= 1000 && i < 4) {
    v /= 1000;
    ++i;
  }
  std::ostringstream os;
  os << std::setprecision(3) << v << kSuffix[i];
  return os.str();
}

}  // namespace

void register_flop_formula(std::string_view op, FlopFormula f) {
  ensure_builtin_formulas();
  TS_CHECK(f != nullptr, ValueError) << "[" << op << "] register_flop_formula needs a function";
  set_slot(op, {std::move(f), nullptr});
}

void register_raw_flop_formula(std::string_view op, RawFlopFormula f) {
  ensure_builtin_formulas();
  TS_CHECK(f != nullptr, ValueError) << "[" << op << "] register_raw_flop_formula needs a function";
  set_slot(op, {nullptr, std::move(f)});
}

bool has_flop_formula(const OperatorHandle& op) {
  ensure_builtin_formulas();
  return op.entry().flop_slot() != nullptr;
}

struct FlopCounterMode::Impl {
  Options options;
  std::map<std::string, std::map<std::string, OpCount>> counts;
  struct Frame {
    std::string op;
    bool declared;
    bool launched = false;  ///< a kernel launch was counted for it
  };
  std::vector<Frame> frames;  // operators running under this counter, innermost last
  int nested = 0;             // > 0 while an operator without a formula runs
  std::unique_ptr<ModeGuard> mode;

  // Adds to the current scope and every enclosing one.
  template <class F>
  void update(const std::string& op, F f) {
    std::string path = "Global";
    f(counts[path][op]);
    std::string scoped;
    for (const auto& s : scope_stack()) {
      scoped = scoped.empty() ? s : scoped + "." + s;
      f(counts[scoped][op]);
    }
  }

  // A launch that ran (derived from its kernel's IR), attributed to the operator it ran in.
  void on_launch(const tl::LaunchRecord& r) {
    if (!frames.empty() && frames.back().declared) return;  // its formula counts it
    if (!r.function) return;
    const ir::KernelCost c = ir::launch_cost(*r.function, r.params, r.grid);
    const std::string name = frames.empty() ? "kernel " + r.kernel : frames.back().op;
    if (!frames.empty()) frames.back().launched = true;
    const bool backward = autograd::in_backward();
    update(name, [&](OpCount& n) {
      (backward ? n.backward_flops : n.forward_flops) +=
          static_cast<int64_t>(std::llround(c.flops));
      n.bytes += c.bytes_read + c.bytes_written;
      n.derived = true;
      n.inexact = n.inexact || !c.exact;
      if (frames.empty()) ++n.calls;
    });
  }
};

FlopCounterMode::FlopCounterMode() : FlopCounterMode(Options{}) {}

FlopCounterMode::FlopCounterMode(Options options) : impl_(std::make_unique<Impl>()) {
  ensure_builtin_formulas();
  impl_->options = options;
  impl_->mode = std::make_unique<ModeGuard>(this, ModeKind::Dispatch);
}

FlopCounterMode::~FlopCounterMode() {
  impl_->mode.reset();
  if (impl_->options.display)
    (impl_->options.out ? *impl_->options.out : std::cout) << table() << std::flush;
}

void FlopCounterMode::handle(const OperatorHandle& op, Stack& stack) {
  if (tl::is_kernel_launch(op)) {
    // A kernel launch is an operator (DESIGN.md D12): run it, then count what it ran.
    const Stack args(stack.end() - 2, stack.end());
    op.redispatch(stack);
    impl_->on_launch(tl::launch_record(args));
    return;
  }
  if (impl_->nested > 0) {
    // Inside an operator without a formula: only its kernel launches count (for it).
    op.redispatch(stack);
    return;
  }
  const auto& slot_ptr = op.entry().flop_slot();
  const auto* slot = static_cast<const FlopSlot*>(slot_ptr.get());
  const size_t nargs = op.schema().arguments().size();
  Stack inputs;
  if (slot) inputs.assign(stack.end() - static_cast<std::ptrdiff_t>(nargs), stack.end());
  impl_->frames.push_back({op.name(), slot != nullptr});
  struct Pop {
    Impl* i;
    ~Pop() { i->frames.pop_back(); }
  } pop{impl_.get()};
  const bool backward = autograd::in_backward();
  if (slot) {
    op.redispatch(stack);  // the formula counts it; what it runs inside is not seen
  } else {
    run_visible(op, stack);
  }
  if (!slot) {
    if (impl_->frames.back().launched) impl_->update(op.name(), [](OpCount& n) { ++n.calls; });
    return;
  }
  const size_t nret = op.schema().returns().size();
  const Stack outputs(stack.end() - static_cast<std::ptrdiff_t>(nret), stack.end());
  const int64_t flops = slot->raw ? slot->raw(inputs, outputs)
                                  : slot->shapes(tensor_shapes(inputs.data(), inputs.size()),
                                                 tensor_shapes(outputs.data(), outputs.size()));
  impl_->update(op.name(), [&](OpCount& n) {
    (backward ? n.backward_flops : n.forward_flops) += flops;
    n.declared = true;
    ++n.calls;
  });
}

// Runs an operator without a formula with the counter still visible inside it, so that the kernels
// it launches are counted for it (the dispatcher hides a mode from its own redispatch). Wrapper
// tensors take the ordinary path (their handler runs first; launches inside are not seen).
void FlopCounterMode::run_visible(const OperatorHandle& op, Stack& stack) {
  const size_t n = op.schema().arguments().size();
  DeviceType device = DeviceType::CPU;
  bool found = false, data = true, wrapper = false;
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    auto look = [&](const Tensor& t) {
      if (!t.defined()) return;
      wrapper = wrapper || (t.impl()->flags() & kTensorWrapper);
      if (found) return;
      found = true;
      device = t.device().type();
      data = t.has_data();
    };
    if (stack[i].is_tensor()) look(stack[i].to_tensor());
    if (stack[i].is_tensor_list())
      for (const auto& t : stack[i].to_tensor_list()) look(t);
  }
  const KernelFunction* k = &op.entry().kernel(data ? device : DeviceType::Meta);
  if (!k->valid()) k = &op.entry().composite();
  if (wrapper || !k->valid()) {
    op.redispatch(stack);
    return;
  }
  ++impl_->nested;
  struct Unnest {
    Impl* i;
    ~Unnest() { --i->nested; }
  } unnest{impl_.get()};
  ModeGuard again(this, ModeKind::Dispatch);
  k->boxed(op.entry(), k->functor, stack);
}

int64_t FlopCounterMode::get_total_flops() const {
  int64_t t = 0;
  auto it = impl_->counts.find("Global");
  if (it == impl_->counts.end()) return 0;
  for (const auto& [op, c] : it->second) t += c.flops();
  return t;
}

std::map<std::string, std::map<std::string, int64_t>> FlopCounterMode::get_flop_counts() const {
  std::map<std::string, std::map<std::string, int64_t>> out;
  for (const auto& [scope, ops] : impl_->counts) {
    for (const auto& [op, c] : ops) out[scope][op] = c.flops();
  }
  return out;
}

const std::map<std::string, std::map<std::string, FlopCounterMode::OpCount>>&
FlopCounterMode::counts() const {
  return impl_->counts;
}

std::string FlopCounterMode::table() const {
  const double total = static_cast<double>(get_total_flops());
  std::ostringstream os;
  os << "FLOP counts (tessera::FlopCounterMode)\n";
  os << std::left << std::setw(34) << "Scope / operator" << std::right << std::setw(10) << "Forward"
     << std::setw(10) << "Backward" << std::setw(10) << "Bytes"
     << "  " << std::left << std::setw(9) << "Source" << std::right << std::setw(9) << "% Total"
     << "\n";
  // Scopes in order: Global first, then by name (nesting follows from the dotted names).
  std::vector<std::string> scopes;
  if (impl_->counts.count("Global")) scopes.push_back("Global");
  for (const auto& [s, _] : impl_->counts) {
    if (s == "Global") continue;
    const int level = 1 + static_cast<int>(std::count(s.begin(), s.end(), '.'));
    if (level < impl_->options.depth) scopes.push_back(s);
  }
  auto pct = [&](double v) {
    std::ostringstream p;
    p << std::fixed << std::setprecision(2) << (total > 0 ? 100.0 * v / total : 0.0) << "%";
    return p.str();
  };
  for (const auto& s : scopes) {
    const int level = s == "Global" ? 0 : 1 + static_cast<int>(std::count(s.begin(), s.end(), '.'));
    const std::string indent(static_cast<size_t>(level) * 2, ' ');
    int64_t f = 0, b = 0;
    for (const auto& [op, c] : impl_->counts.at(s)) {
      f += c.forward_flops;
      b += c.backward_flops;
    }
    const std::string label =
        s == "Global" ? s : s.substr(s.rfind('.') == std::string::npos ? 0 : s.rfind('.') + 1);
    os << std::left << std::setw(34) << (indent + label) << std::right << std::setw(10)
       << human(static_cast<double>(f)) << std::setw(10)
       << (b ? human(static_cast<double>(b)) : "-") << std::setw(10) << ""
       << "  " << std::left << std::setw(9) << "" << std::right << std::setw(9)
       << pct(static_cast<double>(f + b)) << "\n";
    for (const auto& [op, c] : impl_->counts.at(s)) {
      if (c.flops() == 0 && !c.derived) continue;
      const std::string src = c.declared ? "formula" : (c.inexact ? "derived~" : "derived");
      os << std::left << std::setw(34) << (indent + "  " + op) << std::right << std::setw(10)
         << human(static_cast<double>(c.forward_flops)) << std::setw(10)
         << (c.backward_flops ? human(static_cast<double>(c.backward_flops)) : "-") << std::setw(10)
         << (c.derived ? human(c.bytes) : "-") << "  " << std::left << std::setw(9) << src
         << std::right << std::setw(9) << pct(static_cast<double>(c.flops())) << "\n";
    }
  }
  return os.str();
}

FlopCounterMode::Scope::Scope(std::string name) {
  scope_stack().push_back(std::move(name));
}
FlopCounterMode::Scope::~Scope() {
  scope_stack().pop_back();
}

}  // namespace tessera
