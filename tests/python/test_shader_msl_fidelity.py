"""compile_shader accepts Metal as Apple's compiler does: unattributed buffer
parameters, combined attribute lists, <metal_stdlib>'s macros and split headers,
type traits, C++ the way MSL kernels use it (static_assert, constexpr functions, enum
class, unions, as_type, numeric_limits, select, fma, precise::/fast::, metal::
qualified calls, swizzle assignment, simd_shuffle_and_fill). Each kernel's result is
compared with CPU torch; what the simulator cannot run is refused with an error
naming the construct and its line."""

import struct

import pytest
import torch

from metalx import shaders as S


def dev(t):
    return t.to("metalx")


def test_unattributed_buffers_are_numbered_in_order():
    lib = torch.metalx.compile_shader("""
#include <metal_stdlib>
using namespace metal;
kernel void axpy(device float* out, const device float* x, constant float& a, const device float* y,
                 uint i [[thread_position_in_grid]]) {
  out[i] = a * x[i] + y[i];
}
// Explicit indices keep theirs; the others take the lowest free ones, in order.
kernel void mixed(const device float* x [[buffer(1)]], device float* out, constant float& a,
                  uint i [[thread_position_in_grid]]) {
  out[i] = x[i] * a;
}
""")
    x, y = torch.randn(100), torch.randn(100)
    out = dev(torch.empty(100))
    lib.axpy(out, dev(x), 3.0, dev(y))
    torch.testing.assert_close(out.cpu(), 3.0 * x + y, rtol=0, atol=0)
    lib.mixed(out, dev(x), 0.5)  # out is buffer 0, x buffer 1, a buffer 2
    torch.testing.assert_close(out.cpu(), x * 0.5, rtol=0, atol=0)
    with pytest.raises(TypeError, match=r"takes 3 arguments \(out \[\[buffer\(0\)\]\], x \[\[buffer\(1\)\]\], a"):
        lib.mixed(out, dev(x))


def test_a_scalar_parameter_without_attribute_is_an_error():
    with pytest.raises(S.ShaderCompileError, match=r"bad.metal:3: error: parameter 'n' of kernel 'k' has no"):
        torch.metalx.compile_shader("""#include <metal_stdlib>
kernel void k(device float* out,
              uint n) {}
""", name="bad.metal")


def test_combined_attribute_lists_and_metal_func():
    lib = torch.metalx.compile_shader("""
#include <metal_stdlib>
#include <metal_math>
#include <metal_integer>
#include <metal_atomic>
#include <metal_simdgroup>
#include <metal_type_traits>
#include <metal_array>
using namespace metal;

METAL_FUNC float twice(float x) { return 2 * x; }

[[kernel, max_total_threads_per_threadgroup(64)]]
void limited(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],
             uint i [[thread_position_in_grid]]) {
  out[i] = twice(x[i]);
}

template <typename T>
[[kernel]] void scaled(device T* out, const device T* x, uint i [[thread_position_in_grid]]) {
  out[i] = x[i] * T(3);
}
template [[host_name("scaled_float")]] [[kernel]] void scaled<float>(device float*, const device float*, uint);
""")
    assert lib.limited.max_threads_per_threadgroup == 64
    x = torch.randn(50)
    out = dev(torch.empty(50))
    lib.limited(out, dev(x))
    torch.testing.assert_close(out.cpu(), 2 * x, rtol=0, atol=0)
    lib.scaled_float(out, dev(x))
    torch.testing.assert_close(out.cpu(), 3 * x, rtol=0, atol=0)


