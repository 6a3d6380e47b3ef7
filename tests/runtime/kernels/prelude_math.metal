// MSL math functions over a buffer, for test_prelude_math.cpp: the simulator's
// implementations (metalsim_prelude/math_branchless.h) against double-precision libm.
#include <metal_stdlib>
using namespace metal;

// dst[i] = fn(src[i]) in float; fn: 0 exp, 1 exp2, 2 log, 3 log2, 4 tanh.
kernel void float_math(const device float* src [[buffer(0)]], device float* dst [[buffer(1)]],
                       constant uint& fn [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  const float x = src[i];
  switch (fn) {
    case 0: dst[i] = exp(x); break;
    case 1: dst[i] = exp2(x); break;
    case 2: dst[i] = log(x); break;
    case 3: dst[i] = log2(x); break;
    default: dst[i] = tanh(x); break;
  }
}

// The same in half (computed in float, rounded once to half).
kernel void half_math(const device half* src [[buffer(0)]], device half* dst [[buffer(1)]],
                      constant uint& fn [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  const half x = src[i];
  switch (fn) {
    case 0: dst[i] = exp(x); break;
    case 1: dst[i] = exp2(x); break;
    case 2: dst[i] = log(x); break;
    case 3: dst[i] = log2(x); break;
    default: dst[i] = tanh(x); break;
  }
}
