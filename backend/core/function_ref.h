// A non-owning reference to a callable, for callbacks that run before the call that
// takes them returns (Stream::encodeCompute and friends).
//
// std::function copies its callable and allocates when the callable does not fit its
// small buffer (a lambda capturing a handful of references already does not), which a
// per-op callback pays on every op. A FunctionRef is two pointers: the callable stays
// where the caller made it, so it must outlive the call (a lambda written at the call
// site does).
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace metalx {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef> &&
                                              std::is_invocable_r_v<R, F&, Args...>>>
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): converts like std::function
      : callable_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_(&callThrough<std::remove_reference_t<F>>) {}

  R operator()(Args... args) const { return call_(callable_, std::forward<Args>(args)...); }

 private:
  template <class F>
  static R callThrough(void* callable, Args... args) {
    return (*static_cast<F*>(callable))(std::forward<Args>(args)...);
  }

  void* callable_;
  R (*call_)(void*, Args...);
};

}  // namespace metalx
