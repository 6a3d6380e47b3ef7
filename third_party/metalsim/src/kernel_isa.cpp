// Choosing the built-in kernels' instruction-set level (see kernel_isa.h).
#include "kernel_isa.h"

#include "config.h"
#include "metalx/runtime/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace metalsim {

bool cpuSupportsX86_64_v3() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool fma = c & (1u << 12), movbe = c & (1u << 22), osxsave = c & (1u << 27), avx = c & (1u << 28),
             f16c = c & (1u << 29);
  if (!(fma && movbe && osxsave && avx && f16c)) return false;
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0x6u) != 0x6u) return false;  // the OS saves SSE and AVX state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool bmi1 = b & (1u << 3), avx2 = b & (1u << 5), bmi2 = b & (1u << 8);
  if (!(bmi1 && avx2 && bmi2)) return false;
  if (!__get_cpuid(0x80000001u, &a, &b, &c, &d)) return false;
  return c & (1u << 5);  // LZCNT
#else
  return false;
#endif
}

bool cpuSupportsX86_64_v4() {
#if defined(__x86_64__)
  if (!cpuSupportsX86_64_v3()) return false;
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0xE0u) != 0xE0u) return false;  // opmask, ZMM0-15 upper halves, ZMM16-31
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const unsigned need = (1u << 16) | (1u << 17) | (1u << 28) | (1u << 30) | (1u << 31);  // F DQ CD BW VL
  return (b & need) == need;
#else
  return false;
#endif
}

namespace {

struct Level {
  const char* name;
  kabi::RegisterFn entry;
  bool (*cpu_supports)();
};

}  // namespace

KernelIsaChoice chooseKernelIsa(kabi::RegisterFn baseline, kabi::RegisterFn x86_64_v3,
                                kabi::RegisterFn x86_64_v4) {
  // Widest first: `auto` takes the first one that is built and runs on this CPU.
  const Level levels[] = {{"x86-64-v4", x86_64_v4, &cpuSupportsX86_64_v4},
                          {"x86-64-v3", x86_64_v3, &cpuSupportsX86_64_v3}};
  const std::string& want = config().kernel_isa;
  if (want == "baseline") return {baseline, "baseline"};
  for (const Level& l : levels) {
    if (want != l.name) continue;
    if (!l.entry)
      throw metalx::rt::Error(metalx::rt::ErrorKind::Validation,
                              "METALSIM_KERNEL_ISA=" + want + ", but the built-in kernels were not built for " +
                                  want + " (only for x86-64 hosts)");
    if (!l.cpu_supports())
      throw metalx::rt::Error(metalx::rt::ErrorKind::Validation,
                              "METALSIM_KERNEL_ISA=" + want + ", but this CPU (or OS) does not support " + want);
    return {l.entry, l.name};
  }
  // config() accepted only auto past this point (metalx/runtime/env.h).
  for (const Level& l : levels)
    if (l.entry && l.cpu_supports()) return {l.entry, l.name};
  return {baseline, "baseline"};
}

}  // namespace metalsim
