/** \file
 * User-defined operators (the seed's "composability" section; torch.library's `custom_op`,
 * `triton_op`, `wrap_triton`), on the one operator registry built-ins use (DESIGN.md D6).
 *
 *     TL_JIT(sin_kernel, tl::Ptr in_ptr0, tl::Ptr out_ptr, tl::Int n_elements, tl::Const
 * BLOCK_SIZE) {...}
 *
 *     auto mysin = library::triton_op("mylib::mysin", [](const Tensor& x) {
 *       Tensor out = empty_like(x);
 *       auto n = x.numel();
 *       library::wrap_triton(sin_kernel)[{n}](x, out, n, tl::meta("BLOCK_SIZE", 4));
 *       return out;
 *     }, {.arg_names = {"x"}});
 *     Tensor y = mysin(x);                        // the handle
 *     Tensor z = ops("mylib::mysin")(x).to_tensor();  // by name, as torch.ops.mylib.mysin
 *     mysin.register_autograd(backward, setup_context);
 *     mysin.register_kernel("cpu", [](const Tensor& x) { return sin(x); });
 *
 * The schema is inferred from the C++ signature (`Tensor`, `std::optional<Tensor>`,
 * `std::vector<Tensor>`, integers, `double`, `bool`, `Scalar`, `DType`, `Device`, strings, int
 * and float lists, optionals of those; results `Tensor`, `std::tuple<Tensor...>`,
 * `std::vector<Tensor>`, `void`, scalars) or given in the options. C++ has no parameter names,
 * so arguments are `arg0, arg1, ...` unless `arg_names` names them.
 *
 * A `custom_op` is opaque to the graph compiler; a `triton_op` is traced into (its body runs
 * under capture) and its body doubles as its fake (shape) kernel: kernel launches on tensors
 * without data (meta or fake) do nothing. `wrap_triton` is kept for the seed's spelling: every
 * tessera kernel launch is already visible to tracing and FLOP counting.
 */
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tessera/autograd.h"
#include "tessera/detail/boxing.h"
#include "tessera/dispatch.h"
#include "tessera/tl.h"

