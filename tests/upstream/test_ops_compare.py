"""Every OpInfo of torch's op_db, run on metalx and compared with the CPU.

Written against the API of torch.testing._internal (shipped in the wheel). Tests:
- TestCommon.test_compare_cpu: every sample of op.reference_inputs, device vs CPU.
  The class and test are named like upstream's (test/test_ops.py) on purpose: op_db's
  DecorateInfos keyed ("TestCommon", "test_compare_cpu") - upstream's own known CPU
  failures and skips - then apply here too.
- TestMetalxVariants: out=, in-place and gradient variants, each compared with the CPU.
Scope (subset/full) and dtypes: metalx.testing.subset. Known failures: the
expectations file, applied by metalx.testing.pytest_plugin (see conftest.py).
"""

import torch
from torch.testing._internal.common_device_type import (
    OpDTypes,
    instantiate_device_type_tests,
    ops,
)
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase, run_tests

from metalx.testing import subset
from metalx.testing.compare import CompareMixin, sample_pair
from metalx.testing.tie_order import tie_order_check

# Before instantiation: set_test_configs only affects classes instantiated after it.
subset.configure()
_DTYPES = subset.allowed_dtypes()
# out=/in-place/grad variants are cheaper to keep narrow in CI: one dtype per kind.
_VARIANT_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.int64) if _DTYPES else None

def _uninitialized(op):
    # empty* return uninitialised memory: only metadata can be compared.
    return "empty" in op.name


class TestCommon(CompareMixin, TestCase):
    @ops(op_db, dtypes=OpDTypes.supported, allowed_dtypes=_DTYPES)
    def test_compare_cpu(self, device, dtype, op):
        results = []
        for i, sample in enumerate(op.reference_inputs("cpu", dtype)):
            dev_sample, cpu_sample = sample_pair(sample, device, op.name)

            def run_dev(s=dev_sample):
                return s.output_process_fn_grad(op(s.input, *s.args, **s.kwargs))

            def run_cpu(s=cpu_sample):
                return s.output_process_fn_grad(op(s.input, *s.args, **s.kwargs))

            results.append(self.compare(op.full_name, dtype, run_dev, run_cpu, f"sample {i}: {cpu_sample.summary()}",
                                        uninitialized=_uninitialized(op),
                                        tie_order=tie_order_check(op.name, cpu_sample)))
        self.finish(op.full_name, results)


def _clone_out(x, device):
    """An out= argument shaped like the CPU result x, on `device`."""
    if isinstance(x, torch.Tensor):
        return torch.empty_like(x, device=device)
    return type(x)(_clone_out(y, device) for y in x)


class TestMetalxVariants(CompareMixin, TestCase):
    @ops([o for o in op_db if o.supports_out], dtypes=OpDTypes.supported, allowed_dtypes=_VARIANT_DTYPES)
    def test_out_compare_cpu(self, device, dtype, op):
        results = []
        for i, sample in enumerate(op.sample_inputs("cpu", dtype)):
            dev_sample, cpu_sample = sample_pair(sample, device, op.name)
            try:
                reference = op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs)
            except Exception:
                continue  # compare_cpu covers error agreement; out= needs a valid shape
            if not isinstance(reference, (torch.Tensor, tuple, list)):
                continue

            def run(s, dev):
                out = _clone_out(reference, dev)
                ret = op(s.input, *s.args, out=out, **s.kwargs)
                # out= must return the very tensors it was given.
                for r, o in zip(ret if isinstance(out, (tuple, list)) else [ret],
                                out if isinstance(out, (tuple, list)) else [out]):
                    assert r is o, "out= variant returned a new tensor instead of out"
                return out

            results.append(self.compare(op.full_name, dtype, lambda s=dev_sample: run(s, device),
                                        lambda s=cpu_sample: run(s, "cpu"), f"out= sample {i}", uninitialized=_uninitialized(op),
                                        tie_order=tie_order_check(op.name, cpu_sample)))
        self.finish(op.full_name, results)

    @ops([o for o in op_db if o.inplace_variant is not None], dtypes=OpDTypes.supported,
         allowed_dtypes=_VARIANT_DTYPES)
    def test_inplace_compare_cpu(self, device, dtype, op):
        fn = op.inplace_variant
        results = []
        for i, sample in enumerate(op.sample_inputs("cpu", dtype)):
            if sample.broadcasts_input:
                continue  # in-place cannot resize its input: an error on both sides
            dev_sample, cpu_sample = sample_pair(sample, device, op.name)

            def run(s):
                x = s.input.clone()
                ret = fn(x, *s.args, **s.kwargs)
                assert ret is x, "in-place variant returned a new tensor"
                return x

            results.append(self.compare(op.full_name, dtype, lambda s=dev_sample: run(s),
                                        lambda s=cpu_sample: run(s), f"in-place sample {i}", uninitialized=_uninitialized(op)))
        self.finish(op.full_name, results)

    @ops([o for o in op_db if o.supports_autograd], dtypes=OpDTypes.supported_backward,
         allowed_dtypes=_VARIANT_DTYPES)
    def test_grad_compare_cpu(self, device, dtype, op):
        results = []
        for i, sample in enumerate(op.sample_inputs("cpu", dtype, requires_grad=True)):
            if i >= 8:
                break  # gradients of the first samples find wiring bugs; more adds little
            dev_sample, cpu_sample = sample_pair(sample, device, op.name)

            def run(s, dev):
                # Fresh leaves each run (the compare may run a side twice).
                s = s.transform(lambda t: t.detach().requires_grad_(t.requires_grad)
                                if isinstance(t, torch.Tensor) else t)
                leaves = [t for t in (s.input, *s.args, *s.kwargs.values())
                          if isinstance(t, torch.Tensor) and t.requires_grad]
                out = s.output_process_fn_grad(op(s.input, *s.args, **s.kwargs))
                outs = [o for o in (out if isinstance(out, (tuple, list)) else [out])
                        if isinstance(o, torch.Tensor) and o.requires_grad]
                if not outs or not leaves:
                    return []
                # Same cotangents on both sides: made on CPU from a fixed seed.
                g = torch.Generator().manual_seed(i)
                cot = [torch.randn(o.shape, dtype=o.dtype, generator=g).to(o.device) for o in outs]
                grads = torch.autograd.grad(outs, leaves, cot, allow_unused=True)
                return [x for x in grads if x is not None]

            results.append(self.compare(op.full_name, dtype, lambda s=dev_sample: run(s, device),
                                        lambda s=cpu_sample: run(s, "cpu"), f"grad sample {i}", uninitialized=_uninitialized(op)))
        self.finish(op.full_name, results)


instantiate_device_type_tests(TestCommon, globals(), only_for="privateuse1")
instantiate_device_type_tests(TestMetalxVariants, globals(), only_for="privateuse1")

if __name__ == "__main__":
    run_tests()
