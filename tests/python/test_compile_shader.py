"""torch.metalx.compile_shader: user kernels against CPU torch results, argument
binding, launch shapes, ordering with other metalx work, and every error path."""

import pytest
import torch

from conftest import check_python
from metalx import _C
from metalx import shaders as S

HEADER = "#include <metal_stdlib>\nusing namespace metal;\n"


def dev(t):
    """A CPU tensor on metalx, through the native copy (no CPU fallback)."""
    return t.to("metalx")


@pytest.fixture(scope="module")
def elementwise():
    return torch.metalx.compile_shader(HEADER + """
kernel void axpb(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],
                 constant float& alpha [[buffer(2)]], constant float& b [[buffer(3)]],
                 uint i [[thread_position_in_grid]]) {
  out[i] = x[i] * alpha + b;
}
kernel void add_one(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],
                    uint i [[thread_position_in_grid]]) {
  out[i] = x[i] + 1.0f;
}
""")


def test_elementwise_matches_cpu(elementwise):
    x = torch.randn(1003)
    out = dev(torch.empty(1003))
    elementwise.axpb(out, dev(x), 2.5, -1.25)
    torch.testing.assert_close(out.cpu(), x * 2.5 - 1.25, rtol=0, atol=0)


def test_library_lists_its_kernels(elementwise):
    assert elementwise.kernel_names == ["add_one", "axpb"]
    assert {"add_one", "axpb"} <= set(dir(elementwise))
    k = elementwise.axpb
    assert k.name == "axpb" and elementwise["axpb"] is k
    assert 1 <= k.max_threads_per_threadgroup <= 1024
    assert k.thread_execution_width == 32


def test_scalars_bind_with_their_types():
    lib = torch.metalx.compile_shader(HEADER + """
kernel void scalars(device float* out [[buffer(0)]], constant uint& n [[buffer(1)]],
                    constant int& k [[buffer(2)]], constant float& f [[buffer(3)]],
                    constant bool& flag [[buffer(4)]], constant long& big [[buffer(5)]],
                    constant half& h [[buffer(6)]], constant ushort& s [[buffer(7)]],
                    uint i [[thread_position_in_grid]]) {
  if (i >= n) return;
  out[i] = float(k) * f + (flag ? 1000.0f : 0.0f) + float(big - 4000000000L) + float(h) + float(s);
}
""")
    out = dev(torch.zeros(8))
    lib.scalars(out, S.UInt32(5), S.Int32(-3), 1.5, True, 4000000007, S.Float16(0.25), S.UInt16(9),
                threads=8)
    expected = torch.zeros(8)
    expected[:5] = -3 * 1.5 + 1000 + 7 + 0.25 + 9
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0)


def test_python_int_read_as_four_bytes_works_on_little_endian():
    # An int binds 8 bytes of int64; a kernel reading `constant uint&`/`constant int&`
    # gets its low 4 bytes, which are the value on little-endian GPUs (documented).
    lib = torch.metalx.compile_shader(HEADER + """
kernel void k(device int* out [[buffer(0)]], constant uint& n [[buffer(1)]],
              constant int& m [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  out[i] = int(n) * 10 + m;
}
""")
    out = dev(torch.zeros(3, dtype=torch.int32))
    lib.k(out, 7, -3)
    assert out.cpu().tolist() == [67, 67, 67]


def test_lists_bind_as_arrays():
    lib = torch.metalx.compile_shader(HEADER + """
kernel void poly(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],
                 constant float* c [[buffer(2)]], constant long* offs [[buffer(3)]],
                 constant int* small [[buffer(4)]], uint i [[thread_position_in_grid]]) {
  out[i] = c[0] + c[1] * x[i] + c[2] * x[i] * x[i] + float(offs[1]) + float(small[2]);
}
""")
    x = torch.linspace(-2, 2, 33)
    out = dev(torch.empty(33))
    lib.poly(out, dev(x), [1, 0.5, 0.25], (10, 20), S.Int32([1, 2, 3]))
    torch.testing.assert_close(out.cpu(), 1 + 0.5 * x + 0.25 * x * x + 23, rtol=1e-6, atol=1e-6)


def test_templated_kernel_with_host_names():
    lib = torch.metalx.compile_shader(HEADER + """
template <typename T>
kernel void scale(device T* out [[buffer(0)]], const device T* x [[buffer(1)]],
                  constant float& a [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  out[i] = T(float(x[i]) * a);
}
template [[host_name("scale_float")]] kernel decltype(scale<float>) scale<float>;
template [[host_name("scale_half")]] kernel decltype(scale<half>) scale<half>;
template [[host_name("scale_int")]] kernel decltype(scale<int>) scale<int>;
""")
    assert lib.kernel_names == ["scale_float", "scale_half", "scale_int"]
    for dtype, name in [(torch.float32, "scale_float"), (torch.float16, "scale_half"), (torch.int32, "scale_int")]:
        x = torch.arange(-50, 50).to(dtype)
        out = dev(torch.empty(100, dtype=dtype))
        getattr(lib, name)(out, dev(x), 3.0)
        assert torch.equal(out.cpu(), (x.float() * 3).to(dtype)), name


