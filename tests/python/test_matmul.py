"""Native matrix products (backend/ops/matmul.cpp, kernels/matmul.metal) against CPU
torch: mm, bmm, addmm, baddbmm, addbmm, addr, addmv/mv, dot/vdot over float32, float16
and bfloat16, transposed, strided and batch-strided operands read in place, partial
tiles, empty dimensions, long K, out=, in-place, alpha/beta (beta = 0 ignores NaN in
self), autograd through nn.Linear and matmul, and the CPU fallback for float64 and
integers. Native cases must not fall back."""

import math

import pytest
import torch
import torch.nn.functional as F

from device_checks import assert_native

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

DEV = "metalx"
FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g) * 2 - 1).to(dtype)


def tol(dtype, k=64):
    """Tolerance for a K-long float32-accumulated dot product of values in [-1, 1]:
    rounding of the inputs' products grows like sqrt(K); the result's own rounding is
    relative to the storage type."""
    if dtype == torch.float32:
        return dict(rtol=1.3e-6 * math.sqrt(max(k, 1)) * 4, atol=1e-5 * math.sqrt(max(k, 1)))
    eps = 1e-3 if dtype == torch.float16 else 8e-3
    return dict(rtol=2 * eps, atol=2 * eps * math.sqrt(max(k, 1)))


def reference(fn, *args, dtype):
    """CPU's result; for half types computed in float32 and rounded once, as CPU's
    kernels accumulate in float32 (and bfloat16 CPU matmuls may use other orders)."""
    if dtype == torch.float32:
        return fn(*args)
    return fn(*[a.float() if isinstance(a, torch.Tensor) else a for a in args]).to(dtype)


def check(got, want, dtype, k):
    assert got.device.type == DEV
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol(dtype, k))


SHAPES = [(1, 1, 1), (7, 5, 3), (64, 64, 64), (65, 63, 33), (130, 17, 200), (3, 129, 8)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mnk", SHAPES)
def test_mm_matches_cpu(mnk, dtype):
    m, n, k = mnk
    a, b = sample((m, k), dtype, 1), sample((k, n), dtype, 2)
    check(torch.mm(a.to(DEV), b.to(DEV)), reference(torch.mm, a, b, dtype=dtype), dtype, k)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_mm_reads_transposed_and_strided_operands_in_place(ta, tb, dtype):
    m, n, k = 37, 45, 70
    a = sample((k, m), dtype, 3).t() if ta else sample((m, k), dtype, 3)
    b = sample((n, k), dtype, 4).t() if tb else sample((k, n), dtype, 4)
    want = reference(torch.mm, a, b, dtype=dtype)
    da, db = a.to(DEV), b.to(DEV)
    da = da.t().contiguous().t() if ta else da  # keep the column-major layout on the device
    db = db.t().contiguous().t() if tb else db
    assert da.is_contiguous() != ta and db.is_contiguous() != tb
    check(torch.mm(da, db), want, dtype, k)
    # Every other column/row (non-unit strides in both dimensions of a view).
    big_a, big_b = sample((2 * m, 3 * k), dtype, 5), sample((2 * k, 2 * n), dtype, 6)
    va, vb = big_a[::2, 1::3], big_b[1::2, ::2]
    check(torch.mm(va.to(DEV)[:, :], big_b.to(DEV)[1::2, ::2]),
          reference(torch.mm, va, vb, dtype=dtype), dtype, k)
    check(torch.mm(big_a.to(DEV)[::2, 1::3], big_b.to(DEV)[1::2, ::2]), reference(torch.mm, va, vb, dtype=dtype),
          dtype, k)
    assert_native()


def test_mm_issues_no_copy_kernels_for_views():
    a = sample((70, 40), torch.float32, 7).to(DEV)
    b = sample((50, 70), torch.float32, 8).to(DEV)
    torch.metalx.synchronize()
    with torch.metalx.profiler.profile() as prof:
        torch.mm(a.t(), b.t())
    names = [c["name"] for c in prof.commands]
    assert names == ["matmul_gemm_float"], names


@pytest.mark.parametrize("k", [1024, 16384])
def test_long_k_within_cpu_tolerance(k):
    a, b = sample((9, k), torch.float32, 9), sample((k, 11), torch.float32, 10)
    want = (a.double() @ b.double())
    got = torch.mm(a.to(DEV), b.to(DEV)).cpu().double()
    cpu = (a @ b).double()
    # As close to the exact result as CPU's own float32 result is, within a factor.
    err, cpu_err = (got - want).abs().max().item(), (cpu - want).abs().max().item()
    assert err <= max(4 * cpu_err, 1e-6 * math.sqrt(k)), (err, cpu_err)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
def test_empty_dimensions(dtype):
    for m, n, k in [(0, 4, 5), (4, 0, 5), (4, 5, 0), (0, 0, 0)]:
        a, b = sample((m, k), dtype), sample((k, n), dtype)
        got = torch.mm(a.to(DEV), b.to(DEV))
        check(got, torch.mm(a, b), dtype, 1)
        c = torch.full((m, n), 2.0, dtype=dtype)
        check(torch.addmm(c.to(DEV), a.to(DEV), b.to(DEV), beta=0.5), torch.addmm(c, a, b, beta=0.5), dtype, 1)
    check(torch.bmm(torch.ones(0, 3, 4, dtype=dtype).to(DEV), torch.ones(0, 4, 2, dtype=dtype).to(DEV)),
          torch.ones(0, 3, 2, dtype=dtype), dtype, 1)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -2), (0, 1.5), (2, 0)])
