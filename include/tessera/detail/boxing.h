/** \file
 * Templates that connect typed C++ kernels to the boxed dispatcher: `ArgTraits` (box, unbox,
 * check against a schema type, collect dispatch flags), `make_kernel` (a `KernelFunction` from a
 * function or lambda) and `TypedOp` (a typed handle whose call takes the allocation-free fast
 * path when no mode, wrapper or autograd is involved). Heavy: include it from .cpp files and
 * from `library.h` only.
 */
#pragma once

#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "tessera/detail/local_state.h"
#include "tessera/dispatch.h"

namespace tessera {

/** What the fast path needs to know about the arguments of a call. */
struct DispatchInfo {
  uint8_t flags = 0;
  bool has_tensor = false;
  bool has_device_arg = false;
  bool cpu_scalar = false;  ///< the device so far comes from a 0-dim CPU tensor
  Device device = kCPU;

  /** The kernel's device is the first tensor's, except that a CPU scalar (0-dim) gives way to a
   * later tensor on another device (PyTorch's wrapped numbers). */
  void add(const Tensor& t) {
    if (!t.defined()) return;
    flags |= t.impl()->flags();
    if (!has_tensor || (cpu_scalar && !t.device().is_cpu())) {
      device = t.device();
      cpu_scalar = device.is_cpu() && t.dim() == 0;
      has_tensor = true;
    }
  }
  void add_device(const std::optional<Device>& d) {
    if (d && !has_tensor && !has_device_arg) {
      device = *d;
      has_device_arg = true;
    }
  }
  DeviceType kernel_device() const {
    return (flags & kTensorNoData) ? DeviceType::Meta : device.type();
  }
};

template <class T, class = void>
struct ArgTraits;

#define TS_ARG_TRAITS_COMMON(CppT, Check)    \
  static bool matches(const SchemaType& t) { \
    return Check;                            \
  }                                          \
  static void collect(const std::remove_cv_t<std::remove_reference_t<CppT>>&, DispatchInfo&) {}

template <>
struct ArgTraits<const Tensor&> {
  static bool matches(const SchemaType& t) {
    return t.kind == TypeKind::Tensor && !t.list && !t.optional;
  }
  static IValue box(const Tensor& v) { return IValue(v); }
  static const Tensor& unbox(IValue& v) { return v.to_tensor(); }
  static void collect(const Tensor& v, DispatchInfo& i) { i.add(v); }
};
template <>
struct ArgTraits<Tensor&> {
  static bool matches(const SchemaType& t) { return ArgTraits<const Tensor&>::matches(t); }
  static IValue box(const Tensor& v) { return IValue(v); }
  static Tensor& unbox(IValue& v) { return v.to_tensor(); }
  static void collect(const Tensor& v, DispatchInfo& i) { i.add(v); }
};
template <>
struct ArgTraits<const std::optional<Tensor>&> {
  static bool matches(const SchemaType& t) {
    return t.kind == TypeKind::Tensor && !t.list && t.optional;
  }
  static IValue box(const std::optional<Tensor>& v) { return v ? IValue(*v) : IValue(); }
  static std::optional<Tensor> unbox(IValue& v) { return v.to_optional_tensor(); }
  static void collect(const std::optional<Tensor>& v, DispatchInfo& i) {
    if (v) i.add(*v);
  }
};
template <>
struct ArgTraits<ArrayRef<Tensor>> {
  static bool matches(const SchemaType& t) {
    return t.kind == TypeKind::Tensor && t.list && !t.element_optional;
  }
  static IValue box(ArrayRef<Tensor> v) { return IValue(v.vec()); }
  static ArrayRef<Tensor> unbox(IValue& v) { return ArrayRef<Tensor>(v.to_tensor_list()); }
  static void collect(ArrayRef<Tensor> v, DispatchInfo& i) {
    for (const auto& t : v) i.add(t);
  }
};
template <>
struct ArgTraits<int64_t> {
  TS_ARG_TRAITS_COMMON(int64_t, t.kind == TypeKind::Int && !t.list && !t.optional)
  static IValue box(int64_t v) { return IValue(v); }
  static int64_t unbox(IValue& v) { return v.to_int(); }
};
template <>
struct ArgTraits<SymInt> {
  TS_ARG_TRAITS_COMMON(SymInt, t.kind == TypeKind::SymInt && !t.list && !t.optional)
  static IValue box(const SymInt& v) { return IValue(v); }
  static SymInt unbox(IValue& v) { return v.to_symint(); }
};
template <>
struct ArgTraits<double> {
  TS_ARG_TRAITS_COMMON(double, t.kind == TypeKind::Float && !t.list && !t.optional)
  static IValue box(double v) { return IValue(v); }
  static double unbox(IValue& v) { return v.to_double(); }
};
template <>
struct ArgTraits<bool> {
  TS_ARG_TRAITS_COMMON(bool, t.kind == TypeKind::Bool && !t.list && !t.optional)
  static IValue box(bool v) { return IValue(v); }
  static bool unbox(IValue& v) { return v.to_bool(); }
};
template <>
struct ArgTraits<const Scalar&> {
  TS_ARG_TRAITS_COMMON(Scalar, t.kind == TypeKind::Scalar && !t.list && !t.optional)
  static IValue box(const Scalar& v) { return IValue(v); }
  static Scalar unbox(IValue& v) { return v.to_scalar(); }
};
template <>
struct ArgTraits<DType> {
  TS_ARG_TRAITS_COMMON(DType, t.kind == TypeKind::ScalarType && !t.list && !t.optional)
  static IValue box(DType v) { return IValue(v); }
  static DType unbox(IValue& v) { return v.to_dtype(); }
};
template <>
struct ArgTraits<Device> {
  static bool matches(const SchemaType& t) {
    return t.kind == TypeKind::Device && !t.list && !t.optional;
  }
  static IValue box(Device v) { return IValue(v); }
  static Device unbox(IValue& v) { return v.to_device(); }
  static void collect(Device d, DispatchInfo& i) { i.add_device(d); }
};
template <>
struct ArgTraits<std::string_view> {
  TS_ARG_TRAITS_COMMON(std::string_view, t.kind == TypeKind::Str && !t.list && !t.optional)
  static IValue box(std::string_view v) { return IValue(std::string(v)); }
  static std::string_view unbox(IValue& v) { return v.to_string(); }
};
template <>
struct ArgTraits<IntArrayRef> {
  TS_ARG_TRAITS_COMMON(IntArrayRef, t.kind == TypeKind::Int && t.list && !t.optional)
  static IValue box(IntArrayRef v) { return IValue(v.vec()); }
  static IntArrayRef unbox(IValue& v) { return IntArrayRef(v.to_int_list()); }
};
template <>
struct ArgTraits<SymIntArrayRef> {
  TS_ARG_TRAITS_COMMON(SymIntArrayRef, t.kind == TypeKind::SymInt && t.list && !t.optional)
  static IValue box(SymIntArrayRef v) { return IValue(v.vec()); }
  static SymIntArrayRef unbox(IValue& v) { return SymIntArrayRef(v.to_symint_list()); }
};
template <>
struct ArgTraits<ArrayRef<double>> {
  TS_ARG_TRAITS_COMMON(ArrayRef<double>, t.kind == TypeKind::Float && t.list && !t.optional)
  static IValue box(ArrayRef<double> v) { return IValue(v.vec()); }
  static ArrayRef<double> unbox(IValue& v) { return ArrayRef<double>(v.to_double_list()); }
};

// Optionals of the plain types above.
template <class T>
struct ArgTraits<std::optional<T>, std::enable_if_t<!std::is_same_v<T, Tensor>>> {
  static bool matches(const SchemaType& t) {
    SchemaType inner = t;
    inner.optional = false;
    return t.optional && ArgTraits<T>::matches(inner);
  }
  static IValue box(const std::optional<T>& v) { return v ? ArgTraits<T>::box(*v) : IValue(); }
  static std::optional<T> unbox(IValue& v) {
    if (v.is_none()) return std::nullopt;
    return ArgTraits<T>::unbox(v);
  }
  static void collect(const std::optional<T>& v, DispatchInfo& i) {
    if constexpr (std::is_same_v<T, Device>) i.add_device(v);
  }
};
template <>
struct ArgTraits<std::optional<Scalar>> {
  TS_ARG_TRAITS_COMMON(std::optional<Scalar>, t.kind == TypeKind::Scalar && !t.list && t.optional)
  static IValue box(const std::optional<Scalar>& v) { return v ? IValue(*v) : IValue(); }
  static std::optional<Scalar> unbox(IValue& v) {
    if (v.is_none()) return std::nullopt;
    return v.to_scalar();
  }
};
template <>
struct ArgTraits<const std::optional<Scalar>&> : ArgTraits<std::optional<Scalar>> {};

#undef TS_ARG_TRAITS_COMMON

// ---- returns ----------------------------------------------------------------------------------

template <class R>
struct ReturnTraits {
  static constexpr size_t count = 1;
  static void push(Stack& s, R r) { s.emplace_back(std::move(r)); }
  static R pop(Stack& s) {
    IValue v = std::move(s.back());
    s.pop_back();
    if constexpr (std::is_same_v<R, Tensor>) {
      return v.is_none() ? Tensor() : v.to_tensor();
    } else if constexpr (std::is_same_v<R, bool>) {
      return v.to_bool();
    } else if constexpr (std::is_same_v<R, int64_t>) {
      return v.to_int();
    } else if constexpr (std::is_same_v<R, double>) {
      return v.to_double();
    } else if constexpr (std::is_same_v<R, Scalar>) {
      return v.to_scalar();
    } else if constexpr (std::is_same_v<R, std::vector<Tensor>>) {
      return v.to_tensor_list();
    } else if constexpr (std::is_same_v<R, SymInt>) {
      return v.to_symint();
    } else {
      static_assert(!sizeof(R), "unsupported return type");
    }
  }
  static bool matches(const SchemaType& t) {
    if constexpr (std::is_same_v<R, Tensor>)
      return t.kind == TypeKind::Tensor && !t.list;
    else if constexpr (std::is_same_v<R, std::vector<Tensor>>)
      return t.kind == TypeKind::Tensor && t.list;
    else if constexpr (std::is_same_v<R, bool>)
      return t.kind == TypeKind::Bool && !t.list;
    else if constexpr (std::is_same_v<R, int64_t>)
      return t.kind == TypeKind::Int && !t.list;
    else if constexpr (std::is_same_v<R, SymInt>)
      return t.kind == TypeKind::SymInt && !t.list;
    else if constexpr (std::is_same_v<R, double>)
      return t.kind == TypeKind::Float && !t.list;
    else if constexpr (std::is_same_v<R, Scalar>)
      return t.kind == TypeKind::Scalar && !t.list;
    else
      return false;
  }
};

template <class... Ts>
struct ReturnTraits<std::tuple<Ts...>> {
  static constexpr size_t count = sizeof...(Ts);
  static void push(Stack& s, std::tuple<Ts...> r) {
    std::apply(
        [&](auto&... v) { (ReturnTraits<std::decay_t<decltype(v)>>::push(s, std::move(v)), ...); },
        r);
  }
  static std::tuple<Ts...> pop(Stack& s) {
    // Results are in order on the stack; pop from the back into reversed slots.
    std::tuple<Ts...> out;
    pop_into<sizeof...(Ts)>(s, out);
    return out;
  }
  template <size_t I>
  static void pop_into(Stack& s, std::tuple<Ts...>& out) {
    if constexpr (I > 0) {
      std::get<I - 1>(out) = ReturnTraits<std::tuple_element_t<I - 1, std::tuple<Ts...>>>::pop(s);
      pop_into<I - 1>(s, out);
    }
  }
  static bool matches_all(const std::vector<Argument>& rets) {
    if (rets.size() != sizeof...(Ts)) return false;
    size_t i = 0;
    return (ReturnTraits<Ts>::matches(rets[i++].type) && ...);
  }
};

template <>
struct ReturnTraits<void> {
  static constexpr size_t count = 0;
};

template <class R>
bool returns_match(const std::vector<Argument>& rets) {
  using D = std::decay_t<R>;
  if constexpr (std::is_void_v<R>) {
    return rets.empty();
  } else if constexpr (requires { ReturnTraits<D>::matches_all(rets); }) {
    return ReturnTraits<D>::matches_all(rets);
  } else {
    return rets.size() == 1 && ReturnTraits<D>::matches(rets[0].type);
  }
}

// ---- kernels ----------------------------------------------------------------------------------

template <class F>
struct FunctionTraits : FunctionTraits<decltype(&F::operator())> {};
template <class R, class... A>
struct FunctionTraits<R (*)(A...)> {
  using Signature = R(A...);
};
template <class R, class... A>
struct FunctionTraits<R(A...)> {
  using Signature = R(A...);
};
template <class C, class R, class... A>
struct FunctionTraits<R (C::*)(A...) const> {
  using Signature = R(A...);
};
template <class C, class R, class... A>
struct FunctionTraits<R (C::*)(A...)> {
  using Signature = R(A...);
};

template <class F, class Sig>
struct KernelCaller;

template <class F, class R, class... Args>
struct KernelCaller<F, R(Args...)> {
  static R unboxed(const void* functor, Args... args) {
    return (*static_cast<const F*>(functor))(std::forward<Args>(args)...);
  }
  static void boxed(const OperatorEntry& op, const void* functor, Stack& s) {
    constexpr size_t n = sizeof...(Args);
    TS_INTERNAL_ASSERT(s.size() >= n)
        << "[" << op.name() << "] stack has " << s.size() << " values, kernel takes " << n;
    IValue* base = s.data() + (s.size() - n);
    auto invoke = [&]<size_t... I>(std::index_sequence<I...>)->decltype(auto) {
      return (*static_cast<const F*>(functor))(ArgTraits<Args>::unbox(base[I])...);
    };
    if constexpr (std::is_void_v<R>) {
      invoke(std::index_sequence_for<Args...>{});
      s.resize(s.size() - n);
    } else {
      std::decay_t<R> r = invoke(std::index_sequence_for<Args...>{});
      s.resize(s.size() - n);
      ReturnTraits<std::decay_t<R>>::push(s, std::move(r));
    }
  }
  static bool matches(const FunctionSchema& schema) {
    const auto& a = schema.arguments();
    if (a.size() != sizeof...(Args)) return false;
    size_t i = 0;
    const bool args_ok = (ArgTraits<Args>::matches(a[i++].type) && ...);
    return args_ok && returns_match<R>(schema.returns());
  }
};

/** A kernel from a function pointer or lambda. */
template <class F>
KernelFunction make_kernel(F f) {
  using Fn = std::decay_t<F>;
  using Sig = typename FunctionTraits<Fn>::Signature;
  auto holder = std::make_shared<Fn>(std::move(f));
  KernelFunction k;
  k.functor = holder.get();
  k.owner = holder;
  k.unboxed = reinterpret_cast<void*>(&KernelCaller<Fn, Sig>::unboxed);
  k.boxed = &KernelCaller<Fn, Sig>::boxed;
  k.signature = &typeid(Sig);
  return k;
}

/** Whether a kernel of signature `Sig` fits `schema`. */
template <class F>
bool kernel_matches(const FunctionSchema& schema) {
  using Fn = std::decay_t<F>;
  return KernelCaller<Fn, typename FunctionTraits<Fn>::Signature>::matches(schema);
}

namespace detail {
[[noreturn]] void throw_kernel_mismatch(const OperatorEntry& op, const char* what,
                                        const std::type_info& sig);
void check_typed_signature(const OperatorEntry& op, const std::type_info& sig);
/** The boxed dispatcher entry (level 1, or level 4 under a dispatch mode or wrapper). */
void dispatch_boxed(const OperatorEntry& op, Stack& stack);
}  // namespace detail

/** Registers kernels for operators of one namespace (the internal face of `library.h`). */
class Library {
 public:
  explicit Library(std::string ns) : ns_(std::move(ns)) {}