REDUCE = HEADER + """
// One int sum per threadgroup: simd_sum within each SIMD group, then SIMD group 0
// adds the per-group partials through threadgroup memory.
kernel void group_sums(device int* partial [[buffer(0)]], const device int* x [[buffer(1)]],
                       uint gid [[thread_position_in_grid]], uint tg [[threadgroup_position_in_grid]],
                       uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]],
                       uint nsg [[simdgroups_per_threadgroup]]) {
  threadgroup int sums[32];
  int s = simd_sum(x[gid]);
  if (lane == 0) sums[sg] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    int t = simd_sum(lane < nsg ? sums[lane] : 0);
    if (lane == 0) partial[tg] = t;
  }
}
// The same with dynamic threadgroup memory ([[threadgroup(0)]]).
kernel void group_sums_dyn(device int* partial [[buffer(0)]], const device int* x [[buffer(1)]],
                           threadgroup int* sums [[threadgroup(0)]],
                           uint gid [[thread_position_in_grid]], uint tg [[threadgroup_position_in_grid]],
                           uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]],
                           uint nsg [[simdgroups_per_threadgroup]]) {
  int s = simd_sum(x[gid]);
  if (lane == 0) sums[sg] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    int t = simd_sum(lane < nsg ? sums[lane] : 0);
    if (lane == 0) partial[tg] = t;
  }
}
"""


@pytest.mark.parametrize("n", [1, 31, 33, 255, 1001, 12345])
@pytest.mark.parametrize("kernel", ["group_sums", "group_sums_dyn"])
def test_reduction_with_threadgroup_memory_and_simd_sum(n, kernel):
    lib = torch.metalx.compile_shader(REDUCE)
    group = 256
    x = torch.randint(-1000, 1000, (n,), dtype=torch.int32)
    groups = (n + group - 1) // group
    partial = dev(torch.zeros(groups, dtype=torch.int32))
    extra = {"threadgroup_memory": 32 * 4} if kernel == "group_sums_dyn" else {}
    getattr(lib, kernel)(partial, dev(x), threads=n, group_size=group, **extra)
    expected = torch.stack([c.sum() for c in x.split(group)]).to(torch.int32)
    assert torch.equal(partial.cpu(), expected)  # exact, odd sizes and a partial last group
    assert int(partial.cpu().sum()) == int(x.sum())


def test_view_with_storage_offset_binds_at_its_data():
    lib = torch.metalx.compile_shader(HEADER + """
kernel void twice(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] *= 2.0f; }
""")
    base = torch.arange(20, dtype=torch.float32)
    d = dev(base)
    view = d[5:15]
    assert view.storage_offset() == 5
    lib.twice(view)  # threads = view.numel()
    expected = base.clone()
    expected[5:15] *= 2
    assert torch.equal(d.cpu(), expected)


def test_non_contiguous_view_is_raw_memory_with_its_strides():
    lib = torch.metalx.compile_shader(HEADER + """
kernel void gather2d(device float* out [[buffer(0)]], const device float* x [[buffer(1)]],
                     constant long& cols [[buffer(2)]], constant long& s0 [[buffer(3)]],
                     constant long& s1 [[buffer(4)]], uint i [[thread_position_in_grid]]) {
  out[i] = x[(i / cols) * s0 + (i % cols) * s1];
}
""")
    base = torch.randn(4, 7)
    t = dev(base)[:, 1:].t()  # 6 x 4, strides (1, 7), storage offset 1
    assert not t.is_contiguous()
    out = dev(torch.empty(t.numel()))
    lib.gather2d(out, t, t.size(1), t.stride(0), t.stride(1))
    assert torch.equal(out.cpu().view(6, 4), base[:, 1:].t().contiguous())


def test_two_dimensional_grid():
    lib = torch.metalx.compile_shader(HEADER + """
kernel void coords(device int* out [[buffer(0)]], constant uint& width [[buffer(1)]],
                   uint2 p [[thread_position_in_grid]]) {
  out[p.y * width + p.x] = int(p.x) * 1000 + int(p.y);
}
""")
    w, h = 37, 11
    expected = (torch.arange(w) * 1000 + torch.arange(h)[:, None]).to(torch.int32)
    for group in [None, (8, 4), 16]:
        out = dev(torch.full((h, w), -1, dtype=torch.int32))
        lib.coords(out, S.UInt32(w), threads=(w, h), group_size=group)
        assert torch.equal(out.cpu(), expected), group


