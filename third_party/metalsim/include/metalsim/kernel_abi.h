// The contract between kernels translated from Metal Shading Language and the
// simulator that runs them.
//
// A translated kernel file (built in, or compiled at run time and dlopen'ed) never links
// against the simulator: everything it needs from it comes through the HostApi table
// handed to its registration function. That keeps run-time compiled kernels loadable
// however the simulator itself was loaded (Python loads extensions RTLD_LOCAL).
//
// This header is included both by the simulator and, first of all, by the prelude, so
// it must not depend on anything the prelude defines.
#pragma once

#include <cstddef>
#include <cstdint>

namespace metalsim::kabi {

constexpr uint32_t kAbiVersion = 4;
constexpr uint32_t kSimdWidth = 32;
constexpr uint32_t kMaxBindings = 31;

struct U3 {
  uint32_t x, y, z;
};

// Every position/size attribute a kernel parameter can ask for, for one thread.
struct ThreadIds {
  U3 thread_position_in_grid;
  U3 thread_position_in_threadgroup;
  U3 threadgroup_position_in_grid;
  U3 threads_per_threadgroup;  // the actual size: smaller in edge threadgroups
  U3 dispatch_threads_per_threadgroup;
  U3 threadgroups_per_grid;
  U3 threads_per_grid;
  uint32_t thread_index_in_threadgroup;
  uint32_t thread_index_in_simdgroup;
  uint32_t simdgroup_index_in_threadgroup;
  uint32_t simdgroups_per_threadgroup;
  uint32_t thread_index_in_quadgroup;
  uint32_t quadgroup_index_in_threadgroup;
};

// What a kernel parameter is bound to, as its [[...]] attribute says.
enum class Bind : uint8_t {
  Buffer,       // [[buffer(n)]]
  Threadgroup,  // [[threadgroup(n)]]
  ThreadPositionInGrid,
  ThreadPositionInThreadgroup,
  ThreadgroupPositionInGrid,
  ThreadsPerThreadgroup,
  DispatchThreadsPerThreadgroup,
  ThreadgroupsPerGrid,
  ThreadsPerGrid,
  ThreadIndexInThreadgroup,
  ThreadIndexInSimdgroup,
  SimdgroupIndexInThreadgroup,
  SimdgroupsPerThreadgroup,
  ThreadsPerSimdgroup,
  ThreadExecutionWidth,
  ThreadIndexInQuadgroup,
  QuadgroupIndexInThreadgroup,
  GridOrigin,
  GridSize,
};

struct Param {
  Bind bind;
  uint32_t index;  // for Buffer / Threadgroup
  const char* name;
};

// One dispatch as a kernel sees it: bound memory and the grid's shape.
struct Launch {
  void* buffers[kMaxBindings];             // buffer contents + offset, or inline bytes
  U3 threads_per_grid;
  U3 threads_per_threadgroup;              // as dispatched
  U3 threadgroups_per_grid;
};

// Per-thread state the executor owns; kernels only see it through ThreadIds and
// the threadgroup memory pointers.
struct GroupMemory {
  void* dynamic[kMaxBindings];  // [[threadgroup(n)]] arguments of the current group
};

// A SIMD-group (or quad-group) operation waiting for its lanes. Each lane passes its
// own request; when the lanes that take part are known, the simulator calls
// `resolve` once with all of them, and it writes every lane's result.
struct SimdRequest {
  const void* site;      // code address of the call, to tell divergent calls apart
  void (*resolve)(SimdRequest* const* lanes, uint32_t active_mask);
  const void* in;        // this lane's operand (lives on the lane's stack)
  void* out;             // where this lane's result goes
  int32_t arg;           // lane index / delta for broadcasts and shuffles
  uint32_t lane;         // filled by the simulator: index in the SIMD group
  uint8_t quad;          // nonzero: the operation spans the lane's quad only
};

enum class BarrierScope : uint32_t { Threadgroup = 0, Simdgroup = 1 };

// What a simulated thread of a synchronising kernel keeps at the top of its fiber
// stack. Fiber stacks are aligned to `HostApi::fiber_stack_span` (a power of two), so
// kernel code finds its own header from its frame address with a mask, no call:
// SIMD-group matrix functions (metalsim_prelude/simdgroup_matrix.h) run every call
// once, on lane 0 of the SIMD group, and count the calls of every lane here so that
// the simulator can report lanes that did not all reach the same calls.
struct LaneHeader {
  uint32_t simd_lane;     // index in the SIMD group
  uint32_t reserved;
  uint64_t matrix_calls;  // SIMD-group matrix calls this thread reached so far
};
constexpr size_t kLaneHeaderBytes = 64;

struct HostApi {
  uint32_t abi_version;
  void* (*tg_alloc)(size_t size, size_t align);  // a threadgroup variable
  void (*barrier)(BarrierScope scope, const void* site);
  void (*simd)(SimdRequest* request);            // blocks until resolved
  [[noreturn]] void (*fail)(const char* message);
  size_t fiber_stack_span;  // fiber stacks start at multiples of it; LaneHeader at the top
};

using RunGroupFn = void (*)(const Launch&, const GroupMemory&, U3 group);
using RunThreadFn = void (*)(const Launch&, const GroupMemory&, const ThreadIds&);

struct KernelInfo {
  const char* name;               // the host name ([[host_name]] or the function name)
  const Param* params;
  uint32_t param_count;
  bool uses_sync;                 // barriers or SIMD-group functions: needs fibers
  bool declares_threadgroup_memory;
  uint32_t max_total_threads;     // [[max_total_threads_per_threadgroup(n)]], or 0
  RunGroupFn run_group;           // all threads of one group, as a plain loop
  RunThreadFn run_thread;         // one thread (fiber mode)
  const char* source_name;        // the .metal file, for messages
};

// What a kernel file's registration function fills in.
struct Registrar {
  const HostApi* api;
  void (*add)(Registrar* self, const KernelInfo* kernel);
  void* context;
};

// A library's registration function (one per file, and one per built-in library and
// instruction-set level).
using RegisterFn = void (*)(Registrar*);

// Computes the ids of the thread at `local` (position inside the group) of `group`.
inline ThreadIds threadIds(const Launch& L, U3 group, U3 local, U3 group_size) {
  ThreadIds t;
  t.threadgroup_position_in_grid = group;
  t.thread_position_in_threadgroup = local;
  t.thread_position_in_grid = {group.x * L.threads_per_threadgroup.x + local.x,
                               group.y * L.threads_per_threadgroup.y + local.y,
                               group.z * L.threads_per_threadgroup.z + local.z};
  t.threads_per_threadgroup = group_size;
  t.dispatch_threads_per_threadgroup = L.threads_per_threadgroup;
  t.threadgroups_per_grid = L.threadgroups_per_grid;
  t.threads_per_grid = L.threads_per_grid;
  uint32_t linear = (local.z * group_size.y + local.y) * group_size.x + local.x;
  uint32_t count = group_size.x * group_size.y * group_size.z;
  t.thread_index_in_threadgroup = linear;
  t.thread_index_in_simdgroup = linear % kSimdWidth;
  t.simdgroup_index_in_threadgroup = linear / kSimdWidth;
  t.simdgroups_per_threadgroup = (count + kSimdWidth - 1) / kSimdWidth;
  t.thread_index_in_quadgroup = linear % 4;
  t.quadgroup_index_in_threadgroup = linear / 4;
  return t;
}

// The size of `group`: the dispatched threadgroup size, clipped at the grid's edge.
inline U3 groupSize(const Launch& L, U3 group) {
  auto clip = [](uint32_t g, uint32_t per, uint32_t total) {
    uint32_t start = g * per;
    return start + per <= total ? per : total - start;
  };
  return {clip(group.x, L.threads_per_threadgroup.x, L.threads_per_grid.x),
          clip(group.y, L.threads_per_threadgroup.y, L.threads_per_grid.y),
          clip(group.z, L.threads_per_threadgroup.z, L.threads_per_grid.z)};
}

// Calls body(ids) for every thread of `group` in index order. Inlined into each
// kernel's run_group so the compiler sees one loop around the kernel body.
template <class Body>
inline void forEachThread(const Launch& L, U3 group, Body&& body) {
  U3 size = groupSize(L, group);
  for (uint32_t z = 0; z < size.z; ++z)
    for (uint32_t y = 0; y < size.y; ++y)
      for (uint32_t x = 0; x < size.x; ++x) body(threadIds(L, group, U3{x, y, z}, size));
}

}  // namespace metalsim::kabi
