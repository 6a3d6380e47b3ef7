"""Streams and events on metalx, as upstream tests them for CUDA: stream identity and
the current stream, work on several streams running concurrently and ordered by
events, timing, Tensor.record_stream and the allocator, non-blocking copies on a side
stream, and the errors for misuse.

A busy kernel (compiled with torch.metalx.compile_shader) keeps a stream running for a
known while, as torch.cuda._sleep does in upstream's tests.
"""

import threading

import pytest

from conftest import check_python

BUSY = """
#include <metal_stdlib>
using namespace metal;
// `iters` dependent steps per thread, then out[0] = value: the write marks the end.
kernel void busy_write(device int* out [[buffer(0)]],
                       constant uint& iters [[buffer(1)]],
                       constant int& value [[buffer(2)]],
                       uint gid [[thread_position_in_grid]]) {
  uint x = gid + 1u;
  for (uint i = 0; i < iters; ++i) x = x * 1664525u + 1013904223u + (x >> 13);
  out[1 + gid] = int(x);
  if (gid == 0) out[0] = value;
}
"""
LONG = 4_000_000  # iterations: well over 100 ms of device time on the simulator


@pytest.fixture(scope="module")
def busy(torch):
    lib = torch.metalx.compile_shader(BUSY, name="busy")
    from metalx.shaders import Int32, UInt32

    def run(out, iters, value):
        lib.busy_write(out, UInt32(iters), Int32(value), threads=64)

    return run


def marker(torch):
    out = torch.zeros(65, dtype=torch.int32, device="metalx")
    torch.metalx.synchronize()  # the zeros are written before any stream uses them
    return out


def test_streams_have_ids_devices_and_compare_equal(torch):
    default = torch.metalx.default_stream()
    assert default.stream_id == 0 and default.device == torch.device("metalx:0")
    assert torch.metalx.current_stream() == default
    s = torch.metalx.Stream()
    assert s != default and s.stream_id != 0
    assert isinstance(s, torch.Stream)
    assert torch.metalx.Stream(priority=-1).device.type == "metalx"  # accepted, no priorities
    again = torch.metalx.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    assert again == s and hash(again) == hash(s)
    assert torch.Stream(device="metalx").device.type == "metalx"


def test_stream_context_sets_and_restores_the_current_stream(torch):
    s = torch.metalx.Stream()
    with torch.metalx.stream(s) as entered:
        assert entered == s
        assert torch.metalx.current_stream() == s
        assert torch.accelerator.current_stream() == s
        with torch.metalx.stream(None):  # None: no change
            assert torch.metalx.current_stream() == s
    assert torch.metalx.current_stream() == torch.metalx.default_stream()
    torch.metalx.set_stream(s)
    try:
        assert torch.metalx.current_stream() == s
    finally:
        torch.metalx.set_stream(torch.metalx.default_stream())
    with s:  # torch.Stream's own context manager
        assert torch.accelerator.current_stream() == s
    assert torch.metalx.current_stream().stream_id == 0


def test_current_stream_is_per_thread(torch):
    s = torch.metalx.Stream()
    seen = []
    with torch.metalx.stream(s):
        t = threading.Thread(target=lambda: seen.append(torch.metalx.current_stream()))
        t.start()
        t.join()
        assert torch.metalx.current_stream() == s
    assert seen == [torch.metalx.default_stream()]


def test_streams_run_concurrently_and_wait_stream_orders_them(torch, busy):
    out = marker(torch)
    side = torch.metalx.Stream()
    with torch.metalx.stream(side):
        busy(out, LONG, 7)
    # The default stream does not wait for the side stream unless told to.
    x = torch.zeros(1000, device="metalx")
    x.fill_(1.0)
    torch.metalx.current_stream().synchronize()
    assert not side.query(), "the side stream finished before the default stream's work: no concurrency"
    torch.metalx.current_stream().wait_stream(side)
    # item() waits for the current stream only; that stream now waits for the side stream.
    assert out[0].item() == 7
    side.synchronize()
    assert side.query()
    assert x.sum().item() == 1000.0


