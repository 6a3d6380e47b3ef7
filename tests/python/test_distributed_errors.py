"""Nothing of a rank's model is lost on an error it reports.

Two ranks train the shared small model (distributed_models.py) on metalx with Adam
(gradients averaged with all_reduce), then run collectives that fail on the model's own
tensors: bad arguments every rank makes (an op Gloo lacks, on a weight and on a
transposed view of it, which goes through a staged copy; outputs of the wrong size; a
source rank out of range; the average of an int16 buffer, which goes through a widened
copy), and, with TORCH_DISTRIBUTED_DEBUG=DETAIL, collectives whose shapes or dtypes
differ across the ranks. Each must raise on every rank, as the same call on CPU tensors
does; afterwards the rank's parameters, buffers, gradients and optimizer state must equal
the copies saved before, and the group must still work: a following all_reduce of the
gradients and an Adam step give what the CPU computes from the saved copies.
"""

import pytest

import distributed_models as models
from distributed_harness import run_ranks

ADAM = {"lr": 0.01, "betas": (0.9, 0.99)}


def _attach_buffers(torch, model):
    # An int16 buffer (Gloo lacks int16: metalx reduces it in a widened copy) and a
    # float16 one of the same shape as the last bias.
    model.register_buffer("counts", torch.tensor([7, -3, 32767, 5], dtype=torch.int16))
    model.register_buffer("scale16", torch.tensor([0.5, 1.5, -2.0, 3.0], dtype=torch.float16))
    return model


def _state(model, opt):
    """CPU copies of everything the model and its optimizer hold."""
    return {
        "params": {n: p.detach().cpu().clone() for n, p in model.named_parameters()},
        "grads": {n: p.grad.cpu().clone() for n, p in model.named_parameters()},
        "buffers": {n: b.cpu().clone() for n, b in model.named_buffers()},
        "optimizer": {i: {k: v.cpu().clone() for k, v in s.items()}
                      for i, s in enumerate(opt.state[p] for p in model.parameters())},
    }


def _average_gradients(torch, dist, model, world_size):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad.div_(world_size)


def _backward(torch, model, rank, world_size):
    x, y = models.data(torch)
    rows = models.rank_rows(rank, world_size)
    device = next(model.parameters()).device
    torch.nn.functional.mse_loss(model(x[rows].to(device)), y[rows].to(device)).backward()


def _bad_calls(dist, rank, world_size, detail):
    """name -> call(model) that must raise on every rank."""
    R = dist.ReduceOp
    calls = {
        "op_gloo_lacks_on_a_weight": lambda m: dist.all_reduce(m[0].weight, op=dist._make_nccl_premul_sum(2.0)),
        "op_gloo_lacks_on_a_transposed_weight":
            lambda m: dist.all_reduce(m[0].weight.t(), op=dist._make_nccl_premul_sum(2.0)),
        "reduce_scatter_into_a_grad_of_the_wrong_size":
            lambda m: dist.reduce_scatter_tensor(m[2].bias.grad, m[0].weight.grad),
        "all_gather_into_a_bias_of_the_wrong_size": lambda m: dist.all_gather_into_tensor(m[2].bias, m[0].bias),
        "broadcast_from_a_rank_out_of_range": lambda m: dist.broadcast(m[0].bias, src=world_size),
        "average_of_int16_counts": lambda m: dist.all_reduce(m.counts, op=R.AVG),
    }
    if detail:
        # The ranks disagree: only the debug mode's checks make this an error (and not
        # a hang or a wrong result).
        calls["shapes_differ_across_ranks"] = lambda m: dist.all_reduce(m[0].weight.grad if rank == 0 else m[0].bias.grad)
        calls["dtypes_differ_across_ranks"] = lambda m: dist.all_reduce(m[2].bias if rank == 0 else m.scale16)
    return calls