namespace tessera::library {

/** How a user operator is defined. */
struct CustomOpOptions {
  /** Names of the arguments the operator writes (tensors); `{"unknown"}`: assume every tensor. */
  std::vector<std::string> mutates_args = {};
  /** Device types the function is the kernel for ("cpu", "cuda"); empty: every device with data. */
  std::vector<std::string> device_types = {};
  /** The schema, when not inferred ("mylib::mysin(Tensor x) -> Tensor"). */
  std::string schema = {};
  /** Argument names for the inferred schema (default `arg0, arg1, ...`). */
  std::vector<std::string> arg_names = {};
};

namespace detail {

/** How a C++ parameter type maps to the dispatcher: the canonical type kernels take, its schema
 * type, and the conversion back to what the user's function takes. */
template <class T, class = void>
struct Canon {
  static_assert(!sizeof(T), "unsupported parameter type for a custom operator");
};
#define TS_CANON(User, CanonT, Schema, Expr)              \
  template <>                                             \
  struct Canon<User> {                                    \
    using type = CanonT;                                  \
    static constexpr const char* schema = Schema;         \
    static decltype(auto) from(CanonT v) { return Expr; } \
  };
TS_CANON(Tensor, const Tensor&, "Tensor", v)
TS_CANON(const Tensor&, const Tensor&, "Tensor", v)
TS_CANON(Tensor&, Tensor&, "Tensor", v)
TS_CANON(std::optional<Tensor>, const std::optional<Tensor>&, "Tensor?", v)
TS_CANON(const std::optional<Tensor>&, const std::optional<Tensor>&, "Tensor?", v)
TS_CANON(std::vector<Tensor>, ArrayRef<Tensor>, "Tensor[]", v.vec())
TS_CANON(const std::vector<Tensor>&, ArrayRef<Tensor>, "Tensor[]", v.vec())
TS_CANON(ArrayRef<Tensor>, ArrayRef<Tensor>, "Tensor[]", v)
TS_CANON(int64_t, int64_t, "int", v)
TS_CANON(int, int64_t, "int", static_cast<int>(v))
TS_CANON(SymInt, SymInt, "SymInt", v)
TS_CANON(const SymInt&, SymInt, "SymInt", v)
TS_CANON(double, double, "float", v)
TS_CANON(float, double, "float", static_cast<float>(v))
TS_CANON(bool, bool, "bool", v)
TS_CANON(Scalar, const Scalar&, "Scalar", v)
TS_CANON(const Scalar&, const Scalar&, "Scalar", v)
TS_CANON(DType, DType, "ScalarType", v)
TS_CANON(Device, Device, "Device", v)
TS_CANON(std::string_view, std::string_view, "str", v)
TS_CANON(std::string, std::string_view, "str", std::string(v))
TS_CANON(const std::string&, std::string_view, "str", std::string(v))
TS_CANON(IntArrayRef, IntArrayRef, "int[]", v)
TS_CANON(std::vector<int64_t>, IntArrayRef, "int[]", v.vec())
TS_CANON(const std::vector<int64_t>&, IntArrayRef, "int[]", v.vec())
TS_CANON(ArrayRef<double>, ArrayRef<double>, "float[]", v)
TS_CANON(std::vector<double>, ArrayRef<double>, "float[]", v.vec())
TS_CANON(const std::vector<double>&, ArrayRef<double>, "float[]", v.vec())
TS_CANON(std::optional<int64_t>, std::optional<int64_t>, "int?", v)
TS_CANON(std::optional<double>, std::optional<double>, "float?", v)
TS_CANON(std::optional<bool>, std::optional<bool>, "bool?", v)
TS_CANON(std::optional<DType>, std::optional<DType>, "ScalarType?", v)
TS_CANON(std::optional<Scalar>, std::optional<Scalar>, "Scalar?", v)
#undef TS_CANON

template <class R>
struct CanonReturn {
  static_assert(!sizeof(R), "unsupported result type for a custom operator");
};
template <>
struct CanonReturn<Tensor> {
  static std::string schema() { return "Tensor"; }
};
template <>
struct CanonReturn<std::vector<Tensor>> {
  static std::string schema() { return "Tensor[]"; }
};
template <>
struct CanonReturn<void> {
  static std::string schema() { return "()"; }
};
template <>
struct CanonReturn<double> {
  static std::string schema() { return "float"; }
};
template <>
struct CanonReturn<int64_t> {
  static std::string schema() { return "int"; }
};
template <>
struct CanonReturn<bool> {
  static std::string schema() { return "bool"; }
};
template <class... T>
struct CanonReturn<std::tuple<T...>> {
  static std::string schema() {
    std::string s = "(";
    ((s += CanonReturn<T>::schema() + ", "), ...);
    s.resize(s.size() - 2);
    return s + ")";
  }
};

template <class F>
struct UserSig : UserSig<decltype(&std::decay_t<F>::operator())> {};
template <class R, class... A>
struct UserSig<R (*)(A...)> {
  using Ret = R;
  using Args = std::tuple<A...>;
  using Canonical = R(typename Canon<A>::type...);
};
template <class C, class R, class... A>
struct UserSig<R (C::*)(A...) const> : UserSig<R (*)(A...)> {};
template <class C, class R, class... A>
struct UserSig<R (C::*)(A...)> : UserSig<R (*)(A...)> {};

/** A function taking the canonical types, calling the user's. */
template <class F, class R, class... A>
auto adapt(F f, std::tuple<A...>*) {
  return [f = std::move(f)](typename Canon<A>::type... a) -> R { return f(Canon<A>::from(a)...); };
}
template <class F>
auto canonical(F f) {
  using S = UserSig<F>;
  return adapt<F, typename S::Ret>(std::move(f), static_cast<typename S::Args*>(nullptr));
}

template <class... A>
std::vector<std::string> schema_types(std::tuple<A...>*) {
  return {Canon<A>::schema...};
}

/** Defines the operator (inferring the schema when none is given); errors name the op. */
OperatorHandle define(std::string_view name, const CustomOpOptions& o,
                      const std::vector<std::string>& arg_types, const std::string& ret,
                      uint32_t tags);
/** Registers `k` as the kernel of `op` for the option's device types (all with data by default). */
void set_default_kernels(const OperatorHandle& op, const CustomOpOptions& o, KernelFunction k,
                         bool also_fake);
/** `register_kernel`: a per-device override, kept beside the default for set_kernel_enabled. */
void set_device_kernel(const OperatorHandle& op, std::string_view device, KernelFunction k);
void enable_device_kernel(const OperatorHandle& op, std::string_view device, bool enabled);
/** `register_autograd` after the checks (a functional op, a backward given). */
void set_autograd(const OperatorHandle& op, autograd::SetupContextFn setup,
                  autograd::BackwardFn backward);
[[noreturn]] void kernel_mismatch(const OperatorHandle& op, const char* what);

}  // namespace detail

/** A user-defined operator: call it like a function; register per-device kernels, a fake
 * (shape) kernel and a derivative on it. `Sig` is the canonical C++ signature. */
template <class Sig>
class CustomOp;

template <class R, class... Args>
class CustomOp<R(Args...)> {
 public:
  explicit CustomOp(OperatorHandle op) : op_(op), typed_(op.name()) {}

  /** Calls the operator through the dispatcher (modes, autograd, wrapper tensors see it). */
  R operator()(Args... args) const { return typed_(std::forward<Args>(args)...); }

  const OperatorHandle& handle() const { return op_; }
  const std::string& name() const { return op_.name(); }
  const FunctionSchema& schema() const { return op_.schema(); }

  /** The kernel for one device type ("cpu", "cuda"), replacing the default for it. */
  template <class F>
  CustomOp& register_kernel(std::string_view device, F fn) {
    detail::set_device_kernel(op_, device, checked(detail::canonical(std::move(fn)), "kernel"));
    return *this;
  }
  /** Turns a `register_kernel` override off (back to the default) or on again. */
  CustomOp& set_kernel_enabled(std::string_view device, bool enabled) {
    detail::enable_device_kernel(op_, device, enabled);
    return *this;
  }
  /** The fake kernel: computes result shapes for meta and fake tensors. */
  template <class F>
  CustomOp& register_fake(F fn) {
    op_.entry().set_kernel(DeviceType::Meta,
                           checked(detail::canonical(std::move(fn)), "fake kernel"));
    return *this;
  }

