"""_foreach_* ops and fused optimizers on metalx against CPU torch.

Float32, float16 and bfloat16 lists that meet torch's fast-path rules run the
multi-tensor kernels (kernels/foreach.metal, kernels/fused_optim.metal): few dispatches
for many tensors, nothing on the CPU fallback. Other dtypes and non-dense tensors take
torch's per-tensor path and must still give CPU's results.
"""

import pytest
import torch

NATIVE = [torch.float32, torch.float16, torch.bfloat16]
SIZES = [0, 1, 7, 1000, 70_000]


def make(sizes, dtype, seed, positive=False):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in sizes:
        t = torch.randn(n, generator=g)
        if positive:
            t = t.abs() + 0.5
        out.append(t.to(dtype))
    return out


def to_dev(ts):
    return [t.to("metalx") for t in ts]


def assert_lists_close(cpu, dev, dtype):
    assert len(cpu) == len(dev)
    for c, d in zip(cpu, dev):
        assert d.device.type == "metalx"
        kw = dict(rtol=2e-5, atol=1e-6) if dtype == torch.float32 else {}
        torch.testing.assert_close(d.cpu(), c, equal_nan=True, **kw)


def kernel_names(fn):
    with torch.metalx.profiler.profile() as prof:
        fn()
    return [c["name"] for c in prof.commands]


# name -> (function of (self, other, third) lists, needs positive inputs)
UNARY = {
    "sqrt": (lambda a: torch._foreach_sqrt(a), lambda a: torch._foreach_sqrt_(a), True),
    "neg": (lambda a: torch._foreach_neg(a), lambda a: torch._foreach_neg_(a), False),
    "abs": (lambda a: torch._foreach_abs(a), lambda a: torch._foreach_abs_(a), False),
    "exp": (lambda a: torch._foreach_exp(a), lambda a: torch._foreach_exp_(a), False),
    "sign": (lambda a: torch._foreach_sign(a), lambda a: torch._foreach_sign_(a), False),
    "reciprocal": (lambda a: torch._foreach_reciprocal(a), lambda a: torch._foreach_reciprocal_(a), True),
}

SCALARS = [0.5, -1.25, 0.75, 2.0, 3.0]

