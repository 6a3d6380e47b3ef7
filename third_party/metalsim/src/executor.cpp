// Running dispatches (see executor.h).
//
// Two ways to run a threadgroup:
// - Loop mode, for kernels that never synchronise (the translator proved they reach no
//   barrier or SIMD-group function): the generated run_group calls the kernel body
//   once per thread in a plain loop the compiler can optimise as a whole.
// - Fiber mode, for the others: every thread of the group gets a fiber. Fibers run
//   until they block at a barrier or SIMD-group function; when all have blocked, the
//   scheduler resolves what it can, as lockstep hardware would:
//     * in each SIMD group, the SIMD-group call with the lowest code address among
//       the waiting lanes completes, with exactly those lanes active (lanes that took
//       another branch or returned are inactive, as with divergent control flow);
//     * otherwise, if every live thread waits at a threadgroup barrier, all pass;
//       if some threads already returned, the barrier can never complete on a GPU
//       either (it would hang), so the dispatch fails with a message saying so.
#include "executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.h"
#include "fiber.h"
#include "kernel_registry.h"
#include "library.h"
#include "watchdog.h"
#include "worker_pool.h"

namespace metalsim {
namespace {

// A fault raised from kernel code through the host API (fail(), tg overflow, ...).
struct KernelFault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class LaneState { Runnable, AtBarrier, AtSimdBarrier, AtSimd, Done, Faulted };

struct Lane {
  Fiber* fiber = nullptr;
  kabi::ThreadIds ids;
  LaneState state = LaneState::Runnable;
  const void* site = nullptr;
  kabi::SimdRequest* request = nullptr;
  size_t tg_cursor = 0;
  bool started = false;  // its fiber has been set up for this threadgroup
  std::string fault;
};

// What one OS thread is running right now; the host API works on it.
struct WorkerState {
  bool fiber_mode = false;
  Lane* lane = nullptr;          // the lane whose fiber is running (fiber mode)
  size_t loop_tg_cursor = 0;     // loop mode: threadgroup allocation cursor
  size_t tg_static_begin = 0;    // where static threadgroup variables start
  size_t tg_limit = 0;
  unsigned char* arena = nullptr;
  const kabi::KernelInfo* kernel = nullptr;
  const DispatchCommand* dispatch = nullptr;  // the dispatch whose groups run here
  // Checked kernels (shader validation): bytes from each [[buffer(n)]] binding to its
  // end, then the length of each [[threadgroup(n)]] argument (checked_abi::Api).
  uint64_t bound_lengths[2 * kabi::kMaxBindings] = {};
  // Loop mode: the thread running now, for messages (fiber mode has `lane`).
  const kabi::ThreadIds* loop_thread = nullptr;
  // Per-group data for fiber mode.
  const kabi::Launch* launch = nullptr;
  const kabi::GroupMemory* memory = nullptr;
  FiberPool fibers;
  std::vector<Lane> lanes;
  std::vector<unsigned char> arena_storage;
};

thread_local WorkerState* t_worker = nullptr;

WorkerState& worker() {
  thread_local WorkerState state;
  t_worker = &state;
  return state;
}

// ---- the host API translated kernels call ----

void* apiTgAlloc(size_t size, size_t align) {
  WorkerState* w = t_worker;
  if (!w || !w->kernel) throw KernelFault("threadgroup variable declared outside a running kernel");
  size_t& cursor = w->fiber_mode ? w->lane->tg_cursor : w->loop_tg_cursor;
  size_t at = (cursor + align - 1) / align * align;
  if (at + size > w->tg_limit)
    throw KernelFault("the kernel's threadgroup variables need " + std::to_string(at + size) +
                      " bytes of threadgroup memory, more than the device's " +
                      std::to_string(w->tg_limit));
  cursor = at + size;
  return w->arena + at;
}

void blockLane(LaneState state, const void* site, kabi::SimdRequest* request) {
  WorkerState* w = t_worker;
  if (!w || !w->fiber_mode)
    throw KernelFault(std::string("kernel '") + (w && w->kernel ? w->kernel->name : "?") +
                      "' synchronised (barrier or SIMD-group function) although the translator "
                      "classified it as not synchronising; this is a simulator bug, please report it");
  Lane* lane = w->lane;
  lane->state = state;
  lane->site = site;
  lane->request = request;
  lane->fiber->suspend();
}

void apiBarrier(kabi::BarrierScope scope, const void* site) {
  blockLane(scope == kabi::BarrierScope::Threadgroup ? LaneState::AtBarrier : LaneState::AtSimdBarrier,
            site, nullptr);
}

void apiSimd(kabi::SimdRequest* request) { blockLane(LaneState::AtSimd, request->site, request); }

[[noreturn]] void apiFail(const char* message) { throw KernelFault(message); }

const kabi::HostApi& api() {
  static const kabi::HostApi table = {kabi::kAbiVersion, &apiTgAlloc, &apiBarrier, &apiSimd, &apiFail,
                                      fiberStackSpan()};
  return table;
}

// ---- the table of checked kernels: shader validation and the watchdog ----

std::string u3(kabi::U3 v) {
  return "(" + std::to_string(v.x) + ", " + std::to_string(v.y) + ", " + std::to_string(v.z) + ")";
}

void apiWatchdogCheck() {
  WorkerState* w = t_worker;
  if (!w || !w->dispatch || !w->dispatch->expired || !w->dispatch->expired->load(std::memory_order_acquire)) return;
  const long long limit = static_cast<long long>(config().kernel_timeout_s);
  throw KernelFault("Caused GPU Timeout Error (00000002:kIOAccelCommandBufferCallbackErrorTimeout): the kernel ran "
                    "longer than METALSIM_KERNEL_TIMEOUT_S=" + std::to_string(limit) +
                    " s and was stopped, as a GPU's watchdog stops it (a loop that never ends, such as a "
                    "wait for a flag nobody sets?)");
}

const uint64_t* apiBoundLengths() {
  WorkerState* w = t_worker;
  if (!w || !w->dispatch) throw KernelFault("buffer lengths asked for outside a running kernel");
  return w->bound_lengths;
}

// "const char* metalsim_checked::typeSpelling() [with T = metal::vec<float, 4>]" -> "float4":
// the element type of a checked access as the kernel's author would write it in MSL.
std::string typeFromSpelling(const char* spelling) {
  std::string s = spelling ? spelling : "";
  size_t at = s.find("T = ");
  if (at == std::string::npos) return "?";
  s = s.substr(at + 4);
  int depth = 0;
  size_t end = 0;
  for (; end < s.size(); ++end) {
    char c = s[end];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (depth == 0 && (c == ']' || c == ';')) break;
  }
  s = s.substr(0, end);
  static const std::pair<std::regex, std::string> msl[] = {
      {std::regex("metal::"), ""},
      {std::regex("\\blong unsigned int\\b|\\bunsigned long\\b"), "ulong"},
      {std::regex("\\blong int\\b"), "long"},
      {std::regex("\\bunsigned int\\b"), "uint"},
      {std::regex("\\bshort unsigned int\\b|\\bunsigned short\\b"), "ushort"},
      {std::regex("\\bshort int\\b"), "short"},
      {std::regex("\\bunsigned char\\b"), "uchar"},
      {std::regex("\\bsigned char\\b"), "char"},
      {std::regex("\\b_Float16\\b"), "half"},
      {std::regex("\\bvec<(\\w+), (\\d)>"), "$1$2"},
      {std::regex("\\bpacked_vec<(\\w+), (\\d)>"), "packed_$1$2"},
      {std::regex("\\batomic<(\\w+)>"), "atomic_$1"},
  };
  for (const auto& [pattern, replacement] : msl) s = std::regex_replace(s, pattern, replacement);
  return s;
}

// What an out-of-range access went through, for the message: a buffer argument, a
// [[threadgroup(n)]] argument or a threadgroup variable (by where its range starts).
std::string accessedThing(const WorkerState& w, const checked_abi::Access& a, bool* threadgroup) {
  const auto base = reinterpret_cast<uintptr_t>(a.base), arena = reinterpret_cast<uintptr_t>(w.arena);
  const kabi::KernelInfo& k = *w.kernel;
  *threadgroup = w.arena && base >= arena && base < arena + w.tg_limit;
  if (!*threadgroup) {
    for (uint32_t p = 0; p < k.param_count; ++p)
      if (k.params[p].bind == kabi::Bind::Buffer && w.dispatch->launch.buffers[k.params[p].index] == a.base)
        return "argument '" + std::string(k.params[p].name ? k.params[p].name : "?") + "' [[buffer(" +
               std::to_string(k.params[p].index) + ")]]";
    return "a buffer argument";
  }
  // The [[threadgroup(n)]] arguments lie first in the arena, in index order (runGroups).
  size_t offset = 0;
  for (uint32_t i = 0; i < kabi::kMaxBindings; ++i) {
    if (!w.dispatch->threadgroupLength(i)) continue;
    if (base == arena + offset)
      for (uint32_t p = 0; p < k.param_count; ++p)
        if (k.params[p].bind == kabi::Bind::Threadgroup && k.params[p].index == i)
          return "argument '" + std::string(k.params[p].name ? k.params[p].name : "?") + "' [[threadgroup(" +
                 std::to_string(i) + ")]]";
    offset += (w.dispatch->threadgroupLength(i) + 15) / 16 * 16;
  }
  if (a.variable) return "threadgroup variable '" + std::string(a.variable) + "'";
  return "threadgroup memory";
}

[[noreturn]] void apiViolation(const checked_abi::Access* a) {
  WorkerState* w = t_worker;
  if (!w || !w->dispatch || !w->kernel) throw KernelFault("out-of-bounds access outside a running kernel");
  const auto base = reinterpret_cast<uintptr_t>(a->base), end = reinterpret_cast<uintptr_t>(a->end),
             at = reinterpret_cast<uintptr_t>(a->address);
  const long long offset = static_cast<long long>(at - base);
  bool threadgroup = false;
  const std::string argument = accessedThing(*w, *a, &threadgroup);
  // The thread: the running fiber's in fiber mode, the loop's current one, else the one
  // the pointer was bound for.
  const kabi::Launch& L = w->dispatch->launch;
  std::string thread = "a thread";
  kabi::U3 pos{}, group{};
  bool known = true;
  if (w->fiber_mode && w->lane) {
    pos = w->lane->ids.thread_position_in_grid;
  } else if (w->loop_thread) {
    pos = w->loop_thread->thread_position_in_grid;
  } else if (a->thread_in_grid != ~uint64_t(0) && L.threads_per_grid.x && L.threads_per_grid.y) {
    const uint64_t n = a->thread_in_grid;
    pos = {uint32_t(n % L.threads_per_grid.x), uint32_t(n / L.threads_per_grid.x % L.threads_per_grid.y),
           uint32_t(n / L.threads_per_grid.x / L.threads_per_grid.y)};
  } else {
    known = false;
  }
  if (known) {
    group = {pos.x / L.threads_per_threadgroup.x, pos.y / L.threads_per_threadgroup.y,
             pos.z / L.threads_per_threadgroup.z};
    thread = "thread " + u3(pos) + " [[thread_position_in_grid]] of threadgroup " + u3(group);
  }
  const std::string what = thread + " accessed " + argument + " as " + typeFromSpelling(a->type) + " (" +
                           std::to_string(a->size) + " bytes) at byte offset " + std::to_string(offset);
  const std::string off = " (METALSIM_SHADER_VALIDATION=0 turns these checks off)";
  if (threadgroup)
    throw KernelFault("invalid threadgroup memory access (shader validation; on a GPU it would read or overwrite "
                      "another threadgroup variable, or fault): " + what + ", outside its " +
                      std::to_string(end - base) + " bytes; nothing outside them was touched" + off);
  throw KernelFault("invalid device memory access (shader validation; on a GPU: Caused GPU Address Fault Error, "
                    "kIOGPUCommandBufferCallbackErrorPageFault): " + what + ", outside the " +
                    std::to_string(end - base) + " bytes bound from its offset to the buffer's end; nothing "
                    "outside the buffer was touched" + off);
}

const checked_abi::Api& checkedTable() {
  static const checked_abi::Api table = {checked_abi::kVersion, Watchdog::instance().alarm(), &apiWatchdogCheck,
                                         &apiBoundLengths, &apiViolation};
  return table;
}

// ---- one threadgroup ----

std::string groupName(kabi::U3 g) {
  return "(" + std::to_string(g.x) + ", " + std::to_string(g.y) + ", " + std::to_string(g.z) + ")";
}

void fiberEntry(void* arg) {
  WorkerState& w = *static_cast<WorkerState*>(arg);
  Lane& lane = *w.lane;
  lane.fiber->started();
  try {
    w.kernel->run_thread(*w.launch, *w.memory, lane.ids);
    lane.state = LaneState::Done;
  } catch (const std::exception& e) {
    lane.fault = e.what();
    lane.state = LaneState::Faulted;
  } catch (...) {
    lane.fault = "unknown exception";
    lane.state = LaneState::Faulted;
  }
  lane.fiber->suspend();  // never resumed again
}

// SIMD-group matrix calls run once, on lane 0 (metalsim_prelude/simdgroup_matrix.h);
// every lane counts the calls it reached in its LaneHeader. Lanes of one SIMD group that
// meet at a synchronisation point (or finish) with different counts took different
// paths through such calls, which Metal does not allow: fail naming the lanes.
// `in` selects the lanes compared (nullptr: all of them).
void checkMatrixCalls(const WorkerState& w, kabi::U3 g, const char* where, const bool* in = nullptr) {
  const std::vector<Lane>& lanes = w.lanes;
  for (size_t base = 0; base < lanes.size(); base += kabi::kSimdWidth) {
    const size_t end = std::min(lanes.size(), base + kabi::kSimdWidth);
    size_t ref = end;
    for (size_t i = base; i < end; ++i) {
      if (in && !in[i - base]) continue;
      if (ref == end) {
        ref = i;
        continue;
      }
      const uint64_t a = lanes[ref].fiber->header()->matrix_calls, b = lanes[i].fiber->header()->matrix_calls;
      if (a != b)
        throw std::runtime_error(std::string("kernel '") + w.kernel->name + "', threadgroup " + groupName(g) +
                                 ": SIMD group " + std::to_string(base / kabi::kSimdWidth) + " " + where + ": lane " +
                                 std::to_string(ref - base) + " reached " + std::to_string(a) +
                                 " simdgroup_matrix calls but lane " + std::to_string(i - base) + " reached " +
                                 std::to_string(b) +
                                 "; every lane of a SIMD group must reach each simdgroup_matrix call (divergent "
                                 "control flow around simdgroup_load/store/multiply)");
    }
  }
}

// Resolves, in each SIMD group whose live lanes have all blocked, the SIMD-group call
// at the lowest code address (see the file comment). Returns whether any lane moved.
bool resolveSimdGroups(const WorkerState& w, std::vector<Lane>& lanes, kabi::U3 g) {
  bool progressed = false;
  for (size_t base = 0; base < lanes.size(); base += kabi::kSimdWidth) {
    size_t end = std::min(lanes.size(), base + kabi::kSimdWidth);
    const void* site = nullptr;
    for (size_t i = base; i < end; ++i) {
      LaneState s = lanes[i].state;
      if ((s == LaneState::AtSimd || s == LaneState::AtSimdBarrier) && (!site || lanes[i].site < site))
        site = lanes[i].site;
    }
    if (!site) continue;
    uint32_t mask = 0;
    kabi::SimdRequest* reqs[kabi::kSimdWidth] = {};
    bool is_barrier = false;
    uint64_t matrix_calls = 0;
    for (size_t i = base; i < end; ++i) {
      Lane& l = lanes[i];
      if ((l.state != LaneState::AtSimd && l.state != LaneState::AtSimdBarrier) || l.site != site) continue;
      uint32_t lane_index = static_cast<uint32_t>(i - base);
      const uint64_t calls = l.fiber->header()->matrix_calls;
      if (mask == 0) matrix_calls = calls;
      if (calls != matrix_calls) {
        bool at[kabi::kSimdWidth] = {};
        for (size_t j = base; j < end; ++j) at[j - base] = lanes[j].site == site && j <= i;
        checkMatrixCalls(w, g, "at a SIMD-group function or barrier", at);
      }
      mask |= 1u << lane_index;
      is_barrier = l.state == LaneState::AtSimdBarrier;
      if (l.request) {
        l.request->lane = lane_index;
        reqs[lane_index] = l.request;
      }
      l.state = LaneState::Runnable;
    }
    if (!is_barrier) {
      kabi::SimdRequest* first = reqs[__builtin_ctz(mask)];
      if (first->quad) {
        for (uint32_t q = 0; q < kabi::kSimdWidth; q += 4) {
          uint32_t quad_mask = mask & (0xFu << q);
          if (quad_mask) first->resolve(reqs, quad_mask);
        }
      } else {
        first->resolve(reqs, mask);
      }
    }
    progressed = true;
  }
  return progressed;
}

void runGroupFibers(WorkerState& w, const kabi::Launch& L, const kabi::GroupMemory& M, kabi::U3 g) {
  kabi::U3 size = kabi::groupSize(L, g);
  size_t count = size_t(size.x) * size.y * size.z;
  w.lanes.resize(count);
  w.launch = &L;
  w.memory = &M;
  size_t i = 0;
  for (uint32_t z = 0; z < size.z; ++z)
    for (uint32_t y = 0; y < size.y; ++y)
      for (uint32_t x = 0; x < size.x; ++x, ++i) {
        Lane& lane = w.lanes[i];
        lane = Lane{};
        lane.fiber = &w.fibers.get(i);
        lane.ids = kabi::threadIds(L, g, {x, y, z}, size);
        kabi::LaneHeader* header = lane.fiber->header();
        header->simd_lane = lane.ids.thread_index_in_simdgroup;
        header->matrix_calls = 0;
        lane.tg_cursor = w.tg_static_begin;
      }
  // Fibers are set up lazily, on first run, each with the worker state as argument;
  // the lane to run is w.lane.
  size_t done = 0;
  for (;;) {
    for (size_t k = 0; k < count; ++k) {
      Lane& lane = w.lanes[k];
      if (lane.state != LaneState::Runnable) continue;
      if (!lane.started) {
        lane.fiber->reset(&fiberEntry, &w);
        lane.started = true;
      }
      w.lane = &lane;
      lane.fiber->resume();
      if (lane.state == LaneState::Faulted)
        throw std::runtime_error(std::string("kernel '") + w.kernel->name + "', threadgroup " +
                                 groupName(g) + ", thread " + std::to_string(k) + ": " + lane.fault);
      if (lane.state == LaneState::Done) ++done;
    }
    w.lane = nullptr;
    if (done == count) {
      checkMatrixCalls(w, g, "at the end of the kernel");
      return;
    }
    if (resolveSimdGroups(w, w.lanes, g)) continue;
    size_t at_barrier = 0;
    for (const Lane& lane : w.lanes) at_barrier += lane.state == LaneState::AtBarrier;
    if (done > 0)
      throw std::runtime_error(std::string("kernel '") + w.kernel->name + "', threadgroup " +
                               groupName(g) + ": threadgroup_barrier reached by " +
                               std::to_string(at_barrier) + " of " + std::to_string(count) +
                               " threads; the other " + std::to_string(done) +
                               " had returned, so on a GPU this barrier would never complete");
    checkMatrixCalls(w, g, "at a threadgroup_barrier");
    for (Lane& lane : w.lanes) lane.state = LaneState::Runnable;
  }
}

void runGrid(DispatchCommand& d);  // every threadgroup of the dispatch (below)

void runGroups(DispatchCommand& d, size_t begin, size_t end) {
  WorkerState& w = worker();
  const kabi::KernelInfo& k = d.pipeline->kernel();
  const size_t tg_limit = 32768;
  // Threadgroup memory: the dynamic [[threadgroup(n)]] arguments first, then the
  // kernel's own threadgroup variables, in one arena the size of the device's.
  if (w.arena_storage.size() < tg_limit + 64) w.arena_storage.resize(tg_limit + 64);
  auto* arena = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(w.arena_storage.data()) + 63) & ~uintptr_t(63));
  kabi::GroupMemory memory{};
  size_t offset = 0;
  for (uint32_t i = 0; i < kabi::kMaxBindings; ++i)
    if (d.threadgroupLength(i)) {
      memory.dynamic[i] = arena + offset;
      offset += (d.threadgroupLength(i) + 15) / 16 * 16;
    }
  w.arena = arena;
  w.tg_static_begin = offset;
  w.tg_limit = tg_limit;
  w.kernel = &k;
  w.dispatch = &d;
  w.loop_thread = nullptr;
  if (d.pipeline->kernels().checked()) {
    for (uint32_t i = 0; i < d.binding_count; ++i) {
      const DispatchCommand::Binding& b = d.binding(i);
      w.bound_lengths[b.index] = b.buffer ? b.buffer->length() - b.offset : b.length;
    }
    for (uint32_t i = 0; i < kabi::kMaxBindings; ++i)
      w.bound_lengths[kabi::kMaxBindings + i] = d.threadgroupLength(i);
  }
  w.fiber_mode = k.uses_sync;
  const bool per_thread_loop = !k.uses_sync && k.declares_threadgroup_memory;
  const kabi::U3 n = d.groups;
  size_t tg_high_water = w.tg_static_begin;  // for the kernel's static threadgroup size
  try {
    for (size_t linear = begin; linear < end; ++linear) {
      kabi::U3 g{uint32_t(linear % n.x), uint32_t((linear / n.x) % n.y), uint32_t(linear / (size_t(n.x) * n.y))};
      if (config().strict) std::memset(arena, kPoisonByte, tg_limit);
      if (w.fiber_mode) {
        runGroupFibers(w, d.launch, memory, g);
        for (const Lane& lane : w.lanes) tg_high_water = std::max(tg_high_water, lane.tg_cursor);
      } else if (per_thread_loop) {
        // Threadgroup variables are allocated per thread call; restart the cursor
        // for each thread so all threads of the group see the same addresses.
        kabi::forEachThread(d.launch, g, [&](const kabi::ThreadIds& t) {
          w.loop_tg_cursor = w.tg_static_begin;
          w.loop_thread = &t;
          k.run_thread(d.launch, memory, t);
          w.loop_thread = nullptr;
          tg_high_water = std::max(tg_high_water, w.loop_tg_cursor);
        });
      } else {
        w.loop_tg_cursor = w.tg_static_begin;
        k.run_group(d.launch, memory, g);
      }
    }
  } catch (const KernelFault& e) {
    w.kernel = nullptr;
    w.dispatch = nullptr;
    throw std::runtime_error(std::string("kernel '") + k.name + "': " + e.what());
  } catch (...) {
    w.kernel = nullptr;
    w.dispatch = nullptr;
    throw;
  }
  w.kernel = nullptr;
  w.dispatch = nullptr;
  if (k.declares_threadgroup_memory)
    d.pipeline->kernels().recordStaticThreadgroupMemory(&k, tg_high_water - w.tg_static_begin);
}

}  // namespace

