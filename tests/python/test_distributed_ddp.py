"""DistributedDataParallel on metalx over Gloo: 2 processes with half a batch each
train to the same parameters as 1 process on the whole batch (computed here on the
CPU), with the default reducer, gradient-as-bucket-view with many small buckets,
no_sync gradient accumulation and the fp16 compression comm hook."""

import pytest

from distributed_harness import run_ranks

BATCH, STEPS, LR = 16, 3, 0.1
VARIANTS = ("default", "bucket_view_small_buckets", "no_sync", "fp16_hook")


def _model(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def _data(torch):
    g = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, 8, generator=g), torch.randn(BATCH, 4, generator=g)


def _train(rank, world_size):
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    x, y = _data(torch)
    rows = slice(rank * BATCH // world_size, (rank + 1) * BATCH // world_size)
    xs, ys = x[rows].to("metalx"), y[rows].to("metalx")
    out = {}
    for variant in VARIANTS:
        model = _model(torch).to("metalx")
        kwargs = {}
        if variant == "bucket_view_small_buckets":
            kwargs = {"gradient_as_bucket_view": True, "bucket_cap_mb": 0.0005}
        ddp = DDP(model, **kwargs)
        if variant == "fp16_hook":
            ddp.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=LR)
        for _ in range(STEPS):
            opt.zero_grad()
            if variant == "no_sync":
                half = xs.shape[0] // 2
                with ddp.no_sync():
                    torch.nn.functional.mse_loss(ddp(xs[:half]), ys[:half]).backward()
                torch.nn.functional.mse_loss(ddp(xs[half:]), ys[half:]).backward()
            else:
                torch.nn.functional.mse_loss(ddp(xs), ys).backward()
            opt.step()
        out[variant] = [p.detach().cpu() for p in model.parameters()]
    return out


def _reference(torch, variant):
    model = _model(torch)
    x, y = _data(torch)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    # no_sync accumulates two half-batch means per rank: twice the whole batch's mean
    scale = 2.0 if variant == "no_sync" else 1.0
    for _ in range(STEPS):
        opt.zero_grad()
        (scale * torch.nn.functional.mse_loss(model(x), y)).backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


@pytest.fixture(scope="module")
def trained():
    return run_ranks(_train, 2)


@pytest.mark.parametrize("variant", VARIANTS)
def test_ddp_matches_one_process_on_the_whole_batch(torch, trained, variant):
    expected = _reference(torch, variant)
    tol = {"atol": 2e-3, "rtol": 2e-3} if variant == "fp16_hook" else {"atol": 1e-5, "rtol": 1e-5}
    initial = list(_model(torch).parameters())
    for rank, result in enumerate(trained):
        for got, want, before in zip(result[variant], expected, initial):
            torch.testing.assert_close(got, want, **tol)
            assert not torch.allclose(want, before.detach())  # training moved the parameters
    for a, b in zip(trained[0][variant], trained[1][variant]):
        assert torch.equal(a, b)  # the ranks agree exactly
