"""The fixed subset of op_db / module_db that CI runs, and how a scope is chosen.

CI must stay well under its time budget on 2 cores, so it runs ~100 OpInfos picked to
cover each family (elementwise, reductions, views, indexing, linalg-lite,
nn.functional, factories) and a dozen modules, over a reduced dtype set that still
includes float64 and complex (they run through the CPU fallback and must not be
skipped wholesale). The full scope runs every OpInfo over every dtype it supports.

METALX_UPSTREAM_SCOPE=subset|full (default subset) selects it; configure() installs
it with PrivateUse1TestBase.set_test_configs, which must happen before a test module
calls instantiate_device_type_tests.
"""

from __future__ import annotations

import os

import torch

OPS = (
    # elementwise binary / ternary
    "add", "sub", "mul", "div.no_rounding_mode", "div.floor_rounding", "remainder", "pow",
    "atan2", "maximum", "minimum", "where", "clamp", "lerp", "addcmul", "eq", "lt",
    "logical_and",
    # elementwise unary
    "abs", "neg", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf",
    "floor", "sign", "isnan",
    # reductions and scans
    "sum", "mean", "prod", "amax", "amin", "argmax", "max.reduction_with_dim", "var", "std",
    "logsumexp", "cumsum", "norm", "all", "any",
    # views and shape ops
    "view", "reshape", "transpose", "permute", "expand", "squeeze", "unsqueeze", "flatten",
    "narrow", "select", "as_strided", "cat", "stack", "split", "flip", "roll",
    # indexing
    "index_select", "index_add", "index_put", "gather", "scatter", "scatter_add",
    "masked_fill", "masked_select", "__getitem__", "nonzero", "sort", "topk",
    # linalg-lite
    "matmul", "mm", "bmm", "addmm", "linalg.vector_norm", "linalg.solve", "tril", "triu",
    # nn.functional
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "softmax",
    "log_softmax", "nn.functional.linear", "nn.functional.layer_norm",
    "nn.functional.conv2d", "nn.functional.cross_entropy", "nn.functional.mse_loss",
    "nn.functional.embedding", "nn.functional.dropout", "nn.functional.max_pool2d",
    "nn.functional.avg_pool2d", "nn.functional.interpolate.nearest",
    "nn.functional.batch_norm",
    # factories / fills (native in metalx)
    "zeros_like", "ones_like", "full_like", "arange", "linspace",
)

MODULES = (
    "nn_Linear", "nn_Conv2d", "nn_BatchNorm2d", "nn_LayerNorm", "nn_Embedding", "nn_ReLU",
    "nn_GELU", "nn_MaxPool2d", "nn_AvgPool2d", "nn_CrossEntropyLoss", "nn_MSELoss",
    "nn_LSTM", "nn_MultiheadAttention", "nn_Softmax", "nn_GroupNorm",
)

# float32 is the device's main type; float64/complex64 run through the CPU fallback;
# int64/bool exercise integer paths; float16 the reduced-precision one.
SUBSET_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.int64, torch.bool,
                 torch.float16)


def scope() -> str:
    s = os.environ.get("METALX_UPSTREAM_SCOPE", "subset")
    if s not in ("subset", "full"):
        raise ValueError(f"METALX_UPSTREAM_SCOPE must be 'subset' or 'full', not {s!r}")
    return s


def allowed_dtypes():
    """dtypes the @ops/@modules decorators may instantiate (None: all supported)."""
    return SUBSET_DTYPES if scope() == "subset" else None


def module_names():
    return MODULES if scope() == "subset" else None


def configure() -> None:
    """Installs the scope's op allowlist; call before instantiate_device_type_tests."""
    from torch.testing._internal.common_device_type import PrivateUse1TestBase

    # set_test_configs replaces the whole configuration (a reset when called empty).
    PrivateUse1TestBase.set_test_configs(op_allowlist=OPS if scope() == "subset" else None)