def test_float16_tensors():
    lib = torch.metalx.compile_shader(HEADER + """
kernel void fma_half(device half* out [[buffer(0)]], const device half* x [[buffer(1)]],
                     constant half& a [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  out[i] = x[i] * a + x[i];
}
""")
    x = (torch.arange(-256, 256) / 4).to(torch.float16)
    out = dev(torch.empty(512, dtype=torch.float16))
    lib.fma_half(out, dev(x), S.Float16(0.5))
    assert torch.equal(out.cpu(), x * 0.5 + x)


def test_results_are_ordered_with_other_metalx_work(elementwise):
    # More kernels than one command buffer holds, each reading the last one's output,
    # fed by a native fill and read back by .cpu(): every write is seen, in order.
    y = torch.zeros(4099, device="metalx")
    y.fill_(3.0)
    for _ in range(40):
        elementwise.add_one(y, y)
    assert torch.equal(y.cpu(), torch.full((4099,), 43.0))
    z = torch.empty(4099, device="metalx")
    elementwise.axpb(z, y, 0.5, 0.0)
    z.fill_(7.0)  # a later fill overwrites the kernel's result, not the other way round
    assert torch.equal(z.cpu(), torch.full((4099,), 7.0))


def test_kernel_calls_do_not_fall_back(elementwise):
    x = dev(torch.randn(100))
    out = dev(torch.empty(100))
    torch.metalx.reset_fallback_stats()
    elementwise.axpb(out, x, 1.0, 2.0)
    elementwise.add_one(out, out)
    out.cpu()
    assert torch.metalx.fallback_stats() == {}


def test_compiling_the_same_source_again_hits_the_cache():
    src = HEADER + "kernel void same(device int* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = 9; }\n"
    torch.metalx.compile_shader(src)
    before = _C._shader_cache_stats(torch.metalx.current_device())
    lib = torch.metalx.compile_shader(src)
    after = _C._shader_cache_stats(torch.metalx.current_device())
    assert after["hits"] == before["hits"] + 1 and after["misses"] == before["misses"]
    out = dev(torch.zeros(5, dtype=torch.int32))
    lib.same(out)
    assert out.cpu().tolist() == [9] * 5


def test_a_corrupted_disk_cache_entry_is_compiled_again(tmp_path):
    # A compiled object truncated or garbled on disk (a crash, a full disk) must not
    # make the source uncompilable: the next process compiles it again.
    program = (
        "import torch\n"
        "lib = torch.metalx.compile_shader(" + repr(
            HEADER + "kernel void twice(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]])"
            " { x[i] *= 2.0f; }\n") + ")\n"
        "x = torch.arange(5.0, device='metalx')\n"
        "lib.twice(x)\n"
        "assert x.cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0], x\n"
    )
    # (Validation of the user's kernels only, even in CI's METALSIM_SHADER_VALIDATION=all
    # pass: there the built-in kernels would be compiled into the fresh cache too.)
    env = dict(METALSIM_CACHE_DIR=str(tmp_path), METALSIM_SHADER_VALIDATION="1")
    check_python(program, **env)
    objects = list(tmp_path.glob("*.so"))
    assert len(objects) == 1
    objects[0].write_bytes(b"\x7fELF garbage")
    check_python(program, **env)
    assert objects[0].stat().st_size > 1000  # compiled again, in place


def test_zero_threads_runs_nothing(elementwise):
    out = dev(torch.full((4,), 5.0))
    elementwise.add_one(out, out, threads=0)
    empty = torch.empty(0, device="metalx")
    elementwise.add_one(empty, empty)
    assert out.cpu().tolist() == [5.0] * 4


# ---- errors -----------------------------------------------------------------


def test_compile_error_has_the_users_file_and_line():
    src = HEADER + """
kernel void broken(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[i] = 1.0f +;
}
"""  # the bad statement is line 5
    with pytest.raises(S.ShaderCompileError, match=r"my_kernels\.metal:5:\d+: error") as info:
        torch.metalx.compile_shader(src, name="my_kernels.metal")
    assert isinstance(info.value, RuntimeError)
    with pytest.raises(RuntimeError, match=r"shader\.metal:5:"):
        torch.metalx.compile_shader(src)


def test_unknown_kernel_lists_the_available_ones(elementwise):
    with pytest.raises(AttributeError, match="no kernel 'axbp'; its kernels: add_one, axpb"):
        elementwise.axbp
    with pytest.raises(KeyError, match="add_one, axpb"):
        elementwise["nope"]


