// Which aten ops ran on the CPU because metalx has no kernel for them, and what to do
// when one does: users ask "what fell back?" of every out-of-tree device.
//
// METALX_FALLBACK=allow (default): run on the CPU and count it;
//                 warn: also warn, once per op;
//                 error: raise instead, naming the op (to find gaps in CI).
#pragma once

#include <ATen/core/operator_name.h>

#include <cstdint>
#include <map>
#include <string>

namespace metalx {

enum class FallbackMode { Allow, Warn, Error };

FallbackMode fallbackMode();
void setFallbackMode(FallbackMode mode);
FallbackMode parseFallbackMode(const std::string& text);  // throws c10::Error if unknown

// Called by the fallback before running `op` on the CPU: counts it, and warns or
// raises as the mode says.
void reportFallback(const c10::OperatorName& op);

// Results the fallback had to copy to the device (memory a CPU kernel allocated
// outside device memory), since the last reset: ideally 0.
void countFallbackResultCopy();
int64_t fallbackResultCopies();

// {"aten::add.Tensor": 3, ...} since the last reset.
std::map<std::string, int64_t> fallbackCounts();
void resetFallbackCounts();

}  // namespace metalx
