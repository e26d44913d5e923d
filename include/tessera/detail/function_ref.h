/** \file
 * `FunctionRef<R(A...)>`: a non-owning reference to a callable (no allocation), for callbacks
 * that do not outlive the call, such as a parallel loop body.
 */
#pragma once

#include <type_traits>
#include <utility>

namespace tessera {

template <class Sig>
class FunctionRef;

template <class R, class... A>
class FunctionRef<R(A...)> {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef> &&
                                              std::is_invocable_r_v<R, F&, A...>>>
  FunctionRef(F&& f)  // NOLINT: binds any callable
      : obj_(const_cast<void*>(static_cast<const void*>(&f))), call_([](void* o, A... a) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<A>(a)...);
        }) {}

  R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, A...);
};

}  // namespace tessera