const kabi::HostApi& hostApi() { return api(); }
const checked_abi::Api& checkedApi() { return checkedTable(); }

void runDispatch(DispatchCommand& d) {
  std::fill(std::begin(d.launch.buffers), std::end(d.launch.buffers), nullptr);
  for (uint32_t i = 0; i < d.binding_count; ++i) {
    const DispatchCommand::Binding& b = d.binding(i);
    d.launch.buffers[b.index] = b.buffer ? static_cast<unsigned char*>(b.buffer->contents()) + b.offset
                                         : d.inlineBytes() + b.offset;
  }
  if (d.pipeline->kernels().checked() && config().kernel_timeout_s > 0) {
    Watchdog::Deadline deadline(Watchdog::instance(), config().kernel_timeout_s);
    d.expired = &deadline.flag();
    try {
      runGrid(d);
    } catch (...) {
      d.expired = nullptr;
      throw;
    }
    d.expired = nullptr;
    return;
  }
  runGrid(d);
}

namespace {

void runGrid(DispatchCommand& d) {
  size_t groups = size_t(d.groups.x) * d.groups.y * d.groups.z;
  size_t threads_per_group = size_t(d.launch.threads_per_threadgroup.x) *
                             d.launch.threads_per_threadgroup.y * d.launch.threads_per_threadgroup.z;
  if (groups == 1) {
    runGroups(d, 0, 1);
    return;
  }
  // Few threads: run on the queue's own thread, where waking pool threads would cost
  // more than the work, unless the work is heavy (threads that each loop over much
  // data): the first group, timed, tells which.
  size_t first = 0;
  if (groups * threads_per_group <= 2048) {
    const auto start = std::chrono::steady_clock::now();
    runGroups(d, 0, 1);
    const auto per_group = std::chrono::steady_clock::now() - start;
    first = 1;
    if (per_group * (groups - 1) < std::chrono::microseconds(50)) {
      runGroups(d, 1, groups);
      return;
    }
  }
  WorkerPool::instance().parallelFor(groups - first,
                                     [&](size_t b, size_t e) { runGroups(d, first + b, first + e); });
}

}  // namespace

}  // namespace metalsim
