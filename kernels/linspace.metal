// linspace's values over a dense output, rounded as CPU's kernel rounds them: the step
// and every product and sum are rounded to the output type (half and bfloat16 do each
// operation in float and round, as c10::Half/BFloat16 arithmetic does), the first half
// of the points counted up from start, the second half down from end. Host side:
// backend/ops/linspace.cpp; start and end arrive already rounded to the type.
#include <metal_stdlib>
using namespace metal;

struct LinspaceParams {
  float start;
  float end;
  long steps;
};

template <typename T>
kernel void linspace(device T* out [[buffer(0)]], constant LinspaceParams& p [[buffer(1)]],
                     uint gid [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  const float start = p.start, end = p.end;
  const float step = float(T(float(T(end - start)) / float(T(float(p.steps - 1)))));
  const long halfway = p.steps / 2;
  for (long i = gid; i < p.steps; i += threads) {
    if (i < halfway) {
      const float offset = float(T(step * float(T(float(i)))));
      out[i] = T(start + offset);
    } else {
      const float offset = float(T(step * float(T(float(p.steps - i - 1)))));
      out[i] = T(end - offset);
    }
  }
}

#define METALX_LINSPACE_KERNEL(T) template [[host_name("linspace_" #T)]] kernel decltype(linspace<T>) linspace<T>;
METALX_LINSPACE_KERNEL(float)
METALX_LINSPACE_KERNEL(half)
METALX_LINSPACE_KERNEL(bfloat)