def test_events_record_query_wait_and_synchronize(torch, busy):
    out = marker(torch)
    side = torch.metalx.Stream()
    done = torch.metalx.Event()
    assert done.query()  # never recorded: nothing to wait for
    with torch.metalx.stream(side):
        busy(out, LONG, 3)
        done.record()
    assert not done.query()
    done.wait(torch.metalx.current_stream())  # the device waits, not the host
    copy = out.clone()  # on the default stream, after the event
    done.synchronize()
    assert done.query()
    assert copy[0].item() == 3
    assert isinstance(done, torch.metalx.Event) and isinstance(done, torch.Event)
    assert not isinstance(torch.Event(device="cpu"), torch.metalx.Event)


def test_elapsed_time_measures_device_work(torch, busy):
    out = marker(torch)
    s = torch.metalx.Stream()
    start, short, long = (torch.metalx.Event(enable_timing=True) for _ in range(3))
    start.record(s)
    with torch.metalx.stream(s):
        busy(out, 1000, 1)
        short.record()
        busy(out, LONG, 2)
    s.record_event(long)
    long.synchronize()
    assert 0 <= start.elapsed_time(short) < start.elapsed_time(long)
    assert start.elapsed_time(long) > 10.0  # milliseconds: the busy kernel is long
    # torch.Event works the same way.
    a, b = torch.Event(device="metalx", enable_timing=True), torch.Event(device="metalx", enable_timing=True)
    a.record()
    b.record()
    b.synchronize()
    assert a.elapsed_time(b) >= 0


def test_elapsed_time_errors_name_the_problem(torch):
    timing = torch.metalx.Event(enable_timing=True)
    plain = torch.metalx.Event()
    timing.record()
    plain.record()
    plain.synchronize()
    with pytest.raises(ValueError, match="enable_timing"):
        timing.elapsed_time(plain)
    with pytest.raises(ValueError, match="recorded"):
        timing.elapsed_time(torch.metalx.Event(enable_timing=True))
    with pytest.raises(ValueError, match="interprocess"):
        torch.metalx.Event(interprocess=True)


