// Writes one element past the end of its buffer: caught by shader validation (on by
// default), and with it off by AddressSanitizer in sanitized builds.
#include <metal_stdlib>
using namespace metal;

kernel void write_past_end(device int* data [[buffer(0)]],
                           constant uint& n [[buffer(1)]],
                           uint gid [[thread_position_in_grid]]) {
  data[n + gid] = 1;
}
