"""Every ModuleInfo of torch's module_db, run on metalx and compared with the CPU.

TestModule.test_cpu_gpu_parity is named like upstream's (test/test_modules.py) so that
module_db's DecorateInfos keyed ("TestModule", "test_cpu_gpu_parity") apply here too.
Per module input: forward outputs, input and parameter gradients, and buffers after
the step (BatchNorm running stats) must match the CPU.
"""

import copy

import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_modules import module_db, modules
from torch.testing._internal.common_utils import TestCase, run_tests

from metalx.testing import subset
from metalx.testing.compare import CompareMixin

subset.configure()
_NAMES = subset.module_names()
_MODULES = [m for m in module_db if _NAMES is None or m.formatted_name in _NAMES]


def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for y in x for t in _tensors(y)]
    if isinstance(x, dict):
        return [t for y in x.values() for t in _tensors(y)]
    return []


def _move(x, device):
    """Inputs on `device`, as fresh leaves that keep their requires_grad."""
    if isinstance(x, torch.Tensor):
        return x.detach().to(device).requires_grad_(x.requires_grad)
    if isinstance(x, (tuple, list)):
        return type(x)(_move(y, device) for y in x)
    if isinstance(x, dict):
        return {k: _move(v, device) for k, v in x.items()}
    return x


def _step(pristine, module_input, device, seed):
    """Forward + backward of a copy of `pristine` on `device`; everything comparable."""
    m = copy.deepcopy(pristine).to(device)
    args = _move(module_input.forward_input.args, device)
    kwargs = _move(module_input.forward_input.kwargs, device)
    out = m(*args, **kwargs)
    leaves = [t for t in _tensors((args, kwargs)) + list(m.parameters()) if t.requires_grad]
    outs = [o for o in _tensors(out) if o.requires_grad]
    grads = []
    if outs and leaves:
        # Same cotangents on both sides: made on CPU from a fixed seed.
        g = torch.Generator().manual_seed(seed)
        cot = [torch.randn(o.shape, dtype=o.dtype, generator=g).to(device) for o in outs]
        grads = [x for x in torch.autograd.grad(outs, leaves, cot, allow_unused=True) if x is not None]
    return {"out": _tensors(out), "grads": grads, "buffers": list(m.buffers())}


class TestModule(CompareMixin, TestCase):
    @modules(_MODULES, allowed_dtypes=subset.allowed_dtypes())
    def test_cpu_gpu_parity(self, device, dtype, module_info, training):
        inputs = module_info.module_inputs_func(module_info, device="cpu", dtype=dtype,
                                                requires_grad=True, training=training)
        results = []
        for i, mi in enumerate(inputs):
            if mi.forward_input is None:
                continue
            torch.manual_seed(i)
            pristine = module_info.module_cls(*mi.constructor_input.args,
                                              **mi.constructor_input.kwargs).to(dtype)
            pristine.train(training)
            if module_info.is_lazy:
                # Materialise parameters once on CPU, so both sides start from the
                # same weights (each side would otherwise draw its own).
                with torch.no_grad():
                    copy.deepcopy(pristine)(*_move(mi.forward_input.args, "cpu"),
                                            **_move(mi.forward_input.kwargs, "cpu"))
                    pristine(*_move(mi.forward_input.args, "cpu"), **_move(mi.forward_input.kwargs, "cpu"))
            results.append(self.compare(
                module_info.formatted_name, dtype,
                lambda: _step(pristine, mi, device, i), lambda: _step(pristine, mi, "cpu", i),
                f"module input {i} ({mi.desc or 'default'})"))
        self.finish(module_info.formatted_name, results)


instantiate_device_type_tests(TestModule, globals(), only_for="privateuse1")

if __name__ == "__main__":
    run_tests()
