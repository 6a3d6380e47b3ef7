"""The simulator's kernel watchdog (METALSIM_KERNEL_TIMEOUT_S): a compile_shader kernel
that never ends is stopped with Metal's "Caused GPU Timeout Error", raised at the next
synchronisation, and the process keeps working. Run in a child with a 1 s timeout."""

from conftest import check_python

SPIN = r'''
import time, torch
lib = torch.metalx.compile_shader("""
#include <metal_stdlib>
using namespace metal;
kernel void spin(device atomic_int* flag [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  while (atomic_load_explicit(flag, memory_order_relaxed) == 0) {}
}
kernel void spin_group(device int* flag [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  threadgroup_barrier(mem_flags::mem_none);
  for (;;) { if (((volatile device int*)flag)[0] != 0) break; }
}
kernel void count_up(device int* out [[buffer(0)]], constant int& n [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
  int s = 0;
  for (int k = 0; k < n; ++k) s += k;
  out[i] = s;
}
""")
for name in ("spin", "spin_group"):
    flag = torch.zeros(1, dtype=torch.int32, device="metalx")
    t0 = time.monotonic()
    getattr(lib, name)(flag, threads=4096, group_size=64)
    try:
        torch.metalx.synchronize()
        print("NO ERROR", name)
    except RuntimeError as e:
        print("ERR", name, round(time.monotonic() - t0, 1), e)
out = torch.zeros(256, dtype=torch.int32, device="metalx")
lib.count_up(out, 1000)
print("SUM", out.cpu().unique().tolist())
x = torch.arange(10.0)
print("OPS", (x.to("metalx") * 2).cpu().tolist() == (x * 2).tolist())
'''


def test_spinning_kernels_time_out_and_the_process_keeps_working():
    result = check_python(SPIN, METALSIM_KERNEL_TIMEOUT_S="1")
    lines = result.stdout.splitlines()
    for name in ("spin", "spin_group"):
        err = [line for line in lines if line.startswith(f"ERR {name} ")]
        assert err, result.stdout
        assert "Caused GPU Timeout Error" in err[0] and "METALSIM_KERNEL_TIMEOUT_S=1" in err[0], err[0]
        assert f"kernel '{name}'" in err[0], err[0]
        seconds = float(err[0].split()[2])
        assert 0.9 <= seconds < 30, err[0]
    assert "SUM [499500]" in result.stdout
    assert "OPS True" in result.stdout


def test_bounded_loops_are_not_stopped():
    # The watchdog only ends kernels that run past the limit.
    result = check_python(r'''
import torch
lib = torch.metalx.compile_shader("""
kernel void loop(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float s = 0;
  for (uint k = 0; k < 20000; ++k) s += 1.0f;
  out[i] = s;
}
""")
out = torch.zeros(64, device="metalx")
lib.loop(out)
print("OUT", out.cpu().unique().tolist())
''', METALSIM_KERNEL_TIMEOUT_S="1")
    assert "OUT [20000.0]" in result.stdout

