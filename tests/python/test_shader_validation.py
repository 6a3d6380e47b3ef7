"""Shader validation of torch.metalx.compile_shader kernels (on by default in the
simulator, METALSIM_SHADER_VALIDATION): an access outside the buffer an argument is
bound to fails that stream's work with a message naming the kernel, the argument, the
byte offset, the element type and the thread; nothing outside is written; the process
keeps working. Kernels written in the usual styles run exactly as before."""

import os
import re

import pytest
import torch

from conftest import check_python
from metalx import shaders as S

HEADER = "#include <metal_stdlib>\nusing namespace metal;\n"


def dev(t):
    return t.to("metalx")


@pytest.fixture(scope="module")
def faulty():
    return torch.metalx.compile_shader(HEADER + """
kernel void far_write(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[i + 1000000] = 1.0f;
}
kernel void far_read(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
  out[i] = x[i + 1000000] + 1.0f;
}
kernel void before_start(device int* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  device int* p = out;
  p -= 1000000;
  p[i] = 3;
}
kernel void add_one(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],
                    uint i [[thread_position_in_grid]]) {
  out[i] = x[i] + 1.0f;
}
""")


def neighbours():
    """A 16-float target between two filled tensors allocated just before and after it."""
    left = dev(torch.full((1024,), 1.5))
    target = dev(torch.zeros(16))
    right = dev(torch.full((1024,), -2.5))
    return left, target, right


def synchronize_error():
    with pytest.raises(RuntimeError) as info:
        torch.metalx.synchronize()
    return str(info.value)


def test_far_write_fails_at_synchronize_naming_kernel_argument_offset_type_thread(faulty):
    left, target, right = neighbours()
    torch.metalx.synchronize()
    allocated = torch.metalx.memory_allocated()
    faulty.far_write(target, threads=16)
    msg = synchronize_error()
    assert "kernel 'far_write'" in msg, msg
    assert "argument 'out' [[buffer(0)]] as float (4 bytes) at byte offset 4000000" in msg, msg
    assert re.search(r"thread \(\d+, 0, 0\) \[\[thread_position_in_grid\]\]", msg), msg
    assert "Caused GPU Address Fault Error" in msg, msg
    # Nothing was written: not the target, not its neighbours.
    assert torch.equal(left.cpu(), torch.full((1024,), 1.5))
    assert torch.equal(target.cpu(), torch.zeros(16))
    assert torch.equal(right.cpu(), torch.full((1024,), -2.5))
    # The error was reported once, and the process keeps working.
    torch.metalx.synchronize()
    assert torch.metalx.memory_allocated() == allocated
    x = torch.randn(16)
    faulty.add_one(target, dev(x))
    torch.testing.assert_close(target.cpu(), x + 1, rtol=0, atol=0)
    y = torch.randn(300)
    torch.testing.assert_close((dev(y) * 3 + 1).cpu(), y * 3 + 1)


def test_far_read_names_the_read_argument_and_writes_nothing(faulty):
    out = dev(torch.full((8,), 7.0))
    x = dev(torch.ones(8))
    faulty.far_read(out, x, threads=8)
    msg = synchronize_error()
    assert "kernel 'far_read'" in msg and "argument 'x' [[buffer(1)]] as float" in msg, msg
    assert torch.equal(out.cpu(), torch.full((8,), 7.0))


def test_access_before_the_binding_start_is_caught(faulty):
    left, _, right = neighbours()
    target = dev(torch.zeros(4, dtype=torch.int32))
    faulty.before_start(target, threads=4)
    msg = synchronize_error()
    assert "argument 'out' [[buffer(0)]] as int (4 bytes) at byte offset -4000000" in msg, msg
    assert torch.equal(target.cpu(), torch.zeros(4, dtype=torch.int32))
    assert torch.equal(left.cpu(), torch.full((1024,), 1.5))
    assert torch.equal(right.cpu(), torch.full((1024,), -2.5))


def test_threadgroup_memory_is_checked_against_its_declared_and_set_lengths():
    # The block-sum kernel a first reduction often is, with the classic bug: the tree
    # starts at the group size instead of half of it, so thread 0 reads shared[32].
    lib = torch.metalx.compile_shader(HEADER + """
kernel void block_sum(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],
                      constant uint& start [[buffer(2)]],
                      uint i [[thread_position_in_grid]], uint l [[thread_position_in_threadgroup]],
                      uint g [[threadgroup_position_in_grid]]) {
  threadgroup float shared[32];
  shared[l] = x[i];
  for (uint s = start; s > 0; s /= 2) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (l < s) shared[l] += shared[l + s];
  }
  if (l == 0) out[g] = shared[0];
}
kernel void scaled(device float* out [[buffer(0)]], threadgroup float* tmp [[threadgroup(0)]],
                   uint l [[thread_position_in_threadgroup]]) {
  tmp[l] = float(l);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[l] = tmp[31 - l] * 2.0f;
}
""")
    x = torch.randn(128)
    out = dev(torch.zeros(4))
    start = dev(torch.tensor([16], dtype=torch.int32))
    lib.block_sum(out, dev(x), start, threads=128, group_size=32)
    torch.testing.assert_close(out.cpu(), x.view(4, 32).sum(1))
    start.fill_(32)
    lib.block_sum(out, dev(x), start, threads=128, group_size=32)
    msg = synchronize_error()
    assert "invalid threadgroup memory access" in msg and "kernel 'block_sum'" in msg, msg
    assert "threadgroup variable 'shared' as float (4 bytes) at byte offset 128, outside its 128 bytes" in msg, msg
    # [[threadgroup(0)]] holds what the call set: 32 floats are enough, 16 are not.
    out = dev(torch.zeros(32))
    lib.scaled(out, threads=32, group_size=32, threadgroup_memory=32 * 4)
    torch.testing.assert_close(out.cpu(), (31 - torch.arange(32.0)) * 2)
    lib.scaled(out, threads=32, group_size=32, threadgroup_memory=16 * 4)
    msg = synchronize_error()
    assert "argument 'tmp' [[threadgroup(0)]] as float (4 bytes) at byte offset 64, outside its 64 bytes" in msg, msg
    # The process keeps working.
    torch.testing.assert_close((dev(x) * 2).cpu(), x * 2)


