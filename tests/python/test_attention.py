"""Fused scaled dot-product attention (backend/ops/attention.cpp, kernels/attention.metal)
against CPU torch's SDPA: forward and gradients over float32, float16 and bfloat16, key
and query lengths that are not multiples of the kernels' blocks, head dims up to 128
(both tile classes), causal, float and boolean masks with broadcasting (and the float
mask's gradient), non-contiguous q/k/v, grouped-query attention, dropout (determinism,
statistics, and gradients against a reference built from the kernel's own mask), head
dims the kernels do not cover (torch's math path), and nn.MultiheadAttention /
nn.TransformerEncoderLayer training steps. Every fused case asserts the fused kernels
ran and nothing fell back."""

import pytest
import torch
import torch.nn.functional as F

from device_checks import assert_native, kernels_run, sample

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
FLOATS = [torch.float32, torch.float16, torch.bfloat16]
KERNEL_SUFFIX = {torch.float32: "float", torch.float16: "half", torch.bfloat16: "bfloat"}
TOL = {
    torch.float32: dict(rtol=1e-4, atol=2e-5),
    torch.float16: dict(rtol=1e-2, atol=4e-3),
    torch.bfloat16: dict(rtol=4e-2, atol=3e-2),
}


def qkv(b, hq, hk, l, s, d, dv, dtype, seed=0):
    return (sample((b, hq, l, d), seed=seed).to(dtype), sample((b, hk, s, d), seed=seed + 1).to(dtype),
            sample((b, hk, s, dv), seed=seed + 2).to(dtype))


def run_sdpa(inputs, device, grad_seed=7, **kw):
    """SDPA's output and the gradients of every floating input that requires one; CPU
    half types compute in float32 (CPU's own reference precision) and round once."""
    dtype = inputs[0].dtype
    leaves = []
    for t in inputs:
        x = t.float() if device == "cpu" and dtype != torch.float32 and t.dtype == dtype else t
        x = x.detach().to(device)
        if x.is_floating_point():
            x.requires_grad_()
        leaves.append(x)
    q, k, v, *rest = leaves
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=rest[0] if rest else None, **kw)
    g = sample(out.shape, seed=grad_seed).to(out.dtype).to(device)
    out.backward(g)
    grads = [x.grad for x in leaves if x.is_floating_point()]
    cast = (lambda t: t.to(dtype)) if device == "cpu" else (lambda t: t)
    return cast(out.detach()), [cast(gr) for gr in grads]


def assert_matches(inputs, dtype, fused=True, tol=None, **kw):
    ref_out, ref_grads = run_sdpa(inputs, "cpu", **kw)
    holder = {}
    names = kernels_run(lambda: holder.update(res=run_sdpa(inputs, DEV, **kw)))
    out, grads = holder["res"]
    tol = tol or TOL[dtype]
    torch.testing.assert_close(out.cpu(), ref_out, **tol)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got.cpu(), want, **tol)
    # Head dims above 64 run the wide tile class (smaller blocks, same kernels' code).
    suffix = ("wide_" if max(inputs[0].shape[-1], inputs[2].shape[-1]) > 64 else "") + KERNEL_SUFFIX.get(dtype, "")
    ran = {n for n in names if n.startswith("attention_")}
    if fused:
        assert {f"attention_forward_{suffix}", f"attention_backward_kv_{suffix}",
                f"attention_backward_q_{suffix}"} <= ran, names
    else:
        assert not ran, ran
    assert_native()