BINARY = {
    # out-of-place and in-place forms, each taking (a, b): b a list of the same shapes
    "add.Scalar": (lambda a, b: torch._foreach_add(a, 1.5), lambda a, b: torch._foreach_add_(a, 1.5)),
    "add.List": (lambda a, b: torch._foreach_add(a, b, alpha=-0.5), lambda a, b: torch._foreach_add_(a, b, alpha=-0.5)),
    "add.ScalarList": (lambda a, b: torch._foreach_add(a, SCALARS), lambda a, b: torch._foreach_add_(a, SCALARS)),
    "sub.Scalar": (lambda a, b: torch._foreach_sub(a, 1.5), lambda a, b: torch._foreach_sub_(a, 1.5)),
    "sub.List": (lambda a, b: torch._foreach_sub(a, b, alpha=2), lambda a, b: torch._foreach_sub_(a, b, alpha=2)),
    "sub.ScalarList": (lambda a, b: torch._foreach_sub(a, SCALARS), lambda a, b: torch._foreach_sub_(a, SCALARS)),
    "mul.Scalar": (lambda a, b: torch._foreach_mul(a, 0.9), lambda a, b: torch._foreach_mul_(a, 0.9)),
    "mul.List": (lambda a, b: torch._foreach_mul(a, b), lambda a, b: torch._foreach_mul_(a, b)),
    "mul.ScalarList": (lambda a, b: torch._foreach_mul(a, SCALARS), lambda a, b: torch._foreach_mul_(a, SCALARS)),
    "div.Scalar": (lambda a, b: torch._foreach_div(a, 3.0), lambda a, b: torch._foreach_div_(a, 3.0)),
    "div.List": (lambda a, b: torch._foreach_div(a, b), lambda a, b: torch._foreach_div_(a, b)),
    "div.ScalarList": (lambda a, b: torch._foreach_div(a, SCALARS), lambda a, b: torch._foreach_div_(a, SCALARS)),
    "maximum.List": (lambda a, b: torch._foreach_maximum(a, b), lambda a, b: torch._foreach_maximum_(a, b)),
    "maximum.Scalar": (lambda a, b: torch._foreach_maximum(a, 0.1), lambda a, b: torch._foreach_maximum_(a, 0.1)),
    "minimum.List": (lambda a, b: torch._foreach_minimum(a, b), lambda a, b: torch._foreach_minimum_(a, b)),
    "clamp_min.Scalar": (lambda a, b: torch._foreach_clamp_min(a, -0.2), lambda a, b: torch._foreach_clamp_min_(a, -0.2)),
    "clamp_max.Scalar": (lambda a, b: torch._foreach_clamp_max(a, 0.3), lambda a, b: torch._foreach_clamp_max_(a, 0.3)),
    "clamp_min.List": (lambda a, b: torch._foreach_clamp_min(a, b), lambda a, b: torch._foreach_clamp_min_(a, b)),
    "clamp_max.ScalarList": (lambda a, b: torch._foreach_clamp_max(a, SCALARS),
                             lambda a, b: torch._foreach_clamp_max_(a, SCALARS)),
    "pow.Scalar": (lambda a, b: torch._foreach_pow(a, 3.0), lambda a, b: torch._foreach_pow_(a, 3.0)),
    "pow.ScalarList": (lambda a, b: torch._foreach_pow(a, SCALARS), lambda a, b: torch._foreach_pow_(a, SCALARS)),
    "pow.List": (lambda a, b: torch._foreach_pow(a, b), lambda a, b: torch._foreach_pow_(a, b)),
    "minimum.ScalarList": (lambda a, b: torch._foreach_minimum(a, SCALARS),
                           lambda a, b: torch._foreach_minimum_(a, SCALARS)),
    "maximum.ScalarList": (lambda a, b: torch._foreach_maximum(a, SCALARS),
                           lambda a, b: torch._foreach_maximum_(a, SCALARS)),
    "lerp.Scalar": (lambda a, b: torch._foreach_lerp(a, b, 0.3), lambda a, b: torch._foreach_lerp_(a, b, 0.3)),
    "lerp.ScalarList": (lambda a, b: torch._foreach_lerp(a, b, SCALARS), lambda a, b: torch._foreach_lerp_(a, b, SCALARS)),
}

TERNARY = {
    # (a, b, c): c strictly positive
    "addcmul.Scalar": (lambda a, b, c: torch._foreach_addcmul(a, b, c, value=0.5),
                       lambda a, b, c: torch._foreach_addcmul_(a, b, c, value=0.5)),
    "addcmul.ScalarList": (lambda a, b, c: torch._foreach_addcmul(a, b, c, SCALARS),
                           lambda a, b, c: torch._foreach_addcmul_(a, b, c, SCALARS)),
    "addcmul.Tensor": (lambda a, b, c: torch._foreach_addcmul(a, b, c, torch.tensor(SCALARS)),
                       lambda a, b, c: torch._foreach_addcmul_(a, b, c, torch.tensor(SCALARS))),
    "addcdiv.Scalar": (lambda a, b, c: torch._foreach_addcdiv(a, b, c, value=-0.5),
                       lambda a, b, c: torch._foreach_addcdiv_(a, b, c, value=-0.5)),
    "addcdiv.ScalarList": (lambda a, b, c: torch._foreach_addcdiv(a, b, c, SCALARS),
                           lambda a, b, c: torch._foreach_addcdiv_(a, b, c, SCALARS)),
    "addcdiv.Tensor": (lambda a, b, c: torch._foreach_addcdiv(a, b, c, torch.tensor(SCALARS)),
                       lambda a, b, c: torch._foreach_addcdiv_(a, b, c, torch.tensor(SCALARS))),
    "lerp.List": (lambda a, b, c: torch._foreach_lerp(a, b, torch._foreach_div(c, 4.0)),
                  lambda a, b, c: torch._foreach_lerp_(a, b, torch._foreach_div(c, 4.0))),
}