def _train_fail_and_go_on(rank, world_size, detail):
    import torch
    import torch.distributed as dist

    model = _attach_buffers(torch, models.model(torch)).to("metalx")
    cpu_model = _attach_buffers(torch, models.model(torch))  # the same calls on CPU tensors
    opt = torch.optim.Adam(model.parameters(), **ADAM)
    for _ in range(2):  # optimizer state exists after the first step
        opt.zero_grad()
        _backward(torch, model, rank, world_size)
        _average_gradients(torch, dist, model, world_size)
        opt.step()
    opt.zero_grad()
    _backward(torch, model, rank, world_size)  # fresh gradients, not yet averaged
    _backward(torch, cpu_model, rank, world_size)
    before = _state(model, opt)
    optimizer_state_dict = _to_cpu(torch, opt.state_dict())  # for the CPU reference (copies)

    errors = {}
    for name, call in _bad_calls(dist, rank, world_size, detail).items():
        outcome = []
        for m in (model, cpu_model):
            try:
                call(m)
                torch.metalx.synchronize()
                outcome.append(None)
            except Exception as e:
                outcome.append((type(e).__name__, str(e)))
        errors[name] = outcome
    after_errors = _state(model, opt)

    # The group and the device still work: average the gradients and step.
    _average_gradients(torch, dist, model, world_size)
    opt.step()
    torch.metalx.synchronize()
    counts = model.counts.clone()
    dist.all_reduce(counts)  # an int16 sum that wraps: 32767 + 32767
    return {
        "errors": errors,
        "before": before,
        "after_errors": after_errors,
        "optimizer_state_dict": optimizer_state_dict,
        "stepped": {n: p.detach().cpu() for n, p in model.named_parameters()},
        "counts_sum": counts.cpu(),
    }


def _to_cpu(torch, obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().clone()
    if isinstance(obj, dict):
        return {k: _to_cpu(torch, v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(torch, v) for v in obj)
    return obj


@pytest.fixture(scope="module", params=["default", "detail"])
def job(request):
    mp = pytest.MonkeyPatch()
    detail = request.param == "detail"
    if detail:
        mp.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")  # spawned ranks inherit it
    try:
        yield request.param, run_ranks(_train_fail_and_go_on, 2, detail)
    finally:
        mp.undo()


def _assert_same(torch, a, b, what):
    assert a.keys() == b.keys(), what
    for k in a:
        if isinstance(a[k], dict):
            _assert_same(torch, a[k], b[k], f"{what}/{k}")
        else:
            assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), f"{what}/{k} changed"


def test_bad_collectives_raise_on_every_rank_as_on_cpu(torch, job):
    mode, results = job
    import torch.distributed as dist

    expected = set(_bad_calls(dist, 0, 2, mode == "detail"))
    for rank, r in enumerate(results):
        assert set(r["errors"]) == expected
        for name, (metalx, cpu) in r["errors"].items():
            assert metalx is not None, f"rank {rank}: {name} did not raise on metalx"
            assert cpu is not None, f"rank {rank}: {name} did not raise on CPU"
            assert metalx[0] == cpu[0], f"rank {rank}: {name}: metalx raised {metalx}, CPU {cpu}"
        if mode == "detail":
            for name in ("shapes_differ_across_ranks", "dtypes_differ_across_ranks"):
                assert "Detected mismatch between collectives" in r["errors"][name][0][1]


def test_model_gradients_and_optimizer_state_are_intact_after_the_errors(torch, job):
    _, results = job
    for rank, r in enumerate(results):
        _assert_same(torch, r["before"], r["after_errors"], f"rank {rank}")
        # the saved copies are real: training had moved the parameters and made state
        initial = dict(_attach_buffers(torch, models.model(torch)).named_parameters())
        assert any(not torch.equal(r["before"]["params"][n], p.detach()) for n, p in initial.items())
        assert all(s["exp_avg"].abs().sum() > 0 for s in r["before"]["optimizer"].values())


def test_the_group_still_averages_and_steps_after_the_errors(torch, job):
    _, results = job
    grads = {n: sum(r["before"]["grads"][n] for r in results) / len(results) for n in results[0]["before"]["grads"]}
    for rank, r in enumerate(results):
        model = _attach_buffers(torch, models.untrained_model(torch))
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(r["before"]["params"][n])
                p.grad = grads[n].clone()
        opt = torch.optim.Adam(model.parameters(), **ADAM)
        opt.load_state_dict(r["optimizer_state_dict"])
        opt.step()
        for n, p in model.named_parameters():
            torch.testing.assert_close(r["stepped"][n], p.detach(), atol=1e-6, rtol=1e-5, msg=f"rank {rank} {n}")
            assert not torch.equal(r["stepped"][n], r["before"]["params"][n])


def test_int16_sum_after_the_errors_wraps(torch, job):
    _, results = job
    counts = torch.tensor([7, -3, 32767, 5], dtype=torch.int16)
    expected = counts + counts  # int16 arithmetic wraps: 32767 + 32767 == -2
    assert expected[2].item() == -2
    for r in results:
        assert torch.equal(r["counts_sum"], expected)
