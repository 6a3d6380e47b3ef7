"""torch.amp.GradScaler("metalx"): the same training on metalx and on the CPU (each
with its own autocast and scaler) gives the same parameters and the same scale, with
and without overflowing gradients; the two AMP kernels GradScaler uses match the CPU."""

import io

import torch
import torch.nn.functional as F


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _train(device, steps, poison_step=None):
    model = _model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    # A small growth interval so that growth, not only back-off, happens in the test.
    scaler = torch.amp.GradScaler(device, init_scale=2.0**10, growth_interval=2)
    g = torch.Generator().manual_seed(1)
    scales = []
    for step in range(steps):
        x, y = torch.randn(32, 8, generator=g), torch.randn(32, 4, generator=g)
        with torch.autocast(device, dtype=torch.float16):
            out = model(x.to(device))
            loss = F.mse_loss(out, y.to(device))
        assert out.dtype == torch.float16 and loss.dtype == torch.float32
        if step == poison_step:
            loss = loss * float("inf")  # an overflow: this step must be skipped
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        scales.append(scaler.get_scale())
    return model, scales


def test_training_with_grad_scaler_matches_cpu():
    metalx_model, metalx_scales = _train("metalx", steps=6)
    cpu_model, cpu_scales = _train("cpu", steps=6)
    assert metalx_scales == cpu_scales
    assert metalx_scales[-1] > metalx_scales[0]  # it grew
    for (name, p), q in zip(metalx_model.named_parameters(), cpu_model.parameters()):
        assert p.device.type == "metalx" and p.dtype == torch.float32
        torch.testing.assert_close(p.cpu(), q, atol=1e-4, rtol=1e-4, msg=name)
    initial = _model()
    assert not torch.equal(cpu_model[0].weight, initial[0].weight)  # it trained


def test_overflowing_step_is_skipped_and_scale_backs_off_as_on_cpu():
    metalx_model, metalx_scales = _train("metalx", steps=4, poison_step=2)
    cpu_model, cpu_scales = _train("cpu", steps=4, poison_step=2)
    assert metalx_scales == cpu_scales
    assert metalx_scales[2] == metalx_scales[1] / 2  # backoff_factor 0.5
    for p, q in zip(metalx_model.parameters(), cpu_model.parameters()):
        assert torch.isfinite(p).all()
        torch.testing.assert_close(p.cpu(), q, atol=1e-4, rtol=1e-4)


def test_unscale_kernel_matches_cpu():
    grads = [torch.tensor([1.0, 2.0, -4.0]), torch.tensor([[0.5, float("nan")]]), torch.tensor([3.0])]
    for poisoned in (False, True):
        cpu = [g.clone() if poisoned else torch.nan_to_num(g) for g in grads]
        dev = [g.to("metalx") for g in cpu]
        found_cpu, found_dev = torch.zeros(1), torch.zeros(1, device="metalx")
        inv_cpu, inv_dev = torch.full((1,), 0.25), torch.full((1,), 0.25, device="metalx")
        torch._amp_foreach_non_finite_check_and_unscale_(cpu, found_cpu, inv_cpu)
        torch._amp_foreach_non_finite_check_and_unscale_(dev, found_dev, inv_dev)
        assert found_dev.device.type == "metalx" and found_dev.item() == found_cpu.item() == float(poisoned)
        for d, c in zip(dev, cpu):
            torch.testing.assert_close(d.cpu(), c, equal_nan=True)


def test_update_scale_kernel_matches_cpu():
    for found_inf, tracker in ((0.0, 0), (0.0, 2), (1.0, 1)):
        results = []
        for device in ("cpu", "metalx"):
            scale = torch.full((1,), 8.0, device=device)
            growth = torch.full((1,), tracker, dtype=torch.int32, device=device)
            found = torch.full((1,), found_inf, device=device)
            torch._amp_update_scale_(scale, growth, found, 2.0, 0.5, 3)
            results.append((scale.item(), growth.item()))
        assert results[0] == results[1], (found_inf, tracker, results)


def test_metalx_amp_grad_scaler_and_its_state_survive_save_and_load():
    scaler = torch.metalx.amp.GradScaler(init_scale=512.0, growth_interval=7)
    assert scaler._device == "metalx"
    p = torch.nn.Parameter(torch.ones(2, device="metalx"))
    optimizer = torch.optim.SGD([p], lr=0.1)
    scaler.scale(p.sum()).backward()
    scaler.step(optimizer)
    scaler.update()
    buffer = io.BytesIO()
    torch.save(scaler.state_dict(), buffer)
    buffer.seek(0)
    restored = torch.amp.GradScaler("metalx")
    restored.load_state_dict(torch.load(buffer))
    assert restored.state_dict() == scaler.state_dict()
    assert restored.get_scale() == 512.0 and restored.get_growth_interval() == 7
