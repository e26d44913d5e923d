// The boxed dispatcher: the six levels of dispatch.h, modes, grad mode, wrapper tensors, and calls
// by name.
#include <sstream>

#include "tessera/detail/boxing.h"
#include "tessera/dispatch.h"
#include "tessera/env.h"

namespace tessera {
namespace {

enum class Level : uint8_t { FunctionMode, Composite, Autograd, DispatchMode, Wrapper, Backend };

using ModeVec = std::vector<DispatchMode*>;

AutogradHandler g_autograd_handler = nullptr;

const ModeVec* modes_of(const std::shared_ptr<const void>& p) {
  return static_cast<const ModeVec*>(p.get());
}

// Sets the resume level and below-autograd flag for the duration of a handler.
class HandlerScope {
 public:
  HandlerScope(Level resume, bool below_autograd) {
    auto& ls = detail::local_state();
    saved_resume_ = ls.resume_level;
    saved_below_ = ls.below_autograd;
    ls.resume_level = static_cast<uint8_t>(resume);
    ls.below_autograd = below_autograd;
  }
  ~HandlerScope() {
    auto& ls = detail::local_state();
    ls.resume_level = saved_resume_;
    ls.below_autograd = saved_below_;
  }

 private:
  uint8_t saved_resume_;
  bool saved_below_;
};

DispatchInfo info_of(const OperatorEntry& op, const Stack& s) {
  DispatchInfo info;
  const size_t n = static_cast<size_t>(op.num_arguments());
  TS_INTERNAL_ASSERT(s.size() >= n)
      << "[" << op.name() << "] expected " << n << " arguments on the stack, got " << s.size();
  for (size_t i = s.size() - n; i < s.size(); ++i) {
    const IValue& v = s[i];
    if (v.is_tensor()) {
      info.add(v.to_tensor());
    } else if (v.is_tensor_list()) {
      for (const auto& t : v.to_tensor_list()) info.add(t);
    } else if (v.is_optional_tensor_list()) {
      for (const auto& t : v.to_optional_tensor_list()) {
        if (t) info.add(*t);
      }
    } else if (v.is_device()) {
      info.add_device(v.to_device());
    }
  }
  return info;
}

WrapperTensorImpl* first_wrapper(const OperatorEntry& op, const Stack& s) {
  const size_t n = static_cast<size_t>(op.num_arguments());
  auto check = [](const Tensor& t) -> WrapperTensorImpl* {
    if (t.defined() && (t.impl()->flags() & kTensorWrapper)) {
      return static_cast<WrapperTensorImpl*>(t.impl());
    }
    return nullptr;
  };
  for (size_t i = s.size() - n; i < s.size(); ++i) {
    const IValue& v = s[i];
    if (v.is_tensor()) {
      if (auto* w = check(v.to_tensor())) return w;
    } else if (v.is_tensor_list()) {
      for (const auto& t : v.to_tensor_list()) {
        if (auto* w = check(t)) return w;
      }
    } else if (v.is_optional_tensor_list()) {
      for (const auto& t : v.to_optional_tensor_list()) {
        if (t) {
          if (auto* w = check(*t)) return w;
        }
      }
    }
  }
  return nullptr;
}

// TESSERA_LOGS=dispatch: one line per call that reaches a kernel or a wrapper's handler.
void log_call(const OperatorEntry& op, const Stack& stack, const char* target) {
  std::ostringstream os;
  os << op.name() << " -> " << target << " (";
  const size_t n = static_cast<size_t>(op.num_arguments());
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    if (i != stack.size() - n) os << ", ";
    const IValue& v = stack[i];
    if (v.is_tensor() && v.to_tensor().defined()) {
      const Tensor& t = v.to_tensor();
      os << dtype_name(t.dtype()) << t.sizes();
      if (!(t.device() == Device("cpu"))) os << " " << t.device().str();
    } else if (v.is_tensor()) {
      os << "undefined";
    } else if (v.is_tensor_list()) {
      os << "Tensor[" << v.to_tensor_list().size() << "]";
    } else {
      os << v;
    }
  }
  os << ")";
  const SourceLoc loc = UserLocGuard::current();
  if (loc.known()) os << " at " << loc;
  log("dispatch", os.str());
}

void run_from(const OperatorEntry& op, Stack& stack, Level level) {
  auto& ls = detail::local_state();
  const OperatorHandle handle(const_cast<OperatorEntry*>(&op));
  const DispatchInfo info = info_of(op, stack);
  const DeviceType dev = info.kernel_device();

  if (level <= Level::FunctionMode && ls.function_depth > 0) {
    const uint32_t i = ls.function_depth - 1;
    DispatchMode* mode = (*modes_of(ls.function_modes))[i];
    ls.function_depth = i;
    HandlerScope scope(Level::FunctionMode, false);
    try {
      mode->handle(handle, stack);
    } catch (...) {
      ls.function_depth = i + 1;
      throw;
    }
    ls.function_depth = i + 1;
    return;
  }
  // Composite ops decompose before anything below function modes sees them, wherever the call
  // starts (a call made inside a dispatch mode's handler starts below autograd).
  if (level <= Level::Wrapper && !op.kernel(dev).valid() && op.composite().valid()) {
    const auto& k = op.composite();
    k.boxed(op, k.functor, stack);
    return;
  }
  if (level <= Level::Autograd && g_autograd_handler && ls.grad_enabled &&
      (info.flags & kTensorAutograd)) {
    HandlerScope scope(Level::DispatchMode, false);
    g_autograd_handler(handle, stack);
    return;
  }
  if (level <= Level::DispatchMode && ls.dispatch_depth > 0) {
    const uint32_t i = ls.dispatch_depth - 1;
    DispatchMode* mode = (*modes_of(ls.dispatch_modes))[i];
    ls.dispatch_depth = i;
    HandlerScope scope(Level::DispatchMode, true);
    try {
      mode->handle(handle, stack);
    } catch (...) {
      ls.dispatch_depth = i + 1;
      throw;
    }
    ls.dispatch_depth = i + 1;
    return;
  }
  if (level <= Level::Wrapper && (info.flags & kTensorWrapper)) {
    WrapperTensorImpl* w = first_wrapper(op, stack);
    TS_INTERNAL_ASSERT(w != nullptr) << "wrapper flag without a wrapper tensor";
    HandlerScope scope(Level::Backend, true);
    if (detail::g_log_dispatch.load(std::memory_order_relaxed))
      log_call(op, stack, w->type_name().c_str());
    w->dispatch(handle, stack);
    return;
  }
  const KernelFunction* k = &op.kernel(dev);
  if (!k->valid()) k = &op.composite();
  if (!k->valid()) {
    if (dev == DeviceType::Meta) {
      TS_ERROR(NotImplementedError)
          << "[" << op.name() << "] has no shape function (fake kernel), so it cannot run on "
          << (info.flags & kTensorFake ? "fake" : "meta") << " tensors";
    }
    TS_ERROR(NotImplementedError)
        << "[" << op.name() << "] has no kernel for device '" << device_type_name(dev) << "'"
        << (dev == DeviceType::CUDA
                ? " (on CUDA, tessera has factories, copies and user kernels so far; run this "
                  "operator on CPU tensors)"
                : "");
  }
  if (detail::g_log_dispatch.load(std::memory_order_relaxed)) {
    log_call(op, stack, k == &op.kernel(dev) ? device_type_name(dev) : "composite");
  }
  k->boxed(op, k->functor, stack);
}

}  // namespace

