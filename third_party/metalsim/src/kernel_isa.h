// Which build of the built-in kernels the simulator registers: the baseline, or a
// build for a wider instruction-set level when the CPU has it (as Metal picks a
// library slice per GPU family). METALSIM_KERNEL_ISA overrides the choice:
//   auto (default)  the widest level both built and supported by this CPU
//   baseline        always the baseline build
//   x86-64-v3       AVX2/FMA build; an error if it was not built or the CPU lacks it
//   x86-64-v4       AVX-512 build (32 vector registers of 64 bytes); likewise
#pragma once

#include <string>

#include "metalsim/kernel_abi.h"

namespace metalsim {

struct KernelIsaChoice {
  kabi::RegisterFn entry;
  std::string name;  // "baseline", "x86-64-v3" or "x86-64-v4"
};

// `x86_64_v3`, `x86_64_v4`: the build's registration functions for those levels, or null.
KernelIsaChoice chooseKernelIsa(kabi::RegisterFn baseline, kabi::RegisterFn x86_64_v3,
                                kabi::RegisterFn x86_64_v4);

// Whether this CPU (and OS) runs x86-64-v3 code: AVX, AVX2, FMA, F16C, BMI1/2, LZCNT,
// MOVBE, and the OS saving AVX state.
bool cpuSupportsX86_64_v3();

// Whether it also runs x86-64-v4 code: AVX-512 F, BW, CD, DQ and VL, and the OS saving
// the opmask and 512-bit register state.
bool cpuSupportsX86_64_v4();

}  // namespace metalsim
