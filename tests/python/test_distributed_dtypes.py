"""Collectives on metalx tensors of the dtypes Gloo lacks: int16, uint16, uint32, uint64.

CPU Gloo raises "Invalid scalar type" for them (checked here), so the results are
compared with the mathematically expected ones, computed here from every rank's inputs
with Python integers: reductions modulo 2^bits (the wrapped result torch's own integer
arithmetic gives: int16 32767 + 1 == -32768), MIN/MAX in the dtype's own order (unsigned
for the u-types, also above 2^63), bitwise ops on the bits; values that only move must
arrive bit for bit.
"""

import pytest

from distributed_harness import run_ranks

DTYPES = ("int16", "uint16", "uint32", "uint64")
OPS = ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR")
BITS = {"int16": 16, "uint16": 16, "uint32": 32, "uint64": 64}
SIGNED_CARRIER = {16: "int16", 32: "int32", 64: "int64"}
N = 12


def _ints(dtype_name, rank, seed, n=N):
    """Python ints in the dtype's range: its extremes, values near them, and some
    rank-dependent ones (so that sums and products overflow)."""
    import random

    bits = BITS[dtype_name]
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dtype_name == "int16" else (0, (1 << bits) - 1)
    rnd = random.Random(1000 * rank + seed)
    edges = [lo, hi, hi - rank, lo + rank, 0, 1 + rank, (hi + lo) // 2 + 3 * rank]
    return [edges[i] if i < len(edges) else rnd.randint(lo, hi) for i in range(n)]


def _tensor(torch, values, dtype_name):
    """A CPU tensor of the dtype holding `values`, made through the signed type of the
    same size (torch.tensor does not take every unsigned value)."""
    bits = BITS[dtype_name]
    signed = [v - (1 << bits) if v >= (1 << (bits - 1)) else v for v in (x % (1 << bits) for x in values)]
    return torch.tensor(signed, dtype=getattr(torch, SIGNED_CARRIER[bits])).view(getattr(torch, dtype_name))


def _values(torch, t):
    """A tensor's elements as Python ints in the dtype's own range."""
    dtype_name = str(t.dtype).removeprefix("torch.")
    bits = BITS[dtype_name]
    flat = t.contiguous().view(getattr(torch, SIGNED_CARRIER[bits])).reshape(-1).tolist()
    return [_in_range(v, dtype_name) for v in flat]


def _in_range(v, dtype_name):
    bits = BITS[dtype_name]
    v %= 1 << bits
    return v - (1 << bits) if dtype_name == "int16" and v >= (1 << (bits - 1)) else v


def _reduce(values_per_rank, op, dtype_name):
    import functools
    import operator

    combine = {"SUM": operator.add, "PRODUCT": operator.mul, "MIN": min, "MAX": max, "BAND": operator.and_,
               "BOR": operator.or_, "BXOR": operator.xor}[op]
    bits = BITS[dtype_name]
    if op in ("BAND", "BOR", "BXOR"):  # on the bits
        values_per_rank = [[v % (1 << bits) for v in vs] for vs in values_per_rank]
    return [_in_range(functools.reduce(combine, column), dtype_name) for column in zip(*values_per_rank)]


def _collectives(rank, world_size):
    import torch
    import torch.distributed as dist

    R = dist.ReduceOp
    out = {}

    def attempt(name, fn):
        try:
            out[name] = fn()
        except Exception as e:
            out[name] = f"{type(e).__name__}: {e}"

    for dtype_name in DTYPES:
        dtype = getattr(torch, dtype_name)

        def mine(seed, n=N):
            return _tensor(torch, _ints(dtype_name, rank, seed, n), dtype_name).to("metalx")

        for i, op in enumerate(OPS):
            def all_reduce(op=op, i=i):
                t = mine(i)
                dist.all_reduce(t, op=getattr(R, op))
                return (str(t.device), t.dtype, t.cpu())
            attempt(f"all_reduce/{dtype_name}/{op}", all_reduce)

        def strided_all_reduce():
            base = mine(20, 2 * N).reshape(N, 2)
            untouched = base[:, 1].cpu()
            dist.all_reduce(base[:, 0])  # a column: staged (and widened) copy, written back
            return base[:, 0].cpu(), base[:, 1].cpu(), untouched
        attempt(f"all_reduce_column/{dtype_name}", strided_all_reduce)

        def average():
            dist.all_reduce(mine(21), op=R.AVG)
        attempt(f"all_reduce/{dtype_name}/AVG", average)

        def cpu_gloo():
            dist.all_reduce(_tensor(torch, _ints(dtype_name, rank, 22), dtype_name))
        attempt(f"cpu_gloo/{dtype_name}", cpu_gloo)

        def reduce():
            t = mine(23)
            dist.reduce(t, dst=1, op=R.MAX)
            return t.cpu()
        attempt(f"reduce/{dtype_name}", reduce)

        def reduce_scatter():
            o = torch.empty(N // world_size, dtype=dtype, device="metalx")
            dist.reduce_scatter_tensor(o, mine(24))
            return o.cpu()
        attempt(f"reduce_scatter/{dtype_name}", reduce_scatter)

        def broadcast():
            t = mine(25)
            dist.broadcast(t, src=world_size - 1)
            return t.cpu()
        attempt(f"broadcast/{dtype_name}", broadcast)

        def all_gather():
            outs = [torch.empty(N, dtype=dtype, device="metalx") for _ in range(world_size)]
            dist.all_gather(outs, mine(26))
            return [o.cpu() for o in outs]
        attempt(f"all_gather/{dtype_name}", all_gather)

        def all_gather_into_tensor():
            o = torch.empty(world_size * N, dtype=dtype, device="metalx")
            dist.all_gather_into_tensor(o, mine(27))
            return o.cpu()
        attempt(f"all_gather_into_tensor/{dtype_name}", all_gather_into_tensor)

        def all_to_all_single():
            o = torch.empty(N, dtype=dtype, device="metalx")
            dist.all_to_all_single(o, mine(28))
            return o.cpu()
        attempt(f"all_to_all_single/{dtype_name}", all_to_all_single)

        def gather_scatter():
            gathered = [torch.empty(N, dtype=dtype, device="metalx") for _ in range(world_size)] if rank == 0 else None
            dist.gather(mine(29), gathered, dst=0)
            o = torch.empty(N, dtype=dtype, device="metalx")
            dist.scatter(o, [mine(30 + r) for r in range(world_size)] if rank == 0 else None, src=0)
            return ([g.cpu() for g in gathered] if gathered else None), o.cpu()
        attempt(f"gather_scatter/{dtype_name}", gather_scatter)

        def send_recv():
            got = torch.empty(N, dtype=dtype, device="metalx")
            peer = rank ^ 1
            if rank % 2 == 0:
                dist.send(mine(31), dst=peer)
                dist.recv(got, src=peer)
            else:
                dist.recv(got, src=peer)
                dist.send(mine(31), dst=peer)
            return got.cpu()
        attempt(f"send_recv/{dtype_name}", send_recv)
    return out


@pytest.fixture(scope="module")
def two_ranks():
    return run_ranks(_collectives, 2)


def _inputs(dtype_name, seed, world_size, n=N):
    return [_ints(dtype_name, r, seed, n) for r in range(world_size)]


def _ok(result, name):
    got = result[name]
    assert not isinstance(got, str), f"{name}: {got}"
    return got


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_all_reduce(torch, two_ranks, dtype_name, op):
    expected = _reduce(_inputs(dtype_name, OPS.index(op), 2), op, dtype_name)
    for r in two_ranks:
        device, dtype, t = _ok(r, f"all_reduce/{dtype_name}/{op}")
        assert device.startswith("metalx") and dtype == getattr(torch, dtype_name)
        assert _values(torch, t) == expected


def test_int16_sum_wraps_as_int16_arithmetic_does(torch, two_ranks):
    # The reference's modulo, checked against torch's own int16 addition.
    a, b = (_tensor(torch, _ints("int16", r, 0), "int16") for r in range(2))
    assert _values(torch, a + b) == _reduce(_inputs("int16", 0, 2), "SUM", "int16")
    assert (a + b)[1].item() == 32767 + 32767 - 65536  # both ranks' largest int16: wrapped to -2
    assert _values(torch, two_ranks[0]["all_reduce/int16/SUM"][2]) == _values(torch, a + b)


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_all_reduce_of_a_column_writes_the_column_only(torch, two_ranks, dtype_name):
    columns = [[v for i, v in enumerate(_ints(dtype_name, r, 20, 2 * N)) if i % 2 == 0] for r in range(2)]
    expected = _reduce(columns, "SUM", dtype_name)
    for r in two_ranks:
        reduced, other, untouched = _ok(r, f"all_reduce_column/{dtype_name}")
        assert _values(torch, reduced) == expected
        assert _values(torch, other) == _values(torch, untouched)


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_average_of_integers_raises_and_cpu_gloo_lacks_the_dtype(two_ranks, dtype_name):
    for r in two_ranks:
        assert "ReduceOp.AVG" in r[f"all_reduce/{dtype_name}/AVG"]
        assert "Invalid scalar type" in r[f"cpu_gloo/{dtype_name}"]  # why the reference is computed here


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_reduce_and_reduce_scatter(torch, two_ranks, dtype_name):
    expected_max = _reduce(_inputs(dtype_name, 23, 2), "MAX", dtype_name)
    assert _values(torch, _ok(two_ranks[1], f"reduce/{dtype_name}")) == expected_max
    expected_sum = _reduce(_inputs(dtype_name, 24, 2), "SUM", dtype_name)
    for rank, r in enumerate(two_ranks):
        half = N // 2
        assert _values(torch, _ok(r, f"reduce_scatter/{dtype_name}")) == expected_sum[rank * half:(rank + 1) * half]


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_values_move_bit_for_bit(torch, two_ranks, dtype_name):
    sent = {seed: _inputs(dtype_name, seed, 2) for seed in range(25, 32)}
    for rank, r in enumerate(two_ranks):
        assert _values(torch, _ok(r, f"broadcast/{dtype_name}")) == sent[25][1]
        assert [_values(torch, o) for o in _ok(r, f"all_gather/{dtype_name}")] == sent[26]
        assert _values(torch, _ok(r, f"all_gather_into_tensor/{dtype_name}")) == sent[27][0] + sent[27][1]
        half = N // 2
        assert _values(torch, _ok(r, f"all_to_all_single/{dtype_name}")) == \
            sent[28][0][rank * half:(rank + 1) * half] + sent[28][1][rank * half:(rank + 1) * half]
        gathered, scattered = _ok(r, f"gather_scatter/{dtype_name}")
        if rank == 0:
            assert [_values(torch, g) for g in gathered] == sent[29]
        assert _values(torch, scattered) == _ints(dtype_name, 0, 30 + rank)
        assert _values(torch, _ok(r, f"send_recv/{dtype_name}")) == sent[31][1 - rank]


def _four_ranks(rank, world_size):
    import torch
    import torch.distributed as dist

    out = {}
    for dtype_name in DTYPES:
        for op in ("SUM", "PRODUCT", "MAX"):
            t = _tensor(torch, _ints(dtype_name, rank, 40), dtype_name).to("metalx")
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
            out[f"{dtype_name}/{op}"] = t.cpu()
    return out


@pytest.fixture(scope="module")
def four_ranks():
    return run_ranks(_four_ranks, 4)


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_all_reduce_on_four_ranks(torch, four_ranks, dtype_name):
    results = four_ranks
    for op in ("SUM", "PRODUCT", "MAX"):
        expected = _reduce(_inputs(dtype_name, 40, 4), op, dtype_name)
        for r in results:
            assert _values(torch, r[f"{dtype_name}/{op}"]) == expected, op
