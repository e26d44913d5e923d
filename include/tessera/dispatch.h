/** \file
 * The operator registry and dispatcher (DESIGN.md D6).
 *
 * Every tensor operation, built-in or user-defined, is an operator: a schema, a kernel per device
 * type, a shape function (the `Meta` kernel, also used for fake tensors), and slots that the
 * autograd and FLOP-counting layers fill. A call passes through these levels, top to bottom:
 *
 *   1. function modes (`ModeKind::Function`): tools that must see the user-level call;
 *   2. a composite (decomposition) kernel, when the op has one and no kernel for the device;
 *   3. autograd, when an input requires grad and grad mode is on;
 *   4. dispatch modes (`ModeKind::Dispatch`): capture, FLOP counting, ... below autograd, so they
 *      see backward ops as they run;
 *   5. the handler of a wrapper tensor argument (the analogue of `__torch_dispatch__` types);
 *   6. the kernel of the device (the shape function for meta and fake tensors).
 *
 * With no mode, no wrapper and no autograd, a typed call jumps straight to level 6 without
 * boxing or allocating. A mode's handler runs with itself (and the modes above it) hidden, so the
 * ops it calls reach the levels below; a dispatch mode's or wrapper's handler runs below autograd.
 */
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "tessera/ivalue.h"
#include "tessera/schema.h"

namespace tessera {

class OperatorEntry;

/** Properties the compiler and tools read. */
enum OpTag : uint32_t {
  kTagPointwise = 1u << 0,
  kTagReduction = 1u << 1,
  kTagView = 1u << 2,
  kTagInplace = 1u << 3,
  kTagFactory = 1u << 4,
  kTagRandom = 1u << 5,         ///< reads the global generator
  kTagDataDependent = 1u << 6,  ///< its result depends on tensor values (item, equal, ...)
  kTagBuiltin = 1u << 7,
  kTagCustomOp = 1u << 8,  ///< defined by `library::custom_op` or `triton_op`
  kTagTritonOp = 1u << 9,  ///< a `triton_op`: the graph compiler traces into its body
};

/**
 * A kernel as both an unboxed function (`R(*)(const void* functor, Args...)`) and a boxed one
 * (arguments on a `Stack`). Made by `make_kernel` in `tessera/detail/boxing.h`.
 */
struct KernelFunction {
  using Boxed = void (*)(const OperatorEntry& op, const void* functor, Stack& stack);
  Boxed boxed = nullptr;
  void* unboxed = nullptr;
  const void* functor = nullptr;
  std::shared_ptr<const void> owner;
  const std::type_info* signature = nullptr;

  bool valid() const { return boxed != nullptr; }
};

/** A cheap handle to a registered operator. */
class OperatorHandle {
 public:
  OperatorHandle() = default;
  explicit OperatorHandle(OperatorEntry* e) : entry_(e) {}

  const FunctionSchema& schema() const;
  /** "ns::name.overload". */
  const std::string& name() const;
  OperatorEntry& entry() const { return *entry_; }
  bool valid() const { return entry_ != nullptr; }
  bool has_tag(OpTag t) const;

  /** Calls through the full dispatcher with the arguments on `stack` (results replace them). */
  void call(Stack& stack) const;
  /** Continues a call that a mode or wrapper handler intercepted, at the level below it. */
  void redispatch(Stack& stack) const;

  bool operator==(const OperatorHandle& o) const { return entry_ == o.entry_; }

 private:
  OperatorEntry* entry_ = nullptr;
};

/** The registry's record of one operator overload.
 *
 * Registration may happen while other threads dispatch: every kernel and slot is an immutable
 * value published through an atomic pointer, so a reader sees the old or the new value whole.
 * Replaced values stay alive with the entry (registrations are few; calls in flight keep working).
 */
class OperatorEntry {
 public:
  explicit OperatorEntry(FunctionSchema schema, uint32_t tags);
  ~OperatorEntry();
  OperatorEntry(const OperatorEntry&) = delete;
  OperatorEntry& operator=(const OperatorEntry&) = delete;

