"""Counting, choosing and validating metalx devices."""

import pytest

from conftest import check_python


def test_device_module_basics(torch):
    assert torch.metalx.is_available()
    assert torch.metalx.device_count() >= 1
    assert torch.metalx.current_device() == 0
    assert torch.metalx.driver_name() in ("sim", "metal")
    assert torch.metalx.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.metalx._is_in_bad_fork() is False
    torch.metalx._lazy_init()
    torch.metalx.synchronize()
    assert torch.accelerator.current_accelerator().type == "metalx"


def test_two_devices_current_set_and_context_manager():
    check_python(
        """
        import torch
        assert torch.metalx.device_count() == 2
        assert torch.accelerator.device_count() == 2
        assert torch.metalx.current_device() == 0
        with torch.metalx.device(1):
            assert torch.metalx.current_device() == 1
            assert torch.empty(3, device="metalx").device == torch.device("metalx:1")
            with torch.metalx.device("metalx:0"):
                assert torch.metalx.current_device() == 0
            assert torch.metalx.current_device() == 1
        assert torch.metalx.current_device() == 0

        torch.metalx.set_device(1)
        assert torch.metalx.current_device() == 1
        assert torch.ones(2, device="metalx").device.index == 1
        torch.metalx.set_device(torch.device("metalx:0"))
        assert torch.metalx.current_device() == 0

        # Explicit indices, copies between devices and ops on device 1.
        x = torch.arange(4.0).to("metalx:1")
        assert x.device.index == 1
        y = x.to("metalx:0")
        assert y.device.index == 0 and y.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
        z = torch.add(x, x)
        assert z.device.index == 1 and z.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
        torch.metalx.synchronize(1)
        """,
        METALSIM_DEVICE_COUNT="2",
    )


def test_bad_device_index_is_a_clear_error(torch):
    count = torch.metalx.device_count()
    expected = f"metalx device {count + 4} does not exist; {count} device"
    with pytest.raises(RuntimeError, match=expected):
        torch.empty(2, device=f"metalx:{count + 4}")
    with pytest.raises(RuntimeError, match=expected):
        torch.ones(2).to(f"metalx:{count + 4}")
    with pytest.raises(RuntimeError, match=expected):
        torch.metalx.set_device(count + 4)
    with pytest.raises(RuntimeError, match=expected):
        with torch.metalx.device(count + 4):
            pass
    assert torch.metalx.current_device() == 0
    with pytest.raises(ValueError, match="expected a metalx device"):
        torch.metalx.set_device("cpu")


def test_forked_child_refuses_to_reinitialize():
    result = check_python(
        """
        import os, torch
        torch.ones(1, device="metalx")
        assert torch.metalx.is_initialized()
        pid = os.fork()
        if pid == 0:
            ok = torch.metalx._is_in_bad_fork()
            try:
                torch.metalx._lazy_init()
                ok = False
            except RuntimeError as error:
                ok = ok and "spawn" in str(error)
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        assert not torch.metalx._is_in_bad_fork()
        """
    )
