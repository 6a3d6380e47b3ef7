"""FSDP2 (fully_shard) on metalx over Gloo, and torch.distributed.checkpoint: 2
processes with half a batch each train to the parameters 1 process gets on the whole
batch (on the CPU, here); a sharded checkpoint saved by both loads in 1 process."""

import pytest

import distributed_models as models
from distributed_harness import run_ranks


def _train(rank, world_size, checkpoint_dir):
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    x, y = models.data(torch)
    rows = models.rank_rows(rank, world_size)
    xs, ys = x[rows].to("metalx"), y[rows].to("metalx")
    mesh = init_device_mesh("metalx", (world_size,))
    out = {}
    for variant in ("float32", "bfloat16_params"):
        model = models.model(torch).to("metalx")
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
            if variant == "bfloat16_params" else MixedPrecisionPolicy()
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)
        opt = torch.optim.SGD(model.parameters(), lr=models.LR)
        for _ in range(models.STEPS):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(xs).float(), ys).backward()
            opt.step()
        out[variant] = [p.full_tensor().cpu() for p in model.parameters()]
        if variant == "float32":
            dcp.save(model.state_dict(), checkpoint_id=checkpoint_dir)
            out["local_shapes"] = [tuple(p.to_local().shape) for p in model.parameters()]
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    checkpoint_dir = str(tmp_path_factory.mktemp("dcp"))
    return run_ranks(_train, 2, checkpoint_dir), checkpoint_dir


def test_fsdp2_matches_one_process_on_the_whole_batch(torch, trained):
    results, _ = trained
    expected = list(models.reference(torch).parameters())
    for result in results:
        for got, want in zip(result["float32"], expected):
            torch.testing.assert_close(got, want.detach(), atol=1e-5, rtol=1e-5)
        # parameters really were sharded: each rank held half of every weight's rows
        assert result["local_shapes"][0] == (16, 8)


def test_fsdp2_bfloat16_parameters(torch, trained):
    results, _ = trained
    expected = list(models.reference(torch).parameters())
    for got, want in zip(results[0]["bfloat16_params"], expected):
        torch.testing.assert_close(got, want.detach(), atol=3e-2, rtol=3e-2)
    for a, b in zip(results[0]["bfloat16_params"], results[1]["bfloat16_params"]):
        assert torch.equal(a, b)


def test_checkpoint_saved_by_two_ranks_loads_in_one_process(torch, trained):
    import torch.distributed.checkpoint as dcp

    results, checkpoint_dir = trained
    model = models.untrained_model(torch)
    state = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    dcp.load(state, checkpoint_id=checkpoint_dir, no_dist=True)
    for (name, got), want in zip(state.items(), results[0]["float32"]):
        assert torch.equal(got, want), name