def test_addmm_alpha_beta_and_bias_broadcast(beta, alpha, dtype):
    m, n, k = 33, 70, 20
    a, b = sample((m, k), dtype, 11), sample((k, n), dtype, 12)
    for bias in [sample((m, n), dtype, 13), sample((n,), dtype, 14), sample((1, n), dtype, 15), sample((m, 1), dtype, 16)]:
        want = reference(lambda s, x, y: torch.addmm(s, x, y, beta=beta, alpha=alpha), bias, a, b, dtype=dtype)
        check(torch.addmm(bias.to(DEV), a.to(DEV), b.to(DEV), beta=beta, alpha=alpha), want, dtype, k)
    assert_native()


def test_beta_zero_ignores_nan_in_self():
    a, b = sample((5, 6), torch.float32, 1), sample((6, 7), torch.float32, 2)
    nan = torch.full((5, 7), float("nan"))
    for fn in [lambda s, x, y: torch.addmm(s, x, y, beta=0),
               lambda s, x, y: torch.baddbmm(s.unsqueeze(0), x.unsqueeze(0), y.unsqueeze(0), beta=0),
               lambda s, x, y: torch.addbmm(s, x.unsqueeze(0), y.unsqueeze(0), beta=0),
               lambda s, x, y: torch.addmv(s[:, 0], x, y[:, 0], beta=0),
               lambda s, x, y: torch.addr(s, x[:, 0], y[0], beta=0)]:
        want = fn(nan, a, b)
        got = fn(nan.to(DEV), a.to(DEV), b.to(DEV)).cpu()
        assert not torch.isnan(got).any()
        torch.testing.assert_close(got, want)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
def test_out_and_inplace_forms(dtype):
    m, n, k = 19, 23, 29
    a, b, c = sample((m, k), dtype, 1), sample((k, n), dtype, 2), sample((m, n), dtype, 3)
    out = torch.empty(0, dtype=dtype, device=DEV)
    torch.mm(a.to(DEV), b.to(DEV), out=out)
    check(out, reference(torch.mm, a, b, dtype=dtype), dtype, k)
    # A non-contiguous out= (written through its strides or a temporary).
    out_t = torch.empty(n, m, dtype=dtype, device=DEV).t()
    torch.addmm(c.to(DEV), a.to(DEV), b.to(DEV), alpha=0.5, out=out_t)
    check(out_t, reference(lambda s, x, y: torch.addmm(s, x, y, alpha=0.5), c, a, b, dtype=dtype), dtype, k)
    d = c.to(DEV)
    d.addmm_(a.to(DEV), b.to(DEV), beta=2)
    check(d, reference(lambda s, x, y: s.addmm(x, y, beta=2), c, a, b, dtype=dtype), dtype, k)
    v = sample((k,), dtype, 4)
    mv_out = torch.empty(m, dtype=dtype, device=DEV)
    torch.mv(a.to(DEV), v.to(DEV), out=mv_out)
    check(mv_out, reference(torch.mv, a, v, dtype=dtype), dtype, k)
    dot_out = torch.empty((), dtype=dtype, device=DEV)
    torch.dot(v.to(DEV), v.to(DEV), out=dot_out)
    check(dot_out, reference(torch.dot, v, v, dtype=dtype), dtype, k)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
