"""Pinned host memory and non_blocking copies (backend/pinned_memory.*, ops/copy.cpp).

The guarantees under test: pinned memory is what torch's pinning APIs return and
report; a non_blocking copy to or from pinned memory is asynchronous yet never lets
its host memory be reused before the device is done with it; a non_blocking copy
from pageable memory is synchronous, so freeing its source at once is always safe.
Tests that need the device to lag behind run in a child with METALSIM_STRICT=1 and a
long METALSIM_STRICT_DELAY_US, so "the copy is still queued" is deterministic.
"""

import gc
import warnings

import pytest

from conftest import check_python

PAGE = 4096
# Every command buffer starts this late: long enough that a copy is certainly still
# queued while the test frees and reallocates memory right after encoding it (LAGGING,
# for the tests that depend on that), or just late (STRICT, for loops of many copies).
STRICT = dict(METALSIM_STRICT="1", METALSIM_STRICT_DELAY_US="300000")
LAGGING = dict(METALSIM_STRICT="1", METALSIM_STRICT_DELAY_US="1000000")


def test_is_pinned_reports_pinned_host_memory_only(torch):
    cpu = torch.arange(10.0)
    assert not cpu.is_pinned()
    pinned = cpu.pin_memory()
    assert pinned.is_pinned() and pinned.device.type == "cpu"
    assert torch.equal(pinned, cpu)
    assert pinned.pin_memory() is pinned  # already pinned: no copy
    assert pinned.data_ptr() % PAGE == 0
    assert pinned[3:].is_pinned()  # a view of pinned storage is pinned
    assert torch.empty(100, pin_memory=True).is_pinned()
    assert torch.zeros(3, 4, pin_memory=True).is_pinned()
    assert not torch.ones(3, device="metalx").is_pinned()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # device= is deprecated in 2.13
        assert cpu.pin_memory("metalx").is_pinned()
        assert pinned.is_pinned("metalx") and not cpu.is_pinned("metalx")


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "int64", "uint8", "bool", "complex64", "float64"])
def test_pinned_round_trip_values(torch, name):
    dtype = getattr(torch, name)
    cpu = (torch.randn(7, 33) * 50).to(dtype)
    pinned = cpu.pin_memory()
    device = pinned.to("metalx", non_blocking=True)
    back = device.to("cpu", non_blocking=True)
    assert back.is_pinned()  # torch's _to_copy pins the destination of a non_blocking D2H
    torch.metalx.synchronize()
    assert torch.equal(back, cpu)
    assert torch.equal(device.cpu(), cpu)


def test_pinned_strided_and_casting_copies(torch):
    torch.manual_seed(0)
    src = torch.randn(6, 10).pin_memory()
    # Transposed pinned source -> contiguous device: the kernel reads pinned memory.
    dst = torch.empty(10, 6, device="metalx")
    dst.copy_(src.t(), non_blocking=True)
    # Cast while copying.
    half = torch.empty(6, 10, device="metalx", dtype=torch.float16)
    half.copy_(src, non_blocking=True)
    # Device -> every other column of a pinned tensor: the columns between stay.
    out = torch.full((6, 20), -1.0).pin_memory()
    out[:, ::2].copy_(dst.t(), non_blocking=True)
    torch.metalx.synchronize()
    assert torch.equal(dst.cpu(), src.t())
    assert torch.equal(half.cpu(), src.half())
    assert torch.equal(out[:, ::2], src)
    assert torch.equal(out[:, 1::2], torch.full((6, 10), -1.0))


def test_pinned_synchronous_copies_use_pinned_memory_in_place(torch):
    src = torch.arange(24.0).reshape(4, 6).pin_memory()
    dst = src.t().to("metalx")  # strided pinned source, synchronous
    assert torch.equal(dst.cpu(), src.t())
    out = torch.zeros(6, 4).pin_memory()
    out.copy_(dst.neg())  # synchronous: in place on return, no synchronize needed
    assert torch.equal(out, -src.t())


