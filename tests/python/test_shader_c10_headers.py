"""compile_shader with PyTorch's own Metal headers (<c10/metal/*.h> from the installed
torch, code no one here wrote): special functions, threadgroup reductions, Philox
random numbers and emulated atomics, each run on metalx and compared with CPU torch
(or, for Philox, with the published algorithm written out in Python)."""

import os

import pytest
import torch

C10_METAL = os.path.join(os.path.dirname(torch.__file__), "include", "c10", "metal")
pytestmark = pytest.mark.skipif(not os.path.isdir(C10_METAL), reason="this torch ships no c10/metal headers")


def dev(t):
    return t.to("metalx")


# One kernel per function: the translator registers kernels it can see in the source
# (a macro's expansion included). Prefixed, to keep kernel and function names apart.
SPECIAL_FUNCTIONS = {
    # name in the kernel: (c10::metal expression of v, CPU reference, input range)
    "erf": ("c10::metal::erf(v)", torch.special.erf, (-3, 3)),
    "erfinv": ("c10::metal::erfinv(v)", torch.special.erfinv, (-0.99, 0.99)),
    "i0": ("c10::metal::i0(v)", torch.special.i0, (-10, 10)),
    "i0e": ("c10::metal::i0e(v)", torch.special.i0e, (-10, 10)),
    "i1": ("c10::metal::i1(v)", torch.special.i1, (-10, 10)),
    "i1e": ("c10::metal::i1e(v)", torch.special.i1e, (-10, 10)),
    "lgamma": ("c10::metal::log_gamma(v)", torch.lgamma, (0.1, 20)),
    "digamma": ("c10::metal::digamma(v)", torch.digamma, (0.1, 20)),
    "bessel_j0": ("c10::metal::bessel_j0_forward(v)", torch.special.bessel_j0, (-20, 20)),
    "bessel_y0": ("c10::metal::bessel_y0_forward(v)", torch.special.bessel_y0, (0.1, 20)),
    "spherical_bessel_j0": ("c10::metal::spherical_bessel_j0(v)", torch.special.spherical_bessel_j0, (-20, 20)),
    "entr": ("c10::metal::entr(v)", torch.special.entr, (0.01, 5)),
    "expm1": ("c10::metal::expm1f(v)", torch.expm1, (-5, 5)),
    "sinc": ("c10::metal::sinc(v)", torch.sinc, (-5, 5)),
}


@pytest.fixture(scope="module")
def special_lib():
    body = "".join(
        f"kernel void special_{name}(device float* out, const device float* x, uint i [[thread_position_in_grid]]) {{\n"
        f"  const float v = x[i];\n  out[i] = {expr};\n}}\n"
        for name, (expr, _, _) in SPECIAL_FUNCTIONS.items())
    body += """
kernel void special_zeta(device float* out, const device float* x, const device float* q,
                 uint i [[thread_position_in_grid]]) {
  out[i] = c10::metal::zeta(x[i], q[i]);
}
kernel void special_xlog1py(device float* out, const device float* x, const device float* y,
                    uint i [[thread_position_in_grid]]) {
  out[i] = c10::metal::xlog1py(x[i], y[i]);
}
"""
    return torch.metalx.compile_shader(
        "#include <metal_stdlib>\n#include <c10/metal/special_math.h>\n#include <c10/metal/expm1f.h>\n"
        "using namespace metal;\n" + body, name="special.metal")


@pytest.mark.parametrize("name", sorted(SPECIAL_FUNCTIONS))
def test_special_function_matches_cpu(special_lib, name):
    _, reference, (lo, hi) = SPECIAL_FUNCTIONS[name]
    x = torch.linspace(lo, hi, 1000)
    out = dev(torch.empty(1000))
    special_lib["special_" + name](out, dev(x))
    # CPU's result in float64, rounded: PyTorch's Metal versions are float32 ports of
    # the same algorithms, so they agree to a few float32 ulps.
    torch.testing.assert_close(out.cpu(), reference(x.double()).float(), rtol=2e-5, atol=2e-6)