def check_native(fn, kernels=("foreach_",)):
    """Runs fn, which must use only multi-tensor kernels (and `kernels`) and no CPU fallback."""
    torch.metalx.reset_fallback_stats()
    names = kernel_names(fn)
    assert torch.metalx.fallback_stats() == {}
    assert names and all(n.startswith(kernels) for n in names), names


@pytest.mark.parametrize("dtype", NATIVE)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_cpu(torch, name, dtype):
    functional, inplace, positive = UNARY[name]
    a = make(SIZES, dtype, 0, positive)
    da = to_dev(a)
    check_native(lambda: assert_lists_close(functional(a), functional(da), dtype))
    check_native(lambda: inplace(da))
    inplace(a)
    assert_lists_close(a, da, dtype)


@pytest.mark.parametrize("dtype", NATIVE)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_cpu(torch, name, dtype):
    functional, inplace = BINARY[name]
    positive = name.startswith("pow")
    a, b = make(SIZES, dtype, 1, positive), make(SIZES, dtype, 2, True)
    da, db = to_dev(a), to_dev(b)
    expected = functional(a, b)
    result = []
    check_native(lambda: result.extend(functional(da, db)))
    assert_lists_close(expected, result, dtype)
    check_native(lambda: inplace(da, db))
    inplace(a, b)
    assert_lists_close(a, da, dtype)


@pytest.mark.parametrize("dtype", NATIVE)
@pytest.mark.parametrize("name", sorted(TERNARY))
def test_ternary_matches_cpu(torch, name, dtype):
    functional, inplace = TERNARY[name]
    a, b, c = make(SIZES, dtype, 3), make(SIZES, dtype, 4), make(SIZES, dtype, 5, True)
    da, db, dc = to_dev(a), to_dev(b), to_dev(c)
    expected = functional(a, b, c)
    result = []
    check_native(lambda: result.extend(functional(da, db, dc)))
    assert_lists_close(expected, result, dtype)
    check_native(lambda: inplace(da, db, dc))
    inplace(a, b, c)
    assert_lists_close(a, da, dtype)


def test_zero_copy_and_scalar_and_tensor_pow(torch):
    a, b = make(SIZES, torch.float32, 6), make(SIZES, torch.float32, 7)
    da, db = to_dev(a), to_dev(b)
    check_native(lambda: torch._foreach_copy_(da, db))
    assert_lists_close(b, da, torch.float32)
    check_native(lambda: torch._foreach_zero_(da))
    assert all(t.cpu().eq(0).all() for t in da)
    result = []
    check_native(lambda: result.extend(torch._foreach_pow(2.0, db)))
    assert_lists_close(torch._foreach_pow(2.0, b), result, torch.float32)


@pytest.mark.parametrize("where", ["device", "cpu"])
def test_tensor_scalar_forms(torch, where):
    a = make(SIZES, torch.float32, 8)
    da = to_dev(a)
    s = torch.tensor(0.75, device=where if where == "cpu" else "metalx")
    for fn in (lambda x, t: torch._foreach_mul(x, t), lambda x, t: torch._foreach_div(x, t),
               lambda x, t: torch._foreach_add(x, t, alpha=2)):
        result = []
        check_native(lambda: result.extend(fn(da, s)))
        assert_lists_close(fn(a, s.cpu()), result, torch.float32)
    check_native(lambda: torch._foreach_mul_(da, s))
    torch._foreach_mul_(a, s.cpu())
    assert_lists_close(a, da, torch.float32)


@pytest.mark.parametrize("dtype", NATIVE)
@pytest.mark.parametrize("ord", [1, 2, float("inf")])
def test_norm_matches_cpu(torch, ord, dtype):
    sizes = [1, 7, 1000, 70_000, 300_000] + ([] if ord == float("inf") else [0])
    a = make(sizes, dtype, 14)
    da = to_dev(a)
    result = []
    # (the norm of an empty tensor is a zero filled in)
    check_native(lambda: result.extend(torch._foreach_norm(da, ord)), kernels=("foreach_", "fill_"))
    kw = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else {}
    for c, d in zip(torch._foreach_norm(a, ord), result):
        assert d.dtype == c.dtype and d.shape == c.shape
        torch.testing.assert_close(d.cpu(), c, **kw)