  OperatorHandle def(std::string_view schema, uint32_t tags = 0) {
    return define_op(schema, tags, ns_);
  }
  /** The kernel of `name` for one device type. */
  template <class F>
  Library& impl(std::string_view name, DeviceType device, F f) {
    auto op = lookup(name);
    check<F>(op, "kernel");
    op.entry().set_kernel(device, make_kernel(std::move(f)));
    return *this;
  }
  /** The shape function (the Meta kernel, also used for fake tensors). */
  template <class F>
  Library& fake(std::string_view name, F f) {
    return impl(name, DeviceType::Meta, std::move(f));
  }
  /** One kernel for CPU, CUDA and Meta (views and other data-free ops). */
  template <class F>
  Library& impl_all(std::string_view name, F f) {
    auto op = lookup(name);
    check<F>(op, "kernel");
    auto k = make_kernel(std::move(f));
    for (auto d : {DeviceType::CPU, DeviceType::CUDA, DeviceType::Meta})
      op.entry().set_kernel(d, k);
    return *this;
  }
  /** A decomposition into other ops, used for every device without its own kernel. */
  template <class F>
  Library& composite(std::string_view name, F f) {
    auto op = lookup(name);
    check<F>(op, "composite kernel");
    op.entry().set_composite(make_kernel(std::move(f)));
    return *this;
  }