def test_record_stream_keeps_memory_from_reuse_until_the_stream_is_done(torch, busy):
    nbytes = 1 << 20

    def freed_pointer_reused(record):
        side = torch.metalx.Stream()
        x = torch.empty(nbytes // 4, dtype=torch.int32, device="metalx")  # allocated on the default stream
        side.wait_stream(torch.metalx.current_stream())
        with torch.metalx.stream(side):
            busy(x, LONG, 1)  # the side stream writes x for a while
        if record:
            x.record_stream(side)
        torch.metalx.current_stream().synchronize()  # the default stream is idle: only side uses x
        ptr = x.data_ptr()
        del x
        y = torch.empty(nbytes // 4, dtype=torch.int32, device="metalx")
        reused = y.data_ptr() == ptr
        side.synchronize()
        del y
        return reused

    # Without record_stream, the default stream may take the block back at once.
    assert freed_pointer_reused(record=False)
    # With it, not while the side stream still runs...
    assert not freed_pointer_reused(record=True)
    # ...and once it is done, the memory is reused again.
    torch.metalx.synchronize()
    ptr = torch.empty(nbytes, dtype=torch.uint8, device="metalx").data_ptr()
    assert torch.empty(nbytes, dtype=torch.uint8, device="metalx").data_ptr() == ptr


def test_record_stream_rejects_a_foreign_stream(torch):
    x = torch.ones(4, device="metalx")
    with pytest.raises(RuntimeError, match="metalx stream"):
        x.record_stream(torch.Stream(device="cpu"))


def test_non_blocking_pinned_copies_on_a_side_stream(torch):
    host = torch.randn(1 << 18).pin_memory()
    side = torch.metalx.Stream()
    with torch.metalx.stream(side):
        on_device = host.to("metalx", non_blocking=True)
        back = torch.empty_like(host).pin_memory()
        back.copy_(on_device, non_blocking=True)
    side.synchronize()
    torch.testing.assert_close(back, host, rtol=0, atol=0)
    torch.testing.assert_close(on_device.cpu(), host, rtol=0, atol=0)


def test_native_ops_on_a_side_stream_match_cpu(torch):
    inp = torch.randn(2, 3, 9, 9)
    weight = torch.randn(4, 3, 3, 3)
    expected = torch.nn.functional.conv2d(inp, weight, padding=1)
    side = torch.metalx.Stream()
    d_inp, d_weight = inp.to("metalx"), weight.to("metalx")
    side.wait_stream(torch.metalx.current_stream())
    with torch.metalx.stream(side):
        result = torch.nn.functional.conv2d(d_inp, d_weight, padding=1)
        result.mul_(1.0)
    torch.metalx.current_stream().wait_stream(side)
    torch.testing.assert_close(result.cpu(), expected, rtol=1e-4, atol=1e-4)


def test_accelerator_stream_api(torch):
    s = torch.metalx.Stream()
    torch.accelerator.set_stream(s)
    try:
        assert torch.accelerator.current_stream() == s
        assert torch.metalx.current_stream() == s
    finally:
        torch.accelerator.set_stream(torch.metalx.default_stream())
    torch.accelerator.synchronize()


def test_two_devices_events_and_streams():
    check_python(
        """
        import torch
        s0 = torch.metalx.Stream(device=0)
        s1 = torch.metalx.Stream(device=1)
        assert s1.device == torch.device("metalx:1")

        # A stream context makes the stream's device current, and restores both.
        torch.metalx.set_device(1)
        with torch.metalx.stream(s0):
            assert torch.metalx.current_device() == 0
            assert torch.metalx.current_stream() == s0
            assert torch.metalx.current_stream(1).stream_id == 0
        assert torch.metalx.current_device() == 1
        assert torch.metalx.current_stream(0).stream_id == 0
        torch.metalx.set_device(0)

        # Work on device 1's stream, ordered by an event of device 1.
        e = torch.metalx.Event()
        with torch.metalx.stream(s1):
            x = torch.full((100,), 2.0, device="metalx:1")
            e.record()
        e.synchronize()
        assert x.sum().item() == 200.0

        # Events belong to one device.
        try:
            s0.wait_event(e)
        except ValueError as err:
            assert "belong to one device" in str(err), err
        else:
            raise AssertionError("a device-0 stream waited for a device-1 event")
        try:
            e.record(s0)
        except RuntimeError as err:
            assert "metalx:" in str(err), err
        else:
            raise AssertionError("a device-1 event was recorded on a device-0 stream")
        t0, t1 = torch.metalx.Event(enable_timing=True), torch.metalx.Event(enable_timing=True)
        t0.record(s0)
        t1.record(s1)
        t0.synchronize(); t1.synchronize()
        try:
            t0.elapsed_time(t1)
        except (ValueError, RuntimeError) as err:
            assert "different devices" in str(err) or "device" in str(err), err
        else:
            raise AssertionError("elapsed_time across devices did not fail")
        torch.metalx.synchronize(0)
        torch.metalx.synchronize(1)
        print("ok")
        """,
        METALSIM_DEVICE_COUNT="2",
    )


def test_streams_of_a_missing_device_are_a_clear_error(torch):
    missing = torch.metalx.device_count() + 3
    with pytest.raises(RuntimeError, match=f"metalx device {missing} does not exist"):
        torch.Stream(device=f"metalx:{missing}")
    with pytest.raises(RuntimeError, match=f"metalx device {missing} does not exist"):
        torch.accelerator.current_stream(missing)
