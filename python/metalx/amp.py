"""Automatic mixed precision on metalx (torch.metalx.amp).

torch.autocast("metalx", dtype=torch.float16 | torch.bfloat16) casts the ops CUDA's
autocast casts (the op lists and policies are registered in C++:
backend/autocast.cpp); torch.amp.GradScaler("metalx") scales losses. The two classes
here are those with "metalx" filled in, as torch.cuda.amp offers them for CUDA.
"""

import torch


class autocast(torch.amp.autocast):
    """torch.autocast("metalx", ...): `dtype` None means the autocast dtype set for
    metalx (torch.get_autocast_dtype("metalx"), float16 unless changed)."""

    def __init__(self, enabled: bool = True, dtype=None, cache_enabled: bool = True):
        super().__init__("metalx", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """torch.amp.GradScaler("metalx", ...)."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        super().__init__("metalx", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)
