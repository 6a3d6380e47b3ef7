// Running a dispatch: every threadgroup of the grid, with Metal's semantics.
#pragma once

#include "commands.h"

namespace metalsim {

// Runs `dispatch` to completion on the worker pool. Throws std::runtime_error with a
// message naming the kernel and threadgroup when the kernel breaks a rule at run time
// (a barrier not all threads reach, too much threadgroup memory, ...).
void runDispatch(DispatchCommand& dispatch);

}  // namespace metalsim
