"""Comparing ops whose indices CPU leaves open where values tie.

sort and argsort without stable=True, topk, kthvalue and mode return the position of one
of several equal values, and which one is up to the implementation (CPU's introsort and
quickselect pick by their own pivots; CUDA and metalx by theirs; CPU's mode sorts a line
unstably and returns the position its sort left last among the mode's copies). When the device's
indices differ from CPU's, the comparison falls back to what the ops promise: the values
are CPU's exactly, the device's indices point at exactly those values in the input, and
(sort, argsort, topk) they are distinct along the dim. A stable sort promises its order,
so it is always compared exactly.
"""

from __future__ import annotations

import torch

# Position of `dim` in each op's positional arguments (after the input).
_DIM_POSITION = {"sort": 0, "argsort": 0, "topk": 1, "kthvalue": 1, "mode": 0}
# Ops returning one (value, index) per line, and the position of their keepdim argument.
_ONE_PER_LINE_KEEPDIM = {"kthvalue": 2, "mode": 1}


def _arg(sample, position, name, default):
    if len(sample.args) > position:
        return sample.args[position]
    return sample.kwargs.get(name, default)


def _distinct_along(indices, dim):
    if indices.numel() == 0 or indices.dim() == 0 or indices.size(dim) < 2:
        return True
    return bool((indices.sort(dim=dim).values.diff(dim=dim) > 0).all())


def tie_order_check(op_name, cpu_sample):
    """A checker (test, actual, expected, what, atol, rtol) for ops whose tie order is
    open, or None when results must match CPU's exactly."""
    if op_name not in _DIM_POSITION or cpu_sample.kwargs.get("stable"):
        return None
    x = cpu_sample.input
    dim = _arg(cpu_sample, _DIM_POSITION[op_name], "dim", -1)
    if x.dim() == 0:
        return None  # one element: nothing can tie
    one_per_line = op_name in _ONE_PER_LINE_KEEPDIM
    keepdim = one_per_line and _arg(cpu_sample, _ONE_PER_LINE_KEEPDIM.get(op_name, 0), "keepdim", False)
    unsorted = op_name == "topk" and not _arg(cpu_sample, 3, "sorted", True)

    def check(test, actual, expected, what, atol, rtol):
        if op_name == "argsort":
            indices = actual.cpu()
            test.assertEqual(x.gather(dim, indices), x.gather(dim, expected), atol=atol, rtol=rtol, msg=what)
        else:
            values, indices = actual[0].cpu(), actual[1].cpu()
            ref = expected[0]
            if unsorted:
                values, ref = values.sort(dim=dim).values, ref.sort(dim=dim).values
            test.assertEqual(values, ref, atol=atol, rtol=rtol, msg=what)
            kept = indices if (not one_per_line or keepdim) else indices.unsqueeze(dim)
            picked = actual[0].cpu() if (not one_per_line or keepdim) else actual[0].cpu().unsqueeze(dim)
            test.assertEqual(x.gather(dim, kept), picked, atol=0, rtol=0, msg=f"{what}: indices point elsewhere")
        if not one_per_line:
            test.assertTrue(_distinct_along(indices, dim), msg=f"{what}: repeated indices")

    return check
