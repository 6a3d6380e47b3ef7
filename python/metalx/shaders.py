"""Custom Metal kernels from Python: `torch.metalx.compile_shader(source)`.

    lib = torch.metalx.compile_shader('''
        #include <metal_stdlib>
        using namespace metal;
        kernel void axpb(device float* out [[buffer(0)]],
                         const device float* x [[buffer(1)]],
                         constant float& alpha [[buffer(2)]],
                         constant float& b [[buffer(3)]],
                         uint i [[thread_position_in_grid]]) {
            out[i] = x[i] * alpha + b;
        }
    ''')
    lib.axpb(out, x, 2.0, 1.0)                  # threads = out.numel()

Arguments bind in order to [[buffer(0)]], [[buffer(1)]], ...:

- a metalx tensor binds its memory at its data pointer (storage offset included).
  The kernel sees raw memory: a non-contiguous view is bound as is, so the kernel
  must index it with the view's strides (pass them as arguments) or the caller
  passes `.contiguous()`. All tensors must be on one metalx device; CPU tensors
  are rejected (copy them with `.to("metalx")`, or pass small constants as values).
- Python values are copied inline (setBytes, at most 4096 bytes each):
  int -> int64 (8 bytes), float -> float32 (4 bytes), bool -> bool (1 byte);
  a list/tuple binds as an array: all bools -> bool[], all ints -> int64[],
  ints and floats -> float32[].
- Exact types: `Int32(5)`, `UInt32(n)`, `Int8`, `UInt8`, `Int16`, `UInt16`,
  `Int64`, `UInt64`, `Float32`, `Float16`, `BFloat16`, `Bool`, each taking a
  number or a list of numbers (an array). Out-of-range values raise OverflowError.

  MSL kernels often take `constant uint& n` (4 bytes). A plain Python int binds
  8 bytes of int64; on little-endian GPUs (every Apple GPU) a kernel reading the
  first 4 bytes gets the right value for 0 <= n < 2**31 (and for negative n read
  as int), but that is a coincidence of layout: prefer `UInt32(n)`. The same
  does NOT hold for float: `constant half& h` reading a float32 gets garbage; use
  `Float16(x)`.

Parameters without [[buffer(n)]] (device/constant pointers and references) are
numbered in order, as Metal does, so `kernel void f(device float* out, constant
float& a, uint i [[thread_position_in_grid]])` takes (out, a).

Headers: `#include <c10/metal/utils.h>` (and every header under the installed
torch's include/, e.g. <c10/metal/special_math.h>, <c10/metal/reduction_utils.h>)
resolves from the installed torch, as with torch.mps.compile_shader; pass
`include_dirs=[...]` to compile_shader for headers of your own (searched first).

Function constants (`constant bool has_bias [[function_constant(0)]];`):
`k = lib.my_kernel.specialize(has_bias=True, n=UInt32(4))` (by name) or
`lib.my_kernel.specialize({0: True})` (by index) returns the kernel specialised
with those values; each value set is its own pipeline, made once and cached.
Values: bool -> bool, int -> int, float -> float, or an exact type such as
UInt32(4) or Float16(0.5) (the type must be the declared one). A constant given
no value is undefined: `is_function_constant_defined(name)` is false, and
parameters marked [[function_constant(name)]] are not bound.

Launch: `threads` is the grid (an int or a tuple of up to 3 ints; default: the
first tensor argument's numel), `group_size` the threadgroup size (default
min(threads, kernel.max_threads_per_threadgroup, 256), filled x first), and
`threadgroup_memory` the byte lengths of [[threadgroup(i)]] arguments (an int or
a list; rounded up to 16). Kernels dispatch with dispatchThreads on the device's
current stream, ordered with all other metalx work on it: reading the result
(`.cpu()`, printing, any op on that stream) sees the kernel's writes. Kernels are not autograd-aware.

Errors: bad source raises ShaderCompileError (a RuntimeError) whose message has
the compiler's diagnostics as `NAME:LINE:COL: error ...` with NAME the `name=`
given to compile_shader; an unknown kernel raises AttributeError listing the
library's kernels; a bad argument raises TypeError naming its position, and so does
a call with more or fewer arguments than the kernel's [[buffer(n)]] slots (checked
against the kernel's declared arguments, so a forgotten one never silently reads an
earlier kernel's binding); calls the runtime rejects (a threadgroup too large, ...)
raise ValueError. Nothing is encoded for a call that raises.

The compiled library is cached per (device, source, name) in the device's bounded
library cache (METALX_LIBRARY_CACHE_SIZE), so compiling the same source again is
cheap. On the simulator (no Apple GPU) kernels run on CPU threads; see
third_party/metalsim/prelude/README.md for the MSL subset it supports.
"""

import os
import struct

import torch

from metalx import _C
from metalx._lazy_init import _lazy_init

ShaderCompileError = _C.ShaderCompileError

__all__ = [
    "compile_shader",
    "ShaderLibrary",
    "ShaderCompileError",
    "Bool",
    "Int8",
    "UInt8",
    "Int16",
    "UInt16",
    "Int32",
    "UInt32",
    "Int64",
    "UInt64",
    "Float16",
    "BFloat16",
    "Float32",
]