  const FunctionSchema& schema() const { return schema_; }
  const std::string& name() const { return name_; }
  uint32_t tags() const { return tags_.load(std::memory_order_relaxed); }
  void add_tags(uint32_t t) { tags_.fetch_or(t, std::memory_order_relaxed); }

  /** The kernel for a device type (Meta: the shape function). */
  const KernelFunction& kernel(DeviceType t) const {
    return *kernels_[static_cast<int>(t)].load(std::memory_order_acquire);
  }
  const KernelFunction& composite() const { return *composite_.load(std::memory_order_acquire); }
  void set_kernel(DeviceType t, KernelFunction k);
  void set_composite(KernelFunction k);
  bool has_kernel(DeviceType t) const { return kernel(t).valid(); }

  /** Slot for the autograd layer (an opaque formula); null when none. */
  const std::shared_ptr<void>& autograd_slot() const {
    return *autograd_.load(std::memory_order_acquire);
  }
  void set_autograd_slot(std::shared_ptr<void> a) { publish(autograd_, std::move(a)); }
  /** Slot for the FLOP-counting layer. */
  const std::shared_ptr<void>& flop_slot() const { return *flops_.load(std::memory_order_acquire); }
  void set_flop_slot(std::shared_ptr<void> f) { publish(flops_, std::move(f)); }
  /** Slot for the library layer (custom_op / triton_op data). */
  const std::shared_ptr<void>& library_slot() const {
    return *library_.load(std::memory_order_acquire);
  }
  void set_library_slot(std::shared_ptr<void> l) { publish(library_, std::move(l)); }

  /** Number of tensors among the arguments (for the fast dispatch check). */
  int num_arguments() const { return static_cast<int>(schema_.arguments().size()); }

 private:
  using Slot = std::atomic<const std::shared_ptr<void>*>;
  void publish(Slot& slot, std::shared_ptr<void> v);

  FunctionSchema schema_;
  std::string name_;
  std::atomic<uint32_t> tags_;
  std::atomic<const KernelFunction*> kernels_[kNumDeviceTypes];
  std::atomic<const KernelFunction*> composite_;
  Slot autograd_, flops_, library_;
  struct Published;  ///< every value ever published (owned), and the lock writers take
  std::unique_ptr<Published> published_;
};

// ---- the registry ---------------------------------------------------------------------------

/** Defines an operator; `ValueError` when the name is already defined. */
OperatorHandle define_op(std::string_view schema, uint32_t tags = 0,
                         std::string_view default_ns = "");
/** Finds "ns::name.overload" (".default" or no suffix for the default overload); nullopt if none.
 */
std::optional<OperatorHandle> find_op(std::string_view name);
/** Like find_op, but throws `ValueError` naming close matches when missing. */
OperatorHandle get_op(std::string_view name);
/** All overloads of "ns::name". */
std::vector<OperatorHandle> overloads(std::string_view base_name);
/** Every registered operator, sorted by name. */
std::vector<OperatorHandle> all_ops();

// ---- modes ----------------------------------------------------------------------------------

enum class ModeKind : uint8_t { Function, Dispatch };

/** A mode sees every operator call while it is active (see the levels above). */
class DispatchMode {
 public:
  virtual ~DispatchMode() = default;
  /** Handles a call; the default forwards it below (`op.redispatch(stack)`). */
  virtual void handle(const OperatorHandle& op, Stack& stack) { op.redispatch(stack); }
};

/** Pushes a mode for the guard's lifetime (RAII, strictly nested on a thread). */
class ModeGuard {
 public:
  ModeGuard(DispatchMode* mode, ModeKind kind);
  ~ModeGuard();
  ModeGuard(const ModeGuard&) = delete;
  ModeGuard& operator=(const ModeGuard&) = delete;

 private:
  ModeKind kind_;
  std::shared_ptr<const void> saved_;
  uint32_t saved_depth_;
};

/** The modes visible on this thread now (innermost last). */
std::vector<DispatchMode*> active_modes(ModeKind kind);

// ---- grad mode ------------------------------------------------------------------------------

/** Whether autograd records operations on this thread. */
bool grad_enabled();
/** Disables autograd recording for the guard's lifetime (`torch.no_grad()`). */
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};
/** Sets grad mode for the guard's lifetime. */
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};

