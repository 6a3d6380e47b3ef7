"""Ctrl-C during a long wait for the device (synchronize, or the waits inside .item(),
.cpu() and the CPU fallback) raises KeyboardInterrupt, and metalx stays usable.

A child process queues a kernel that runs for seconds, says so, and waits in
torch.metalx.synchronize() (or a stream's synchronize()); the test sends it SIGINT. The
child checks that the wait ended with KeyboardInterrupt while the kernel was still
running (the stream reports unfinished work: no timing threshold), that a later
synchronize waits for the kernel, and that its result is right.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

CHILD = textwrap.dedent(
    """
    import sys, torch
    lib = torch.metalx.compile_shader('''
    kernel void spin(device float* out [[buffer(0)]], constant uint& n [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
      float acc = 0.0f;
      for (uint k = 0; k < n; ++k) acc = acc * 0.5f + 1.0f;   // a serial chain: not folded
      out[i] = acc;
    }''')
    from metalx.shaders import UInt32
    out = torch.zeros(1, device="metalx")
    lib.spin(out, UInt32(600_000_000), threads=1)
    waits = {
        "device": torch.metalx.synchronize,
        "stream": torch.metalx.current_stream().synchronize,
        # Implicit waits inside ops: the host waits for the stream before it reads.
        "item": out.item,
        "cpu": out.cpu,
        "strided cpu": lambda: out.expand(4, 3).t().cpu(),  # staged through a copy kernel
        "pinned cpu": lambda: torch.empty(1, pin_memory=True).copy_(out),
        "fallback": lambda: out.i0(),  # a CPU-fallback op
    }
    wait = waits[sys.argv[1]]
    try:
        print("waiting", flush=True)
        wait()
        print("not interrupted", flush=True)
        sys.exit(3)
    except KeyboardInterrupt:
        still_running = not torch.metalx.current_stream().query()
    torch.metalx.synchronize()
    print("interrupted", still_running, out.item(), flush=True)
    """
)


@pytest.mark.parametrize("wait", ["device", "stream", "item", "cpu", "strided cpu", "pinned cpu", "fallback"])
def test_ctrl_c_interrupts_a_long_wait(wait):
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, wait],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # The kernel runs for seconds on purpose: no watchdog, however loaded the machine.
        env={**os.environ, "METALX_DRIVER": "sim", "METALSIM_KERNEL_TIMEOUT_S": "0"},
    )
    try:
        assert child.stdout.readline().strip() == "waiting", child.stderr.read()
        time.sleep(0.5)  # into wait(): a signal before it would only prove less, not fail
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, (out, err)
    # The interrupt came while the kernel ran; afterwards its result (the limit 2 of
    # acc * 0.5 + 1) is there.
    assert out.split() == ["interrupted", "True", "2.0"], (out, err)