def test_bmm_and_baddbmm_with_batch_strides(dtype):
    bsz, m, n, k = 5, 21, 34, 40
    a, b = sample((bsz, m, k), dtype, 1), sample((bsz, k, n), dtype, 2)
    check(torch.bmm(a.to(DEV), b.to(DEV)), reference(torch.bmm, a, b, dtype=dtype), dtype, k)
    # Batch as the middle dimension (a permuted view), transposed matrices, expanded batch.
    ap = sample((m, bsz, k), dtype, 3)
    bt = sample((bsz, n, k), dtype, 4)
    be = sample((1, k, n), dtype, 5)
    check(torch.bmm(ap.to(DEV).permute(1, 0, 2), bt.to(DEV).transpose(1, 2)),
          reference(torch.bmm, ap.permute(1, 0, 2), bt.transpose(1, 2), dtype=dtype), dtype, k)
    check(torch.bmm(a.to(DEV), be.to(DEV).expand(bsz, k, n)),
          reference(torch.bmm, a, be.expand(bsz, k, n), dtype=dtype), dtype, k)
    s = sample((m, 1), dtype, 6)
    check(torch.baddbmm(s.to(DEV), a.to(DEV), b.to(DEV), beta=0.5, alpha=2),
          reference(lambda q, x, y: torch.baddbmm(q, x, y, beta=0.5, alpha=2), s, a, b, dtype=dtype), dtype, k)
    c = sample((bsz, m, n), dtype, 7)
    d = c.to(DEV)
    d.baddbmm_(a.to(DEV), b.to(DEV))
    check(d, reference(lambda q, x, y: q.baddbmm(x, y), c, a, b, dtype=dtype), dtype, k)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
def test_addbmm_sums_the_batches(dtype):
    bsz, m, n, k = 6, 17, 26, 12
    a, b, s = sample((bsz, m, k), dtype, 1), sample((bsz, k, n), dtype, 2), sample((n,), dtype, 3)
    want = reference(lambda q, x, y: torch.addbmm(q, x, y, beta=0.25, alpha=-1), s, a, b, dtype=dtype)
    check(torch.addbmm(s.to(DEV), a.to(DEV), b.to(DEV), beta=0.25, alpha=-1), want, dtype, bsz * k)
    c = sample((m, n), dtype, 4)
    d = c.to(DEV)
    d.addbmm_(a.to(DEV), b.to(DEV))
    check(d, reference(lambda q, x, y: q.addbmm(x, y), c, a, b, dtype=dtype), dtype, bsz * k)
    out = torch.empty(0, dtype=dtype, device=DEV)
    torch.addbmm(c.to(DEV), a.to(DEV), b.to(DEV), out=out)
    check(out, reference(torch.addbmm, c, a, b, dtype=dtype), dtype, bsz * k)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
def test_mv_addmv_dot_vdot_outer_addr(dtype):
    m, k = 45, 300
    A, x, s = sample((m, k), dtype, 1), sample((k,), dtype, 2), sample((m,), dtype, 3)
    check(torch.mv(A.to(DEV), x.to(DEV)), reference(torch.mv, A, x, dtype=dtype), dtype, k)
    At = sample((k, m), dtype, 4)
    check(torch.mv(At.to(DEV).t(), x.to(DEV)), reference(torch.mv, At.t(), x, dtype=dtype), dtype, k)
    xs = sample((2 * k,), dtype, 5)
    check(torch.mv(A.to(DEV), xs.to(DEV)[::2]), reference(torch.mv, A, xs[::2], dtype=dtype), dtype, k)
    check(torch.addmv(s.to(DEV), A.to(DEV), x.to(DEV), beta=0.5, alpha=3),
          reference(lambda q, a, v: torch.addmv(q, a, v, beta=0.5, alpha=3), s, A, x, dtype=dtype), dtype, k)
    check(torch.dot(x.to(DEV), x.to(DEV)), reference(torch.dot, x, x, dtype=dtype), dtype, k)
    check(torch.vdot(x.to(DEV), xs.to(DEV)[1::2]), reference(torch.vdot, x, xs[1::2], dtype=dtype), dtype, k)
    u, w = sample((m,), dtype, 6), sample((31,), dtype, 7)
    check(torch.outer(u.to(DEV), w.to(DEV)), torch.outer(u, w), dtype, 1)
    c = sample((m, 31), dtype, 8)
    check(torch.addr(c.to(DEV), u.to(DEV), w.to(DEV), beta=2, alpha=0.5),
          reference(lambda q, a, b: torch.addr(q, a, b, beta=2, alpha=0.5), c, u, w, dtype=dtype), dtype, 1)
    assert_native()