def test_error_stays_on_its_stream_and_a_later_stream_sync_is_clean(faulty):
    s = torch.metalx.Stream()
    with torch.metalx.stream(s):
        faulty.far_write(dev(torch.zeros(16)), threads=16)
    with pytest.raises(RuntimeError, match="far_write"):
        s.synchronize()
    s.synchronize()  # reported once
    torch.metalx.synchronize()


def test_scalar_argument_smaller_than_the_kernel_reads_is_reported():
    lib = torch.metalx.compile_shader(HEADER + """
kernel void read_vec(device float* out [[buffer(0)]], constant float4& v [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) { out[i] = v.w; }
""")
    lib.read_vec(dev(torch.zeros(4)), 2.0, threads=4)  # a Python float binds 4 bytes
    msg = synchronize_error()
    assert "argument 'v' [[buffer(1)]] as float4 (16 bytes) at byte offset 0, outside the 4 bytes" in msg, msg


STYLES = HEADER + """
struct Pair { float a; float b; };
inline void put(device float* p, uint i, float v) { p[i] = v; }
template <typename T> inline T twice_at(const device T* p, uint i) { return p[i] * T(2); }
kernel void styles(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],
                   device atomic_uint* count [[buffer(2)]], device Pair* pairs [[buffer(3)]],
                   constant uint& n [[buffer(4)]],
                   uint i [[thread_position_in_grid]]) {
  if (i >= n) return;
  float s = 0;
  for (uint k = 0; k < n; ++k) s += x[k];
  const device float4* x4 = (const device float4*)x;
  float4 v = x4[i / 4];
  device float* row = out + i;
  put(row, 0, s + v[i % 4] + twice_at(x, i));
  atomic_fetch_add_explicit(count, 1u, memory_order_relaxed);
  device Pair* pr = pairs + i;
  pr->a = x[i];
  (*pr).b = pr->a * 3.0f;
}
kernel void reduce_tg(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],
                      uint i [[thread_position_in_grid]], uint l [[thread_position_in_threadgroup]],
                      uint g [[threadgroup_position_in_grid]]) {
  threadgroup float part[32];
  part[l] = x[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (l == 0) {
    float s = 0;
    for (uint k = 0; k < 32; ++k) s += part[k];
    out[g] = s;
  }
}
"""


def test_usual_kernel_styles_run_as_on_cpu():
    lib = torch.metalx.compile_shader(STYLES)
    n = 64
    x = torch.randn(n)
    out = dev(torch.zeros(n))
    count = dev(torch.zeros(1, dtype=torch.int32))
    pairs = dev(torch.zeros(n, 2))
    lib.styles(out, dev(x), count, pairs, S.UInt32(n), threads=n)
    expected = x.sum() + x + 2 * x
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)
    assert count.cpu().item() == n
    torch.testing.assert_close(pairs.cpu(), torch.stack([x, 3 * x], 1), rtol=0, atol=0)
    sums = dev(torch.zeros(4))
    y = torch.randn(128)
    lib.reduce_tg(sums, dev(y), threads=128, group_size=32)
    torch.testing.assert_close(sums.cpu(), y.view(4, 32).sum(1), rtol=1e-5, atol=1e-5)


def test_validation_can_be_turned_off():
    # With validation off the short scalar is read past its 4 bytes (from the command's
    # own inline storage) without an error; with it on the same call fails.
    code = HEADER.replace("\n", "\\n")
    result = check_python(f"""
        import torch
        lib = torch.metalx.compile_shader("{code}" '''
        kernel void read_vec(device float* out [[buffer(0)]], constant float4& v [[buffer(1)]],
                             uint i [[thread_position_in_grid]]) {{ out[i] = v.x; }}
        ''')
        out = torch.zeros(4, device="metalx")
        lib.read_vec(out, 2.0, threads=4)
        print("OUT", out.cpu().tolist())
    """, METALSIM_SHADER_VALIDATION="0")
    assert "OUT [2.0, 2.0, 2.0, 2.0]" in result.stdout


@pytest.mark.skipif(os.environ.get("METALSIM_SHADER_VALIDATION") != "all",
                    reason="built-in kernels are checked only with METALSIM_SHADER_VALIDATION=all "
                           "(CI's second pass of this suite)")
def test_builtin_kernels_are_checked_with_validation_all():
    # A storage shrunk under its tensor (torch does not check storage bounds at op time):
    # metalx's own fill kernel then writes far past the buffer. Checked, it stops before
    # writing, the stream reports it, and everything else is intact.
    x = torch.zeros(10_000_000, device="metalx")
    neighbour = torch.full((1000,), 5.0, device="metalx")
    x.untyped_storage().resize_(4)
    with pytest.raises(RuntimeError, match=r"kernel 'fill_dense_\w+': invalid device memory access.*"
                                           r"argument 'out' \[\[buffer\(0\)\]\].*outside the \d+ bytes bound"):
        x.fill_(1.0)
        torch.metalx.synchronize()
    assert neighbour.sum().item() == 5000.0
    assert torch.equal((torch.arange(5, device="metalx") * 2).cpu(), torch.arange(5) * 2)
