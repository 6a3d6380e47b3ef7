"""memory_snapshot(), memory_summary(), mem_get_info() and the per-process memory
fraction, checked against the allocator's statistics and the runtime's own count of
device memory (MTLDevice.currentAllocatedSize on Apple, the simulator's otherwise)."""

import re

import pytest
import torch

from conftest import check_python
from metalx import _C
from metalx._memory_summary import format_bytes


def _settled():
    # Freed blocks become free (inactive) only after queued GPU work completes.
    torch.metalx.synchronize()


def test_snapshot_agrees_with_allocator_statistics():
    keep = [torch.empty(n, dtype=torch.uint8, device="metalx") for n in (100, 3000, 5 << 20, 1 << 20)]
    dropped = torch.empty(7 << 20, dtype=torch.uint8, device="metalx")
    del dropped
    _settled()
    segments = torch.metalx.memory_snapshot()
    stats = torch.metalx.memory_stats()

    assert sum(s["total_size"] for s in segments) == stats["reserved_bytes.all.current"]
    assert sum(s["allocated_size"] for s in segments) == stats["allocated_bytes.all.current"]
    assert sum(s["requested_size"] for s in segments) == stats["requested_bytes.all.current"]
    assert len(segments) == stats["segment.all.allocated"] - stats["segment.all.freed"]
    blocks = [b for s in segments for b in s["blocks"]]
    assert sum(b["state"] == "active_allocated" for b in blocks) == stats["active.all.current"]

    for s in segments:
        # Blocks tile their segment: contiguous, in address order, covering all of it.
        offset = 0
        for b in s["blocks"]:
            assert b["offset"] == offset and b["address"] == s["address"] + offset
            assert b["state"] in ("active_allocated", "active_pending_free", "inactive")
            offset += b["size"]
        assert offset == s["total_size"]
        assert s["segment_type"] in ("small", "large")

    by_address = {b["address"]: b for b in blocks}
    for t in keep:
        block = by_address[t.data_ptr()]
        assert block["state"] == "active_allocated"
        assert block["requested_size"] == t.nbytes
        assert block["size"] >= t.nbytes


def test_freed_block_shows_as_inactive_at_the_same_address():
    t = torch.empty(3 << 20, dtype=torch.uint8, device="metalx")
    address = t.data_ptr()
    del t
    _settled()
    block = next(b for s in torch.metalx.memory_snapshot() for b in s["blocks"] if b["address"] == address)
    assert block["state"] == "inactive" and block["requested_size"] == 0


def test_reserved_memory_is_what_the_device_really_holds():
    # Deltas: the runtime may hold buffers of its own (libraries, pinned memory).
    _settled()
    torch.metalx.empty_cache()
    device_before, reserved_before = _C._device_allocated_size(0), torch.metalx.memory_reserved()
    t = torch.empty(9 << 20, dtype=torch.uint8, device="metalx")
    grown_device = _C._device_allocated_size(0) - device_before
    grown_reserved = torch.metalx.memory_reserved() - reserved_before
    assert grown_reserved >= 9 << 20
    assert grown_device == grown_reserved
    del t
    _settled()
    torch.metalx.empty_cache()
    assert _C._device_allocated_size(0) == device_before
    assert torch.metalx.memory_reserved() == reserved_before


def test_snapshot_covers_every_device_or_the_one_asked_for():
    check_python(
        """
        import torch
        on1 = torch.empty(3 << 20, dtype=torch.uint8, device="metalx:1")
        assert {s["device"] for s in torch.metalx.memory_snapshot("metalx:1")} == {1}
        assert torch.metalx.memory_snapshot(0) == []
        everything = torch.metalx.memory_snapshot()
        assert [s["device"] for s in everything] == [1]
        on0 = torch.empty(10, device="metalx:0")
        assert sorted({s["device"] for s in torch.metalx.memory_snapshot()}) == [0, 1]
        assert on1.data_ptr() in [b["address"] for s in torch.metalx.memory_snapshot(1) for b in s["blocks"]]
        """,
        METALSIM_DEVICE_COUNT="2",
    )


def test_snapshot_of_a_bad_device_is_a_clear_error():
    count = torch.metalx.device_count()
    with pytest.raises(RuntimeError, match=f"metalx device {count + 3} does not exist"):
        torch.metalx.memory_snapshot(count + 3)
    with pytest.raises(ValueError, match="expected a metalx device"):
        torch.metalx.memory_summary("cpu")


