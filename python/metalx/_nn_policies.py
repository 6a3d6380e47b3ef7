"""Per-device numeric policies torch keys by device type, given for metalx.

torch.nn.functional.linear_cross_entropy's chunked path resolves
LinearCrossEntropyOptions(acc_policy="auto", acc_dtype=None) from a table keyed by
device type (torch/nn/modules/linear_cross_entropy_options.py). Only "cuda" and "cpu"
are listed; any other device gets the fallback: the "compact" policy with the
accumulation dtype equal to the input dtype, i.e. float16/bfloat16 inputs accumulate
logits, softmax sums and gradients in float16/bfloat16. On metalx that made the loss
and gradients differ from CPU's (which accumulates in float32) by several half-precision
ulps, and be further from a float64 reference.

metalx runs those matmuls and reductions on the CPU (fallback) today, and its own
kernels accumulate half-precision inputs in float32, so CPU's choice is the right one:
the "accurate" policy with float32 accumulation.
"""

from __future__ import annotations

_AUTO_POLICY = ("accurate", "aspect_ratio")  # what torch picks for ("cpu", float16/bfloat16)


def register(torch, device_type: str) -> None:
    """Gives `device_type` CPU's auto choices for float16/bfloat16. Idempotent."""
    try:
        from torch.nn.modules import linear_cross_entropy_options as lce
    except ImportError:  # a torch without the chunked linear_cross_entropy
        return
    options = getattr(lce, "LinearCrossEntropyOptions", None)
    defaults = getattr(lce, "_AUTO_DEFAULTS", None)
    resolve = getattr(options, "_resolve_auto_acc_dtype", None)
    if options is None or not isinstance(defaults, dict) or resolve is None:
        return
    for dtype in (torch.float16, torch.bfloat16):
        defaults[(device_type, dtype)] = type(lce._AUTO_FALLBACK)(*_AUTO_POLICY)
    if getattr(resolve, "_metalx_device_type", None) == device_type:
        return

    # acc_dtype=None resolves through this staticmethod, which answers only for cuda
    # and cpu (None, i.e. the input dtype, for every other device).
    def resolve_auto_acc_dtype(dtype, device):
        if device is not None and device.type == device_type and dtype in (torch.float16, torch.bfloat16):
            return torch.float32
        return resolve(dtype, device)

    resolve_auto_acc_dtype._metalx_device_type = device_type
    options._resolve_auto_acc_dtype = staticmethod(resolve_auto_acc_dtype)
