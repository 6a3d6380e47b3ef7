"""torch.save / torch.load of metalx tensors, storages, modules and optimizer state,
with every kind of map_location; checkpoints read where metalx is missing; truncated
checkpoints. The CPU is the reference: whatever a CPU round trip preserves (values,
dtypes, shapes, strides, shared storage, storage types) a metalx one must too."""

import io
import warnings

import pytest
import torch

from conftest import check_python, run_python
from test_autoload import SIMULATE_ABI_BREAK


def _round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


def _tensors(device):
    # Views are made on the device, so they share their base's storage there too.
    base = torch.arange(24, dtype=torch.float32, device=device).reshape(4, 6)
    return {
        "f32": base,
        "f16": base.half(),
        "bf16": base.bfloat16(),
        "f64": base.double(),
        "i64": torch.arange(10, device=device),
        "bool": torch.tensor([True, False, True], device=device),
        "transposed": base.t(),
        "offset_view": base[1:3, 2:5],
        "empty": torch.empty(0, 3, device=device),
        "scalar": torch.tensor(3.5, device=device),
    }


def test_tensors_round_trip_on_metalx_as_on_cpu():
    loaded = _round_trip(_tensors("metalx"))
    expected = _round_trip(_tensors("cpu"))
    for name, t in loaded.items():
        assert t.device == torch.device("metalx:0"), name
        e = expected[name]
        assert (t.dtype, t.shape, t.stride(), t.storage_offset()) == (e.dtype, e.shape, e.stride(),
                                                                      e.storage_offset()), name
        assert torch.equal(t.cpu(), e), name


def test_views_keep_sharing_their_storage_after_load():
    base = torch.arange(12.0, device="metalx")
    loaded = _round_trip({"base": base, "view": base[3:7], "matrix": base.view(3, 4)})
    storage = loaded["base"].untyped_storage()
    assert loaded["view"].untyped_storage().data_ptr() == storage.data_ptr()
    assert loaded["matrix"].untyped_storage().data_ptr() == storage.data_ptr()
    loaded["base"][4] = -1.0  # one write, seen through every view
    assert loaded["view"][1].item() == -1.0 and loaded["matrix"][1, 0].item() == -1.0


def test_untyped_and_typed_storages_keep_their_device_and_type():
    data = torch.arange(6, dtype=torch.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage is deprecated
        for make in (lambda t: t.untyped_storage(), lambda t: t.storage()):
            cpu, dev = _round_trip(make(data)), _round_trip(make(data.to("metalx")))
            assert type(dev) is type(cpu)
            assert dev.device == torch.device("metalx:0") and cpu.device.type == "cpu"
            assert (dev.dtype, dev.size()) == (cpu.dtype, cpu.size())
            assert dev.cpu().tolist() == cpu.tolist()
        # A typed storage and a tensor on it stay one storage.
        t = data.to("metalx")
        loaded = _round_trip({"storage": t.storage(), "tensor": t[2:]})
        assert loaded["tensor"].untyped_storage().data_ptr() == loaded["storage"]._untyped_storage.data_ptr()


_identity = lambda storage, location: storage  # noqa: E731
_to_metalx = lambda storage, location: storage.metalx()  # noqa: E731

# (saved on, map_location, where the tensors end up)
MAP_LOCATIONS = [
    (saved, location, expected)
    for saved in ("cpu", "metalx")
    for location, expected in [
        ("cpu", "cpu"),
        ("metalx", "metalx:0"),
        ("metalx:0", "metalx:0"),
        (torch.device("cpu"), "cpu"),
        (torch.device("metalx", 0), "metalx:0"),
        (_to_metalx, "metalx:0"),
        # torch hands a callable the storage as read, on the CPU.
        (_identity, "cpu"),
        # A dict remaps only the locations it names.
        ({"metalx:0": "cpu"}, "cpu"),
        ({"cpu": "metalx:0"}, "metalx:0"),
        ({"metalx:1": "cpu", "cpu": "cpu"}, "cpu" if saved == "cpu" else "metalx:0"),
    ]
]


@pytest.mark.parametrize("saved_on, map_location, device", MAP_LOCATIONS)
def test_map_location(saved_on, map_location, device):
    x = torch.arange(6.0).reshape(2, 3).to(saved_on)
    loaded = _round_trip({"x": x, "view": x[1]}, map_location=map_location)
    assert loaded["x"].device == torch.device(device)
    assert loaded["x"].cpu().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert loaded["view"].untyped_storage().data_ptr() == loaded["x"].untyped_storage().data_ptr()


def test_map_location_to_a_missing_device_is_a_clear_error():
    count = torch.metalx.device_count()
    for obj in (torch.ones(2), torch.ones(2, device="metalx")):
        with pytest.raises(RuntimeError, match=f"on METALX device {count + 2} but torch.metalx.device_count"
                                               f"\\(\\) is {count}"):
            _round_trip(obj, map_location=f"metalx:{count + 2}")


def test_between_devices_by_map_location():
    check_python(
        """
        import io, torch
        buffer = io.BytesIO()
        torch.save({"a": torch.arange(3.0, device="metalx:1"), "b": torch.ones(2, device="metalx:0")}, buffer)
        def load(**kw):
            buffer.seek(0)
            return torch.load(buffer, **kw)
        as_saved = load()
        assert as_saved["a"].device == torch.device("metalx:1") and as_saved["b"].device == torch.device("metalx:0")
        swapped = load(map_location={"metalx:1": "metalx:0", "metalx:0": "metalx:1"})
        assert swapped["a"].device == torch.device("metalx:0") and swapped["b"].device == torch.device("metalx:1")
        assert swapped["a"].cpu().tolist() == [0.0, 1.0, 2.0]
        """,
        METALSIM_DEVICE_COUNT="2",
    )


def _model():
    torch.manual_seed(0)
    # No conv bias: BatchNorm makes its gradient zero up to rounding noise, which Adam
    # would amplify into differences between any two correct implementations.
    return torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, bias=False), torch.nn.BatchNorm2d(3), torch.nn.Flatten(),
                               torch.nn.Linear(12, 2))