def test_norm_of_other_orders_and_empty_inf_take_cpus_path(torch):
    a = make([5, 0, 100], torch.float32, 15)
    da = to_dev(a)
    for c, d in zip(torch._foreach_norm(a, 3), torch._foreach_norm(da, 3)):
        torch.testing.assert_close(d.cpu(), c)
    with pytest.raises(RuntimeError) as cpu_error:
        torch._foreach_norm(a, float("inf"))
    with pytest.raises(RuntimeError) as dev_error:
        torch._foreach_norm(da, float("inf"))
    assert str(cpu_error.value).split("\n")[0] == str(dev_error.value).split("\n")[0]


def test_many_tensors_take_few_dispatches(torch):
    # 150 small tensors (more than one dispatch's table) and 40 tensors of their own
    # buffers (more than one dispatch's 28 slots).
    sizes = [13 * (i % 7) + 1 for i in range(150)] + [300_000] * 40
    a, b = make(sizes, torch.float32, 9), make(sizes, torch.float32, 10)
    da, db = to_dev(a), to_dev(b)
    torch.metalx.reset_fallback_stats()
    names = kernel_names(lambda: torch._foreach_add_(da, db, alpha=0.25))
    assert torch.metalx.fallback_stats() == {}
    assert names and set(names) == {"foreach_add_list_float"}
    assert 3 <= len(names) <= 12, len(names)
    torch._foreach_add_(a, b, alpha=0.25)
    assert_lists_close(a, da, torch.float32)


def test_dense_permuted_tensors_are_native(torch):
    a = [torch.randn(30, 40).t(), torch.randn(2, 3, 4, 5).permute(0, 2, 3, 1)]
    b = [torch.randn_like(t) for t in a]
    da, db = to_dev(a), to_dev(b)
    result = []
    check_native(lambda: result.extend(torch._foreach_mul(da, db)))
    for c, d in zip(torch._foreach_mul(a, b), result):
        assert d.stride() == c.stride()
        torch.testing.assert_close(d.cpu(), c)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.int32])
def test_other_dtypes_take_the_per_tensor_path(torch, dtype):
    g = torch.Generator().manual_seed(11)
    a = [(torch.randn(n, generator=g) * 10).to(dtype) for n in SIZES]
    b = [(torch.randn(n, generator=g) * 10).abs().to(dtype) + 1 for n in SIZES]
    da, db = to_dev(a), to_dev(b)
    for fn in (lambda x, y: torch._foreach_add(x, y, alpha=2), lambda x, y: torch._foreach_mul(x, 3),
               lambda x, y: torch._foreach_maximum(x, y), lambda x, y: torch._foreach_abs(x),
               lambda x, y: torch._foreach_addcmul(x, x, y, value=2)):
        names = []
        result = []
        names = kernel_names(lambda: result.extend(fn(da, db)))
        assert not any(n.startswith("foreach_") for n in names)
        for c, d in zip(fn(a, b), result):
            assert d.dtype == c.dtype
            torch.testing.assert_close(d.cpu(), c)
    # ops that promote integers to float
    result = torch._foreach_div(da, db)
    for c, d in zip(torch._foreach_div(a, b), result):
        assert d.dtype == c.dtype
        torch.testing.assert_close(d.cpu(), c)


def test_non_dense_and_mixed_dtype_lists_take_the_per_tensor_path(torch):
    base = torch.randn(1000)
    a = [base[::3], torch.randn(5)]
    b = [torch.randn(334), torch.randn(5)]
    da, db = [base.to("metalx")[::3], a[1].to("metalx")], to_dev(b)
    names = kernel_names(lambda: torch._foreach_mul_(da, db))
    assert not any(n.startswith("foreach_") for n in names)
    torch._foreach_mul_(a, b)
    assert_lists_close(a, da, torch.float32)
    mixed = [torch.randn(10), torch.randn(10, dtype=torch.float16)]
    dmixed = to_dev(mixed)
    for c, d in zip(torch._foreach_mul(mixed, 2.0), torch._foreach_mul(dmixed, 2.0)):
        assert d.dtype == c.dtype
        torch.testing.assert_close(d.cpu(), c)


