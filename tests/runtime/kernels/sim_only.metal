// Kernels only the simulator may run (test_sim_execution.cpp): on a GPU the first
// hangs and the second is refused when its pipeline is made, so they are kept out of
// execution.metal, which every driver compiles.
#include <metal_stdlib>
using namespace metal;

// A barrier that threads which returned early never reach: hangs a GPU, an error here.
kernel void divergent_barrier(device int* out [[buffer(0)]],
                              uint tid [[thread_index_in_threadgroup]]) {
  if (tid >= 16) return;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = 1;
}

// More threadgroup memory than the device has (32 KiB).
kernel void too_much_threadgroup_memory(device float* out [[buffer(0)]],
                                        uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float big[9000];
  big[tid] = 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = big[0];
}