SHAPES = [
    # b, hq, hk, l, s, d, dv
    (2, 3, 3, 37, 45, 16, 16),
    (1, 2, 2, 64, 64, 32, 32),
    (2, 1, 1, 20, 70, 64, 64),
    (1, 2, 2, 5, 3, 24, 40),
    (1, 1, 1, 1, 1, 8, 8),
    (1, 2, 2, 33, 17, 13, 7),
    # the wide tile class: head dims of real models (80, 96, 128), lengths that are not
    # multiples of its blocks (16 and 8), query and value dims that differ
    (2, 2, 2, 37, 45, 80, 80),
    (1, 3, 3, 29, 33, 96, 96),
    (1, 2, 2, 40, 24, 128, 128),
    (1, 1, 1, 5, 70, 72, 128),
    (1, 2, 2, 17, 9, 128, 40),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_cpu(shape, dtype):
    assert_matches(qkv(*shape, dtype), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ls", [(40, 50), (50, 40), (64, 64), (3, 70)])
def test_causal(ls, dtype):
    l, s = ls
    assert_matches(qkv(2, 2, 2, l, s, 32, 32, dtype), dtype, is_causal=True)


@pytest.mark.parametrize("scale", [0.3, -0.5])
def test_explicit_scale(scale):
    assert_matches(qkv(1, 2, 2, 19, 23, 16, 16, torch.float32), torch.float32, scale=scale)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mask_shape", [(37, 45), (2, 1, 37, 45), (1, 3, 1, 45), (45,), (2, 3, 37, 45)])
def test_float_mask_and_its_gradient(mask_shape, dtype):
    q, k, v = qkv(2, 3, 3, 37, 45, 32, 32, dtype)
    mask = sample(mask_shape, seed=5).to(dtype)
    assert_matches((q, k, v, mask), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("mask_shape", [(37, 45), (2, 1, 37, 45), (1, 1, 1, 45)])
def test_bool_mask(mask_shape, dtype):
    q, k, v = qkv(2, 3, 3, 37, 45, 16, 16, dtype)
    mask = torch.rand(mask_shape, generator=torch.Generator().manual_seed(3)) > 0.3
    if mask_shape[-2] > 4:
        mask[..., 4, :] = False  # a row with no key: CPU gives zeros (and zero gradients)
    assert_matches((q, k, v, mask), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_non_contiguous_inputs(dtype):
    # [B, L, H, D] projections viewed as [B, H, L, D], as nn.MultiheadAttention makes them.
    b, l, s, h, d = 2, 29, 35, 3, 32
    q = sample((b, l, h, d), seed=1).to(dtype).transpose(1, 2)
    k = sample((b, s, h, d), seed=2).to(dtype).transpose(1, 2)
    v = sample((b, s, h, d), seed=3).to(dtype).transpose(1, 2)
    assert not q.is_contiguous()
    assert_matches((q, k, v), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_attention(dtype, causal):
    assert_matches(qkv(2, 6, 2, 27, 40, 32, 32, dtype), dtype, enable_gqa=True, is_causal=causal)


@pytest.mark.parametrize("dtype", FLOATS)
def test_wide_head_dims_causal_gqa_and_mask(dtype):
    assert_matches(qkv(1, 4, 2, 35, 35, 128, 128, dtype), dtype, is_causal=True, enable_gqa=True)
    q, k, v = qkv(2, 2, 2, 21, 30, 96, 96, dtype)
    assert_matches((q, k, v, sample((2, 1, 21, 30), seed=5).to(dtype)), dtype)


@pytest.mark.parametrize("d", [32, 96])  # both tile classes
def test_saturated_scores(d):
    # Scores of up to a few hundred: most probabilities underflow to 0 and rows are
    # nearly one-hot, through the simulator's lane-0 kernels (vectorised metal::exp
    # across rows or keys). Large scores amplify float32 rounding: CPU's own float32 gradients are
    # up to 8e-4 off a float64 reference here (metalx's 5e-4), hence the tolerance.
    q, k, v = qkv(2, 2, 2, 40, 64, d, d, torch.float32)
    assert_matches((q * 30, k, v), torch.float32, tol=dict(rtol=1e-3, atol=1e-4))


@pytest.mark.parametrize("d", [136, 256])
def test_uncovered_head_dims_take_the_math_path(d):
    assert_matches(qkv(1, 2, 2, 19, 23, d, d, torch.float32), torch.float32, fused=False)


def test_sdpa_math_backend_choice_is_respected():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        assert_matches(qkv(1, 2, 2, 19, 23, 16, 16, torch.float32), torch.float32, fused=False)


# ---- dropout ----

OP = torch.ops.aten._scaled_dot_product_fused_attention_overrideable


def test_dropout_is_deterministic_under_manual_seed():
    q, k, v = (t.to(DEV) for t in qkv(2, 2, 2, 33, 41, 16, 16, torch.float32))
    torch.manual_seed(11)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    torch.manual_seed(11)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    c = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0)
    assert not torch.equal(a.cpu(), c.cpu())
    # SDPA's dropout draws exactly what the fused op with its debug mask does.
    torch.manual_seed(11)
    out = OP(q, k, v, None, 0.4, False, True)[0]
    torch.testing.assert_close(a.cpu(), out.cpu(), rtol=0, atol=0)
    assert_native()


def philox4x32_10(key, counter):
    """kernels/philox.h's philox4x32_10 in Python: counter words (group_lo, group_hi, 0, 0),
    key (seed_lo, seed_hi), nine keyed rounds with the key bumped after each, then a tenth."""
    m = 0xFFFFFFFF
    c = [counter & m, counter >> 32, 0, 0]
    k = list(key)
    for r in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & m, (p0 >> 32) ^ c[3] ^ k[1], p0 & m]
        k = [(k[0] + 0x9E3779B9) & m, (k[1] + 0xBB67AE85) & m]
    return c


@pytest.mark.parametrize("causal", [False, True])
def test_dropout_mask_is_the_documented_philox_stream(causal):
    # Element (bh, i, j) keeps when the top 24 bits of word j % 4 of Philox counter
    # offset / 4 + (bh * L + i) * ceil(S / 4) + j // 4 are >= p (kernels/attention.metal),
    # for every key, causal or not; the forward's output uses that same mask.
    p, (b, h, l, s) = 0.4, (1, 2, 5, 11)
    q, k, v = (t.to(DEV) for t in qkv(b, h, h, l, s, 8, 8, torch.float32))
    res = OP(q, k, v, None, p, causal, True)
    seed, offset, keep = int(res[6]), int(res[7]), res[8].cpu()
    key = (seed & 0xFFFFFFFF, seed >> 32)
    per_row = (s + 3) // 4
    want = torch.empty(b * h, l, s)
    for bh in range(b * h):
        for i in range(l):
            for j0 in range(0, s, 4):
                words = philox4x32_10(key, offset // 4 + (bh * l + i) * per_row + j0 // 4)
                for j in range(j0, min(j0 + 4, s)):
                    want[bh, i, j] = float((words[j % 4] >> 8) / 2**24 >= p)
    assert torch.equal(keep.reshape(b * h, l, s), want)
    # The output: softmax's probabilities times that mask / (1 - p).
    scores = (q.cpu() @ k.cpu().transpose(-2, -1)) / 8**0.5
    if causal:
        scores = scores.masked_fill(torch.ones(l, s, dtype=torch.bool).tril().logical_not(), float("-inf"))
    ref = (torch.softmax(scores, -1) * want.reshape(b, h, l, s) / (1 - p)) @ v.cpu()
    torch.testing.assert_close(res[0].cpu(), ref, **TOL[torch.float32])
    assert_native()


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_statistics(p):
    q, k, v = (t.to(DEV) for t in qkv(2, 4, 4, 64, 256, 16, 16, torch.float32))
    mask = OP(q, k, v, None, p, False, True)[8].cpu()
    n = mask.numel()
    assert set(mask.unique().tolist()) <= {0.0, 1.0}
    kept = mask.mean().item()
    sigma = (p * (1 - p) / n) ** 0.5
    assert abs(kept - (1 - p)) < 6 * sigma, (kept, 1 - p)
    # No correlation between neighbouring keys (one Philox call serves four of them).
    a, b = mask[..., :-1].flatten(), mask[..., 1:].flatten()
    both = (a * b).mean().item()
    assert abs(both - (1 - p) ** 2) < 6 * (((1 - p) ** 2 * (1 - (1 - p) ** 2)) / a.numel()) ** 0.5


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [32, 96])  # both tile classes
def test_dropout_forward_and_backward_match_a_reference_with_the_same_mask(dtype, causal, d):
    p = 0.3
    q, k, v = qkv(2, 2, 2, 37, 45, d, d, dtype)
    bias = None if causal else sample((37, 45), seed=9).to(dtype)
    leaves = [t.to(DEV).requires_grad_() for t in (q, k, v)]
    bias_dev = bias.to(DEV).requires_grad_() if bias is not None else None
    torch.manual_seed(3)
    res = OP(*leaves, bias_dev, p, causal, True)
    out, keep = res[0], res[8]
    g = sample(out.shape, seed=4).to(dtype)
    out.backward(g.to(DEV))

    # The reference: softmax, the kernel's mask, / (1 - p), @ v, in float32 on CPU.
    ref_leaves = [t.float().requires_grad_() for t in (q, k, v)]
    rq, rk, rv = ref_leaves
    scores = rq @ rk.transpose(-2, -1) / rq.shape[-1] ** 0.5
    rbias = None
    if bias is not None:
        rbias = bias.float().requires_grad_()
        scores = scores + rbias
    if causal:
        scores = scores.masked_fill(torch.ones(37, 45, dtype=torch.bool).tril().logical_not(), float("-inf"))
    probs = torch.softmax(scores, -1) * keep.cpu().float() / (1 - p)
    ref = probs @ rv
    ref.backward(g.float())
    tol = TOL[dtype]
    torch.testing.assert_close(out.detach().cpu(), ref.detach().to(dtype), **tol)
    for got, want in zip(leaves, ref_leaves):
        torch.testing.assert_close(got.grad.cpu(), want.grad.to(dtype), **tol)
    if bias is not None:
        torch.testing.assert_close(bias_dev.grad.cpu(), rbias.grad.to(dtype), **tol)
    assert 0.6 < keep.float().mean().item() < 0.8
    assert_native()


# ---- the GPU's code on the simulator ----
# The simulator runs its lane-0 kernels for every call; METALX_SIM_ATTENTION_GPU_CODE=1 runs
# the kernels' shared per-lane code instead (what an Apple GPU runs), so it stays tested.


@pytest.mark.parametrize("d", [32, 96])  # both tile classes
def test_gpu_code_with_a_mask(monkeypatch, d):
    monkeypatch.setenv("METALX_SIM_ATTENTION_GPU_CODE", "1")
    q, k, v = qkv(2, 2, 2, 37, 45, d, d, torch.float32)
    assert_matches((q, k, v, sample((2, 1, 37, 45), seed=5)), torch.float32)
    assert_matches(qkv(1, 4, 2, 35, 35, d, d, torch.float32), torch.float32, is_causal=True, enable_gqa=True)


@pytest.mark.parametrize("causal", [False, True])
def test_gpu_code_and_lane0_kernels_drop_the_same_elements(monkeypatch, causal):
    # The same seed through both: equal within rounding only if both keep the same mask.
    q, k, v = qkv(2, 2, 2, 37, 45, 32, 32, torch.float32)
    runs = []
    for gpu_code in ("0", "1"):
        monkeypatch.setenv("METALX_SIM_ATTENTION_GPU_CODE", gpu_code)
        torch.manual_seed(21)
        runs.append(run_sdpa((q, k, v), DEV, dropout_p=0.3, is_causal=causal))
    (out0, grads0), (out1, grads1) = runs
    torch.testing.assert_close(out1.cpu(), out0.cpu(), **TOL[torch.float32])
    for a, b in zip(grads1, grads0):
        torch.testing.assert_close(a.cpu(), b.cpu(), **TOL[torch.float32])
    assert_native()


# ---- modules ----


def _copy_module(module):
    import copy

    return copy.deepcopy(module).to(DEV)


def _training_step(module, x, forward):
    out = forward(module, x)
    out.square().mean().backward()
    return out.detach(), {n: p.grad for n, p in module.named_parameters()}


def _assert_module_matches(module_cpu, x, forward):
    module_dev = _copy_module(module_cpu)
    ref_out, ref_grads = _training_step(module_cpu, x, forward)
    holder = {}
    names = kernels_run(lambda: holder.update(res=_training_step(module_dev, x.to(DEV), forward)))
    out, grads = holder["res"]
    torch.testing.assert_close(out.cpu(), ref_out, rtol=1e-4, atol=1e-5)
    for n, g in ref_grads.items():
        torch.testing.assert_close(grads[n].cpu(), g, rtol=1e-4, atol=1e-5, msg=n)
    assert {"attention_forward_float", "attention_backward_kv_float", "attention_backward_q_float"} <= set(names)
    assert_native()


def test_multihead_attention_training_step():
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(64, 4, batch_first=True)
    x = sample((3, 21, 64), seed=2)
    _assert_module_matches(mha, x, lambda m, t: m(t, t, t, need_weights=False)[0])


def test_transformer_encoder_layer_training_step():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, dim_feedforward=96, dropout=0.0, batch_first=True)
    x = sample((2, 19, 64), seed=3)
    _assert_module_matches(layer, x, lambda m, t: m(t, is_causal=False))