def test_bad_lists_raise_cpus_errors(torch):
    da, db = to_dev(make([3, 4], torch.float32, 12)), to_dev(make([3], torch.float32, 13))
    with pytest.raises(RuntimeError, match="Tensor lists must have the same number of tensors, got 2 and 1"):
        torch._foreach_add(da, db)
    with pytest.raises(RuntimeError, match="Tensor list must have at least one tensor"):
        torch._foreach_mul([], 2.0)
    with pytest.raises(RuntimeError, match="Tensor list must have same number of elements as scalar list"):
        torch._foreach_mul(da, [1.0, 2.0, 3.0])


# ---- optimizers ----

def train(device, cls, kwargs, dtype=torch.float32, steps=3, sizes=(3, 100, 5000, 0, 70_000), compute_dtype=None):
    """Parameters and gradients of `dtype` (computed in `compute_dtype` from those values,
    when given), `steps` optimizer steps; the parameters and the optimizer state after."""
    g = torch.Generator().manual_seed(21)
    compute_dtype = compute_dtype or dtype
    params = [torch.randn(n, generator=g).to(dtype).to(compute_dtype).to(device).requires_grad_() for n in sizes]
    opt = cls(params, **kwargs)
    for s in range(steps):
        for p in params:
            p.grad = (torch.randn(p.shape, generator=g) * (s + 1)).to(dtype).to(compute_dtype).to(device)
        opt.step()
    state = [{k: v.cpu() for k, v in opt.state[p].items() if torch.is_tensor(v)} for p in params]
    return [p.detach().cpu() for p in params], state


OPTIMIZERS = [
    (torch.optim.Adam, dict(lr=0.01)),
    (torch.optim.Adam, dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    (torch.optim.Adam, dict(lr=0.01, maximize=True, betas=(0.8, 0.95))),
    (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1)),
    (torch.optim.AdamW, dict(lr=torch.tensor(0.02), amsgrad=True)),
    (torch.optim.SGD, dict(lr=0.1)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.2)),
    (torch.optim.Adagrad, dict(lr=0.1)),
    (torch.optim.Adagrad, dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, maximize=True, eps=1e-6)),
]


def optimizer_id(case):
    cls, kwargs = case
    return cls.__name__ + "-" + "-".join(f"{k}={v}" for k, v in kwargs.items())


def assert_training_matches(cpu, dev, dtype, **tolerance):
    (cpu_params, cpu_state), (dev_params, dev_state) = cpu, dev
    kw = tolerance or (dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else {})
    for c, d in zip(cpu_params, dev_params):
        assert d.dtype == dtype
        torch.testing.assert_close(d.to(c.dtype), c, **kw)
    for c, d in zip(cpu_state, dev_state):
        assert c.keys() == d.keys()
        for k in c:
            torch.testing.assert_close(d[k].to(c[k].dtype), c[k], **kw)


@pytest.mark.parametrize("case", OPTIMIZERS, ids=optimizer_id)
@pytest.mark.parametrize("mode", ["fused", "foreach", "default"])
def test_optimizer_steps_match_cpu(torch, case, mode):
    cls, kwargs = case
    flags = {"fused": dict(fused=True), "foreach": dict(foreach=True), "default": {}}[mode]
    if mode == "foreach" and torch.is_tensor(kwargs.get("lr")) and cls is not torch.optim.SGD:
        flags = dict(foreach=True, capturable=True)  # a tensor lr with foreach needs capturable
    cpu_flags = dict(fused=True) if mode == "fused" else dict(foreach=False)
    cpu = train("cpu", cls, {**kwargs, **cpu_flags})
    torch.metalx.reset_fallback_stats()
    names = []
    with torch.metalx.profiler.profile() as prof:
        dev = train("metalx", cls, {**kwargs, **flags})
    names = {c["name"] for c in prof.commands}
    assert torch.metalx.fallback_stats() == {}
    if mode == "fused":
        assert any(n.startswith("fused_") for n in names), names
    elif mode == "foreach" or not torch.is_tensor(kwargs.get("lr")):
        # foreach is the default on metalx (with a tensor lr torch picks its per-tensor loop)
        assert any(n.startswith("foreach_") for n in names), names
    assert_training_matches(cpu, dev, torch.float32)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("cls", [torch.optim.AdamW, torch.optim.Adam, torch.optim.SGD, torch.optim.Adagrad])