def test_freed_pinned_block_is_reused_when_no_work_is_in_flight(torch):
    nbytes = 123 * PAGE  # a size no other test uses, so the cached block is ours
    torch.metalx.synchronize()
    first = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    address = first.data_ptr()
    hits = torch.metalx.host_memory_stats()["cache_hits"]
    del first
    again = torch.empty(nbytes - 100, dtype=torch.uint8, pin_memory=True)  # same page count
    assert again.data_ptr() == address
    assert torch.metalx.host_memory_stats()["cache_hits"] == hits + 1
    # Used by a non_blocking copy that has completed: reusable again once freed.
    dev = torch.empty(nbytes - 100, dtype=torch.uint8, device="metalx")
    dev.copy_(again, non_blocking=True)
    torch.metalx.synchronize()
    del again
    assert torch.empty(nbytes, dtype=torch.uint8, pin_memory=True).data_ptr() == address


def test_host_memory_stats_follow_pinned_tensors(torch):
    before = torch.metalx.host_memory_stats()
    t = torch.empty(200 * PAGE - 1, dtype=torch.uint8, pin_memory=True)
    during = torch.metalx.host_memory_stats()
    assert during["allocated_bytes"] - before["allocated_bytes"] == 200 * PAGE
    assert during["reserved_bytes"] >= during["allocated_bytes"]
    del t
    after = torch.metalx.host_memory_stats()
    assert after["allocated_bytes"] == before["allocated_bytes"]


def test_non_blocking_h2d_compute_d2h_loop(torch):
    torch.manual_seed(1)
    for i in range(20):
        batch = (torch.randn(64, 17) + i).pin_memory()
        expected = (batch * 2 + 1).sum(dim=1)
        x = batch.to("metalx", non_blocking=True)
        y = (x * 2 + 1).sum(dim=1)
        host = torch.empty(64).pin_memory()
        host.copy_(y, non_blocking=True)
        del batch, x, y  # freed while the copies may still be queued
        torch.metalx.synchronize()
        torch.testing.assert_close(host, expected)


def test_non_blocking_from_pageable_memory_is_synchronous(torch):
    src = torch.randn(50, 40)
    expected = src.clone()
    dst = torch.empty(40, 50, device="metalx")
    dst.copy_(src.t(), non_blocking=True)  # staged path
    dense = torch.empty(50, 40, device="metalx")
    dense.copy_(src, non_blocking=True)  # memcpy path
    src.fill_(0)  # the copies have consumed the source already
    del src
    gc.collect()
    assert torch.equal(dst.cpu(), expected.t())
    assert torch.equal(dense.cpu(), expected)