def test_kernels_instantiated_by_macros():
    lib = torch.metalx.compile_shader("""
#include <metal_stdlib>
using namespace metal;
template <typename T, int K>
[[kernel]] void scale_by(device T* out [[buffer(0)]], constant T* x [[buffer(1)]],
                         uint i [[thread_position_in_grid]]) {
  out[i] = x[i] * T(K);
}
#define instantiate_scale(T, K)                                        \\
  template [[host_name("scale_" #T "_" #K)]] [[kernel]] void          \\
  scale_by<T, K>(device T* out [[buffer(0)]], constant T* x [[buffer(1)]], \\
                 uint i [[thread_position_in_grid]]);
#define instantiate_all(K) \\
  instantiate_scale(float, K) \\
  instantiate_scale(half, K)

instantiate_all(2)
instantiate_all(3)
""")
    assert {"scale_float_2", "scale_half_2", "scale_float_3", "scale_half_3"} <= set(lib.kernel_names)
    x = torch.randn(40)
    out = dev(torch.empty(40))
    lib.scale_float_3(out, dev(x))
    torch.testing.assert_close(out.cpu(), 3 * x, rtol=0, atol=0)
    xh = x.half()
    outh = dev(torch.empty(40, dtype=torch.half))
    lib.scale_half_2(outh, dev(xh))
    torch.testing.assert_close(outh.cpu(), 2 * xh, rtol=0, atol=0)


def test_cpp_constructs_msl_kernels_use():
    lib = torch.metalx.compile_shader("""
#include <metal_stdlib>
using namespace metal;

enum class Op : uint { Add = 0, Mul = 1 };
constexpr int cube(int v) { return v * v * v; }
static_assert(cube(3) == 27, "constexpr functions evaluate at compile time");
static_assert(metal::is_floating_point_v<half> && metal::is_floating_point_v<bfloat>, "");
static_assert(!metal::is_floating_point_v<int> && metal::is_integral_v<ushort>, "");
static_assert(metal::is_same_v<metal::make_unsigned_t<int>, uint>, "");
static_assert(sizeof(float3) == 16 && alignof(float4) == 16, "Metal vector layout");
static_assert(__METAL_VERSION__ >= 310, "");

union Bits { float f; uint u; };

// Address-space qualified references and pointers in templates.
template <typename T> void accumulate(thread T& acc, const device T* p, uint n) {
  for (uint k = 0; k < n; ++k) acc += p[k];
}
template <typename T> T first_of(constant T& c) { return c; }

template <typename T> struct Pair { T a, b; };

kernel void constructs(device float* out, device uint* bits, const device float* x,
                       constant Op& op, uint i [[thread_position_in_grid]]) {
  const float v = x[i];
  Bits b;
  b.f = v;
  bits[2 * i] = b.u;
  bits[2 * i + 1] = as_type<uint>(v);
  Pair<float> p = {v, float(cube(2))};
  float r = op == Op::Add ? p.a + p.b : p.a * p.b;
  r = metal::fma(r, 2.0f, 1.0f);
  r = metal::select(r, -r, v < 0);  // select(a, b, c) is c ? b : a
  r += metal::precise::sqrt(metal::abs(v)) - metal::fast::sqrt(metal::abs(v));
  float acc = 0;
  accumulate(acc, x + i, 1);  // acc = v
  r += acc - v + float(uint(first_of(op)) - 1);  // + 0
  out[i] = r;
}
""")
    x = torch.randn(64)
    out = dev(torch.empty(64))
    bits = dev(torch.empty(128, dtype=torch.int32))
    lib.constructs(out, bits, dev(x), S.UInt32(1))
    expected = torch.where(x < 0, -(x * 8 * 2 + 1), x * 8 * 2 + 1)
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-6, atol=1e-6)
    as_bits = x.view(torch.int32)
    assert torch.equal(bits.cpu()[0::2], as_bits) and torch.equal(bits.cpu()[1::2], as_bits)


