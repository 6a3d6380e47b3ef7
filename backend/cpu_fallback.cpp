// Every aten op metalx does not implement runs on the CPU: its metalx arguments are
// copied to the CPU, the CPU kernel runs, and results are copied back.
//
// Correct but slow, and only as capable as the copies (contiguous, same dtype).
// Every use is counted and governed by METALX_FALLBACK (fallback_report.h).
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include "fallback_report.h"

namespace metalx {
namespace {

void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  reportFallback(op.operator_name());
  at::native::cpu_fallback(op, stack);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
}

}  // namespace
}  // namespace metalx