/**
 * The autograd layer's hook: receives calls whose inputs require grad and must continue them with
 * `op.redispatch(stack)` (which resumes below autograd).
 */
using AutogradHandler = void (*)(const OperatorHandle& op, Stack& stack);
void set_autograd_handler(AutogradHandler h);

// ---- wrapper tensor types -------------------------------------------------------------------

/**
 * Base of wrapper tensor types: a tensor with sizes, dtype and device but no storage of its own,
 * whose `dispatch` receives every operator call that has it as an argument (like a
 * `__torch_dispatch__` subclass). The handler usually unwraps, calls ops on inner tensors and
 * wraps the results; it runs below autograd.
 */
class WrapperTensorImpl : public TensorImpl {
 public:
  WrapperTensorImpl(SymIntArrayRef sizes, DType dtype, Device device, SymIntArrayRef strides = {});
  virtual void dispatch(const OperatorHandle& op, Stack& stack) = 0;
  /** A short name for printing ("TwoTensor"). */
  virtual std::string type_name() const { return "WrapperTensor"; }
};

/** Makes a Tensor owning a new wrapper impl. */
template <class W, class... A>
Tensor make_wrapper(A&&... args) {
  return Tensor(IntrusivePtr<TensorImpl>(new W(std::forward<A>(args)...)));
}
/** The wrapper impl of `t`, or null. */
template <class W>
W* wrapper_cast(const Tensor& t) {
  if (!t.defined() || !(t.impl()->flags() & kTensorWrapper)) return nullptr;
  return dynamic_cast<W*>(t.impl());
}

// ---- calls by name --------------------------------------------------------------------------

/** A keyword argument for a call by name: `ops("aten::add")(a, b, kw("alpha", 2))`. */
struct Kwarg {
  std::string name;
  IValue value;
};
inline Kwarg kw(std::string name, IValue v) {
  return Kwarg{std::move(name), std::move(v)};
}

/**
 * An operator (or the overload set of "ns::name") callable with boxed arguments: the analogue of
 * `torch.ops.mylib.mysin.default(x)`. Returns the single result, a tuple, or None.
 */
class OpRef {
 public:
  /** Looks the operator (or overload set) up; errors name `loc`, the caller's line. */
  explicit OpRef(std::string_view name, SourceLoc loc = SourceLoc::current());

  template <class... A>
  IValue operator()(A&&... args) const {
    Stack stack;
    std::vector<Kwarg> kwargs;
    stack.reserve(sizeof...(A));
    (push(stack, kwargs, std::forward<A>(args)), ...);
    return call(std::move(stack), std::move(kwargs));
  }

  /** Calls with positional and keyword arguments already boxed. */
  IValue call(Stack args, std::vector<Kwarg> kwargs = {}) const;
  const std::vector<OperatorHandle>& candidates() const { return ops_; }

 private:
  static void push(Stack&, std::vector<Kwarg>& kws, Kwarg k) { kws.push_back(std::move(k)); }
  template <class T>
  static void push(Stack& s, std::vector<Kwarg>&, T&& v) {
    s.emplace_back(std::forward<T>(v));
  }

  std::string name_;
  std::vector<OperatorHandle> ops_;
  SourceLoc loc_;
};

/** `ops("mylib::mysin")(x)`, `ops("aten::add.Tensor")(a, b)`. */
inline OpRef ops(std::string_view name, SourceLoc loc = SourceLoc::current()) {
  return OpRef(name, loc);
}

/**
 * Matches positional and keyword arguments against `schema`, fills defaults and converts values to
 * the declared types (ints for floats, int lists for SymInt lists, ...). Throws `TypeError` naming
 * the op and argument on a mismatch.
 */
Stack bind_arguments(const FunctionSchema& schema, Stack args, std::vector<Kwarg> kwargs);

}  // namespace tessera