def test_binary_special_functions_match_cpu(special_lib):
    x = torch.linspace(1.5, 6, 500)
    q = torch.linspace(0.5, 4, 500)
    out = dev(torch.empty(500))
    special_lib.special_zeta(out, dev(x), dev(q))
    torch.testing.assert_close(out.cpu(), torch.special.zeta(x.double(), q.double()).float(), rtol=2e-5, atol=0)
    y = torch.linspace(-0.5, 10, 500)
    x2 = torch.linspace(-2, 2, 500)
    special_lib.special_xlog1py(out, dev(x2), dev(y))
    torch.testing.assert_close(out.cpu(), torch.special.xlog1py(x2.double(), y.double()).float(), rtol=2e-5, atol=1e-6)


REDUCTIONS = """
#include <metal_stdlib>
#include <c10/metal/reduction_utils.h>
using namespace metal;

// One threadgroup per row: PyTorch's two-stage (SIMD group, then threadgroup) reductions.
kernel void row_reduce(device float* sums [[buffer(0)]], device float* maxs [[buffer(1)]],
                       device float* mins [[buffer(2)]], device long* argmax [[buffer(3)]],
                       const device float* x [[buffer(4)]],
                       uint tid [[thread_position_in_threadgroup]],
                       uint row [[threadgroup_position_in_grid]],
                       uint n [[threads_per_threadgroup]]) {
  threadgroup float sum_buf[32];
  threadgroup float max_buf[32];
  threadgroup float min_buf[32];
  threadgroup float arg_val[32];
  threadgroup long arg_idx[32];
  const float v = x[row * n + tid];
  const float s = c10::metal::threadgroup_sum(sum_buf, v, tid, n);
  const float hi = c10::metal::threadgroup_max(max_buf, v, tid, n);
  const float lo = c10::metal::threadgroup_min(min_buf, v, tid, n);
  const long at = c10::metal::threadgroup_argmax(arg_val, arg_idx, v, long(tid), tid, n);
  if (tid == 0) {
    sums[row] = s;
    maxs[row] = hi;
    mins[row] = lo;
    argmax[row] = at;
  }
}
"""