def _train_step(model, optimizer, device):
    x = torch.randn(4, 2, 4, 4, generator=torch.Generator().manual_seed(1)).to(device)
    optimizer.zero_grad()
    model(x).pow(2).mean().backward()
    optimizer.step()


def test_module_and_optimizer_checkpoint_resumes_training_like_cpu():
    device_model, cpu_model = _model().to("metalx"), _model()
    device_opt = torch.optim.Adam(device_model.parameters(), lr=0.01)
    cpu_opt = torch.optim.Adam(cpu_model.parameters(), lr=0.01)
    _train_step(device_model, device_opt, "metalx")
    _train_step(cpu_model, cpu_opt, "cpu")

    checkpoint = _round_trip({"model": device_model.state_dict(), "optimizer": device_opt.state_dict()})
    assert all(v.device.type == "metalx" for v in checkpoint["model"].values())
    exp_avg = checkpoint["optimizer"]["state"][0]["exp_avg"]
    assert exp_avg.device.type == "metalx"

    resumed = _model().to("metalx")
    resumed.load_state_dict(checkpoint["model"])
    resumed_opt = torch.optim.Adam(resumed.parameters(), lr=0.01)
    resumed_opt.load_state_dict(checkpoint["optimizer"])
    _train_step(resumed, resumed_opt, "metalx")
    _train_step(cpu_model, cpu_opt, "cpu")
    for p, q in zip(resumed.state_dict().values(), cpu_model.state_dict().values()):
        torch.testing.assert_close(p.cpu(), q, atol=1e-5, rtol=1e-5)

    # The same checkpoint restored on the CPU.
    on_cpu = _round_trip({"model": device_model.state_dict()}, map_location="cpu")["model"]
    assert all(v.device.type == "cpu" for v in on_cpu.values())


def test_whole_module_pickles_with_its_device():
    model = _model().to("metalx")
    loaded = _round_trip(model, weights_only=False)
    assert isinstance(loaded, torch.nn.Sequential)
    assert {p.device for p in loaded.parameters()} == {torch.device("metalx:0")}
    x = torch.randn(1, 2, 4, 4, device="metalx")
    model.eval(), loaded.eval()
    assert torch.equal(loaded(x).cpu(), model(x).cpu())


def _save_checkpoint(path):
    torch.save({"weight": torch.arange(8.0).reshape(2, 4).to("metalx"), "step": 3}, path)


