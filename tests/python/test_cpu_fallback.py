"""The CPU fallback runs ops without metalx kernels on the CPU over the same memory:
in-place and out= results land in device memory, views stay views of their metalx
input, new results move to the device, and mixing devices fails as it does on CUDA."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch


def test_in_place_op_returns_the_same_tensor_and_writes_device_memory():
    # i0_ has no metalx kernel (the modified Bessel function)
    x = torch.arange(8.0, device="metalx")
    ptr = x.data_ptr()
    torch.metalx.reset_fallback_stats()
    y = x.i0_()
    assert y is x and x.data_ptr() == ptr
    assert torch.equal(x.cpu(), torch.arange(8.0).i0())
    assert torch.metalx.fallback_stats()  # it did go through the fallback


def test_in_place_op_on_a_strided_view_touches_only_its_elements():
    base = torch.arange(24.0).reshape(4, 6)
    dev = base.to("metalx")
    dev[:, ::2].add_(100)
    base[:, ::2].add_(100)
    assert torch.equal(dev.cpu(), base)


def test_out_argument_of_the_right_size_is_written_in_place():
    a, b = torch.randn(5, 3), torch.randn(5, 3)
    out = torch.empty(5, 3, device="metalx")
    ptr = out.data_ptr()
    torch.add(a.to("metalx"), b.to("metalx"), out=out)
    assert out.data_ptr() == ptr
    torch.testing.assert_close(out.cpu(), a + b)


def test_out_argument_that_must_grow_is_resized_like_on_cpu():
    a = torch.randn(4, 5)
    out = torch.empty(0, device="metalx")
    torch.mul(a.to("metalx"), 2, out=out)
    assert out.shape == (4, 5)
    torch.testing.assert_close(out.cpu(), a * 2)


# Every view op of aten has a metalx kernel now; a view op of our own, with only a CPU
# kernel, is what reaches the fallback.
_view_lib = torch.library.Library("metalx_fallback_test", "DEF")
_view_lib.define("windows(Tensor(a) self) -> Tensor(a)")
_view_lib.impl("windows", lambda t: t.unfold(1, 2, 1), "CPU")


def test_view_results_are_views_of_the_metalx_input():
    x = torch.arange(12.0).reshape(3, 4).to("metalx")
    torch.metalx.reset_fallback_stats()
    w = torch.ops.metalx_fallback_test.windows(x)  # no metalx kernel: runs through the fallback
    assert torch.metalx.fallback_stats() == {"metalx_fallback_test::windows": 1}
    assert w.is_metalx and w.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    x[0, 0] = 42.0
    assert w[0, 0, 0].item() == 42.0  # shares memory with x
    torch.testing.assert_close(w.cpu(), x.cpu().unfold(1, 2, 1))


def test_multiple_results_and_tensor_list_inputs():
    a = torch.randn(4, 6)
    values, indices = torch.max(a.to("metalx"), dim=1)
    assert values.is_metalx and indices.is_metalx
    ref_v, ref_i = torch.max(a, dim=1)
    torch.testing.assert_close(values.cpu(), ref_v)
    assert torch.equal(indices.cpu(), ref_i)
    cat = torch.cat([a.to("metalx"), a.to("metalx") * 2])
    torch.testing.assert_close(cat.cpu(), torch.cat([a, a * 2]))


def test_float64_and_complex_compute_through_the_fallback():
    x = torch.randn(100, dtype=torch.float64)
    torch.testing.assert_close((x.to("metalx") * 2).sum().cpu(), (x * 2).sum())
    z = torch.randn(10, dtype=torch.complex128)
    torch.testing.assert_close((z.to("metalx").conj() * z.to("metalx")).cpu(), z.conj() * z)


def test_results_of_queued_kernels_are_visible_to_the_fallback():
    x = torch.empty(1 << 16, device="metalx")
    x.fill_(2.0)  # a queued kernel
    assert x.sum().item() == 2.0 * (1 << 16)


def test_random_ops_follow_the_manual_seed():
    torch.manual_seed(7)
    a = torch.randn(16, device="metalx")
    torch.manual_seed(7)
    b = torch.randn(16, device="metalx")
    assert torch.equal(a.cpu(), b.cpu())


def test_mixing_metalx_and_cpu_tensors_is_rejected_like_cuda():
    x = torch.ones(3, device="metalx")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.add(x, torch.ones(3))
    # A 0-dim CPU tensor is a scalar, as on CUDA.
    torch.testing.assert_close(torch.add(x, torch.tensor(2.0)).cpu(), torch.full((3,), 3.0))
    # Indexing accepts CPU indices, as on CUDA.
    y = torch.arange(5.0, device="metalx")
    assert torch.equal(y[torch.tensor([0, 3])].cpu(), torch.tensor([0.0, 3.0]))


def test_a_cpu_out_argument_is_rejected_even_when_0_dim():
    # A 0-dim CPU tensor is a scalar only as an input: an op cannot write its result
    # into one (CUDA raises; metalx used to fill the CPU tensor). Found by upstream
    # test_shape_ops.py::test_nonzero.
    x = torch.tensor([0.0, 1.0, 0.0, 2.0], device="metalx")
    for out in (torch.empty([], dtype=torch.long), torch.empty(0, dtype=torch.long)):
        # nonzero is native (its own message); special_i1 runs on the CPU fallback.
        with pytest.raises(RuntimeError, match="same device"):
            torch.nonzero(x, out=out)
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            torch.special.i1(x, out=out.float())
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.sin(x, out=torch.empty([]))
    # The same ops with metalx out= tensors still match CPU.
    out = torch.empty(0, dtype=torch.long, device="metalx")
    torch.nonzero(x, out=out)
    assert torch.equal(out.cpu(), torch.nonzero(x.cpu()))


def test_uint8_mask_indexing_warns_once_per_mask_like_cpu():
    # Indexing went through the structured wrapper (index's meta function) and then the
    # CPU kernel (the meta function again): every uint8 mask warned twice. Found by
    # upstream test_indexing.py::test_byte_mask*.
    import warnings

    def count(device):
        v = torch.arange(105.0).reshape(5, 7, 3).to(device)
        m1 = torch.tensor([1, 0, 1, 1, 0], dtype=torch.uint8, device=device)
        m2 = torch.tensor([1, 1, 1], dtype=torch.uint8, device=device)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r1, r2 = v[m1], v[m1, :, m2]
        return len([x for x in w if "torch.uint8" in str(x.message)]), r1.cpu(), r2.cpu()

    n_cpu, a_cpu, b_cpu = count("cpu")
    n_dev, a_dev, b_dev = count("metalx")
    assert n_dev == n_cpu == 3
    assert torch.equal(a_dev, a_cpu) and torch.equal(b_dev, b_cpu)


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")  # torch deprecates quantized dtypes
def test_quantizing_a_metalx_tensor_is_a_clear_error():
    # The CPU kernel's quantized result used to be adopted as a metalx tensor without its
    # quantizer (dtype quint8, is_quantized False), failing in later ops with an internal
    # assert. Found by upstream test_shape_ops.py::test_flip (float32 quantizes).
    x = torch.randn(4, 4)
    with pytest.raises(NotImplementedError, match="metalx has no quantized tensors"):
        torch.quantize_per_tensor(x.to("metalx"), 0.1, 5, torch.quint8)
    # Quantizing on the CPU works as before.
    q = torch.quantize_per_tensor(x, 0.1, 5, torch.quint8)
    assert q.is_quantized and q.qscheme() == torch.per_tensor_affine


def test_two_metalx_devices_in_one_op_are_rejected():
    code = textwrap.dedent("""
        import torch
        a = torch.ones(2, device="metalx:0")
        b = torch.ones(2, device="metalx:1")
        try:
            torch.add(a, b)
        except RuntimeError as e:
            print("raised:", e)
        print("b still usable:", (b * 2).cpu().tolist())
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, METALSIM_DEVICE_COUNT="2"))
    assert result.returncode == 0, result.stderr
    assert "found at least two devices, metalx:0 and metalx:1" in result.stdout
    assert "b still usable: [2.0, 2.0]" in result.stdout


