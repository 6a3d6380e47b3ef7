"""embedding_bag on the device (backend/ops/embedding_bag.cpp, kernels/embedding_bag.metal):
sum / mean / max, offsets with include_last_offset, 2-d input, per_sample_weights,
padding_idx, int32 / int64 indices, float32 / float16 / bfloat16, forward and the
gradients of weight and per_sample_weights, against CPU torch; bad values raise CPU's
errors at the next synchronisation. Native cases must not fall back."""

import pytest
import torch
import torch.nn.functional as F

from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def tol(dtype):
    return {torch.float16: dict(atol=2e-2, rtol=2e-2), torch.bfloat16: dict(atol=1e-1, rtol=5e-2)}.get(
        dtype, dict(atol=1e-5, rtol=1e-5))


def run(device, weight, indices, offsets, dtype, grad_out_seed=3, psw=None, **kw):
    w = weight.to(device=device, dtype=dtype).detach().clone().requires_grad_()
    p = None if psw is None else psw.to(device=device, dtype=dtype).detach().clone().requires_grad_()
    out = F.embedding_bag(indices.to(device), w, None if offsets is None else offsets.to(device),
                          per_sample_weights=p, **kw)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_out_seed)).to(device=device, dtype=dtype)
    out.backward(g)
    return out, w.grad, None if p is None else p.grad


def compare(*args, **kw):
    dtype = args[3]
    got = run(DEV, *args, **kw)
    ref = run("cpu", *args, **kw)
    for a, b in zip(got, ref):
        if b is None:
            assert a is None
            continue
        assert a.device.type == DEV
        torch.testing.assert_close(a.cpu(), b, **tol(dtype))


WEIGHT = torch.randn(10, 6, generator=torch.Generator().manual_seed(0))
INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 0, 7])
OFFSETS = torch.tensor([0, 3, 3, 6, 8])  # a bag of 3, an empty bag, 3, 2, 3


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_modes_and_index_types(dtype, mode, index_dtype):
    compare(WEIGHT, INDICES.to(index_dtype), OFFSETS.to(index_dtype), dtype, mode=mode)
    assert_native()


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [0, 4, -1])
def test_padding_idx_and_include_last_offset(mode, padding_idx):
    compare(WEIGHT, INDICES, OFFSETS, torch.float32, mode=mode, padding_idx=padding_idx)
    last = torch.cat([OFFSETS, torch.tensor([INDICES.numel()])])
    compare(WEIGHT, INDICES, last, torch.float32, mode=mode, include_last_offset=True, padding_idx=padding_idx)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
def test_per_sample_weights(dtype):
    psw = torch.rand(INDICES.numel(), generator=torch.Generator().manual_seed(5))
    compare(WEIGHT, INDICES, OFFSETS, dtype, mode="sum", psw=psw)
    compare(WEIGHT, INDICES, OFFSETS, dtype, mode="sum", psw=psw, padding_idx=2)
    assert_native()


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_2d_input_and_strided_weight(mode):
    idx = torch.tensor([[1, 2, 2], [3, 3, 3], [0, 9, 1]])
    compare(WEIGHT, idx, None, torch.float32, mode=mode)
    # a transposed weight is read in place
    wt = WEIGHT.t().contiguous().t()
    got = F.embedding_bag(idx.to(DEV), wt.to(DEV).t().contiguous().t(), mode=mode)
    torch.testing.assert_close(got.cpu(), F.embedding_bag(idx, wt, mode=mode))
    assert_native()


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_scale_grad_by_freq_divides_by_each_index_count(mode):
    # CPU's dense backward divides each index's gradient by the count of another index
    # when indices repeat (it looks the count up by position among the unique indices);
    # metalx divides by the index's own count, as CUDA does: the unscaled gradient over
    # the counts.
    idx = torch.tensor([[1, 2, 2], [3, 3, 3], [0, 9, 1]])
    _, scaled, _ = run(DEV, WEIGHT, idx, None, torch.float32, mode=mode, scale_grad_by_freq=True)
    _, plain, _ = run("cpu", WEIGHT, idx, None, torch.float32, mode=mode)
    counts = torch.bincount(idx.flatten(), minlength=WEIGHT.shape[0]).clamp_min(1).unsqueeze(1)
    torch.testing.assert_close(scaled.cpu(), plain / counts)
    assert_native()


