"""Device-vs-CPU comparison shared by the in-wheel op and module suites."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from metalx.testing import coverage

_REDUCED = (torch.float16, torch.bfloat16, torch.complex32)


_FLOAT8 = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                                              "float8_e5m2fnuz", "float8_e8m0fnu") if hasattr(torch, n))


def tolerance(dtype):
    # metalx runs most ops through the CPU fallback, so results are usually bitwise
    # equal; the tolerances are upstream's, so native kernels get the same slack.
    if dtype in _FLOAT8:
        return (0.0, 0.0)  # assertEqual compares float8 bitwise only
    return (1e-3, 1e-3) if dtype in _REDUCED else (1e-4, 1e-4)


def same_layout(t: torch.Tensor, device) -> torch.Tensor:
    """t on `device` with t's exact strides and storage offset (a fresh leaf).

    CPU kernels take layout-dependent paths (vectorised vs scalar loops round complex
    products differently and disagree on inf/nan), so the device input and the CPU
    reference must have the same layout; Tensor.to would make non-dense ones contiguous.
    """
    storage = t.untyped_storage()
    flat = torch.empty(0, dtype=t.dtype).set_(storage, 0, (storage.nbytes() // t.element_size(),), (1,))
    moved = flat.to(device).as_strided(t.size(), t.stride(), t.storage_offset())
    if t.is_conj():
        moved = moved.conj()
    return moved.detach().requires_grad_(t.requires_grad)


def _retarget(sample, device, keep_args_on_cpu=False):
    """sample with tensors (and device arguments) moved to `device`."""
    target = torch.device(device)

    def move(x):
        # Sparse and other non-strided layouts cannot be re-strided: plain copy.
        if x.layout != torch.strided:
            return x.detach().to(device).requires_grad_(x.requires_grad)
        return same_layout(x, device)

    def is_device(a):
        if isinstance(a, torch.device):
            return True
        if isinstance(a, str):
            try:
                return torch.device(a).type != target.type
            except RuntimeError:
                return False
        return False

    s = sample.transform(lambda x: move(x) if isinstance(x, torch.Tensor) else x)
    if keep_args_on_cpu:
        s.args = sample.args
    # Device arguments (Tensor.to's positional device, factories' device=) follow.
    s.args = tuple(target if is_device(a) else a for a in s.args)
    s.kwargs = {k: (target if k == "device" or is_device(v) else v) for k, v in s.kwargs.items()}
    return s


# Ops whose sample args must stay on the CPU whatever the device (upstream's sample
# functions create them with device="cpu" explicitly).
_CPU_ARGS = {"tensor_split"}


def sample_pair(cpu_sample, device, op_name=""):
    """(device sample, CPU reference) for a sample generated on the CPU.

    Generated on the CPU, not on the device as upstream does: sample generation itself
    (make_tensor: uniform_, view_as_real for complex, ...) would otherwise run through
    metalx and one metalx bug would fail every op's test. The device sample has the
    reference's exact layout.
    """
    return _retarget(cpu_sample, device, keep_args_on_cpu=op_name in _CPU_ARGS), cpu_sample


class _SeededOpWatch(TorchDispatchMode):
    """Records whether an aten op that draws random numbers (tag nondeterministic_seeded) ran."""

    def __init__(self):
        super().__init__()
        self.seen = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.seen = True
        return func(*args, **(kwargs or {}))


def cpu_is_random(fn) -> bool:
    """True if fn() (on CPU) samples randomness: it changes with the RNG seed, or it
    draws from the RNG while seeding it itself (OpInfo wraps dropout, randn, ... in
    wrapper_set_seed, so two CPU runs agree while the device's RNG gives other numbers).

    Only asked after a mismatch, so deterministic ops pay nothing: the device and CPU
    RNG streams differ by design, so random outputs cannot be compared elementwise.
    """
    state = torch.get_rng_state()
    try:
        torch.manual_seed(0)
        a = fn()
        torch.manual_seed(1)
        b = fn()
        with _SeededOpWatch() as watch:
            fn()
    finally:
        torch.set_rng_state(state)
    try:
        torch.testing.assert_close(a, b, equal_nan=True)
        return watch.seen
    except Exception:
        return True


def meta(x):
    """What can be compared of random or uninitialised results: shapes and dtypes."""
    if isinstance(x, torch.Tensor):
        return (tuple(x.shape), x.dtype)
    if isinstance(x, (tuple, list)):
        return type(x)(meta(y) for y in x)
    if isinstance(x, dict):
        return {k: meta(v) for k, v in x.items()}
    return x


class CompareMixin:
    """For common_utils.TestCase subclasses."""

    def compare(self, name, dtype, run_device, run_cpu, what, *, uninitialized=False, tie_order=None):
        """Runs both sides; asserts equal results, or the same exception type.

        Returns "ok", "raises", "meta", "ties" (indices differ from CPU's only where CPU
        leaves the choice among equal values open: `tie_order`, from
        metalx.testing.tie_order, checked what the op promises instead) or "random" (a
        mismatch explained by the op sampling randomness: then only shapes and dtypes are
        checked).
        """
        try:
            expected = run_cpu()
        except Exception as cpu_err:
            # Invalid for this sample on the CPU too: metalx must also refuse it.
            with self.assertRaises(type(cpu_err), msg=f"{what}: CPU raised {cpu_err!r}"):
                run_device()
            return "raises"
        with coverage.measure(name):
            actual = run_device()
            # Results copied to the host with non_blocking=True (Tensor.to does that
            # into pinned memory) are only valid after a synchronize, as on CUDA.
            torch.accelerator.synchronize()
        if uninitialized:
            self.assertEqual(meta(actual), meta(expected), msg=what)
            return "meta"
        atol, rtol = tolerance(dtype)
        try:
            self.assertEqual(actual, expected, atol=atol, rtol=rtol, exact_device=False, msg=what)
        except AssertionError:
            if tie_order is not None:
                tie_order(self, actual, expected, what, atol, rtol)
                return "ties"
            if cpu_is_random(run_cpu):
                self.assertEqual(meta(actual), meta(expected), msg=what)
                return "random"
            raise
        return "ok"

    def finish(self, name, results):
        if results and all(r == "random" for r in results):
            self.skipTest(f"{name} is random: checked shapes/dtypes only "
                          "(metalx and CPU RNG streams differ by design)")