@pytest.mark.parametrize("width", [32, 256, 1024])
def test_threadgroup_reductions_match_cpu(width):
    lib = torch.metalx.compile_shader(REDUCTIONS, name="reductions.metal")
    rows = 6
    x = torch.randn(rows, width)
    sums, maxs, mins = (dev(torch.empty(rows)) for _ in range(3))
    argmax = dev(torch.empty(rows, dtype=torch.long))
    lib.row_reduce(sums, maxs, mins, argmax, dev(x), threads=(rows * width,), group_size=(width,))
    torch.testing.assert_close(sums.cpu(), x.sum(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(maxs.cpu(), x.amax(1), rtol=0, atol=0)
    torch.testing.assert_close(mins.cpu(), x.amin(1), rtol=0, atol=0)
    torch.testing.assert_close(argmax.cpu(), x.argmax(1), rtol=0, atol=0)


RANDOM = """
#include <metal_stdlib>
#include <c10/metal/random.h>
using namespace metal;
kernel void draw(device uint4* raw, device float* uniform, device float* normal, device long* ints,
                 constant long& seed, uint i [[thread_position_in_grid]]) {
  raw[i] = c10::metal::philox4::rand(seed, i);
  uniform[i] = c10::metal::rand(seed, i);
  normal[i] = c10::metal::randn(seed, i);
  ints[i] = c10::metal::randint64(seed, i, -5, 17);
}
"""


def philox_reference(seed, index, rounds=10):
    """c10/metal/random.h's philox4::rand in Python: Philox4x32 (Salmon et al., 2011)
    on the counter (0, 0, index_hi, index_lo) with key (seed_hi, seed_lo), as many
    rounds as that header runs (rounds - 1)."""
    m = 0xFFFFFFFF
    ctr = [0, 0, (index >> 32) & m, index & m]
    key = [(seed >> 32) & m, seed & m]
    for _ in range(rounds - 1):
        p0 = 0xD2511F53 * ctr[0]
        p1 = 0xCD9E8D57 * ctr[2]
        hi0, lo0 = (p0 >> 32) & m, p0 & m
        hi1, lo1 = (p1 >> 32) & m, p1 & m
        ctr = [hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0]
        key = [(key[0] + 0x9E3779B9) & m, (key[1] + 0xBB67AE85) & m]
    return ctr


def test_philox_random_numbers_match_the_algorithm():
    lib = torch.metalx.compile_shader(RANDOM, name="random.metal")
    n, seed = 257, 0x1234_5678_9ABC
    raw = dev(torch.empty(n, 4, dtype=torch.int32))
    uniform, normal = dev(torch.empty(n)), dev(torch.empty(n))
    ints = dev(torch.empty(n, dtype=torch.long))
    from metalx.shaders import Int64
    lib.draw(raw, uniform, normal, ints, Int64(seed), threads=n)
    expected = torch.tensor([philox_reference(seed, i) for i in range(n)], dtype=torch.int64)
    assert torch.equal(raw.cpu().to(torch.int64) & 0xFFFFFFFF, expected)
    # The derived draws, computed from the same words in float32 as the header does.
    scale = torch.tensor(4.6566127342e-10, dtype=torch.float32)
    u = (expected[:, 0] & 0x7FFFFFFF).float() * scale
    torch.testing.assert_close(uniform.cpu(), u, rtol=0, atol=0)
    assert torch.equal(ints.cpu(), -5 + (u * 22).long())
    u1 = 1.0 - u
    u2 = 1.0 - (expected[:, 1] & 0x7FFFFFFF).float() * scale
    normal_ref = torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * torch.pi * u2)
    torch.testing.assert_close(normal.cpu(), normal_ref, rtol=1e-5, atol=1e-5)


ATOMICS = """
#include <metal_stdlib>
#include <c10/metal/atomic.h>
using namespace metal;
using c10::metal::AtomicType;
// Every thread adds its value to slot i % slots: PyTorch's emulated atomics (CAS
// loops on 32-bit words for half/bfloat, split adds for long).
kernel void add_half(device AtomicType<half>::type* acc, const device half* v, constant uint& slots,
                     uint i [[thread_position_in_grid]]) {
  AtomicType<half>::atomic_add(acc, i % slots, v[i]);
}
kernel void add_bfloat(device AtomicType<bfloat>::type* acc, const device bfloat* v, constant uint& slots,
                       uint i [[thread_position_in_grid]]) {
  AtomicType<bfloat>::atomic_add(acc, i % slots, v[i]);
}
kernel void add_float(device AtomicType<float>::type* acc, const device float* v, constant uint& slots,
                      uint i [[thread_position_in_grid]]) {
  AtomicType<float>::atomic_add(acc, i % slots, v[i]);
}
kernel void add_long(device AtomicType<long>::type* acc, const device long* v, constant uint& slots,
                     uint i [[thread_position_in_grid]]) {
  AtomicType<long>::atomic_add(acc, i % slots, v[i]);
}
"""


@pytest.mark.parametrize("dtype,kernel", [(torch.half, "add_half"), (torch.bfloat16, "add_bfloat"),
                                          (torch.float32, "add_float"), (torch.long, "add_long")])
def test_emulated_atomics_add_like_index_add(dtype, kernel):
    from metalx.shaders import UInt32
    lib = torch.metalx.compile_shader(ATOMICS, name="atomics.metal")
    n, slots = 4096, 7
    if dtype == torch.long:
        # Values whose low words carry into the high word.
        values = torch.randint(0, 2**33, (n,), dtype=torch.long)
    else:
        # Small integers: every partial sum is exact in half/bfloat, whatever the order.
        values = torch.randint(-2, 3, (n,)).to(dtype)
    acc = torch.zeros(slots, dtype=dtype)
    out = dev(acc.clone())
    lib[kernel](out, dev(values), UInt32(slots), threads=n)
    expected = acc.index_add(0, torch.arange(n) % slots, values)
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0)


