// Barriers and memory fences: threadgroup_barrier, simdgroup_barrier, mem_flags.
//
// A barrier is a point where the simulator's fibers for the group meet, so it goes to
// host_api->barrier together with the code address of the call. The address lets the
// simulator tell different barriers apart (and diagnose threads waiting at different
// ones). To get a distinct address per call site in the user's kernel, the public
// function is always inlined into the kernel and calls a never-inlined helper; the
// helper's return address is then an address inside the kernel, at that call.
#pragma once

namespace metal {

enum class mem_flags : unsigned {
  mem_none = 0,
  mem_device = 1,
  mem_threadgroup = 2,
  mem_texture = 4,
  mem_threadgroup_imageblock = 8,
  mem_object_data = 16,
};
constexpr mem_flags operator|(mem_flags a, mem_flags b) noexcept {
  return static_cast<mem_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
constexpr mem_flags operator&(mem_flags a, mem_flags b) noexcept {
  return static_cast<mem_flags>(static_cast<unsigned>(a) & static_cast<unsigned>(b));
}

namespace detail {
// `line` only keeps calls on different lines from being merged into one call by the
// optimiser (tail merging of identical if/else branches), which would give them a
// single call site; the asm makes it a real use.
METALSIM_NOINLINE_SITE inline void barrier_at(metalsim::kabi::BarrierScope scope, unsigned line) {
  __asm__ volatile("" : : "r"(line));
  metalsim::kernel::host_api->barrier(scope, __builtin_return_address(0));
}
}  // namespace detail

// The simulator's barrier also orders memory for the whole group (fibers are switched
// inside it), so the flags need no separate fence here.
METALSIM_ALWAYS_INLINE void threadgroup_barrier(mem_flags = mem_flags::mem_none,
                                                unsigned line = __builtin_LINE()) {
  detail::barrier_at(metalsim::kabi::BarrierScope::Threadgroup, line);
}
METALSIM_ALWAYS_INLINE void simdgroup_barrier(mem_flags = mem_flags::mem_none, unsigned line = __builtin_LINE()) {
  detail::barrier_at(metalsim::kabi::BarrierScope::Simdgroup, line);
}

// MSL 3.2 atomic_thread_fence: a real fence, threads of other groups may be on other
// OS threads.
inline void atomic_thread_fence(mem_flags, memory_order o, thread_scope = thread_scope_device) noexcept {
  __atomic_thread_fence(detail::gcc_order(o));
}

}  // namespace metal