namespace detail {
void dispatch_boxed(const OperatorEntry& op, Stack& stack) {
  run_from(op, stack,
           detail::local_state().below_autograd ? Level::DispatchMode : Level::FunctionMode);
}
}  // namespace detail

void OperatorHandle::call(Stack& stack) const {
  detail::dispatch_boxed(*entry_, stack);
}

void OperatorHandle::redispatch(Stack& stack) const {
  run_from(*entry_, stack, static_cast<Level>(detail::local_state().resume_level));
}

// ---- modes ----------------------------------------------------------------------------------

ModeGuard::ModeGuard(DispatchMode* mode, ModeKind kind) : kind_(kind) {
  TS_CHECK(mode != nullptr, ValueError) << "ModeGuard with a null mode";
  auto& ls = detail::local_state();
  auto& slot = kind == ModeKind::Function ? ls.function_modes : ls.dispatch_modes;
  uint32_t& depth = kind == ModeKind::Function ? ls.function_depth : ls.dispatch_depth;
  saved_ = slot;
  saved_depth_ = depth;
  // Stacks are immutable once shared (pool tasks hold them), so pushing copies the visible part.
  auto fresh = std::make_shared<ModeVec>();
  if (const ModeVec* cur = modes_of(slot)) fresh->assign(cur->begin(), cur->begin() + depth);
  fresh->push_back(mode);
  depth = static_cast<uint32_t>(fresh->size());
  slot = std::move(fresh);
}

