"""Profiling metalx: torch.profiler with ProfilerActivity.PrivateUse1 shows device
kernels, copies and fills with names and device durations, linked to the ops that
launched them; CPU fallbacks show as their own range; torch.metalx.profiler brackets a
region, as torch.mps.profiler does."""

import json

import pytest
from torch.profiler import ProfilerActivity, profile


def conv_inputs(torch):
    x = torch.randn(2, 3, 12, 12, device="metalx")
    w = torch.randn(5, 3, 3, 3, device="metalx")
    return x, w


def test_metalx_profiler_records_the_commands_of_its_region(torch):
    x, w = conv_inputs(torch)
    host = torch.randn(4096).pin_memory()
    torch.nn.functional.conv2d(x, w)  # before the region: not recorded
    side = torch.metalx.Stream()
    with torch.metalx.profiler.profile() as prof:
        torch.nn.functional.conv2d(x, w)
        x.fill_(0.5)
        with torch.metalx.stream(side):
            host.to("metalx", non_blocking=True)
    torch.nn.functional.conv2d(x, w)  # after: not recorded either
    kinds = [c["kind"] for c in prof.commands]
    names = [c["name"] for c in prof.commands]
    assert kinds.count("kernel") == 2 and kinds.count("copy") == 1, prof.commands
    assert any("conv2d" in n for n in names), names
    assert any(n.startswith("fill") for n in names), names
    copy = next(c for c in prof.commands if c["kind"] == "copy")
    assert copy["bytes"] == host.nbytes and copy["stream"] == side.stream_id
    assert all(c["duration_ms"] >= 0 and c["device"] == 0 for c in prof.commands)
    assert "conv2d" in prof.table()
    total = sum(count for count, _ in prof.summary().values())
    assert total == len(prof.commands)


def test_profiling_does_not_change_results(torch):
    x, w = conv_inputs(torch)
    expected = torch.nn.functional.conv2d(x.cpu(), w.cpu(), padding=1)
    with torch.metalx.profiler.profile():
        got = torch.nn.functional.conv2d(x, w, padding=1).cpu()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
        got2 = torch.nn.functional.conv2d(x, w, padding=1).cpu()
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got2, expected, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def torch_profile(torch):
    x, w = conv_inputs(torch)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        torch.nn.functional.conv2d(x, w)
        x.fill_(1.0)
        x.i0()  # no metalx kernel: a CPU fallback
        torch.metalx.synchronize()
    return prof


def test_torch_profiler_shows_kernels_with_device_time(torch_profile):
    events = {e.key: e for e in torch_profile.key_averages()}
    kernels = [k for k in events if "conv2d" in k and not k.startswith("aten::")]
    assert kernels, sorted(events)
    assert events[kernels[0]].self_device_time_total > 0
    assert any(k.startswith("fill") for k in events), sorted(events)


def test_torch_profiler_links_kernels_to_their_ops(torch_profile):
    events = {e.key: e for e in torch_profile.key_averages()}
    # Device time rolls up into the op that launched the kernel.
    assert events["aten::convolution_overrideable"].device_time_total > 0
    assert events["aten::conv2d"].device_time_total > 0
    assert events["aten::fill_"].device_time_total > 0


def test_torch_profiler_shows_cpu_fallbacks(torch_profile):
    keys = {e.key for e in torch_profile.key_averages()}
    # (i0 reaches the fallback as its out= variant)
    assert any(k.startswith("metalx::cpu_fallback(aten::i0") for k in keys), sorted(keys)


def test_chrome_trace_has_the_kernels_on_device_rows(torch_profile, tmp_path):
    path = tmp_path / "trace.json"
    torch_profile.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert any("conv2d" in e["name"] for e in kernels), kernels
    assert all(e["dur"] >= 0 for e in kernels)
