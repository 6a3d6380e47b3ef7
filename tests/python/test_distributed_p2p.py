"""Point-to-point, barriers, process-group setup and failures for metalx tensors over
Gloo: send/recv, isend/irecv, batch_isend_irecv, barrier, monitored_barrier,
init_process_group(device_id=metalx), new_group, and a peer that dies."""

import re
import time

import pytest

from distributed_harness import PG_TIMEOUT_S, run_ranks


def _p2p(rank, world_size):
    import torch
    import torch.distributed as dist

    out = {}
    peer = 1 - rank
    mine = torch.arange(12, dtype=torch.float32).reshape(3, 4) + 100 * rank
    # send/recv: rank 0 first sends, rank 1 first receives
    got = torch.empty(3, 4, device="metalx")
    if rank == 0:
        dist.send(mine.to("metalx"), dst=peer)
        dist.recv(got, src=peer)
    else:
        dist.recv(got, src=peer)
        dist.send(mine.to("metalx"), dst=peer)
    out["send_recv"] = got.cpu()
    # isend/irecv, non-contiguous receive buffer
    recv_base = torch.zeros(4, 6, device="metalx")
    recv_view = recv_base[:, ::2]
    works = [dist.isend((mine.t() * 2).to("metalx").contiguous(), dst=peer), dist.irecv(recv_view, src=peer)]
    for w in works:
        w.wait()
    out["isend_irecv"] = recv_base.cpu()
    # batch_isend_irecv with two tensors each way
    a = torch.empty(5, device="metalx")
    b = torch.empty(2, 2, dtype=torch.int64, device="metalx")
    ops = [dist.P2POp(dist.isend, torch.full((5,), rank + 0.5, device="metalx"), peer),
           dist.P2POp(dist.isend, torch.full((2, 2), rank + 7, dtype=torch.int64, device="metalx"), peer),
           dist.P2POp(dist.irecv, a, peer), dist.P2POp(dist.irecv, b, peer)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    out["batch"] = (a.cpu(), b.cpu())
    # barriers
    dist.barrier()
    dist.barrier(async_op=True).wait()
    dist.monitored_barrier(timeout=__import__("datetime").timedelta(seconds=20))
    # a subgroup made by new_group serves metalx too
    sub = dist.new_group([0, 1])
    s = torch.full((3,), float(rank + 1), device="metalx")
    dist.all_reduce(s, group=sub)
    out["new_group"] = s.cpu()
    from metalx.distributed import serves_metalx

    out["serves"] = (serves_metalx(), serves_metalx(sub))
    return out


@pytest.fixture(scope="module")
def p2p():
    return run_ranks(_p2p, 2)


def test_send_recv(torch, p2p):
    for rank, r in enumerate(p2p):
        expected = torch.arange(12, dtype=torch.float32).reshape(3, 4) + 100 * (1 - rank)
        assert torch.equal(r["send_recv"], expected)


def test_isend_irecv_into_a_view(torch, p2p):
    for rank, r in enumerate(p2p):
        peer = torch.arange(12, dtype=torch.float32).reshape(3, 4) + 100 * (1 - rank)
        got = r["isend_irecv"]
        assert torch.equal(got[:, ::2], peer.t() * 2)
        assert torch.equal(got[:, 1::2], torch.zeros(4, 3))


def test_batch_isend_irecv(torch, p2p):
    for rank, r in enumerate(p2p):
        a, b = r["batch"]
        assert torch.equal(a, torch.full((5,), 1 - rank + 0.5))
        assert torch.equal(b, torch.full((2, 2), 1 - rank + 7, dtype=torch.int64))


def test_new_group_and_barriers(torch, p2p):
    for r in p2p:
        assert torch.equal(r["new_group"], torch.full((3,), 3.0))
        assert r["serves"] == (True, True)


def _device_id_init(rank, world_size):
    import torch
    import torch.distributed as dist

    t = torch.full((4,), float(rank), device="metalx")
    dist.all_reduce(t)
    dist.barrier()  # on the bound device
    pg = dist.distributed_c10d._get_default_group()
    return (t.cpu(), str(pg.bound_device_id), dist.get_backend())


def test_init_process_group_with_metalx_device_id(torch):
    # no backend name: torch picks metalx's default backend, Gloo
    results = run_ranks(_device_id_init, 2, init_kwargs={"backend": None, "device_id": torch.device("metalx", 0)})
    for t, device, backend in results:
        assert torch.equal(t, torch.full((4,), 1.0))
        assert device == "metalx:0" and backend == "gloo"


def _dead_peer(rank, world_size):
    import os

    import torch
    import torch.distributed as dist

    t = torch.ones(1000, device="metalx")
    dist.all_reduce(t)  # both alive: works
    if rank == 1:
        os._exit(3)  # dies without a word
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        t.cpu()
        return ("no error", time.monotonic() - start)
    except Exception as e:
        return (f"{type(e).__name__}: {e}", time.monotonic() - start)


def test_dead_peer_gives_an_error_within_the_timeout(torch):
    start = time.monotonic()
    results = run_ranks(_dead_peer, 2, dying_ranks=(1,))
    assert results[1] is None
    message, waited = results[0]
    assert message != "no error"
    assert waited < PG_TIMEOUT_S + 5, f"the error took {waited:.0f} s: {message}"
    assert time.monotonic() - start < PG_TIMEOUT_S + 60


HANG_TIMEOUT_S = 3


def _hung_peer(rank, world_size):
    import torch
    import torch.distributed as dist

    t = torch.ones(1000, device="metalx")
    if rank == 1:
        time.sleep(3 * HANG_TIMEOUT_S)  # alive but late: rank 0's collective times out
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        return ("no error", time.monotonic() - start)
    except Exception as e:
        return (f"{type(e).__name__}: {e}", time.monotonic() - start)


def test_hung_peer_times_out_with_an_error(torch):
    import datetime

    results = run_ranks(_hung_peer, 2, init_kwargs={"timeout": datetime.timedelta(seconds=HANG_TIMEOUT_S)})
    message, waited = results[0]
    assert message != "no error"
    assert "timed out" in message.lower() or "timeout" in message.lower(), message
    assert waited < HANG_TIMEOUT_S + 5


def _mismatched_shapes(rank, world_size):
    import torch
    import torch.distributed as dist

    t = torch.ones(4 + rank, device="metalx")  # rank 0: 4 elements, rank 1: 5
    try:
        dist.all_reduce(t)
        return "no error"
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def test_mismatched_shapes_are_reported_with_debug_detail(torch, monkeypatch):
    # Spawned ranks inherit the variable; torch.distributed reads it at import.
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")
    for rank, message in enumerate(run_ranks(_mismatched_shapes, 2)):
        assert "Detected mismatch between collectives" in message, message
        assert f"TensorShape=[{4 + rank}]" in message, message
        # torch's checker sees the metalx tensors, not the CPU views Gloo gets
        assert "device=metalx" in message and "device=cpu" not in message, message


TORCHRUN_SCRIPT = """
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group(device_id=torch.device("metalx", 0))
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(torch.nn.Linear(8, 4).to("metalx"))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 8, generator=torch.Generator().manual_seed(rank)).to("metalx")
model(x).square().mean().backward()
opt.step()
w = model.module.weight.detach()
highest = w.clone()
dist.all_reduce(highest, op=dist.ReduceOp.MAX)
print(f"rank {rank}/{world} {dist.get_backend()} same={torch.equal(highest.cpu(), w.cpu())}", flush=True)
dist.destroy_process_group()
"""


def test_torchrun_launches_metalx_ranks(tmp_path):
    """The README's command: torchrun starts the ranks, DDP keeps their parameters equal."""
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text(TORCHRUN_SCRIPT)
    import socket

    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**__import__("os").environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
         "--master-port", str(port), str(script)],
        capture_output=True, text=True, timeout=PG_TIMEOUT_S + 120, env=env,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    # Both ranks write to one pipe: their lines may run together.
    reports = sorted(re.findall(r"rank \d/\d gloo same=(?:True|False)", run.stdout))
    assert reports == ["rank 0/2 gloo same=True", "rank 1/2 gloo same=True"], run.stdout