ModeGuard::~ModeGuard() {
  auto& ls = detail::local_state();
  auto& slot = kind_ == ModeKind::Function ? ls.function_modes : ls.dispatch_modes;
  uint32_t& depth = kind_ == ModeKind::Function ? ls.function_depth : ls.dispatch_depth;
  slot = std::move(saved_);
  depth = saved_depth_;
}

std::vector<DispatchMode*> active_modes(ModeKind kind) {
  const auto& ls = detail::local_state();
  const auto& slot = kind == ModeKind::Function ? ls.function_modes : ls.dispatch_modes;
  const uint32_t depth = kind == ModeKind::Function ? ls.function_depth : ls.dispatch_depth;
  std::vector<DispatchMode*> out;
  if (const ModeVec* m = modes_of(slot)) out.assign(m->begin(), m->begin() + depth);
  return out;
}

// ---- grad mode ------------------------------------------------------------------------------

bool grad_enabled() {
  return detail::local_state().grad_enabled;
}

NoGradGuard::NoGradGuard() : prev_(detail::local_state().grad_enabled) {
  detail::local_state().grad_enabled = false;
}
NoGradGuard::~NoGradGuard() {
  detail::local_state().grad_enabled = prev_;
}

GradModeGuard::GradModeGuard(bool enabled) : prev_(detail::local_state().grad_enabled) {
  detail::local_state().grad_enabled = enabled;
}
GradModeGuard::~GradModeGuard() {
  detail::local_state().grad_enabled = prev_;
}

void set_autograd_handler(AutogradHandler h) {
  g_autograd_handler = h;
}

// ---- wrapper tensors ------------------------------------------------------------------------

WrapperTensorImpl::WrapperTensorImpl(SymIntArrayRef sizes, DType dtype, Device device,
                                     SymIntArrayRef strides)
    : TensorImpl(StorageImpl::dataless(0, device), dtype, device) {
  set_geometry(sizes, strides, 0);
  set_flag(kTensorWrapper, true);
  set_flag(kTensorNoData, true);
}

// ---- calls by name --------------------------------------------------------------------------

namespace {

[[noreturn]] void bad_arg(const FunctionSchema& s, const Argument& a, const IValue& v) {
  TS_ERROR(TypeError) << "[" << s.qualified_name() << "] argument '" << a.name << "' must be "
                      << a.type.str() << ", not " << v.type_name() << " (schema: " << s << ")";
}

// Converts `v` to the schema type in place, or throws.
void coerce(const FunctionSchema& s, const Argument& a, IValue& v) {
  const SchemaType& t = a.type;
  if (v.is_none()) {
    if (t.optional) return;
    bad_arg(s, a, v);
  }
  if (t.list) {
    switch (t.kind) {
      case TypeKind::Int:
        if (v.is_int_list()) return;
        if (v.is_symint_list()) {
          std::vector<int64_t> out;
          for (const auto& x : v.to_symint_list())
            out.push_back(x.guard_int(UserLocGuard::current()));
          v = IValue(std::move(out));
          return;
        }
        if (v.is_int() && t.list_size > 0) {
          v = IValue(std::vector<int64_t>(static_cast<size_t>(t.list_size), v.to_int()));
          return;
        }
        break;
      case TypeKind::SymInt:
        if (v.is_symint_list()) return;
        if (v.is_int_list()) {
          std::vector<SymInt> out;
          for (int64_t x : v.to_int_list()) out.emplace_back(x);
          v = IValue(std::move(out));
          return;
        }
        if (v.is_intlike() && t.list_size > 0) {
          v = IValue(std::vector<SymInt>(static_cast<size_t>(t.list_size), v.to_symint()));
          return;
        }
        break;
      case TypeKind::Float:
        if (v.is_double_list()) return;
        if (v.is_int_list()) {
          std::vector<double> out(v.to_int_list().begin(), v.to_int_list().end());
          v = IValue(std::move(out));
          return;
        }
        break;
      case TypeKind::Bool:
        if (v.is_bool_list()) return;
        break;
      case TypeKind::Tensor:
        if (t.element_optional) {
          if (v.is_optional_tensor_list()) return;
          if (v.is_tensor_list()) {
            std::vector<std::optional<Tensor>> out(v.to_tensor_list().begin(),
                                                   v.to_tensor_list().end());
            v = IValue(std::move(out));
            return;
          }
        } else if (v.is_tensor_list()) {
          return;
        }
        break;
      default:
        break;
    }
    bad_arg(s, a, v);
  }
  switch (t.kind) {
    case TypeKind::Tensor:
      if (v.is_tensor()) return;
      break;
    case TypeKind::Int:
      if (v.is_int()) return;
      if (v.is_symint()) {
        v = IValue(v.to_int());
        return;
      }
      if (v.is_bool()) {
        v = IValue(static_cast<int64_t>(v.to_bool()));
        return;
      }
      break;
    case TypeKind::SymInt:
      if (v.is_intlike()) return;
      break;
    case TypeKind::Float:
      if (v.is_double()) return;
      if (v.is_int()) {
        v = IValue(v.to_double());
        return;
      }
      break;
    case TypeKind::Bool:
      if (v.is_bool()) return;
      break;
    case TypeKind::Scalar:
      if (v.is_scalar()) return;
      break;
    case TypeKind::ScalarType:
      if (v.is_dtype()) return;
      if (v.is_string()) {
        if (auto d = parse_dtype(v.to_string())) {
          v = IValue(*d);
          return;
        }
      }
      break;
    case TypeKind::Device:
      if (v.is_device()) return;
      if (v.is_string()) {
        v = IValue(Device(std::string_view(v.to_string())));
        return;
      }
      break;
    case TypeKind::Str:
      if (v.is_string()) return;
      break;
  }
  bad_arg(s, a, v);
}

}  // namespace

