"""torch.autocast("metalx"): which ops run in lower precision, which in float32, which
promote, compared with CUDA's op lists and with the same ops computed on the CPU with
the inputs cast as autocast's policy says."""

import warnings

import pytest
import torch
import torch.nn.functional as F

LOW = (torch.float16, torch.bfloat16)


def _registered_for(key):
    return {name for name in torch._C._dispatch_get_all_op_names()
            if torch._C._dispatch_has_kernel_for_dispatch_key(name, key)}


def test_metalx_casts_exactly_the_ops_cuda_casts():
    # cuDNN's own convolutions exist only on CUDA; every other op CUDA's autocast
    # handles, metalx handles too, and no other.
    cuda_only = {"aten::cudnn_convolution", "aten::cudnn_convolution_transpose"}
    cuda = _registered_for("AutocastCUDA") - cuda_only
    assert len(cuda) > 100
    assert _registered_for("AutocastPrivateUse1") == cuda


def test_default_dtype_and_supported_dtypes():
    assert torch.get_autocast_dtype("metalx") == torch.float16
    assert torch.metalx.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.amp.is_autocast_available("metalx")
    a = torch.randn(3, 3, device="metalx")
    with torch.autocast("metalx"):
        assert torch.is_autocast_enabled("metalx")
        assert not torch.is_autocast_enabled("cpu")
        assert torch.mm(a, a).dtype == torch.float16
    assert not torch.is_autocast_enabled("metalx")
    with torch.metalx.amp.autocast(dtype=torch.bfloat16):
        assert torch.mm(a, a).dtype == torch.bfloat16


def _inputs(*shapes, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g, dtype=dtype) for s in shapes]


# (name, function, input shapes): ops CUDA runs in the autocast dtype.
LOWER_PRECISION = [
    ("mm", torch.mm, [(4, 5), (5, 3)]),
    ("bmm", torch.bmm, [(2, 4, 5), (2, 5, 3)]),
    ("matmul", torch.matmul, [(2, 4, 5), (5, 3)]),
    ("addmm", torch.addmm, [(4, 3), (4, 5), (5, 3)]),
    ("baddbmm", torch.baddbmm, [(2, 4, 3), (2, 4, 5), (2, 5, 3)]),
    ("addbmm", torch.addbmm, [(4, 3), (2, 4, 5), (2, 5, 3)]),
    ("mv", torch.mv, [(4, 5), (5,)]),
    ("addmv", torch.addmv, [(4,), (4, 5), (5,)]),
    ("addr", torch.addr, [(4, 5), (4,), (5,)]),
    ("linear", F.linear, [(6, 5), (3, 5), (3,)]),
    ("chain_matmul", lambda a, b, c: torch.linalg.multi_dot([a, b, c]), [(3, 4), (4, 5), (5, 2)]),
    ("einsum", lambda a, b: torch.einsum("ij,jk->ik", a, b), [(4, 5), (5, 3)]),
    ("prelu", F.prelu, [(2, 3, 4), (3,)]),
    ("conv1d", F.conv1d, [(2, 3, 9), (4, 3, 3)]),
    ("conv2d", F.conv2d, [(2, 3, 7, 7), (4, 3, 3, 3), (4,)]),
    ("conv_transpose2d", F.conv_transpose2d, [(2, 4, 5, 5), (4, 3, 3, 3)]),
    ("conv3d", F.conv3d, [(1, 2, 4, 4, 4), (3, 2, 2, 2, 2)]),
]


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name, fn, shapes", LOWER_PRECISION, ids=[c[0] for c in LOWER_PRECISION])
def test_lower_precision_ops(name, fn, shapes, dtype):
    cpu = _inputs(*shapes)
    with torch.autocast("metalx", dtype=dtype):
        out = fn(*[t.to("metalx") for t in cpu])
    assert out.device.type == "metalx" and out.dtype == dtype
    # What the policy says: inputs cast, op unchanged. The reference computes on the cast
    # inputs in float64 and rounds once: CPU's own float16/bfloat16 kernels accumulate in
    # the low precision (conv_transpose2d in bfloat16 is off by several ulps) and would
    # be a looser reference than the kernels under test.
    expected = fn(*[t.to(dtype).double() for t in cpu]).to(dtype)
    torch.testing.assert_close(out.cpu(), expected, atol=2e-2, rtol=2e-2)


