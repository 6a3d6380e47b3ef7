"""Function constants in compile_shader: `constant T x [[function_constant(i)]]`
specialised per pipeline with kernel.specialize(...), by name or by index, each value
set compiled once and cached; is_function_constant_defined; buffers that exist only
when a constant is true; and the errors for values the source does not declare or
declares with another type."""

import pytest
import torch

from metalx import shaders as S

SOURCE = """
#include <metal_stdlib>
using namespace metal;
constant bool has_bias [[function_constant(0)]];
constant uint repeats [[function_constant(1)]];
constant float scale [[function_constant(2)]];
constant half offset [[function_constant(3)]];
constant bool scaled = is_function_constant_defined(scale);

kernel void affine(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],
                   const device float* bias [[buffer(2), function_constant(has_bias)]],
                   uint i [[thread_position_in_grid]]) {
  float v = x[i];
  for (uint r = 0; r < repeats; ++r) v = v * 2.0f;  // a loop bound fixed per pipeline
  if (scaled) v *= scale;
  if (is_function_constant_defined(offset)) v += float(offset);
  if (has_bias) v += bias[i];
  out[i] = v;
}
"""


def dev(t):
    return t.to("metalx")


@pytest.fixture(scope="module")
def lib():
    return torch.metalx.compile_shader(SOURCE, name="constants.metal")


def test_specialisations_compute_with_their_values(lib):
    x, bias = torch.randn(200), torch.randn(200)
    out = dev(torch.empty(200))
    k = lib.affine.specialize(has_bias=True, repeats=S.UInt32(3), scale=0.5)
    k(out, dev(x), dev(bias))
    torch.testing.assert_close(out.cpu(), x * 8 * 0.5 + bias, rtol=1e-6, atol=1e-6)

    # By index; a constant left undefined: not scaled, no offset, the bias buffer absent.
    k2 = lib.affine.specialize({0: False, 1: S.UInt32(1)})
    k2(out, dev(x))
    torch.testing.assert_close(out.cpu(), x * 2, rtol=0, atol=0)
    with pytest.raises(TypeError, match=r"takes 2 arguments"):
        k2(out, dev(x), dev(bias))

    k3 = k2.specialize(offset=S.Float16(0.25))  # adds to k2's values
    k3(out, dev(x))
    torch.testing.assert_close(out.cpu(), x * 2 + 0.25, rtol=0, atol=1e-6)


def test_value_sets_in_any_order_specialise_alike(lib):
    # (That each set is one cached pipeline is tested on PipelineCache in C++.)
    a = lib.affine.specialize(has_bias=False, repeats=S.UInt32(2))
    b = lib.affine.specialize(repeats=S.UInt32(2), has_bias=False)  # same set, other order
    x = torch.randn(10)
    out_a, out_b = dev(torch.empty(10)), dev(torch.empty(10))
    a(out_a, dev(x))
    b(out_b, dev(x))
    torch.testing.assert_close(out_a.cpu(), x * 4, rtol=0, atol=0)
    torch.testing.assert_close(out_b.cpu(), x * 4, rtol=0, atol=0)


def test_bad_values_are_clear_errors(lib):
    with pytest.raises(ValueError, match=r"constants\.metal declares no function constant 'has_bais' \(it declares "
                                         r"bool has_bias \[\[function_constant\(0\)\]\], uint repeats"):
        lib.affine.specialize(has_bais=True)
    with pytest.raises(ValueError, match=r"function constant 'repeats' is declared uint but given a int value"):
        lib.affine.specialize(repeats=3)
    with pytest.raises(ValueError, match=r"declares no function constant index 9"):
        lib.affine.specialize({9: True})
    with pytest.raises(TypeError, match=r"function constant 'scale' has type str"):
        lib.affine.specialize(scale="big")


def test_a_library_without_function_constants_refuses_values():
    plain = torch.metalx.compile_shader("""
kernel void k(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) { o[i] = 1; }
""")
    with pytest.raises(ValueError, match=r"declares no \[\[function_constant"):
        plain.k.specialize(x=True)


def test_malformed_function_constant_declarations_name_the_line():
    with pytest.raises(S.ShaderCompileError, match=r"fc\.metal:3: error: function constants 'a' and 'b' share index 0"):
        torch.metalx.compile_shader("""#include <metal_stdlib>
constant bool a [[function_constant(0)]];
constant bool b [[function_constant(0)]];
kernel void k(device float* o [[buffer(0)]]) {}
""", name="fc.metal")
    with pytest.raises(S.ShaderCompileError, match=r"fc\.metal:3: error: \[\[function_constant\(nope\)\]\] on parameter"):
        torch.metalx.compile_shader("""#include <metal_stdlib>
kernel void k(device float* o [[buffer(0)]],
              device float* p [[buffer(1), function_constant(nope)]]) {}
""", name="fc.metal")
