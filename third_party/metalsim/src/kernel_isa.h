// Which build of the built-in kernels the simulator registers: the baseline, or a
// build for a wider instruction-set level when the CPU has it (as Metal picks a
// library slice per GPU family). METALSIM_KERNEL_ISA overrides the choice:
//   auto (default)  the widest level both built and supported by this CPU
//   baseline        always the baseline build
//   x86-64-v3       AVX2/FMA build; an error if it was not built or the CPU lacks it
#pragma once

#include <string>

#include "metalsim/kernel_abi.h"

namespace metalsim {

struct KernelIsaChoice {
  kabi::RegisterFn entry;
  std::string name;  // "baseline" or "x86-64-v3"
};

// `x86_64_v3` is the build's registration function for that level, or null.
KernelIsaChoice chooseKernelIsa(kabi::RegisterFn baseline, kabi::RegisterFn x86_64_v3);

// Whether this CPU (and OS) runs x86-64-v3 code: AVX, AVX2, FMA, F16C, BMI1/2, LZCNT,
// MOVBE, and the OS saving AVX state.
bool cpuSupportsX86_64_v3();

}  // namespace metalsim
