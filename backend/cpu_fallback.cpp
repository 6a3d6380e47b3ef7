// Every aten op metalx does not implement runs on the CPU: its metalx arguments are
// copied to the CPU, the CPU kernel runs, and results are copied back.
//
// Correct but slow, and only as capable as the copies (contiguous, same dtype).
// TODO(metalx fallback report): count fallen-back ops per name and make the list
// available (users ask which ops fell back), with an option to warn or to fail.
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

namespace metalx {
namespace {

void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  at::native::cpu_fallback(op, stack);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
}

}  // namespace
}  // namespace metalx