def test_dataloader_pins_batches_for_metalx(torch):
    from torch.utils.data import DataLoader, TensorDataset

    data = torch.arange(40 * 3, dtype=torch.float32).reshape(40, 3)
    labels = torch.arange(40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # pin_memory_device is deprecated in 2.13
        loader = DataLoader(TensorDataset(data, labels), batch_size=8, pin_memory=True,
                            pin_memory_device="metalx")
        seen = 0
        for x, y in loader:
            assert x.is_pinned() and y.is_pinned()
            dx = x.to("metalx", non_blocking=True)
            dy = y.to("metalx", non_blocking=True)
            torch.metalx.synchronize()
            assert torch.equal(dx.cpu(), data[seen:seen + 8])
            assert torch.equal(dy.cpu(), labels[seen:seen + 8])
            seen += 8
    assert seen == 40


def test_dataloader_with_workers_pins_in_its_pin_thread():
    check_python(
        """
        import warnings, torch
        from torch.utils.data import DataLoader, TensorDataset
        warnings.simplefilter("ignore", UserWarning)
        data = torch.randn(32, 5)
        loader = DataLoader(TensorDataset(data), batch_size=4, pin_memory=True,
                            pin_memory_device="metalx", num_workers=2,
                            multiprocessing_context="spawn")
        out = []
        for (x,) in loader:
            assert x.is_pinned()
            out.append(x.to("metalx", non_blocking=True))
        torch.metalx.synchronize()
        assert torch.equal(torch.cat([o.cpu() for o in out]), data)
        """
    )


def test_pinned_source_freed_right_after_non_blocking_copy_strict():
    # The device starts every command buffer 1 s late: the copy is certainly queued
    # when the source is freed and its memory asked for again.
    check_python(
        """
        import gc, time, torch
        n = 300_000
        dst = torch.empty(n, device="metalx")
        torch.metalx.synchronize()
        src = torch.arange(n, dtype=torch.float32).pin_memory()
        address = src.data_ptr()
        start = time.monotonic()
        dst.copy_(src, non_blocking=True)
        returned_after = time.monotonic() - start
        assert returned_after < 0.5, returned_after  # asynchronous: did not wait
        del src
        gc.collect()
        stats = torch.metalx.host_memory_stats()
        assert stats["pending_free_bytes"] >= n * 4, stats
        other = torch.empty(n, dtype=torch.float32, pin_memory=True)
        assert other.data_ptr() != address  # not reused while the copy is queued
        other.fill_(-1)  # would corrupt the copy if it were the same memory
        torch.metalx.synchronize()
        assert torch.equal(dst.cpu(), torch.arange(n, dtype=torch.float32))
        # Once the copy has completed the block comes back.
        deadline = time.monotonic() + 5
        while torch.metalx.host_memory_stats()["pending_free_bytes"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert torch.metalx.host_memory_stats()["pending_free_bytes"] == 0
        assert torch.empty(n, dtype=torch.float32, pin_memory=True).data_ptr() == address
        """,
        **LAGGING,
    )


def test_pinned_destination_freed_before_d2h_completes_strict():
    check_python(
        """
        import gc, torch
        n = 200_000
        dev = torch.full((n,), 3.0, device="metalx")
        torch.metalx.synchronize()
        host = dev.to("cpu", non_blocking=True)
        assert host.is_pinned()
        address = host.data_ptr()
        del host
        gc.collect()
        other = torch.full((n,), 7.0, pin_memory=True)
        assert other.data_ptr() != address  # the device still writes the old block
        torch.metalx.synchronize()
        assert torch.equal(other, torch.full((n,), 7.0))  # the late write did not land here
        """,
        **LAGGING,
    )


def test_pageable_source_freed_right_after_non_blocking_copy_strict():
    check_python(
        """
        import gc, torch
        n = 100_000
        src = torch.arange(n, dtype=torch.float32).reshape(500, 200)
        dense = torch.empty(500, 200, device="metalx")
        strided = torch.empty(200, 500, device="metalx")
        dense.copy_(src, non_blocking=True)
        strided.copy_(src.t(), non_blocking=True)
        src.fill_(-5)
        del src
        gc.collect()
        junk = [torch.full((500, 200), -9.0) for _ in range(8)]  # reuse freed host memory
        expected = torch.arange(n, dtype=torch.float32).reshape(500, 200)
        torch.metalx.synchronize()
        assert torch.equal(dense.cpu(), expected)
        assert torch.equal(strided.cpu(), expected.t())
        """,
        **STRICT,
    )


def test_non_blocking_loop_strict():
    check_python(
        """
        import torch
        torch.manual_seed(0)
        for i in range(6):
            batch = torch.randn(32, 9).pin_memory()
            x = batch.to("metalx", non_blocking=True)
            out = torch.empty(9, 32).pin_memory()
            out.copy_(x.t(), non_blocking=True)
            expected = batch.t().clone()
            del batch  # freed while both copies are queued
            torch.metalx.synchronize()
            assert torch.equal(out, expected), i
        """,
        **STRICT,
    )


def test_pinned_memory_with_two_devices():
    check_python(
        """
        import torch
        src = torch.arange(1000.0).pin_memory()
        a = src.to("metalx:0", non_blocking=True)
        b = src.to("metalx:1", non_blocking=True)
        torch.metalx.synchronize(0)
        torch.metalx.synchronize(1)
        assert torch.equal(a.cpu(), src) and torch.equal(b.cpu(), src)
        back = b.to("cpu", non_blocking=True)
        torch.metalx.synchronize(1)
        assert torch.equal(back, src)
        assert torch.metalx.host_memory_stats()["wrapped_buffers"] >= 2  # one per device
        """,
        METALSIM_DEVICE_COUNT="2",
    )