@pytest.mark.parametrize("msl_type,dtype", [
    ("float", torch.float32), ("half", torch.float16), ("bfloat", torch.bfloat16),
    ("int", torch.int32), ("short", torch.int16), ("char", torch.int8), ("uchar", torch.uint8),
    ("long", torch.int64),
])
def test_numeric_limits_of_every_type(msl_type, dtype):
    lib = torch.metalx.compile_shader(f"""
#include <metal_stdlib>
using namespace metal;
kernel void limits(device {msl_type}* out, uint i [[thread_position_in_grid]]) {{
  out[0] = metal::numeric_limits<{msl_type}>::max();
  out[1] = metal::numeric_limits<{msl_type}>::lowest();
  out[2] = metal::numeric_limits<{msl_type}>::min();
  out[3] = metal::numeric_limits<{msl_type}>::is_integer ? {msl_type}(1) : metal::numeric_limits<{msl_type}>::epsilon();
}}
""")
    out = dev(torch.empty(4, dtype=dtype))
    lib.limits(out, threads=1)
    got = out.cpu()
    info = torch.iinfo(dtype) if not dtype.is_floating_point else torch.finfo(dtype)
    assert got[0].item() == info.max
    assert got[1].item() == info.min
    if dtype.is_floating_point:
        assert got[2].item() == info.tiny and got[3].item() == info.eps
    else:
        assert got[2].item() == info.min and got[3].item() == 1


def test_swizzle_assignment_and_shuffle_and_fill():
    lib = torch.metalx.compile_shader("""
#include <metal_stdlib>
using namespace metal;
kernel void swz(device float4* out, const device float4* x, uint i [[thread_position_in_grid]]) {
  float4 v = x[i];
  v.zw = v.xy;      // assignment through a swizzle
  v.xy += float2(10.0f, 20.0f);
  out[i] = v;
}
kernel void fill_down(device float* out, const device float* x, const device float* f,
                      uint i [[thread_position_in_grid]]) {
  out[i] = simd_shuffle_and_fill_down(x[i], f[i], ushort(5));
}
kernel void fill_up(device float* out, const device float* x, const device float* f,
                    uint i [[thread_position_in_grid]]) {
  out[i] = simd_shuffle_and_fill_up(x[i], f[i], ushort(3));
}
""")
    x = torch.randn(8, 4)
    out = dev(torch.empty(8, 4))
    lib.swz(out, dev(x), threads=8)
    expected = x.clone()
    expected[:, 2:] = x[:, :2]
    expected[:, 0] += 10
    expected[:, 1] += 20
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0)

    a, f = torch.arange(64.0), -torch.arange(64.0) - 1
    out = dev(torch.empty(64))
    lib.fill_down(out, dev(a), dev(f), threads=64, group_size=64)
    lane = torch.arange(64) % 32
    base = torch.arange(64) - lane
    down = torch.where(lane + 5 < 32, a[base + (lane + 5) % 32], f[base + (lane + 5) % 32])
    torch.testing.assert_close(out.cpu(), down, rtol=0, atol=0)
    lib.fill_up(out, dev(a), dev(f), threads=64, group_size=64)
    up = torch.where(lane >= 3, a[base + (lane - 3) % 32], f[base + (lane - 3) % 32])
    torch.testing.assert_close(out.cpu(), up, rtol=0, atol=0)


def test_integer_and_float_helpers():
    lib = torch.metalx.compile_shader("""
#include <metal_stdlib>
#include <metal_integer>
using namespace metal;
kernel void k(device uint* u, device int* s, device float* f, uint i [[thread_position_in_grid]]) {
  u[0] = mulhi(0x80000000u, 6u);
  u[1] = rotate(0x80000001u, 4u);
  u[2] = extract_bits(0xABCDu, 4, 8);
  u[3] = insert_bits(0xFFFFu, 0x0u, 4, 8);
  u[4] = absdiff(3, 10);
  u[5] = hadd(7u, 9u);
  u[6] = rhadd(7u, 8u);
  s[0] = extract_bits(int(0xF0), 4, 4);  // sign-extended
  s[1] = median3(5, 1, 3);
  s[2] = max3(1, -2, 3);
  s[3] = min3(1, -2, 3);
  int e;
  f[0] = frexp(12.0f, e);
  s[4] = e;
  float whole;
  f[1] = modf(2.75f, whole);
  f[2] = whole;
  f[3] = metal::fast::divide(1.0f, 4.0f);
  f[4] = nextafter(1.0f, 2.0f);
}
""")
    u = dev(torch.zeros(7, dtype=torch.int32))
    s_ = dev(torch.zeros(5, dtype=torch.int32))
    f = dev(torch.zeros(5))
    lib.k(u, s_, f, threads=1)
    expected_u = [(0x80000000 * 6) >> 32, 0x00000018, 0xBC, 0xF00F, 7, 8, 8]
    assert [v & 0xFFFFFFFF for v in u.cpu().tolist()] == expected_u
    assert s_.cpu().tolist() == [-1, 3, 3, -2, 4]
    next_after_one = torch.nextafter(torch.tensor(1.0), torch.tensor(2.0)).item()
    assert f.cpu().tolist() == [0.75, 0.75, 2.0, 0.25, next_after_one]


