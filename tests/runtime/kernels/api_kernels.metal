// Small kernels for the API-contract tests (test_validation.cpp, test_command_model.cpp).
// They exist to give the runtime something with known bindings and a checkable result;
// kernel-language behaviour itself is tested elsewhere.
#include <metal_stdlib>
using namespace metal;

// data[i] += 1 for i < n. Declares [[buffer(0)]] and [[buffer(1)]] only.
kernel void add_one(device int* data [[buffer(0)]],
                    constant uint& n [[buffer(1)]],
                    uint gid [[thread_position_in_grid]]) {
  if (gid < n) data[gid] += 1;
}

// data[i] += k for i < n. Declares [[buffer(0)]] to [[buffer(2)]].
kernel void add_k(device int* data [[buffer(0)]],
                  constant uint& n [[buffer(1)]],
                  constant int& k [[buffer(2)]],
                  uint gid [[thread_position_in_grid]]) {
  if (gid < n) data[gid] += k;
}

// dst[i] = src[i] for i < n.
kernel void copy_int(device const int* src [[buffer(0)]],
                     device int* dst [[buffer(1)]],
                     constant uint& n [[buffer(2)]],
                     uint gid [[thread_position_in_grid]]) {
  if (gid < n) dst[gid] = src[gid];
}

// Busy work: `iters` dependent multiply-adds per thread (no closed form the compiler
// could fold), then out[0] = value from thread 0. Makes a command buffer take as long
// as the test needs, and marks the moment its work is done with a visible write.
kernel void slow_write(device uint* out [[buffer(0)]],
                       constant uint& iters [[buffer(1)]],
                       constant uint& value [[buffer(2)]],
                       uint gid [[thread_position_in_grid]]) {
  uint x = gid + 1u;
  for (uint i = 0; i < iters; ++i) x = x * 1664525u + 1013904223u + (x >> 13);
  out[1 + gid] = x;  // keeps the loop's result observable
  if (gid == 0) out[0] = value;
}

// Uses dynamic threadgroup memory at [[threadgroup(0)]]: out[i] = 2 * i.
kernel void tg_double(device int* out [[buffer(0)]],
                      threadgroup int* scratch [[threadgroup(0)]],
                      uint tid [[thread_position_in_threadgroup]],
                      uint gid [[thread_position_in_grid]]) {
  scratch[tid] = int(gid);
  out[gid] = scratch[tid] * 2;
}

// Two dynamic threadgroup arguments: out[i] = a + b where both hold i.
kernel void tg_two(device int* out [[buffer(0)]],
                   threadgroup int* a [[threadgroup(0)]],
                   threadgroup int* b [[threadgroup(1)]],
                   uint tid [[thread_position_in_threadgroup]],
                   uint gid [[thread_position_in_grid]]) {
  a[tid] = int(gid);
  b[tid] = int(gid);
  out[gid] = a[tid] + b[tid];
}

// A kernel declaring a smaller threadgroup bound than the device's 1024.
[[max_total_threads_per_threadgroup(64)]]
kernel void capped64(device int* out [[buffer(0)]], uint gid [[thread_position_in_grid]]) {
  out[gid] = int(gid);
}

// Undefined on a GPU: only threads 0-15 reach the barrier, the others return. A real
// GPU hangs or corrupts; the simulator must fail the command buffer instead.
kernel void partial_barrier(device int* out [[buffer(0)]],
                            uint tid [[thread_position_in_threadgroup]]) {
  if (tid >= 16) return;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = 1;
}

// 16 KiB of static threadgroup memory besides the dynamic [[threadgroup(0)]] argument:
// out[i] = 2 * i. Metal counts both against the 32 KiB limit.
kernel void tg_static(device int* out [[buffer(0)]],
                      threadgroup int* dyn [[threadgroup(0)]],
                      uint tid [[thread_position_in_threadgroup]],
                      uint gid [[thread_position_in_grid]]) {
  threadgroup int fixed[4096];
  fixed[tid] = int(gid);
  dyn[tid] = int(gid);
  out[gid] = fixed[tid] + dyn[tid];
}