  /**
   * The derivative. `backward(ctx, grad)` returns the gradient of the (single) argument as a
   * Tensor, or one gradient per argument as `std::vector<Tensor>` / `std::vector<IValue>`;
   * `backward(ctx, grads)` takes one gradient per result. `setup_context(ctx, args..., result)`
   * (or `(ctx, const Stack& inputs, const Stack& outputs)`) runs after the forward to save what
   * the backward needs. Only for operators that write none of their arguments.
   */
  template <class B, class S = std::nullptr_t>
  CustomOp& register_autograd(B backward, S setup_context = nullptr) {
    detail::set_autograd(op_, make_setup(std::move(setup_context)),
                         make_backward(std::move(backward)));
    return *this;
  }

 private:
  template <class F>
  KernelFunction checked(F f, const char* what) const {
    if (!kernel_matches<F>(op_.schema())) detail::kernel_mismatch(op_, what);
    return make_kernel(std::move(f));
  }

  template <class S>
  autograd::SetupContextFn make_setup(S s) const {
    if constexpr (std::is_same_v<S, std::nullptr_t>) {
      return nullptr;
    } else if constexpr (std::is_invocable_v<S&, autograd::AutogradContext&, const Stack&,
                                             const Stack&>) {
      return s;
    } else {
      static_assert(
          !std::is_void_v<R> && !std::is_same_v<R, Tensor&>,
          "setup_context(ctx, args..., result) needs a result; use (ctx, inputs, outputs)");
      return [s = std::move(s)](autograd::AutogradContext& ctx, const Stack& in, const Stack& out) {
        Stack args = in;
        IValue* base = args.data();
        Stack outs = out;
        std::decay_t<R> r = ReturnTraits<std::decay_t<R>>::pop(outs);
        [&]<size_t... I>(std::index_sequence<I...>) {
          s(ctx, ArgTraits<Args>::unbox(base[I])..., r);
        }
        (std::index_sequence_for<Args...>{});
      };
    }
  }

  template <class B>
  autograd::BackwardFn make_backward(B b) const {
    return [b = std::move(b)](autograd::AutogradContext& ctx,
                              const std::vector<Tensor>& grads) -> std::vector<IValue> {
      auto pack = [](auto&& r) -> std::vector<IValue> {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, Tensor>) {
          return {IValue(r)};
        } else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
          return std::vector<IValue>(r.begin(), r.end());
        } else {
          static_assert(std::is_same_v<T, std::vector<IValue>>,
                        "a backward returns a Tensor, std::vector<Tensor> or std::vector<IValue>");
          return r;
        }
      };
      if constexpr (std::is_invocable_v<B&, autograd::AutogradContext&,
                                        const std::vector<Tensor>&>) {
        return pack(b(ctx, grads));
      } else {
        return pack(b(ctx, grads.at(0)));
      }
    };
  }

  OperatorHandle op_;
  TypedOp<R(Args...)> typed_;
};

namespace detail {
template <class F>
using OpOf = CustomOp<typename UserSig<F>::Canonical>;

template <class F>
OpOf<F> make_op(std::string_view name, F fn, const CustomOpOptions& o, uint32_t tags,
                bool fake_from_fn) {
  using S = UserSig<F>;
  auto f = canonical(std::move(fn));
  const OperatorHandle op = define(name, o, schema_types(static_cast<typename S::Args*>(nullptr)),
                                   CanonReturn<std::decay_t<typename S::Ret>>::schema(), tags);
  if (!kernel_matches<decltype(f)>(op.schema())) kernel_mismatch(op, "function");
  set_default_kernels(op, o, make_kernel(std::move(f)), fake_from_fn);
  return OpOf<F>(op);
}
}  // namespace detail

/** An operator whose body is opaque to the graph compiler (torch.library.custom_op). */
template <class F>
auto custom_op(std::string_view name, F fn, CustomOpOptions options = {}) {
  return detail::make_op(name, std::move(fn), options, kTagCustomOp, false);
}
template <class F>
auto custom_op(std::string_view name, CustomOpOptions options, F fn) {
  return custom_op(name, std::move(fn), std::move(options));
}

/** An operator whose body launches tile kernels; the graph compiler traces into it and its body
 * is also its fake kernel (torch.library.triton_op). */
template <class F>
auto triton_op(std::string_view name, F fn, CustomOpOptions options = {}) {
  return detail::make_op(name, std::move(fn), options, kTagCustomOp | kTagTritonOp, true);
}
template <class F>
auto triton_op(std::string_view name, CustomOpOptions options, F fn) {
  return triton_op(name, std::move(fn), std::move(options));
}

/** The seed's `wrap_triton(kernel)[grid](...)`: the kernel itself (every launch is traceable). */
inline const tl::JITFunction& wrap_triton(const tl::JITFunction& kernel) {
  return kernel;
}

}  // namespace tessera::library