Stack bind_arguments(const FunctionSchema& schema, Stack args, std::vector<Kwarg> kwargs) {
  const auto& params = schema.arguments();
  size_t positional = 0;
  for (const auto& p : params) positional += p.kwarg_only ? 0 : 1;
  TS_CHECK(args.size() <= positional, TypeError)
      << "[" << schema.qualified_name() << "] takes " << positional << " positional argument"
      << (positional == 1 ? "" : "s") << " but " << args.size() << " were given (schema: " << schema
      << ")";
  std::vector<std::optional<IValue>> slots(params.size());
  for (size_t i = 0; i < args.size(); ++i) slots[i] = std::move(args[i]);
  for (auto& k : kwargs) {
    const int idx = schema.argument_index(k.name);
    TS_CHECK(idx >= 0, TypeError) << "[" << schema.qualified_name()
                                  << "] got an unexpected keyword argument '" << k.name
                                  << "' (schema: " << schema << ")";
    TS_CHECK(!slots[idx].has_value(), TypeError)
        << "[" << schema.qualified_name() << "] got multiple values for argument '" << k.name
        << "'";
    slots[idx] = std::move(k.value);
  }
  Stack out;
  out.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (!slots[i]) {
      TS_CHECK(params[i].default_value.has_value(), TypeError)
          << "[" << schema.qualified_name() << "] missing required argument '" << params[i].name
          << "' (schema: " << schema << ")";
      slots[i] = *params[i].default_value;
    }
    coerce(schema, params[i], *slots[i]);
    out.push_back(std::move(*slots[i]));
  }
  return out;
}

OpRef::OpRef(std::string_view name, SourceLoc loc) : name_(name), loc_(loc) {
  UserLocGuard g(loc);
  if (auto op = find_op(name)) {
    ops_.push_back(*op);
  } else {
    ops_ = overloads(name);
    if (ops_.empty()) get_op(name);  // throws with a suggestion
  }
}

IValue OpRef::call(Stack args, std::vector<Kwarg> kwargs) const {
  UserLocGuard g(loc_);
  const OperatorHandle* chosen = nullptr;
  Stack bound;
  std::string reasons;
  for (const auto& op : ops_) {
    try {
      bound = bind_arguments(op.schema(), args, kwargs);
      chosen = &op;
      break;
    } catch (const TypeError& e) {
      if (ops_.size() == 1) throw;
      reasons += "\n  " + op.schema().str() + ": " + e.message();
    }
  }
  TS_CHECK(chosen != nullptr, TypeError)
      << "[" << name_ << "] no overload matches the arguments:" << reasons;
  chosen->call(bound);
  const size_t nret = chosen->schema().returns().size();
  TS_INTERNAL_ASSERT(bound.size() == nret)
      << "[" << chosen->name() << "] left " << bound.size() << " values, schema returns " << nret;
  if (nret == 0) return IValue();
  if (nret == 1) return std::move(bound[0]);
  return IValue::tuple(std::move(bound));
}

}  // namespace tessera
