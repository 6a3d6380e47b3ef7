// The CPU fallback (cpu_fallback.cpp) as a boxed kernel, for registrations made
// elsewhere: the sparse dispatch keys (sparse.cpp) use the same route.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace metalx {

// Runs `op` on the CPU over the metalx tensors on `stack` (dense or sparse) and
// leaves metalx results on it.
void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace metalx
