// The kernel side of the simulator ABI: the HostApi pointer and threadgroup memory.
//
// Kernel code reaches the simulator only through `host_api` (see kernel_abi.h): the
// translator's generated registration function stores the table handed to it. It is a
// C++17 inline variable so that every translation unit of a kernel library shares one.
#pragma once

#if defined(__clang__)
#define METALSIM_NOINLINE_SITE __attribute__((noinline))
#else
// noipa: no inlining, cloning or interprocedural changes, so the helper stays a real
// call whose return address identifies the call site, and its parameters stay used.
#define METALSIM_NOINLINE_SITE __attribute__((noipa))
#endif
#define METALSIM_ALWAYS_INLINE inline __attribute__((always_inline))

namespace metalsim {
namespace kernel {

inline const metalsim::kabi::HostApi* host_api = nullptr;

// Storage for one `threadgroup T x;` declared inside a kernel (the translator rewrites
// `threadgroup float tile[16][16];` to use tg_alloc<float[16][16]>()). The simulator
// hands out the same block to every thread of the group for the same declaration.
template <class T>
inline T* tg_alloc() {
  return static_cast<T*>(host_api->tg_alloc(sizeof(T), alignof(T)));
}

namespace detail {
// Reports a usage error through the simulator (which does not return).
[[noreturn]] inline void fail(const char* message) {
  if (host_api) host_api->fail(message);
  __builtin_trap();
}
}  // namespace detail

}  // namespace kernel

// The translator emits `metalsim::kernel::...` after the prelude has defined the MSL
// keyword `kernel` as an empty macro, which would turn that into `metalsim::::...`.
// This alias names the same namespace without the keyword (see README.md).
namespace kernel_rt = kernel;

}  // namespace metalsim