def test_checkpoint_without_metalx_loaded_names_the_device_and_loads_to_cpu(tmp_path):
    path = tmp_path / "checkpoint.pt"
    _save_checkpoint(path)
    result = check_python(
        f"""
        import sys, torch
        assert "metalx" not in sys.modules
        try:
            torch.load({str(path)!r})
        except RuntimeError as error:
            print("error:", error)
        on_cpu = torch.load({str(path)!r}, map_location="cpu")
        assert on_cpu["weight"].device.type == "cpu" and on_cpu["step"] == 3
        print(on_cpu["weight"].sum().item())
        import metalx  # loading metalx later makes the checkpoint loadable as saved
        assert torch.load({str(path)!r})["weight"].device.type == "metalx"
        """,
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    assert "error:" in result.stdout and "tagged with metalx:0" in result.stdout
    assert "28.0" in result.stdout


def test_checkpoint_when_metalx_failed_to_load_says_why_and_how(tmp_path):
    path = tmp_path / "checkpoint.pt"
    _save_checkpoint(path)
    result = check_python(
        SIMULATE_ABI_BREAK
        + f"""
import warnings
warnings.simplefilter("ignore")
import torch
for weights_only in (True, False):
    try:
        torch.load({str(path)!r}, weights_only=weights_only)
        raise SystemExit("loaded without metalx")
    except RuntimeError as error:
        print("error:", error)
print("cpu:", torch.load({str(path)!r}, map_location="cpu")["weight"].sum().item())
"""
    )
    out = result.stdout
    assert out.count("saved on the metalx device (metalx:0)") == 2
    assert "undefined symbol" in out  # why metalx is missing
    assert "map_location='cpu'" in out  # and what to do
    assert "cpu: 28.0" in out


def test_checkpoint_when_metalx_has_no_device_says_so():
    result = run_python(
        """
        import io, torch
        assert not torch.metalx.is_available()
        torch.load(io.BytesIO(bytes.fromhex(%r)))
        """ % _checkpoint_bytes().hex(),
        METALX_DRIVER="metal",  # this build has no Metal driver: no devices
    )
    assert result.returncode != 0
    assert "torch.metalx.is_available() is False" in result.stderr
    assert "map_location=torch.device('cpu')" in result.stderr


def _checkpoint_bytes():
    buffer = io.BytesIO()
    torch.save(torch.arange(4.0, device="metalx"), buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, 0.999])
def test_truncated_checkpoint_is_a_clear_error_and_changes_nothing(tmp_path, keep):
    model = _model().to("metalx")
    before = {k: v.cpu().clone() for k, v in model.state_dict().items()}
    path = tmp_path / "model.pt"
    torch.save(model.state_dict(), path)
    data = path.read_bytes()
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(data[: int(len(data) * keep)])

    torch.metalx.synchronize()
    allocated = torch.metalx.memory_allocated()
    with pytest.raises(RuntimeError, match="failed reading zip archive.*corrupted"):
        model.load_state_dict(torch.load(truncated))
    torch.metalx.synchronize()
    assert torch.metalx.memory_allocated() == allocated  # nothing half-loaded left behind
    for k, v in model.state_dict().items():
        assert torch.equal(v.cpu(), before[k]), k
    assert path.read_bytes() == data
    model.load_state_dict(torch.load(path))  # the intact file still loads


@pytest.mark.parametrize("map_location, device", [(None, "metalx:0"), ("cpu", "cpu"), ("metalx", "metalx:0")])
def test_memory_mapped_load(tmp_path, map_location, device):
    path = tmp_path / "mapped.pt"
    torch.save({"x": torch.arange(5.0, device="metalx")}, path)
    loaded = torch.load(path, mmap=True, map_location=map_location)["x"]
    assert loaded.device == torch.device(device) and loaded.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_legacy_format_round_trip():
    buffer = io.BytesIO()
    x = torch.arange(6.0, device="metalx").reshape(2, 3)
    torch.save({"x": x, "row": x[1]}, buffer, _use_new_zipfile_serialization=False)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert loaded["x"].device == torch.device("metalx:0") and torch.equal(loaded["x"].cpu(), x.cpu())
    assert loaded["row"].untyped_storage().data_ptr() == loaded["x"].untyped_storage().data_ptr()