def test_double_literals_in_math_calls_compute_in_float():
    lib = torch.metalx.compile_shader("""
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* out, uint i [[thread_position_in_grid]]) {
  out[0] = metal::log(2.0);
  out[1] = metal::cos(0.5) + metal::sqrt(2.0);
}
""")
    out = dev(torch.empty(2))
    lib.k(out, threads=1)
    expected = torch.tensor([2.0]).log().tolist() + [torch.tensor(0.5).cos().item() + torch.tensor(2.0).sqrt().item()]
    torch.testing.assert_close(out.cpu(), torch.tensor(expected), rtol=1e-6, atol=0)


def test_own_headers_through_include_dirs(tmp_path):
    (tmp_path / "mylib").mkdir()
    (tmp_path / "mylib" / "ops.h").write_text("""#pragma once
#include <metal_stdlib>
inline float shifted(float x) { return x + 7.0f; }
// A helper that reaches a barrier: the kernel using it must run on fibers.
inline float group_first(threadgroup float* scratch, float v, uint tid) {
  if (tid == 0) scratch[0] = v;
  metal::threadgroup_barrier(metal::mem_flags::mem_threadgroup);
  return scratch[0];
}
""")
    lib = torch.metalx.compile_shader("""
#include "mylib/ops.h"
#include <mylib/ops.h>
kernel void k(device float* out, const device float* x, uint i [[thread_position_in_grid]],
              uint tid [[thread_position_in_threadgroup]]) {
  threadgroup float scratch[1];
  out[i] = shifted(group_first(scratch, x[i], tid));
}
""", include_dirs=[tmp_path])
    x = torch.randn(64)
    out = dev(torch.empty(64))
    lib.k(out, dev(x), group_size=32)
    expected = torch.cat([x[:1].expand(32), x[32:33].expand(32)]) + 7
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0)
    with pytest.raises(ValueError, match="include directory"):
        torch.metalx.compile_shader("kernel void k() {}", include_dirs=[tmp_path / "missing"])


def test_errors_in_included_headers_name_the_header_and_line(tmp_path):
    (tmp_path / "broken.h").write_text("#pragma once\n\ninline float f(float x) { return x +; }\n")
    with pytest.raises(S.ShaderCompileError, match=r"broken\.h:3:"):
        torch.metalx.compile_shader('#include "broken.h"\nkernel void k(device float* o) { o[0] = f(1); }',
                                    include_dirs=[tmp_path])


@pytest.mark.parametrize("source,construct", [
    ("kernel void k(texture2d<float> t [[texture(0)]], uint i [[thread_position_in_grid]]) {}", r"\[\[texture\(0\)\]\]"),
    ("kernel void k(sampler s [[sampler(0)]]) {}", r"\[\[sampler\(0\)\]\]"),
    ("kernel void k(device float* o [[buffer(0)]], float4 p [[stage_in]]) {}", r"\[\[stage_in\]\]"),
])
def test_unsupported_constructs_are_refused_by_name_and_line(source, construct):
    with pytest.raises(S.ShaderCompileError, match=r"u\.metal:3: error: " + construct):
        torch.metalx.compile_shader("#include <metal_stdlib>\nusing namespace metal;\n" + source, name="u.metal")