def test_fused_half_precision_matches_cpu_fused(torch, cls, dtype):
    # metalx computes in float and rounds what it stores, as CPU's fused Adam does; the
    # two differ by an ulp now and then, which later steps carry on. CPU's fused SGD in
    # float16 and bfloat16 is wrong in torch 2.13 (its momentum buffers are garbage after
    # one step), so SGD is compared with CPU's fused SGD in float32 on the same values.
    kwargs = dict(lr=0.01, weight_decay=0.1, fused=True) | (dict(momentum=0.9) if cls is torch.optim.SGD else {})
    reference = torch.float32 if cls is torch.optim.SGD else None
    cpu = train("cpu", cls, kwargs, dtype=dtype, compute_dtype=reference)
    torch.metalx.reset_fallback_stats()
    dev = train("metalx", cls, kwargs, dtype=dtype)
    assert torch.metalx.fallback_stats() == {}
    tolerance = 1e-2 if dtype == torch.float16 else 4e-2
    assert_training_matches(cpu, dev, dtype, rtol=tolerance, atol=tolerance)


def test_fused_float64_runs_cpus_kernel(torch):
    cpu = train("cpu", torch.optim.AdamW, dict(lr=0.01, fused=True), dtype=torch.float64)
    torch.metalx.reset_fallback_stats()
    dev = train("metalx", torch.optim.AdamW, dict(lr=0.01, fused=True), dtype=torch.float64)
    assert "aten::_fused_adamw_" in torch.metalx.fallback_stats()
    assert_training_matches(cpu, dev, torch.float64)


def fused_call(device, op, found_inf, lr_device):
    g = torch.Generator().manual_seed(31)
    lists = [[torch.randn(n, generator=g).to(device) for n in (5, 300)] for _ in range(4)]
    lists[3] = [t.abs() for t in lists[3]]
    steps = [torch.tensor(3.0, device=device) for _ in range(2)]
    scale = torch.tensor(4.0, device=device)
    inf = torch.tensor(found_inf, device=device)
    lr = torch.tensor(0.05, device=device if lr_device else "cpu")
    if op == "adam":
        torch._fused_adam_(lists[0], lists[1], lists[2], lists[3], [], steps, lr=lr, beta1=0.9, beta2=0.99,
                           weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False, grad_scale=scale,
                           found_inf=inf)
    elif op == "adagrad":
        torch._fused_adagrad_(lists[0], lists[1], lists[3], steps, lr=lr, lr_decay=0.01, weight_decay=0.01,
                              eps=1e-10, maximize=False, grad_scale=scale, found_inf=inf)
    else:
        torch._fused_sgd_(lists[0], lists[1], lists[2], weight_decay=0.01, momentum=0.9, lr=lr, dampening=0.0,
                          nesterov=False, maximize=False, is_first_step=False, grad_scale=scale, found_inf=inf)
    return [t.cpu() for ts in lists for t in ts]


@pytest.mark.parametrize("op", ["adam", "sgd", "adagrad"])
@pytest.mark.parametrize("found_inf", [0.0, 1.0])
@pytest.mark.parametrize("lr_device", [True, False])
def test_fused_grad_scale_found_inf_and_tensor_lr(torch, op, found_inf, lr_device):
    cpu = fused_call("cpu", op, found_inf, False)
    torch.metalx.reset_fallback_stats()
    dev = fused_call("metalx", op, found_inf, lr_device)
    assert torch.metalx.fallback_stats() == {}
    for c, d in zip(cpu, dev):
        torch.testing.assert_close(d, c, rtol=1e-5, atol=1e-6)


