"""DistributedDataParallel on metalx over Gloo: 2 processes with half a batch each
train to the same parameters as 1 process on the whole batch (computed here on the
CPU), with the default reducer, gradient-as-bucket-view with many small buckets,
no_sync gradient accumulation and the fp16 compression comm hook."""

import pytest

import distributed_models as models
from distributed_harness import run_ranks

VARIANTS = ("default", "bucket_view_small_buckets", "no_sync", "fp16_hook")


def _train(rank, world_size):
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    x, y = models.data(torch)
    rows = models.rank_rows(rank, world_size)
    xs, ys = x[rows].to("metalx"), y[rows].to("metalx")
    out = {}
    for variant in VARIANTS:
        model = models.model(torch).to("metalx")
        kwargs = {}
        if variant == "bucket_view_small_buckets":
            kwargs = {"gradient_as_bucket_view": True, "bucket_cap_mb": 0.0005}
        ddp = DDP(model, **kwargs)
        if variant == "fp16_hook":
            ddp.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=models.LR)
        for _ in range(models.STEPS):
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
    # no_sync accumulates two half-batch means per rank: twice the whole batch's mean
    model = models.reference(torch, loss_scale=2.0 if variant == "no_sync" else 1.0)
    return [p.detach() for p in model.parameters()]


@pytest.fixture(scope="module")
def trained():
    return run_ranks(_train, 2)


@pytest.mark.parametrize("variant", VARIANTS)
def test_ddp_matches_one_process_on_the_whole_batch(torch, trained, variant):
    expected = _reference(torch, variant)
    tol = {"atol": 2e-3, "rtol": 2e-3} if variant == "fp16_hook" else {"atol": 1e-5, "rtol": 1e-5}
    initial = list(models.model(torch).parameters())
    for rank, result in enumerate(trained):
        for got, want, before in zip(result[variant], expected, initial):
            torch.testing.assert_close(got, want, **tol)
            assert not torch.allclose(want, before.detach())  # training moved the parameters
    for a, b in zip(trained[0][variant], trained[1][variant]):
        assert torch.equal(a, b)  # the ranks agree exactly
