// Kernels for bench/runtime_bench.cpp: the costs of the simulated runtime itself.
#include <metal_stdlib>
using namespace metal;

// Does nothing: what is left is the cost of getting a dispatch to run.
kernel void empty_kernel(device float* out [[buffer(0)]], uint gid [[thread_position_in_grid]]) {}

// out = a * alpha + b, one element per thread: a memory-bound elementwise op.
kernel void axpy(device const float* a [[buffer(0)]],
                 device const float* b [[buffer(1)]],
                 device float* out [[buffer(2)]],
                 constant float& alpha [[buffer(3)]],
                 constant uint& n [[buffer(4)]],
                 uint gid [[thread_position_in_grid]]) {
  if (gid < n) out[gid] = a[gid] * alpha + b[gid];
}

// Sum of each block of 256 x 16 elements in threadgroup memory with barriers (the
// classic tree), to price threadgroup_barrier.
kernel void block_sum_barrier(device const float* in [[buffer(0)]],
                              device float* partial [[buffer(1)]],
                              constant uint& n [[buffer(2)]],
                              uint tid [[thread_position_in_threadgroup]],
                              uint group [[threadgroup_position_in_grid]]) {
  threadgroup float scratch[256];
  float acc = 0;
  uint base = group * 256 * 16;
  for (uint k = 0; k < 16; ++k) {
    uint i = base + k * 256 + tid;
    if (i < n) acc += in[i];
  }
  scratch[tid] = acc;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint stride = 128; stride > 0; stride >>= 1) {
    if (tid < stride) scratch[tid] += scratch[tid + stride];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (tid == 0) partial[group] = scratch[0];
}

// The same sums with simd_sum and one barrier, as Apple GPU reductions are written.
kernel void block_sum_simd(device const float* in [[buffer(0)]],
                           device float* partial [[buffer(1)]],
                           constant uint& n [[buffer(2)]],
                           uint tid [[thread_position_in_threadgroup]],
                           uint lane [[thread_index_in_simdgroup]],
                           uint warp [[simdgroup_index_in_threadgroup]],
                           uint group [[threadgroup_position_in_grid]]) {
  threadgroup float warp_sums[8];
  float acc = 0;
  uint base = group * 256 * 16;
  for (uint k = 0; k < 16; ++k) {
    uint i = base + k * 256 + tid;
    if (i < n) acc += in[i];
  }
  acc = simd_sum(acc);
  if (lane == 0) warp_sums[warp] = acc;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (warp == 0) {
    float v = lane < 8 ? warp_sums[lane] : 0.0f;
    v = simd_sum(v);
    if (lane == 0) partial[group] = v;
  }
}
