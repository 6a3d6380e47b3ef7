"""The GEMM's shape classes (backend/ops/matmul.cpp's gemmShape, kernels/matmul.metal):
skinny products (up to 16 rows, or up to 16 columns run as the transpose), narrow ones
(17..32 columns, or 17..32 rows run as the transpose), square ones, and mm's
matrix-vector fast path, each against CPU torch in every native dtype, with
transposed operands, a bias, partial blocks, K steps that are not whole, and long K.
Which kernel ran is checked through the profiler."""

import math

import pytest
import torch

from device_checks import assert_native
from test_matmul import DEV, FLOATS, check, reference, sample

pytestmark = pytest.mark.usefixtures("fallback_stats_reset")

KERNEL_DTYPE = {torch.float32: "float", torch.float16: "half", torch.bfloat16: "bfloat"}  # kernel name suffixes


def kernels_run(fn):
    torch.metalx.synchronize()
    with torch.metalx.profiler.profile() as prof:
        fn()
        torch.metalx.synchronize()
    return [c["name"] for c in prof.commands]


# (m, n, k, kernel family): each class, its edges, and both orientations.
CLASSES = [
    (8, 512, 128, "matmul_gemm_skinny"),   # an LSTM step's gate product
    (1, 70, 33, "matmul_gemm_skinny"),     # one row, row-major B: not the gemv path
    (16, 65, 200, "matmul_gemm_skinny"),
    (300, 5, 70, "matmul_gemm_skinny"),    # few columns: run as C^T = B^T A^T
    (130, 16, 9, "matmul_gemm_skinny"),
    (256, 32, 256, "matmul_gemm_narrow"),  # attention's P @ V at head width 32
    (70, 17, 64, "matmul_gemm_narrow"),
    (32, 300, 40, "matmul_gemm_narrow"),   # 17..32 rows: run transposed
    (17, 33, 20, "matmul_gemm_narrow"),
    (33, 33, 8, "matmul_gemm"),
    (128, 96, 100, "matmul_gemm"),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,n,k,family", CLASSES)
def test_shape_classes_match_cpu(m, n, k, family, dtype):
    a, b = sample((m, k), dtype, 1), sample((k, n), dtype, 2)
    da, db = a.to(DEV), b.to(DEV)
    out = []
    assert kernels_run(lambda: out.append(torch.mm(da, db))) == [f"{family}_{KERNEL_DTYPE[dtype]}"]
    check(out[0], reference(torch.mm, a, b, dtype=dtype), dtype, k)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,n,k", [(8, 100, 70), (100, 8, 70), (24, 90, 130), (90, 24, 130), (8, 8, 20)])
@pytest.mark.parametrize("ta,tb", [(False, True), (True, False), (True, True)])
def test_shape_classes_with_transposed_operands_and_bias(m, n, k, ta, tb, dtype):
    a = sample((k, m), dtype, 3).t() if ta else sample((m, k), dtype, 3)
    b = sample((n, k), dtype, 4).t() if tb else sample((k, n), dtype, 4)
    bias = sample((n,), dtype, 5)
    da = a.to(DEV).t().contiguous().t() if ta else a.to(DEV)
    db = b.to(DEV).t().contiguous().t() if tb else b.to(DEV)
    got = torch.addmm(bias.to(DEV), da, db, beta=0.5, alpha=-1.5)
    want = reference(lambda s, x, y: torch.addmm(s, x, y, beta=0.5, alpha=-1.5), bias, a, b, dtype=dtype)
    check(got, want, dtype, k)
    # A column bias (broadcast along rows) through the transposed path as well.
    col = sample((m, 1), dtype, 6)
    check(torch.addmm(col.to(DEV), da, db), reference(torch.addmm, col, a, b, dtype=dtype), dtype, k)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
def test_batched_small_products(dtype):
    # Attention's shapes at head width 32 (q @ k^T through a transposed view, P @ V) and
    # an RNN-like batch of skinny products.
    q, kk = sample((6, 40, 32), dtype, 7), sample((6, 40, 32), dtype, 8)
    p, v = sample((6, 40, 40), dtype, 9), sample((6, 40, 32), dtype, 10)
    x, w = sample((5, 4, 50), dtype, 11), sample((5, 50, 70), dtype, 12)
    check(torch.bmm(q.to(DEV), kk.to(DEV).transpose(1, 2)),
          reference(lambda s, t: torch.bmm(s, t.transpose(1, 2)), q, kk, dtype=dtype), dtype, 32)
    check(torch.bmm(p.to(DEV), v.to(DEV)), reference(torch.bmm, p, v, dtype=dtype), dtype, 40)
    check(torch.bmm(x.to(DEV), w.to(DEV)), reference(torch.bmm, x, w, dtype=dtype), dtype, 50)
    c = sample((5, 70, 4), dtype, 13)  # few columns, transposed, with a bias per batch
    check(torch.baddbmm(c.to(DEV), w.to(DEV).transpose(1, 2), x.to(DEV).transpose(1, 2), alpha=2),
          reference(lambda s, t, u: torch.baddbmm(s, t.transpose(1, 2), u.transpose(1, 2), alpha=2), c, w, x,
                    dtype=dtype), dtype, 50)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
def test_addbmm_in_every_class(dtype):
    for m, n in ((6, 70), (70, 6), (70, 24), (24, 70)):
        b1, b2, s = sample((3, m, 40), dtype, 14), sample((3, 40, n), dtype, 15), sample((m, n), dtype, 16)
        check(torch.addbmm(s.to(DEV), b1.to(DEV), b2.to(DEV), beta=0.5),
              reference(lambda t, u, w: torch.addbmm(t, u, w, beta=0.5), s, b1, b2, dtype=dtype), dtype, 120)
    assert_native()


@pytest.mark.parametrize("dtype", FLOATS)
def test_mm_with_one_column_or_row_runs_the_gemv_kernel(dtype):
    name = KERNEL_DTYPE[dtype]
    A, x = sample((70, 300), dtype, 17), sample((300, 1), dtype, 18)
    out = []
    assert kernels_run(lambda: out.append(torch.mm(A.to(DEV), x.to(DEV)))) == [f"matmul_gemv_{name}"]
    check(out[0], reference(torch.mm, A, x, dtype=dtype), dtype, 300)
    # One row times a column-major matrix (a linear layer on one token): B^T's rows are contiguous.
    row, W = sample((1, 300), dtype, 19), sample((90, 300), dtype, 20)
    bias = sample((90,), dtype, 21)
    out.clear()
    assert kernels_run(lambda: out.append(torch.addmm(bias.to(DEV), row.to(DEV), W.to(DEV).t(), alpha=0.5))) == [
        f"matmul_gemv_{name}"]
    check(out[0], reference(lambda s, r, w: torch.addmm(s, r, w.t(), alpha=0.5), bias, row, W, dtype=dtype), dtype,
          300)
    # The gemv path writes into strided outputs and reads a strided vector.
    C = torch.zeros(70, 3, dtype=dtype, device=DEV)
    xs = sample((300, 2), dtype, 22)
    torch.mm(A.to(DEV), xs.to(DEV)[:, 1:], out=C[:, 1:2])
    check(C[:, 1:2], reference(torch.mm, A, xs[:, 1:], dtype=dtype), dtype, 300)
    assert C[:, 0].abs().sum().item() == 0 and C[:, 2].abs().sum().item() == 0
    assert_native()


@pytest.mark.parametrize("m,n", [(9, 11), (11, 9), (1, 11), (11, 1), (24, 80), (200, 24)])
@pytest.mark.parametrize("k", [1024, 16384])
def test_long_k_within_cpu_tolerance_in_every_class(m, n, k):
    a, b = sample((m, k), torch.float32, 23), sample((k, n), torch.float32, 24)
    want = a.double() @ b.double()
    got = torch.mm(a.to(DEV), b.to(DEV)).cpu().double()
    cpu = (a @ b).double()
    err, cpu_err = (got - want).abs().max().item(), (cpu - want).abs().max().item()
    assert err <= max(4 * cpu_err, 1e-6 * math.sqrt(k)), (err, cpu_err)
    assert_native()


@pytest.mark.parametrize("k", [8, 20, 64, 70, 130])
def test_k_steps_that_are_not_whole(k):
    # Full blocks with K not a multiple of the K step (nor of 8): the simulator reads
    # float operands in place only where a step lies inside them.
    for m, n in ((64, 64), (128, 64), (8, 64), (64, 32)):
        a, b = sample((m, k), torch.float32, 25), sample((k, n), torch.float32, 26)
        check(torch.mm(a.to(DEV), b.to(DEV)), a @ b, torch.float32, k)
        # A broadcast row of B (stride 0 between rows) read in place.
        row = sample((1, n), torch.float32, 27)
        check(torch.mm(a.to(DEV), row.to(DEV).expand(k, n)), a @ row.expand(k, n), torch.float32, k)
    assert_native()

