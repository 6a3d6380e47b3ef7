// Kernels for test_execution.cpp: each exercises one part of Metal's execution model.
#include <metal_stdlib>
using namespace metal;

// Sum of each threadgroup's slice with a barrier tree in threadgroup memory. Integer
// data so the result must be exact. Works for any threadgroup size up to 1024.
kernel void tg_tree_sum(device const int* in [[buffer(0)]],
                        device int* out [[buffer(1)]],
                        constant uint& n [[buffer(2)]],
                        uint gid [[thread_position_in_grid]],
                        uint tid [[thread_index_in_threadgroup]],
                        uint size [[threads_per_threadgroup]],
                        uint group [[threadgroup_position_in_grid]]) {
  threadgroup int scratch[1024];
  scratch[tid] = gid < n ? in[gid] : 0;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint stride = 512; stride > 0; stride >>= 1) {
    if (tid < stride && tid + stride < size) scratch[tid] += scratch[tid + stride];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (tid == 0) out[group] = scratch[0];
}

// Whole-array sum: simd_sum per SIMD group, then a device atomic per SIMD group.
kernel void simd_atomic_sum(device const uint* in [[buffer(0)]],
                            device atomic_uint* total [[buffer(1)]],
                            constant uint& n [[buffer(2)]],
                            uint gid [[thread_position_in_grid]],
                            uint lane [[thread_index_in_simdgroup]]) {
  uint v = gid < n ? in[gid] : 0u;
  uint s = simd_sum(v);
  if (lane == 0) atomic_fetch_add_explicit(total, s, memory_order_relaxed);
}

// Per-thread results of SIMD-group functions, to compare against their definitions.
struct SimdResults {
  int sum, prefix_exclusive, prefix_inclusive, broadcast3, shuffle_down2, shuffle_xor1, maximum;
  uint ballot_even_low, ballot_even_high, is_first;
};

kernel void simd_functions(device SimdResults* out [[buffer(0)]],
                           uint gid [[thread_position_in_grid]],
                           uint lane [[thread_index_in_simdgroup]]) {
  int v = int(gid % 7) + 1;
  SimdResults r;
  r.sum = simd_sum(v);
  r.prefix_exclusive = simd_prefix_exclusive_sum(v);
  r.prefix_inclusive = simd_prefix_inclusive_sum(v);
  r.broadcast3 = simd_broadcast(v, ushort(3));
  r.shuffle_down2 = simd_shuffle_down(v, ushort(2));
  r.shuffle_xor1 = simd_shuffle_xor(v, ushort(1));
  r.maximum = simd_max(v);
  simd_vote vote = simd_ballot(lane % 2 == 0);
  ulong bits = static_cast<ulong>(vote);
  r.ballot_even_low = uint(bits & 0xffffffffu);
  r.ballot_even_high = uint(bits >> 32);
  r.is_first = simd_is_first() ? 1u : 0u;
  out[gid] = r;
}

// SIMD-group functions in divergent control flow: only the lanes that take the branch
// are active in it, as on the GPU.
kernel void simd_divergent(device int* out [[buffer(0)]],
                           uint lane [[thread_index_in_simdgroup]],
                           uint gid [[thread_position_in_grid]]) {
  int r;
  if (lane < 10) {
    r = simd_sum(1);          // 10 lanes take part
  } else {
    r = 100 + simd_sum(2);    // the other 22 (or fewer in a partial group)
  }
  out[gid] = r;
}

// Lanes that returned early are inactive in later SIMD-group functions.
kernel void simd_after_return(device int* out [[buffer(0)]],
                              constant uint& n [[buffer(1)]],
                              uint gid [[thread_position_in_grid]]) {
  if (gid >= n) return;
  out[gid] = simd_sum(1);
}

// Dynamic threadgroup memory: reverses each group's slice through shared memory.
kernel void reverse_in_group(device const float* in [[buffer(0)]],
                             device float* out [[buffer(1)]],
                             threadgroup float* shared [[threadgroup(0)]],
                             uint gid [[thread_position_in_grid]],
                             uint tid [[thread_index_in_threadgroup]],
                             uint size [[threads_per_threadgroup]]) {
  shared[tid] = in[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[gid] = shared[size - 1 - tid];
}

// Records every thread's position attributes in a 3-D grid with partial edge groups.
kernel void positions_3d(device uint4* out [[buffer(0)]],
                         uint3 pos [[thread_position_in_grid]],
                         uint3 local [[thread_position_in_threadgroup]],
                         uint3 group [[threadgroup_position_in_grid]],
                         uint3 group_size [[threads_per_threadgroup]],
                         uint3 grid [[threads_per_grid]],
                         ushort index [[thread_index_in_threadgroup]]) {
  uint linear = (pos.z * grid.y + pos.y) * grid.x + pos.x;
  out[linear * 3 + 0] = uint4(pos, index);
  out[linear * 3 + 1] = uint4(local, group_size.x * group_size.y * group_size.z);
  out[linear * 3 + 2] = uint4(group, 0);
}

// Histogram with device atomics: threadgroups run concurrently on different CPU threads.
kernel void histogram(device const uint* in [[buffer(0)]],
                      device atomic_uint* bins [[buffer(1)]],
                      constant uint& n [[buffer(2)]],
                      uint gid [[thread_position_in_grid]]) {
  if (gid < n) atomic_fetch_add_explicit(&bins[in[gid] % 16], 1u, memory_order_relaxed);
}

// A template instantiated for several types, each callable by its host name.
template <typename T>
kernel void scale(device T* data [[buffer(0)]],
                  constant float& factor [[buffer(1)]],
                  uint gid [[thread_position_in_grid]]) {
  data[gid] = T(float(data[gid]) * factor);
}
template [[host_name("scale_float")]] kernel void scale<float>(device float*, constant float&, uint);
template [[host_name("scale_int")]] kernel decltype(scale<int>) scale<int>;
template [[host_name("scale_half")]] kernel decltype(scale<half>) scale<half>;

// Vector types, swizzles and math in one elementwise kernel.
kernel void vector_math(device const float4* in [[buffer(0)]],
                        device float4* out [[buffer(1)]],
                        uint gid [[thread_position_in_grid]]) {
  float4 v = in[gid];
  float2 xy = v.xy;
  float3 w = float3(xy, v.z) * 2.0f;
  out[gid] = float4(w, metal::sqrt(metal::abs(v.w))) + float4(clamp(v.x, 0.0f, 1.0f));
}