# (name, function, input shapes): ops CUDA runs in float32 whatever their inputs.
FLOAT32 = [
    ("exp", torch.exp, [(4, 5)]),
    ("log", torch.log, [(4, 5)]),
    ("pow", lambda x: torch.pow(x, 2), [(4, 5)]),
    ("rsqrt", torch.rsqrt, [(4, 5)]),
    ("softmax", lambda x: torch.softmax(x, -1), [(4, 5)]),
    ("log_softmax", lambda x: F.log_softmax(x, -1), [(4, 5)]),
    ("sum", torch.sum, [(4, 5)]),
    ("cumsum", lambda x: torch.cumsum(x, 0), [(4, 5)]),
    ("prod", lambda x: torch.prod(x, 1), [(4, 5)]),
    ("norm", torch.norm, [(4, 5)]),
    ("logsumexp", lambda x: torch.logsumexp(x, 1), [(4, 5)]),
    ("layer_norm", lambda x: F.layer_norm(x, (5,)), [(4, 5)]),
    ("group_norm", lambda x: F.group_norm(x, 2), [(2, 4, 3)]),
    ("mse_loss", F.mse_loss, [(4, 5), (4, 5)]),
    ("l1_loss", F.l1_loss, [(4, 5), (4, 5)]),
    ("smooth_l1_loss", F.smooth_l1_loss, [(4, 5), (4, 5)]),
    ("kl_div", lambda a, b: F.kl_div(a, b, reduction="batchmean"), [(4, 5), (4, 5)]),
    ("bce_with_logits", F.binary_cross_entropy_with_logits, [(4, 5), (4, 5)]),
    ("cosine_similarity", F.cosine_similarity, [(4, 5), (4, 5)]),
    ("cdist", torch.cdist, [(4, 5), (3, 5)]),
    ("upsample_nearest2d", lambda x: F.interpolate(x, scale_factor=2), [(1, 2, 3, 3)]),
]


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name, fn, shapes", FLOAT32, ids=[c[0] for c in FLOAT32])
def test_float32_ops_from_lower_precision_inputs(name, fn, shapes, dtype):
    # Positive inputs (log, rsqrt), rounded to `dtype` before either side sees them.
    cpu = [(t.abs() + 0.1).to(dtype) for t in _inputs(*shapes)]
    with torch.autocast("metalx", dtype=dtype):
        out = fn(*[t.to("metalx") for t in cpu])
    assert out.dtype == torch.float32
    expected = fn(*[t.float() for t in cpu])
    torch.testing.assert_close(out.cpu(), expected, atol=1e-5, rtol=1e-5)


def test_cross_entropy_is_float32_after_a_half_linear_layer():
    x, w, target = torch.randn(8, 5), torch.randn(3, 5), torch.randint(0, 3, (8,))
    with torch.autocast("metalx"):
        logits = F.linear(x.to("metalx"), w.to("metalx"))
        loss = F.cross_entropy(logits, target.to("metalx"))
    assert logits.dtype == torch.float16 and loss.dtype == torch.float32
    # Logits are half: two correct half matmuls may round differently in the last bit.
    torch.testing.assert_close(loss.cpu(), F.cross_entropy(F.linear(x.half(), w.half()).float(), target),
                               atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("name, fn", [
    ("addcmul", lambda a, b, c: torch.addcmul(a, b, c)),
    ("addcdiv", lambda a, b, c: torch.addcdiv(a, b, c)),
    ("atan2", lambda a, b, c: torch.atan2(a, b)),
    ("dot", lambda a, b, c: torch.dot(a, b)),
    ("cross", lambda a, b, c: torch.cross(a[:3], b[:3], dim=0)),
    ("scatter_add", lambda a, b, c: torch.scatter_add(a, 0, torch.tensor([0, 1, 2], device=a.device), b[:3])),
])
def test_promote_ops_run_in_the_widest_input_dtype(name, fn):
    a, b, c = _inputs((6,), (6,), (6,))
    b, c = b.half(), (c.abs() + 1).half()  # one float32 input among half ones; c divides
    with torch.autocast("metalx"):
        out = fn(a.to("metalx"), b.to("metalx"), c.to("metalx"))
        all_half = fn(a.half().to("metalx"), b.to("metalx"), c.to("metalx"))
    assert out.dtype == torch.float32
    assert all_half.dtype == torch.float16  # nothing wider to promote to
    torch.testing.assert_close(out.cpu(), fn(a, b.float(), c.float()))


def test_ops_outside_the_lists_keep_their_dtype_and_others_are_untouched():
    a = torch.randn(4, 4, device="metalx")
    with torch.autocast("metalx"):
        half = torch.mm(a, a)
        assert (half + half).dtype == torch.float16  # add: no policy
        assert torch.relu(a).dtype == torch.float32
        assert torch.mm(a.cpu(), a.cpu()).dtype == torch.float32  # CPU tensors: another device's autocast
        ints = torch.arange(4, device="metalx").reshape(2, 2)
        assert torch.mm(ints, ints).dtype == torch.int64  # only floating tensors are cast
        assert a.double().exp().dtype == torch.float64  # float64 is left alone, as on CUDA
        with torch.autocast("metalx", enabled=False):
            assert torch.mm(a, a).dtype == torch.float32


def test_gradients_flow_to_float32_parameters():
    layer = torch.nn.Linear(5, 3).to("metalx")
    x = torch.randn(4, 5, device="metalx")
    with torch.autocast("metalx"):
        y = layer(x)
        loss = y.float().pow(2).sum()
    assert y.dtype == torch.float16
    loss.backward()
    assert layer.weight.grad.dtype == torch.float32 and layer.weight.grad.device.type == "metalx"

    reference = torch.nn.Linear(5, 3)
    reference.load_state_dict({k: v.cpu() for k, v in layer.state_dict().items()})
    (F.linear(x.cpu().half(), reference.weight.half(), reference.bias.half()).float().pow(2).sum()).backward()
    torch.testing.assert_close(layer.weight.grad.cpu(), reference.weight.grad, atol=1e-2, rtol=1e-2)


def test_binary_cross_entropy_is_refused_with_the_safe_alternative():
    p = torch.rand(4, device="metalx")
    with torch.autocast("metalx"):
        with pytest.raises(RuntimeError, match="unsafe to autocast on metalx.*binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(p, p)
    assert F.binary_cross_entropy(p, p).dtype == torch.float32  # outside autocast: allowed


def test_unsupported_autocast_dtype_warns_and_disables_autocast():
    a = torch.randn(2, 2, device="metalx")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autocast("metalx", dtype=torch.float64):
            assert torch.mm(a, a).dtype == torch.float32
    messages = [str(w.message) for w in caught]
    assert any("metalx autocast" in m and "Disabling autocast" in m and "torch.float16, torch.bfloat16" in m
               for m in messages), messages
