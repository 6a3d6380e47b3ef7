"""metalx collectives and streams: Gloo reads a tensor only after the work queued on
the current metalx stream has produced it, writes it where later metalx work sees the
result, and async work handles complete in order. Also non-contiguous tensors (Gloo
gets a contiguous copy, the result lands in the original view)."""

import pytest

from distributed_harness import run_ranks

N = 1 << 20  # big enough that the queued adds are still running when the collective starts
ADDS = 100


def _streams(rank, world_size):
    import torch
    import torch.distributed as dist

    out = {}
    # The values come from many queued adds; nothing synchronises before all_reduce.
    t = torch.zeros(N, dtype=torch.int64, device="metalx")
    for _ in range(ADDS):
        t.add_(rank + 1)
    dist.all_reduce(t)
    out["busy_current_stream"] = (t + 1).cpu()  # later metalx work sees the result

    # The same on a side stream made current: the collective waits for that stream.
    s = torch.metalx.Stream()
    with torch.metalx.stream(s):
        u = torch.zeros(N, dtype=torch.int64, device="metalx")
        for _ in range(ADDS):
            u.add_(rank + 2)
        work = dist.all_reduce(u, async_op=True)
        work.wait()
        out["side_stream_async"] = (u * 2).cpu()
    torch.metalx.synchronize()

    # Several async collectives in flight, waited in reverse order.
    xs = [torch.full((1000,), float(rank + i), device="metalx") for i in range(4)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    for w in reversed(works):
        w.wait()
    out["async_many"] = [x.cpu() for x in xs]
    y = torch.full((10,), float(rank + 1), device="metalx")
    fut = dist.all_reduce(y, async_op=True).get_future()
    value = fut.wait()
    out["async_future"] = (str(value[0].device), value[0].cpu(), y.cpu())

    # Non-contiguous: every other column of a metalx matrix.
    g = torch.Generator().manual_seed(rank)
    base_cpu = torch.randn(6, 8, generator=g)
    base = base_cpu.to("metalx")
    view = base[:, ::2]
    dist.all_reduce(view)
    ref = base_cpu[:, ::2].contiguous()
    dist.all_reduce(ref)
    out["non_contiguous"] = (base.cpu(), base_cpu, ref)
    tv = torch.randn(4, 6, generator=g).to("metalx").t()  # transposed view, broadcast from rank 0
    tv_cpu = tv.cpu().contiguous()
    dist.broadcast(tv, src=0)
    dist.broadcast(tv_cpu, src=0)
    out["transposed_broadcast"] = (tv.cpu(), tv_cpu)
    outs = [torch.empty(4, 4, device="metalx")[:, ::2] for _ in range(world_size)]
    dist.all_gather(outs, torch.full((4, 2), float(rank + 5), device="metalx"))
    out["all_gather_non_contiguous_outputs"] = [o.cpu() for o in outs]
    return out


@pytest.fixture(scope="module")
def results():
    return run_ranks(_streams, 2)


def test_collective_waits_for_busy_current_stream(torch, results):
    expected = torch.full((N,), ADDS * (1 + 2) + 1, dtype=torch.int64)
    for r in results:
        assert torch.equal(r["busy_current_stream"], expected)


def test_collective_waits_for_side_stream_and_async_wait(torch, results):
    expected = torch.full((N,), ADDS * (2 + 3) * 2, dtype=torch.int64)
    for r in results:
        assert torch.equal(r["side_stream_async"], expected)


def test_many_async_collectives_waited_out_of_order(torch, results):
    for r in results:
        for i, x in enumerate(r["async_many"]):
            assert torch.equal(x, torch.full((1000,), float(i + (1 + i))))


def test_future_value_is_the_metalx_tensor(torch, results):
    for r in results:
        device, value, y = r["async_future"]
        assert device.startswith("metalx")
        assert torch.equal(value, torch.full((10,), 3.0)) and torch.equal(y, value)


def test_non_contiguous_all_reduce_writes_the_view_only(torch, results):
    for r in results:
        base, base_before, ref = r["non_contiguous"]
        assert torch.equal(base[:, ::2], ref)
        assert torch.equal(base[:, 1::2], base_before[:, 1::2])


def test_non_contiguous_broadcast_and_all_gather(torch, results):
    for r in results:
        got, ref = r["transposed_broadcast"]
        assert torch.equal(got, ref)
        for i, o in enumerate(r["all_gather_non_contiguous_outputs"]):
            assert torch.equal(o, torch.full((4, 2), float(i + 5)))
    assert torch.equal(results[0]["transposed_broadcast"][0], results[1]["transposed_broadcast"][0])