def test_matvec_runs_the_gemv_kernel():
    A, x = sample((40, 50), torch.float32).to(DEV), sample((50,), torch.float32).to(DEV)
    torch.metalx.synchronize()
    with torch.metalx.profiler.profile() as prof:
        torch.mv(A, x)
    assert [c["name"] for c in prof.commands] == ["matmul_gemv_float"]


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.int32])
def test_other_dtypes_fall_back_to_cpu(dtype):
    a = torch.arange(12).reshape(3, 4).to(dtype)
    b = torch.arange(20).reshape(4, 5).to(dtype)
    got = torch.mm(a.to(DEV), b.to(DEV))
    assert got.device.type == DEV
    assert torch.equal(got.cpu(), torch.mm(a, b))
    assert torch.metalx.fallback_stats() != {}
    assert torch.equal(torch.dot(a[0].to(DEV), a[1].to(DEV)).cpu(), torch.dot(a[0], a[1]))
    c = torch.ones(3, 3, dtype=dtype)
    assert torch.equal(torch.addr(c.to(DEV), a[:, 0].to(DEV), a[:, 1].to(DEV)).cpu(), torch.addr(c, a[:, 0], a[:, 1]))


def test_errors_match_cpu():
    a = torch.ones(3, 4, device=DEV)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.mm(a, torch.ones(5, 2, device=DEV))
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.mm(a, torch.ones(4, 2, device=DEV, dtype=torch.float16))
    with pytest.raises(RuntimeError, match="batch1 must be a 3D tensor"):
        torch.addbmm(torch.ones(3, 2, device=DEV), a, torch.ones(1, 4, 2, device=DEV))
    with pytest.raises(RuntimeError, match="1D tensors expected"):
        torch.dot(a, a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_autograd_through_linear_and_matmul(dtype):
    torch.manual_seed(0)
    lin = torch.nn.Linear(24, 40).to(dtype)
    x = torch.randn(3, 7, 24).to(dtype)
    w2 = torch.randn(40, 9).to(dtype)

    def run(device):
        m = torch.nn.Linear(24, 40).to(dtype).to(device)
        m.load_state_dict(lin.state_dict())
        xi = x.to(device).requires_grad_()
        wi = w2.to(device).requires_grad_()
        y = torch.matmul(F.gelu(m(xi)), wi)
        y.square().sum().backward()
        return [t.detach().cpu().float() for t in (y, xi.grad, wi.grad, m.weight.grad, m.bias.grad)]

    got, want = run(DEV), run("cpu")
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **(dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else
                                             dict(rtol=5e-2, atol=5e-1)))


def test_gradcheck_float32_against_float64():
    # gradcheck needs float64, which runs on the CPU: compare the native float32
    # gradients of addmm/bmm with CPU float64's instead.
    g = torch.Generator().manual_seed(1)
    s, a, b = (torch.randn(s, generator=g, dtype=torch.float64) for s in [(6, 5), (6, 8), (8, 5)])

    def grads(device, dtype):
        ts = [t.to(dtype).to(device).requires_grad_() for t in (s, a, b)]
        torch.addmm(*ts, beta=0.5, alpha=2).sin().sum().backward()
        return [t.grad.cpu().double() for t in ts]

    for g32, g64 in zip(grads(DEV, torch.float32), grads("cpu", torch.float64)):
        torch.testing.assert_close(g32, g64, rtol=1e-5, atol=1e-5)