 private:
  OperatorHandle lookup(std::string_view name) {
    std::string full = name.find("::") == std::string_view::npos ? ns_ + "::" + std::string(name)
                                                                 : std::string(name);
    return get_op(full);
  }
  template <class F>
  void check(const OperatorHandle& op, const char* what) {
    using Fn = std::decay_t<F>;
    if (!kernel_matches<Fn>(op.schema())) {
      detail::throw_kernel_mismatch(op.entry(), what,
                                    typeid(typename FunctionTraits<Fn>::Signature));
    }
  }

  std::string ns_;
};

template <class Sig>
class TypedOp;

/** A typed handle to an operator: the allocation-free way ops call each other. */
template <class R, class... Args>
class TypedOp<R(Args...)> {
 public:
  explicit TypedOp(std::string_view name) : entry_(&get_op(name).entry()) {
    detail::check_typed_signature(*entry_, typeid(R(Args...)));
  }

  OperatorHandle handle() const { return OperatorHandle(entry_); }

  R operator()(Args... args) const {
    DispatchInfo info;
    (ArgTraits<Args>::collect(args, info), ...);
    const auto& ls = detail::local_state();
    const bool slow = ls.function_depth != 0 || ls.dispatch_depth != 0 ||
                      (info.flags & kTensorWrapper) ||
                      ((info.flags & kTensorAutograd) && ls.grad_enabled) ||
                      detail::g_log_dispatch.load(std::memory_order_relaxed);
    if (__builtin_expect(!slow, 1)) {
      const KernelFunction* k = &entry_->kernel(info.kernel_device());
      if (!k->unboxed) k = &entry_->composite();
      if (k->unboxed) {
        return reinterpret_cast<R (*)(const void*, Args...)>(k->unboxed)(
            k->functor, std::forward<Args>(args)...);
      }
    }
    return call_boxed(std::forward<Args>(args)...);
  }

 private:
  R call_boxed(Args... args) const {
    Stack s;
    s.reserve(sizeof...(Args) + 1);
    (s.push_back(ArgTraits<Args>::box(args)), ...);
    detail::dispatch_boxed(*entry_, s);
    if constexpr (std::is_void_v<R>) {
      return;
    } else if constexpr (std::is_same_v<R, Tensor&>) {
      // In-place and out= ops return the tensor they wrote: the first mutable tensor argument.
      return first_mutable(args...);
    } else {
      return ReturnTraits<std::decay_t<R>>::pop(s);
    }
  }

  template <class A0, class... Rest>
  static Tensor& first_mutable(A0&& a0, Rest&&... rest) {
    if constexpr (std::is_same_v<A0, Tensor&>) {
      return a0;
    } else {
      static_assert(sizeof...(Rest) > 0, "Tensor& return without a Tensor& argument");
      return first_mutable(std::forward<Rest>(rest)...);
    }
  }

  OperatorEntry* entry_;
};

}  // namespace tessera