def test_new_results_need_no_copy_to_the_device():
    from metalx import _C

    a = torch.randn(1000, device="metalx")
    torch.metalx.reset_fallback_stats()
    # Ops without kernels: i0 (an out= op), mode along a dim of float64 (two results;
    # Metal has no float64), cdist (a functional op).
    s = a.i0()
    wide = a.reshape(10, 100).round().double()
    m = torch.mode(wide, dim=1)
    rows = a.reshape(10, 100)
    c = torch.cdist(rows, rows)
    assert set(torch.metalx.fallback_stats()) >= {"aten::i0.out", "aten::mode", "aten::_cdist_forward"}
    assert _C._fallback_result_copies() == 0  # and their results were born in device memory
    torch.testing.assert_close(s.cpu(), a.cpu().i0())
    torch.testing.assert_close(m.values.cpu(), wide.cpu().mode(1).values)
    torch.testing.assert_close(c.cpu(), torch.cdist(rows.cpu(), rows.cpu()))
    s.resize_(5000)  # adopted results are ordinary, resizable metalx tensors
    assert s.shape == (5000,)



@pytest.mark.parametrize("op", ["mish_backward", "silu_backward"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_activation_gradients_match_cpu_in_half_precision(op, dtype):
    # These backward ops' decompositions compute in the input's precision; CPU's kernels
    # in float: metalx runs CPU's, so the gradients are CPU's exactly.
    x = (torch.randn(256) * 3).to(dtype)
    go = torch.randn(256).to(dtype)
    fn = getattr(torch.ops.aten, op)
    torch.testing.assert_close(fn(go.to("metalx"), x.to("metalx")).cpu(), fn(go, x), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_ops_with_composite_kernels_run_cpus_kernels(dtype):
    # layer_norm, group_norm and addr have decompositions torch would otherwise use for
    # metalx, computing in half precision; metalx sends them to CPU's float-accumulating
    # kernels, so the results equal CPU's exactly.
    x = torch.randn(6, 32, dtype=dtype) * 10 + 3
    w, b = torch.randn(32, dtype=dtype), torch.randn(32, dtype=dtype)
    d = lambda t: t.to("metalx")  # noqa: E731
    F = torch.nn.functional
    torch.testing.assert_close(F.layer_norm(d(x), (32,), d(w), d(b)).cpu(), F.layer_norm(x, (32,), w, b), rtol=0, atol=0)
    g = x.reshape(6, 8, 4)
    torch.testing.assert_close(F.group_norm(d(g), 4).cpu(), F.group_norm(g, 4), rtol=0, atol=0)
    m, u, v = torch.randn(6, 5, dtype=dtype), torch.randn(6, dtype=dtype), torch.randn(5, dtype=dtype)
    torch.testing.assert_close(torch.addr(d(m), d(u), d(v)).cpu(), torch.addr(m, u, v), rtol=0, atol=0)


def test_in_place_conj_physical():
    z = torch.randn(5, dtype=torch.complex64)
    on_device = z.to("metalx")
    assert on_device.conj_physical_() is on_device
    torch.testing.assert_close(on_device.cpu(), z.conj_physical(), rtol=0, atol=0)


@pytest.mark.parametrize("loss", ["mse_loss", "smooth_l1_loss"])
def test_reduced_losses_match_cpu_without_resize_warnings(loss, recwarn):
    fn = getattr(torch.nn.functional, loss)
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    for reduction in ("mean", "sum", "none"):
        torch.testing.assert_close(fn(a.to("metalx"), b.to("metalx"), reduction=reduction).cpu(), fn(a, b, reduction=reduction))
    assert not [w for w in recwarn if "resized" in str(w.message)]


def test_mode_with_out_tensors():
    # torch.mode(..., out=) is a composite that refuses devices other than CPU/CUDA/XPU;
    # metalx sends it to the CPU kernel and writes the given tensors.
    x = torch.randint(0, 4, (5, 7)).float()
    values, indices = torch.empty(0, device="metalx"), torch.empty(0, dtype=torch.long, device="metalx")
    r = torch.mode(x.to("metalx"), 1, out=(values, indices))
    assert r.values is values and r.indices is indices
    ref = torch.mode(x, 1)
    torch.testing.assert_close(values.cpu(), ref.values, rtol=0, atol=0)
    torch.testing.assert_close(indices.cpu(), ref.indices, rtol=0, atol=0)