def test_utils_helpers_match_cpu():
    lib = torch.metalx.compile_shader("""
#include <c10/metal/utils.h>
kernel void helpers(device float* out, device long* iout, const device float* a, const device float* b,
                    const device long* p, const device long* q, uint i [[thread_position_in_grid]]) {
  out[4 * i + 0] = c10::metal::max(a[i], b[i]);        // NaN-propagating, unlike metal::max
  out[4 * i + 1] = c10::metal::remainder(a[i], b[i]);
  out[4 * i + 2] = c10::metal::hypot(metal::abs(a[i]), metal::abs(b[i]));  // it takes magnitudes
  out[4 * i + 3] = c10::metal::log1p(a[i]);
  iout[2 * i + 0] = c10::metal::floor_divide(p[i], q[i]);
  iout[2 * i + 1] = c10::metal::remainder(p[i], q[i]);
}
""", name="utils.metal")
    n = 300
    a = torch.randn(n) * 3
    b = torch.randn(n) * 2
    a[::17] = float("nan")
    p = torch.randint(-50, 50, (n,))
    q = torch.randint(1, 9, (n,)) * torch.where(torch.rand(n) < 0.5, -1, 1)
    out = dev(torch.empty(n, 4))
    iout = dev(torch.empty(n, 2, dtype=torch.long))
    lib.helpers(out, iout, dev(a), dev(b), dev(p), dev(q), threads=n)
    got = out.cpu()
    torch.testing.assert_close(got[:, 0], torch.maximum(a, b), rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(got[:, 1], torch.remainder(a, b), rtol=1e-5, atol=1e-5, equal_nan=True)
    torch.testing.assert_close(got[:, 2], torch.hypot(a, b), rtol=2e-6, atol=0, equal_nan=True)
    finite = a > -1
    torch.testing.assert_close(got[finite, 3], torch.log1p(a[finite]), rtol=2e-6, atol=1e-7)
    assert torch.equal(iout.cpu()[:, 0], torch.div(p, q, rounding_mode="floor"))
    assert torch.equal(iout.cpu()[:, 1], torch.remainder(p, q))


def test_ops_registered_through_c10_indexing_macros():
    # <c10/metal/indexing.h> defines PyTorch's elementwise kernel templates in
    # namespace c10::metal and macros that instantiate them with qualified names
    # (`kernel void ::c10::metal::unary_dense<T, F>(...)`); here with a functor of ours.
    lib = torch.metalx.compile_shader("""
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
using namespace c10::metal;
struct cube_plus_one_functor {
  template <typename T>
  inline T operator()(const T x) {
    return x * x * x + T(1);
  }
};
REGISTER_UNARY_OP(cube_plus_one, float, float);
REGISTER_UNARY_OP(cube_plus_one, half, half);
""", name="c10_ops.metal")
    assert {"cube_plus_one_dense_float_float", "cube_plus_one_strided_half_half"} <= set(lib.kernel_names)
    from metalx.shaders import UInt32
    x = torch.randn(1001)
    out = dev(torch.empty(1001))
    # Each thread of the dense kernel handles ILP_PER_THREAD (4) elements.
    lib.cube_plus_one_dense_float_float(out, dev(x), UInt32(1001), threads=(1001 + 3) // 4)
    torch.testing.assert_close(out.cpu(), x * x * x + 1, rtol=1e-6, atol=1e-6)
    xh = x.half()
    outh = dev(torch.empty(1001, dtype=torch.half))
    lib.cube_plus_one_dense_half_half(outh, dev(xh), UInt32(1001), threads=(1001 + 3) // 4)
    torch.testing.assert_close(outh.cpu(), xh * xh * xh + 1, rtol=1e-3, atol=1e-3)