def test_module_and_empty_input():
    bag = torch.nn.EmbeddingBag(10, 6, mode="mean")
    bag_d = torch.nn.EmbeddingBag(10, 6, mode="mean").to(DEV)
    bag_d.load_state_dict({k: v.to(DEV) for k, v in bag.state_dict().items()})
    torch.testing.assert_close(bag_d(INDICES.to(DEV), OFFSETS.to(DEV)).cpu(), bag(INDICES, OFFSETS))
    empty = torch.tensor([], dtype=torch.long)
    torch.testing.assert_close(
        F.embedding_bag(empty.to(DEV), WEIGHT.to(DEV), torch.tensor([0, 0], device=DEV)).cpu(),
        F.embedding_bag(empty, WEIGHT, torch.tensor([0, 0])))
    assert_native()


def test_float64_runs_on_the_fallback_and_matches():
    got = F.embedding_bag(INDICES.to(DEV), WEIGHT.double().to(DEV), OFFSETS.to(DEV), mode="max")
    torch.testing.assert_close(got.cpu(), F.embedding_bag(INDICES, WEIGHT.double(), OFFSETS, mode="max"))


def test_bad_values_raise_at_the_next_sync_with_cpu_messages():
    w = WEIGHT.to(DEV)
    F.embedding_bag(torch.tensor([0, 10], device=DEV), w, torch.tensor([0, 1], device=DEV), mode="max")
    with pytest.raises(RuntimeError, match="in embedding_bag: embedding_bag: Expected idx >= 0 && idx < num_embeddings "
                                           "but found idx to be 10"):
        torch.metalx.synchronize()
    F.embedding_bag(torch.tensor([0, 1], device=DEV), w, torch.tensor([1], device=DEV))
    with pytest.raises(RuntimeError, match=r"offsets\[0\] has to be 0, .* However, got 1"):
        torch.metalx.synchronize()
    F.embedding_bag(torch.tensor([0, 1], device=DEV), w, torch.tensor([0, 3], device=DEV), include_last_offset=True)
    with pytest.raises(RuntimeError, match=r"offsets\[-1\] can not be greater than input's length 2 but got "
                                           r"offsets\[-1\] of 3"):
        torch.metalx.synchronize()
    torch.metalx.synchronize()  # reported once
    # argument errors are CPU's, at the op
    with pytest.raises(RuntimeError, match="embedding_bag: per_sample_weights only supported with mode='sum'"):
        torch.ops.aten._embedding_bag(w, INDICES.to(DEV), OFFSETS.to(DEV), False, 2, False,
                                      torch.ones(INDICES.numel(), device=DEV))
    with pytest.raises(RuntimeError, match="input has to be a 1D or 2D Tensor"):
        torch.ops.aten._embedding_bag(w, torch.zeros(1, 1, 1, dtype=torch.long, device=DEV),
                                      torch.tensor([0], device=DEV))
    # still usable
    torch.testing.assert_close(F.embedding_bag(INDICES.to(DEV), w, OFFSETS.to(DEV)).cpu(),
                               F.embedding_bag(INDICES, WEIGHT, OFFSETS))


def test_auxiliary_outputs_follow_cpu():
    for mode in (1, 2):
        got = torch.ops.aten._embedding_bag(WEIGHT.to(DEV), INDICES.to(DEV), OFFSETS.to(DEV), False, mode, False,
                                            None, False, 4)
        ref = torch.ops.aten._embedding_bag(WEIGHT, INDICES, OFFSETS, False, mode, False, None, False, 4)
        for a, b in zip(got, ref):
            torch.testing.assert_close(a.cpu(), b)
    assert_native()
