"""torch.distributed collectives on metalx tensors (Gloo), against the same collective
on CPU tensors with Gloo in the same process group.

Each rank runs every collective twice, on metalx tensors and on CPU tensors holding the
same values, and returns both; the tests compare them (Gloo reduces both in the same
code, so results are equal exactly) and check that results are metalx tensors. The
jobs run once per module (2 ranks, and 4 for a few collectives) to keep the suite
short; each test checks its part of the results.
"""

import pytest

from distributed_harness import run_ranks

FLOAT_DTYPES = ("float32", "float16", "bfloat16")
INT_DTYPES = ("int8", "uint8", "int32", "int64")
FLOAT_OPS = ("SUM", "AVG", "MIN", "MAX", "PRODUCT")
INT_OPS = ("SUM", "MIN", "MAX", "PRODUCT", "BAND", "BOR", "BXOR")


def _values(dtype_name, rank, seed, shape=(5, 7)):
    """The same CPU values on every call: rank- and seed-dependent."""
    import torch

    dtype = getattr(torch, dtype_name)
    g = torch.Generator().manual_seed(1000 * rank + seed)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 2).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    low, high = (0, 256) if dtype == torch.uint8 else (-6, 7)
    return torch.randint(low, high, shape, generator=g).to(dtype)


def _both(fn, cpu_tensors):
    """fn on metalx copies and on CPU copies of `cpu_tensors`: ((metalx outs on CPU,
    devices), CPU outs), or the error each raised."""
    import torch

    def attempt(tensors):
        try:
            outs = fn(*tensors)
            return [o.cpu() for o in outs], [str(o.device) for o in outs]
        except Exception as e:  # the same bad input must fail the same way
            return type(e).__name__, None

    metalx = attempt([t.to("metalx") for t in cpu_tensors])
    torch.metalx.synchronize()
    cpu = attempt([t.clone() for t in cpu_tensors])
    return metalx, cpu


