"""C++ extensions with their own Metal kernels (metalx/extension.h, metalx.cpp_extension).

Builds the worked example in examples/cpp_extension/ once per session with
torch.utils.cpp_extension (about a minute), together with cpp_extension_misuse.cpp,
and checks: results against CPU PyTorch, views and storage offsets, ordering with
metalx's own ops on the current stream, work on a side stream, bad input, and misuse
of the API (each must raise and leave the stream usable).
"""

import importlib.util
import os
import shutil

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "cpp_extension")


def _compiler_missing():
    return shutil.which(os.environ.get("CXX", "c++")) is None


@pytest.fixture(scope="module")
def ext(torch, tmp_path_factory):
    if _compiler_missing():
        pytest.skip("no C++ compiler (c++ or $CXX) to build the example extension")
    spec = importlib.util.spec_from_file_location("example_build", os.path.join(EXAMPLE, "build.py"))
    example_build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example_build)
    build_dir = tmp_path_factory.mktemp("cpp_extension_build")
    return example_build.build(
        build_directory=str(build_dir), extra_sources=[os.path.join(HERE, "cpp_extension_misuse.cpp")]
    )


def scaled_add(torch, x, y, alpha):
    return torch.ops.metalx_example.scaled_add(x, y, alpha)


def test_include_paths_hold_the_installed_headers(torch):
    from metalx import cpp_extension

    (include,) = cpp_extension.include_paths()
    for header in ("metalx/extension.h", "metalx/extension_abi.h", "metalx/runtime/command.h"):
        assert os.path.isfile(os.path.join(include, header)), header


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_matches_cpu(torch, ext, dtype):
    dtype = getattr(torch, dtype)
    x = torch.randn(1000, 37, dtype=dtype)
    y = torch.randn(1000, 37, dtype=dtype)
    out = scaled_add(torch, x.to("metalx"), y.to("metalx"), -1.5)
    assert out.device.type == "metalx" and out.dtype == dtype and out.shape == x.shape
    # The kernel computes in float and rounds once, as CPU PyTorch's float reference does.
    expected = (x.float() + -1.5 * y.float()).to(dtype)
    torch.testing.assert_close(out.cpu(), expected)


def test_views_and_storage_offsets(torch, ext):
    base_x = torch.randn(64, 48)
    base_y = torch.randn(48, 64)
    x, y = base_x.to("metalx"), base_y.to("metalx")
    # A transposed view (gathered by .contiguous()) and a slice with a storage offset.
    out = scaled_add(torch, x[3:40, 5:], y.t()[3:40, 5:], 2.0)
    torch.testing.assert_close(out.cpu(), base_x[3:40, 5:] + 2.0 * base_y.t()[3:40, 5:])
    # A contiguous slice is passed as is (its storage offset must reach the kernel), a
    # broadcast view (stride 0) is gathered.
    out = scaled_add(torch, x[10:], x[20:21].expand(54, 48), 1.0)
    torch.testing.assert_close(out.cpu(), base_x[10:] + base_x[20:21].expand(54, 48))


def test_buffer_offset_includes_the_storage_offset(torch, ext):
    from metalx import _C

    base = torch.arange(100, dtype=torch.float32, device="metalx")
    view = base[7:]
    assert ext.buffer_offset(view) == ext.buffer_offset(base) + 7 * 4
    assert ext.buffer_offset(view) == _C._buffer_info(view)[0]


def test_ordered_with_native_ops_on_the_current_stream(torch, ext):
    n = 1 << 20
    x_cpu, y_cpu = torch.randn(n), torch.randn(n)
    x, y = x_cpu.to("metalx"), y_cpu.to("metalx")  # native copies, queued on the stream
    out = scaled_add(torch, x, y, 3.0)
    # Native ops queued right after: a fill overwriting an input the kernel reads, a
    # strided gather of its result, and the extension's kernel on its own result.
    x.fill_(0.0)
    every_other = out[::2].contiguous()
    again = scaled_add(torch, out, y, 1.0)
    expected = x_cpu + 3.0 * y_cpu
    torch.testing.assert_close(out.cpu(), expected)
    torch.testing.assert_close(every_other.cpu(), expected[::2])
    torch.testing.assert_close(again.cpu(), expected + y_cpu)
    assert bool((x.cpu() == 0).all())