def test_wrong_argument_types_name_the_position(elementwise):
    out, x = dev(torch.zeros(3)), dev(torch.ones(3))
    with pytest.raises(TypeError, match="argument 2 has type str"):
        elementwise.axpb(out, x, "2.0", 1.0)
    with pytest.raises(TypeError, match="argument 3 has type NoneType"):
        elementwise.axpb(out, x, 2.0, None)
    with pytest.raises(TypeError, match="argument 2: element 1 has type str"):
        elementwise.axpb(out, x, [1, "a"], 1.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'thread'"):
        elementwise.axpb(out, x, 2.0, 1.0, thread=3)
    with pytest.raises(TypeError, match="needs threads="):
        elementwise.axpb(1, 2, 3, 4)
    with pytest.raises(TypeError, match="threads must be an int"):
        elementwise.axpb(out, x, 2.0, 1.0, threads=3.0)
    with pytest.raises(OverflowError, match="int64"):
        elementwise.axpb(out, x, 2**63, 1.0)
    with pytest.raises(OverflowError, match="UInt32"):
        S.UInt32(-1)
    with pytest.raises(ValueError, match="4096"):
        elementwise.axpb(out, x, [1.0] * 1025, 1.0)
    with pytest.raises(TypeError):
        torch.metalx.compile_shader(b"kernel void f() {}")


def test_cpu_tensor_is_rejected(elementwise):
    with pytest.raises(RuntimeError, match="argument 1 is on cpu; metalx kernels take metalx tensors"):
        elementwise.axpb(dev(torch.zeros(3)), torch.ones(3), 1.0, 0.0)


def test_wrong_argument_count_is_a_type_error_naming_the_arguments(elementwise):
    out, x = dev(torch.zeros(3)), dev(torch.ones(3))
    with pytest.raises(TypeError, match=r"axpb\(\) takes 4 arguments \(out \[\[buffer\(0\)\]\], .*\), got 5"):
        elementwise.axpb(out, x, 1.0, 0.0, 5)
    with pytest.raises(TypeError, match=r"add_one\(\) takes 2 arguments .*, got 1"):
        elementwise.add_one(out)


def test_runtime_validation_becomes_value_error(elementwise):
    out, x = dev(torch.zeros(3)), dev(torch.ones(3))
    with pytest.raises(ValueError, match="threads per threadgroup"):
        elementwise.axpb(out, x, 1.0, 0.0, group_size=(64, 64))


def test_missing_argument_after_another_kernel_is_detected(elementwise):
    # The stream's open encoder still has buffer(1) bound to x from the first call: a
    # missing argument must not silently read it.
    out, x = dev(torch.zeros(3)), dev(torch.ones(3))
    torch.metalx.synchronize()
    elementwise.add_one(out, x)
    with pytest.raises(TypeError, match="got 1"):
        elementwise.add_one(out)
    torch.metalx.synchronize()


def test_failed_calls_leak_nothing_and_the_process_stays_usable(elementwise):
    out, x = dev(torch.zeros(64)), dev(torch.ones(64))
    torch.metalx.synchronize()
    before = torch.metalx.memory_allocated()
    for _ in range(20):
        with pytest.raises(TypeError):
            elementwise.axpb(out, x, 1.0, 0.0, 5)
        with pytest.raises(ValueError):
            elementwise.axpb(out, x, 1.0, 0.0, group_size=(64, 64))
        with pytest.raises(TypeError):
            elementwise.axpb(out, x, "bad", 0.0)
        with pytest.raises(RuntimeError):
            elementwise.axpb(out, torch.ones(64), 1.0, 0.0)
        with pytest.raises(RuntimeError):
            torch.metalx.compile_shader("kernel void f( {")
    torch.metalx.synchronize()
    assert torch.metalx.memory_allocated() == before
    elementwise.axpb(out, x, 2.0, 1.0)
    assert out.cpu().eq(3.0).all()


def test_tensors_on_two_devices_are_rejected():
    result = check_python("""
        import torch
        lib = torch.metalx.compile_shader('''
        kernel void add(device float* o [[buffer(0)]], const device float* x [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) { o[i] += x[i]; }
        ''')
        a = torch.zeros(4, device="metalx:0")
        b = torch.ones(4, device="metalx:1")
        try:
            lib.add(a, b)
        except RuntimeError as e:
            print("ERR", e)
        # Each device runs it; the library compiles for metalx:1 on first use there.
        c = torch.full((4,), 2.0, device="metalx:1")
        lib.add(c, b)
        print("C", c.cpu().tolist())
    """, METALSIM_DEVICE_COUNT=2)
    assert "ERR argument 0 is on metalx:0 but argument 1 is on metalx:1" in result.stdout
    assert "C [3.0, 3.0, 3.0, 3.0]" in result.stdout