def _collectives(rank, world_size):
    import torch
    import torch.distributed as dist

    R = dist.ReduceOp
    out = {}

    def all_reduce(op):
        def f(t):
            dist.all_reduce(t, op=getattr(R, op))
            return [t]
        return f

    for dtype in FLOAT_DTYPES + INT_DTYPES + ("bool",):
        ops = FLOAT_OPS if dtype in FLOAT_DTYPES else INT_OPS
        for i, op in enumerate(ops + (("AVG",) if dtype not in FLOAT_DTYPES else ())):
            out[f"all_reduce/{dtype}/{op}"] = _both(all_reduce(op), [_values(dtype, rank, i)])

    def broadcast(t):
        dist.broadcast(t, src=world_size - 1)
        return [t]

    def all_gather(t):
        outs = [torch.empty_like(t) for _ in range(world_size)]
        dist.all_gather(outs, t)
        return outs

    def all_gather_into_tensor(t):
        o = t.new_empty((world_size * t.shape[0],) + t.shape[1:])
        dist.all_gather_into_tensor(o, t)
        return [o]

    def reduce_scatter_tensor(op):
        def f(t):
            o = t.new_empty((t.shape[0] // world_size,) + t.shape[1:])
            dist.reduce_scatter_tensor(o, t, op=getattr(R, op))
            return [o]
        return f

    def reduce(t):
        dist.reduce(t, dst=0)
        return [t]

    def gather(t):
        outs = [torch.empty_like(t) for _ in range(world_size)] if rank == 0 else None
        dist.gather(t, outs, dst=0)
        return outs if rank == 0 else [t]

    def scatter(*ts):
        o = torch.empty_like(ts[0])
        dist.scatter(o, list(ts) if rank == 0 else None, src=0)
        return [o]

    def all_to_all_single(t):
        o = torch.empty_like(t)
        dist.all_to_all_single(o, t)
        return [o]

    def all_to_all_single_uneven(t):
        # rank r sends r + 1 + i rows to rank i
        send = [rank + 1 + i for i in range(world_size)]
        recv = [i + 1 + rank for i in range(world_size)]
        src = t[: sum(send)]
        o = t.new_empty((sum(recv),) + t.shape[1:])
        dist.all_to_all_single(o, src, output_split_sizes=recv, input_split_sizes=send)
        return [o]

    for dtype in ("float32", "float16", "bfloat16", "int64", "bool"):
        rows = 4 * world_size
        out[f"broadcast/{dtype}"] = _both(broadcast, [_values(dtype, rank, 50, (rows, 3))])
        out[f"all_gather/{dtype}"] = _both(all_gather, [_values(dtype, rank, 51, (rows, 3))])
        out[f"all_gather_into_tensor/{dtype}"] = _both(all_gather_into_tensor, [_values(dtype, rank, 52, (rows, 3))])
        out[f"gather/{dtype}"] = _both(gather, [_values(dtype, rank, 53, (rows, 3))])
        out[f"scatter/{dtype}"] = _both(scatter, [_values(dtype, rank, 60 + i, (rows, 3)) for i in range(world_size)])
        out[f"all_to_all_single/{dtype}"] = _both(all_to_all_single, [_values(dtype, rank, 54, (rows, 3))])
    for dtype in ("float32", "float16", "bfloat16", "int64"):
        rows = 4 * world_size
        for op in ("SUM", "MAX") + (("AVG",) if dtype != "int64" else ()):
            out[f"reduce_scatter_tensor/{dtype}/{op}"] = _both(reduce_scatter_tensor(op),
                                                               [_values(dtype, rank, 55, (rows, 3))])
        out[f"reduce/{dtype}"] = _both(reduce, [_values(dtype, rank, 56, (rows, 3))])
    out["all_to_all_single_uneven/float32"] = _both(all_to_all_single_uneven,
                                                    [_values("float32", rank, 57, (4 * world_size * world_size, 3))])
    return out


@pytest.fixture(scope="module")
def two_ranks():
    return run_ranks(_collectives, 2)


def _check(results, name):
    for rank, got in enumerate(results):
        (metalx, devices), (cpu, _) = got[name]
        assert not isinstance(cpu, str) or metalx == cpu, f"{name} rank {rank}: metalx raised {metalx}, CPU {cpu}"
        if isinstance(cpu, str):
            continue  # both raised the same error (e.g. AVG of integers)
        assert not isinstance(metalx, str), f"{name} rank {rank}: metalx raised {metalx}, CPU did not"
        assert all(d.startswith("metalx") for d in devices), f"{name}: results on {devices}"
        assert len(metalx) == len(cpu)
        for m, c in zip(metalx, cpu):
            assert m.dtype == c.dtype and m.shape == c.shape
            assert m.equal(c), f"{name} rank {rank}:\nmetalx {m}\ncpu {c}"


def test_gloo_serves_metalx_in_torch_tables(torch):
    import torch.distributed as dist

    assert "metalx" in dist.Backend.backend_capability["gloo"]
    assert dist.Backend.default_device_backend_map["metalx"] == "gloo"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", FLOAT_OPS)
def test_all_reduce_floats(two_ranks, dtype, op):
    _check(two_ranks, f"all_reduce/{dtype}/{op}")


@pytest.mark.parametrize("dtype", INT_DTYPES + ("bool",))
@pytest.mark.parametrize("op", INT_OPS + ("AVG",))
def test_all_reduce_integers_and_bool(two_ranks, dtype, op):
    _check(two_ranks, f"all_reduce/{dtype}/{op}")


def test_all_reduce_really_reduces(two_ranks):
    # Guards the comparison itself: CPU Gloo's sum is the sum of both ranks' inputs.
    import torch

    (_, _), (cpu, _) = two_ranks[0]["all_reduce/int64/SUM"]
    expected = _values("int64", 0, 0) + _values("int64", 1, 0)
    assert torch.equal(cpu[0], expected)


@pytest.mark.parametrize("collective", ["broadcast", "all_gather", "all_gather_into_tensor", "gather", "scatter",
                                        "all_to_all_single"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64", "bool"])
def test_data_movement(two_ranks, collective, dtype):
    _check(two_ranks, f"{collective}/{dtype}")


@pytest.mark.parametrize("name", ["reduce_scatter_tensor/float32/SUM", "reduce_scatter_tensor/float32/MAX",
                                  "reduce_scatter_tensor/float32/AVG", "reduce_scatter_tensor/float16/SUM",
                                  "reduce_scatter_tensor/float16/AVG", "reduce_scatter_tensor/bfloat16/SUM",
                                  "reduce_scatter_tensor/bfloat16/AVG", "reduce_scatter_tensor/int64/SUM",
                                  "reduce_scatter_tensor/int64/MAX", "reduce/float32", "reduce/float16",
                                  "reduce/bfloat16", "reduce/int64", "all_to_all_single_uneven/float32"])
def test_reductions_and_uneven(two_ranks, name):
    _check(two_ranks, name)


def _four_rank_collectives(rank, world_size):
    import torch.distributed as dist

    out = {}
    R = dist.ReduceOp

    def all_reduce(op):
        def f(t):
            dist.all_reduce(t, op=op)
            return [t]
        return f

    def all_gather_into_tensor(t):
        o = t.new_empty((world_size * t.shape[0],) + t.shape[1:])
        dist.all_gather_into_tensor(o, t)
        return [o]

    def reduce_scatter_tensor(t):
        o = t.new_empty((t.shape[0] // world_size,) + t.shape[1:])
        dist.reduce_scatter_tensor(o, t)
        return [o]

    def broadcast(t):
        dist.broadcast(t, src=2)
        return [t]

    out["all_reduce/float32/SUM"] = _both(all_reduce(R.SUM), [_values("float32", rank, 1)])
    out["all_reduce/bfloat16/AVG"] = _both(all_reduce(R.AVG), [_values("bfloat16", rank, 2)])
    out["all_reduce/int32/BXOR"] = _both(all_reduce(R.BXOR), [_values("int32", rank, 3)])
    out["all_gather_into_tensor/float32"] = _both(all_gather_into_tensor, [_values("float32", rank, 4, (8, 3))])
    out["reduce_scatter_tensor/float32"] = _both(reduce_scatter_tensor, [_values("float32", rank, 5, (8, 3))])
    out["broadcast/int64"] = _both(broadcast, [_values("int64", rank, 6)])
    return out


@pytest.fixture(scope="module")
def four_ranks():
    return run_ranks(_four_rank_collectives, 4)


@pytest.mark.parametrize("name", ["all_reduce/float32/SUM", "all_reduce/bfloat16/AVG", "all_reduce/int32/BXOR",
                                  "all_gather_into_tensor/float32", "reduce_scatter_tensor/float32",
                                  "broadcast/int64"])
def test_four_ranks(four_ranks, name):
    _check(four_ranks, name)
