"""torch.metalx's memory API over the caching allocator, and out-of-memory errors."""

import subprocess
import sys
import textwrap

import pytest
import torch


def test_allocated_and_reserved_follow_tensors():
    torch.metalx.synchronize()
    torch.metalx.empty_cache()
    base_alloc = torch.metalx.memory_allocated()
    x = torch.empty(1 << 20, dtype=torch.float32, device="metalx")  # 4 MiB
    assert torch.metalx.memory_allocated() == base_alloc + (4 << 20)
    assert torch.metalx.memory_reserved() >= torch.metalx.memory_allocated()
    peak = torch.metalx.max_memory_allocated()
    assert peak >= base_alloc + (4 << 20)
    del x
    torch.metalx.synchronize()  # freed memory is reusable once queued work finished
    assert torch.metalx.memory_allocated() == base_alloc
    assert torch.metalx.max_memory_allocated() == peak
    torch.metalx.reset_peak_memory_stats()
    assert torch.metalx.max_memory_allocated() == base_alloc


def test_freed_memory_is_reused_and_empty_cache_releases_it():
    torch.metalx.synchronize()
    torch.metalx.empty_cache()
    before = torch.metalx.memory_stats()
    x = torch.empty(3 << 20, dtype=torch.uint8, device="metalx")
    ptr = x.data_ptr()
    del x
    torch.metalx.synchronize()
    y = torch.empty(3 << 20, dtype=torch.uint8, device="metalx")
    assert y.data_ptr() == ptr  # the cached block, no new device buffer
    after = torch.metalx.memory_stats()
    assert after["segment.all.allocated"] == before["segment.all.allocated"] + 1
    assert after["cache_hits"] == before["cache_hits"] + 1
    del y
    torch.metalx.synchronize()
    torch.metalx.empty_cache()
    assert torch.metalx.memory_reserved() == before["reserved_bytes.all.current"]


def test_accelerator_memory_info_reports_free_and_total():
    free, total = torch.accelerator.get_memory_info(torch.device("metalx"))
    assert 0 < free <= total


def _run(code, **env):
    import os

    full_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full_env, timeout=120)


def test_out_of_memory_is_torch_oom_with_a_useful_message_and_loses_nothing():
    # A 64 MiB device: the limit is 1.7 x 48 MiB of recommended working set.
    result = _run(
        """
        import torch
        keep = torch.empty(40 << 20, dtype=torch.uint8, device="metalx")
        before = torch.metalx.memory_stats()
        try:
            torch.empty(80 << 20, dtype=torch.uint8, device="metalx")
        except torch.OutOfMemoryError as e:
            print("OOM:", e)
        after = torch.metalx.memory_stats()
        assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
        assert after["num_ooms"] == before["num_ooms"] + 1
        del keep
        torch.metalx.synchronize()
        again = torch.empty(60 << 20, dtype=torch.uint8, device="metalx")  # still usable
        print("ok", again.numel())
        """,
        METALSIM_MEMORY_MB="64",
    )
    assert result.returncode == 0, result.stderr
    assert "tried to allocate 80.00 MiB" in result.stdout
    assert "is allocated by tensors" in result.stdout
    assert "METALX_HIGH_WATERMARK_RATIO" in result.stdout
    assert "ok 62914560" in result.stdout