# Keeps a stream busy for a known while (as torch.cuda._sleep does in upstream tests).
BUSY = """
kernel void busy(device uint* out [[buffer(0)]], constant uint& iters [[buffer(1)]],
                 uint gid [[thread_position_in_grid]]) {
  uint x = gid + 1u;
  for (uint i = 0; i < iters; ++i) x = x * 1664525u + 1013904223u + (x >> 13);
  out[gid] = x;
}
"""


def test_runs_on_a_side_stream(torch, ext):
    from metalx.shaders import UInt32

    busy = torch.metalx.compile_shader(BUSY, name="busy").busy
    assert ext.current_stream_id(0) == torch.metalx.current_stream().stream_id == 0
    s = torch.metalx.Stream()
    x_cpu, y_cpu = torch.randn(4096), torch.randn(4096)
    x = torch.zeros(4096, device="metalx")
    x_new, y = x_cpu.to("metalx"), y_cpu.to("metalx")
    scratch = torch.empty(64, dtype=torch.int32, device="metalx")
    torch.metalx.synchronize()
    with torch.metalx.stream(s):
        assert ext.current_stream_id(0) == s.stream_id
        # x gets its values on s only after a long kernel: the extension's kernel sees
        # them only if it is encoded on s too (on another stream it would read zeros).
        busy(scratch, UInt32(4_000_000), threads=64)
        x.copy_(x_new)
        out = scaled_add(torch, x, y, 0.25)
        chained = scaled_add(torch, out, out, 1.0)
    assert ext.current_stream_id(0) == 0
    # Runs whatever the default stream holds now, while s is still busy: had the kernel
    # gone there, it would read x before the copy.
    torch.metalx.default_stream().synchronize()
    s.synchronize()
    torch.testing.assert_close(out.cpu(), x_cpu + 0.25 * y_cpu)
    torch.testing.assert_close(chained.cpu(), 2 * (x_cpu + 0.25 * y_cpu))


def test_bad_input_errors(torch, ext):
    x = torch.randn(8, device="metalx")
    with pytest.raises(RuntimeError, match="y is on cpu but x is on metalx:0"):
        scaled_add(torch, x, torch.randn(8), 1.0)
    with pytest.raises(RuntimeError, match="supports float32 and float16 tensors, got Long"):
        scaled_add(torch, x.long(), x.long(), 1.0)
    with pytest.raises(RuntimeError, match="x is Float but y is Half"):
        scaled_add(torch, x, x.half(), 1.0)
    with pytest.raises(RuntimeError, match=r"x has shape \[8\] but y has shape \[4\]"):
        scaled_add(torch, x, x[:4], 1.0)
    with pytest.raises(RuntimeError, match="expected a metalx tensor, got one on cpu"):
        ext.buffer_offset(torch.randn(3))
    with pytest.raises(RuntimeError, match="the tensor is empty"):
        ext.buffer_offset(torch.empty(0, device="metalx"))
    assert scaled_add(torch, x[:0], x[:0], 1.0).shape == (0,)


@pytest.mark.parametrize(
    "case, message",
    [
        ("unbound_argument", r"twice declares in \[\[buffer\(1\)\]\] but it was not bound"),
        ("no_pipeline", r"dispatch without setComputePipeline\(\)"),
        ("end_encoding", r"must not call endEncoding\(\)"),
        ("metalx_op_inside", r"on metalx stream 0 from inside a C\+\+ extension's encodeCompute callback"),
        ("too_many_bytes", r"encodeCompute: setBytes: length 8192 must be between 1 and 4096"),
        ("compile_error", r"(?s)compileLibrary: .*broken\.metal:2:47: error"),
        ("unknown_kernel", r"no kernel 'thrice'; its kernels: twice"),
    ],
)
def test_api_misuse_raises_and_leaves_the_stream_usable(torch, ext, case, message):
    x = torch.randn(16, device="metalx")
    with pytest.raises(RuntimeError, match=message):
        torch.ops.metalx_ext_misuse.misuse(x, case)
    y = torch.randn(16)
    out = scaled_add(torch, x, y.to("metalx"), 2.0)
    torch.testing.assert_close(out.cpu(), x.cpu() + 2.0 * y)
    torch.metalx.synchronize()  # nothing the misuse left behind fails later
