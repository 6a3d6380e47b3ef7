// The CPU fallback (cpu_fallback.cpp) as a boxed kernel, for registrations made
// elsewhere: the sparse dispatch keys (sparse.cpp) use the same route.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <tuple>
#include <utility>

namespace metalx {

// Runs `op` on the CPU over the metalx tensors on `stack` (dense or sparse) and
// leaves metalx results on it.
void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// `op` run on the CPU fallback with `args` as its arguments: its results, as the boxed
// call leaves them on the stack. For ops that take the fallback for some inputs only
// (dtypes without kernels, shapes a kernel does not cover).
template <class... Args>
torch::jit::Stack cpuFallbackCall(const c10::OperatorHandle& op, const Args&... args) {
  torch::jit::Stack stack;
  stack.reserve(sizeof...(Args));
  (stack.emplace_back(args), ...);
  cpuFallback(op, &stack);
  return stack;
}

// The same for the operator `name`.`overload`, looked up on each call.
template <class... Args>
torch::jit::Stack cpuFallbackCall(const char* name, const char* overload, const Args&... args) {
  return cpuFallbackCall(c10::Dispatcher::singleton().findSchemaOrThrow(name, overload), args...);
}

template <size_t... I>
auto resultTensors(const torch::jit::Stack& results, std::index_sequence<I...>) {
  return std::make_tuple(results[I].toTensor()...);
}

// The first N results of such a call, as a tuple of tensors.
template <size_t N>
auto resultTensors(const torch::jit::Stack& results) {
  return resultTensors(results, std::make_index_sequence<N>{});
}

}  // namespace metalx