class ShaderLibrary:
    """Kernels of one compiled Metal source, as attributes: `lib.my_kernel(...)`.

    `lib["name"]` reaches a kernel whose name is also an attribute of this class.
    Each kernel has `max_threads_per_threadgroup`, `thread_execution_width`,
    `name` and `specialize(...)` (function constants), and is called as
    `kernel(*args, threads=None, group_size=None, threadgroup_memory=None)` (see
    the module docstring).
    """

    def __init__(self, source, name="shader.metal", include_dirs=None):
        if not isinstance(source, str):
            raise TypeError(f"compile_shader: source must be a str, got {type(source).__name__}")
        dirs = [os.fspath(d) for d in (include_dirs or [])]
        for d in dirs:
            if not os.path.isdir(d):
                raise ValueError(f"compile_shader: include directory {d!r} does not exist")
        dirs.append(_torch_include_dir())
        _lazy_init()  # start the runtime as any first metalx call does
        self._lib = _C._ShaderLibrary(source, name, dirs)
        self._kernels = {}

    @property
    def kernel_names(self):
        """The library's kernel functions (host names of template instantiations)."""
        return list(self._lib.kernel_names)

    @property
    def name(self):
        """The file name used in compile diagnostics."""
        return self._lib.source_name

    def __getitem__(self, kernel_name):
        kernel = self._kernels.get(kernel_name)
        if kernel is None:
            try:
                kernel = self._kernels[kernel_name] = self._lib.kernel(kernel_name)
            except AttributeError as e:
                raise KeyError(str(e)) from None
        return kernel

    def __getattr__(self, kernel_name):
        # Only reached for names that are not ordinary attributes.
        if kernel_name.startswith("__") or kernel_name in ("_lib", "_kernels"):
            raise AttributeError(kernel_name)
        kernel = self._kernels.get(kernel_name)
        if kernel is None:
            kernel = self._kernels[kernel_name] = self._lib.kernel(kernel_name)  # AttributeError if unknown
        return kernel

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._lib.kernel_names))

    def __repr__(self):
        return f"<metalx ShaderLibrary {self.name!r}: {', '.join(self._lib.kernel_names)}>"


def _torch_include_dir():
    # Where the installed torch keeps its headers, <c10/metal/*.h> among them.
    return os.path.join(os.path.dirname(torch.__file__), "include")


def compile_shader(source, name="shader.metal", include_dirs=None):
    """Compiles Metal Shading Language `source`; returns a ShaderLibrary.

    `name` is the file name compile diagnostics use (`name:LINE:COL: error ...`).
    `#include` finds headers in `include_dirs` (if given), then in the installed
    torch's include directory (<c10/metal/...>).
    Raises ShaderCompileError (a RuntimeError) if the source does not compile.
    """
    return ShaderLibrary(source, name, include_dirs)


# ---- exact-type values -------------------------------------------------------


class _Value(_C._ShaderValue):
    """A number or list of numbers bound as this exact Metal type."""

    _format = ""  # struct format character
    _type_name = ""

    def __init__(self, value):
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if not values:
            raise ValueError(f"{type(self).__name__}: an empty list cannot be bound (Metal binds no zero-byte data)")
        try:
            data = self._pack(values)
        except (struct.error, OverflowError) as e:
            raise OverflowError(f"{type(self).__name__}({value!r}): out of range for {self._type_name} ({e})") from None
        super().__init__(data, self._type_name)
        self.value = value

    def _pack(self, values):
        if self._format in "efd":
            values = [float(v) for v in values]
        elif self._format != "?":
            for v in values:
                if not isinstance(v, int) or isinstance(v, bool):
                    raise TypeError(f"{type(self).__name__} takes ints, got {type(v).__name__}")
        return struct.pack(f"<{len(values)}{self._format}", *values)

    def __repr__(self):
        return f"{type(self).__name__}({self.value!r})"


def _value_type(class_name, fmt, type_name):
    return type(class_name, (_Value,), {"_format": fmt, "_type_name": type_name, "__doc__": f"Binds as MSL `{type_name}`."})


Bool = _value_type("Bool", "?", "bool")
Int8 = _value_type("Int8", "b", "char")
UInt8 = _value_type("UInt8", "B", "uchar")
Int16 = _value_type("Int16", "h", "short")
UInt16 = _value_type("UInt16", "H", "ushort")
Int32 = _value_type("Int32", "i", "int")
UInt32 = _value_type("UInt32", "I", "uint")
Int64 = _value_type("Int64", "q", "long")
UInt64 = _value_type("UInt64", "Q", "ulong")
Float16 = _value_type("Float16", "e", "half")
Float32 = _value_type("Float32", "f", "float")


class BFloat16(_Value):
    """Binds as MSL `bfloat` (rounded to nearest even, as torch.bfloat16 rounds)."""

    _type_name = "bfloat"

    def _pack(self, values):
        bits = torch.tensor([float(v) for v in values], dtype=torch.bfloat16).view(torch.int16).tolist()
        return struct.pack(f"<{len(bits)}h", *bits)