def test_clip_grad_norm_and_zero_grad_with_foreach(torch):
    g = torch.Generator().manual_seed(41)
    cpu = [torch.randn(n, generator=g).requires_grad_() for n in (10, 1000)]
    dev = [p.detach().to("metalx").requires_grad_() for p in cpu]
    for c, d in zip(cpu, dev):
        c.grad = torch.randn(c.shape, generator=g) * 3
        d.grad = c.grad.to("metalx")
    norm_c = torch.nn.utils.clip_grad_norm_(cpu, 1.0, foreach=True)
    norm_d = torch.nn.utils.clip_grad_norm_(dev, 1.0, foreach=True)
    torch.testing.assert_close(norm_d.cpu(), norm_c)
    for c, d in zip(cpu, dev):
        torch.testing.assert_close(d.grad.cpu(), c.grad)
    torch.nn.utils.clip_grad_value_(dev, 0.01, foreach=True)
    torch.nn.utils.clip_grad_value_(cpu, 0.01, foreach=True)
    for c, d in zip(cpu, dev):
        torch.testing.assert_close(d.grad.cpu(), c.grad)
    opt = torch.optim.SGD(dev, lr=0.1, foreach=True)
    opt.zero_grad(set_to_none=False)
    assert all(p.grad.cpu().eq(0).all() for p in dev)


@pytest.mark.parametrize("cls", [torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD])
def test_fused_steps_with_amp_scaling_match_cpu(torch, cls):
    # What GradScaler hands a fused optimizer: grad_scale and found_inf on the device;
    # a step with found_inf set changes nothing (Adam's step counts are taken back).
    def run(device):
        g = torch.Generator().manual_seed(51)
        params = [torch.randn(n, generator=g).to(device).requires_grad_() for n in (4, 3000)]
        kwargs = dict(lr=0.01, fused=True) | (dict(momentum=0.9) if cls is torch.optim.SGD else {})
        opt = cls(params, **kwargs)
        for found in (0.0, 1.0, 0.0):
            for p in params:
                p.grad = (torch.randn(p.shape, generator=g) * 8).to(device)
            opt.grad_scale = torch.tensor(8.0, device=device)
            opt.found_inf = torch.tensor(found, device=device)
            opt.step()
        return [p.detach().cpu() for p in params], [
            {k: v.cpu() for k, v in opt.state[p].items() if torch.is_tensor(v)} for p in params]

    cpu = run("cpu")
    torch.metalx.reset_fallback_stats()
    dev = run("metalx")
    assert torch.metalx.fallback_stats() == {}
    assert_training_matches(cpu, dev, torch.float32)


def test_pow_of_negative_bases_and_nan_in_maximum_and_clamp_match_cpu(torch):
    a = [torch.tensor([-2.0, -0.5, 0.0, 1.5, float("nan"), -3.0]), torch.tensor([-1.0, 2.0])]
    da = to_dev(a)
    for exponent in (3.0, 2.0, -1.0, 0.5, 1.5, 0.0):
        for c, d in zip(torch._foreach_pow(a, exponent), torch._foreach_pow(da, exponent)):
            torch.testing.assert_close(d.cpu(), c, equal_nan=True)
    b = [torch.tensor([float("nan"), 1.0, -1.0, 0.0, 2.0, 5.0]), torch.tensor([0.0, float("nan")])]
    db = to_dev(b)
    for fn in (torch._foreach_maximum, torch._foreach_minimum, torch._foreach_clamp_min, torch._foreach_clamp_max):
        for c, d in zip(fn(a, b), fn(da, db)):
            torch.testing.assert_close(d.cpu(), c, equal_nan=True)
        for c, d in zip(fn(a, float("nan")), fn(da, float("nan"))):
            torch.testing.assert_close(d.cpu(), c, equal_nan=True)
    for c, d in zip(torch._foreach_sign(a), torch._foreach_sign(da)):
        torch.testing.assert_close(d.cpu(), c, equal_nan=True)


@pytest.mark.parametrize("flags", [{}, dict(fused=True)])
def test_training_a_small_model_matches_cpu(torch, flags):
    def run(device):
        torch.manual_seed(61)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
        x, y = torch.randn(8, 16), torch.randn(8, 4)
        model.to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=0.01, **flags)
        for _ in range(3):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
        return [p.detach().cpu() for p in model.parameters()]

    for c, d in zip(run("cpu"), run("metalx")):
        torch.testing.assert_close(d, c, rtol=1e-4, atol=1e-5)