def test_summary_shows_the_allocator_numbers():
    keep = torch.empty(5 << 20, dtype=torch.uint8, device="metalx")  # noqa: F841
    _settled()
    stats = torch.metalx.memory_stats()
    summary = torch.metalx.memory_summary()
    info = _C._device_info(0)

    def row(name):
        line = next(line for line in summary.splitlines() if line.startswith(f"| {name}"))
        return [cell.strip() for cell in line.strip("|").split("|")[1:]]

    assert row("Allocated")[:2] == [format_bytes(stats["allocated_bytes.all.current"]),
                                    format_bytes(stats["allocated_bytes.all.peak"])]
    assert row("Reserved")[:2] == [format_bytes(stats["reserved_bytes.all.current"]),
                                   format_bytes(stats["reserved_bytes.all.peak"])]
    assert row("Segments") == [str(len(torch.metalx.memory_snapshot(0))), str(stats["segment.all.allocated"]),
                               str(stats["segment.all.freed"])]
    assert info["name"] in summary
    limit = torch.metalx.mem_get_info()[1]
    assert f"Limit: {format_bytes(limit)}" in summary
    assert "small pool" in summary and "small pool" not in torch.metalx.memory_summary(abbreviated=True)
    assert len({len(line) for line in summary.splitlines()}) == 1  # a rectangular table


def test_format_bytes():
    assert [format_bytes(n) for n in (0, 1023, 1024, 3 << 20, 5 << 30)] == [
        "0 B", "1023 B", "1.00 KiB", "3.00 MiB", "5.00 GiB"]


def test_mem_get_info_matches_accelerator_api_and_allocated_memory():
    keep = torch.empty(4 << 20, dtype=torch.uint8, device="metalx")  # noqa: F841
    free, total = torch.metalx.mem_get_info()
    assert (free, total) == torch.accelerator.get_memory_info(torch.device("metalx", 0))
    assert free == total - torch.metalx.memory_allocated()
    working_set = _C._device_info(0)["recommended_max_working_set_size"]
    assert total == int(torch.metalx.get_per_process_memory_fraction() * working_set)


def test_memory_fraction_limits_allocations_and_loses_nothing():
    # A 64 MiB simulated device; sizes are multiples of 2 MiB, the large-pool rounding.
    result = check_python(
        """
        import torch
        from metalx import _C
        MiB = 1 << 20
        working_set = _C._device_info(0)["recommended_max_working_set_size"]
        fraction = (24 * MiB) / working_set
        torch.metalx.set_per_process_memory_fraction(fraction)
        assert torch.metalx.get_per_process_memory_fraction() == fraction
        free, total = torch.metalx.mem_get_info()
        assert total == 24 * MiB and free == total, (free, total)

        keep = torch.full((16 * MiB,), 7, dtype=torch.uint8, device="metalx")
        cached = torch.empty(6 * MiB, dtype=torch.uint8, device="metalx")
        del cached
        torch.metalx.synchronize()
        assert torch.metalx.memory_reserved() == 22 * MiB
        before = torch.metalx.memory_stats()

        # Fits only once the 6 MiB cached buffer is released: freed, retried, served.
        fits = torch.empty(8 * MiB, dtype=torch.uint8, device="metalx")
        after = torch.metalx.memory_stats()
        assert after["num_alloc_retries"] == before["num_alloc_retries"] + 1
        assert after["reserved_bytes.all.current"] == 24 * MiB
        del fits
        torch.metalx.synchronize()

        # Over the limit even with the cache released.
        try:
            torch.empty(10 * MiB, dtype=torch.uint8, device="metalx")
            raise SystemExit("no OutOfMemoryError")
        except torch.OutOfMemoryError as e:
            print("OOM:", e)
        assert torch.metalx.memory_allocated() == 16 * MiB
        assert bool((keep.cpu() == 7).all()) and keep.device.type == "metalx"

        # Raising the fraction makes room again.
        torch.metalx.set_per_process_memory_fraction(2 * fraction)
        again = torch.empty(10 * MiB, dtype=torch.uint8, device="metalx")
        print("ok", again.numel(), torch.metalx.memory_allocated())
        """,
        METALSIM_MEMORY_MB="64",
    )
    out = result.stdout
    assert "tried to allocate 10.00 MiB" in out
    assert "the limit is 24.00 MiB (torch.metalx.set_per_process_memory_fraction(" in out
    assert "raise the memory fraction" in out
    assert f"ok {10 << 20} {26 << 20}" in out


def test_memory_fraction_default_comes_from_the_environment():
    result = check_python(
        """
        import torch
        print(torch.metalx.get_per_process_memory_fraction())
        """,
        METALX_HIGH_WATERMARK_RATIO="0.75",
    )
    assert float(result.stdout) == 0.75


@pytest.mark.parametrize("bad, error, message", [
    (0, ValueError, "must be a finite number > 0, got 0"),
    (-0.5, ValueError, "must be a finite number > 0, got -0.5"),
    (float("nan"), ValueError, "must be a finite number > 0, got nan"),
    (float("inf"), ValueError, "must be a finite number > 0, got inf"),
    ("0.5", TypeError, "fraction must be a number, got str"),
    (True, TypeError, "fraction must be a number, got bool"),
])
def test_bad_memory_fraction_is_a_clear_error_and_changes_nothing(bad, error, message):
    before = torch.metalx.get_per_process_memory_fraction()
    with pytest.raises(error, match=re.escape(message)):
        torch.metalx.set_per_process_memory_fraction(bad)
    assert torch.metalx.get_per_process_memory_fraction() == before
