"""The module torch exposes as `torch.metalx` (torch._register_device_module).

Its names are the device-module protocol torch and user code call, with the
signatures of torch.cuda's equivalents.
"""

import torch

from metalx._device import (  # noqa: F401
    current_device,
    device,
    device_count,
    driver_name,
    host_wait_count,
    is_available,
    set_device,
    synchronize,
)
from metalx import amp  # noqa: F401  (torch.metalx.amp, as torch.cuda.amp)
from metalx import profiler  # noqa: F401  (torch.metalx.profiler, as torch.mps.profiler)
from metalx import random  # noqa: F401  (torch.metalx.random, as torch.cuda.random)
from metalx.fallback import (  # noqa: F401
    fallback_mode,
    fallback_stats,
    reset_fallback_stats,
    set_fallback_mode,
)
from metalx import memory  # noqa: F401  (torch.metalx.memory, as torch.cuda.memory)
from metalx.memory import (  # noqa: F401
    empty_cache,
    get_per_process_memory_fraction,
    host_memory_stats,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_summary,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from metalx.shaders import compile_shader  # noqa: F401
from metalx.streams import (  # noqa: F401
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)
from metalx._lazy_init import _is_in_bad_fork, _lazy_init, is_initialized  # noqa: F401
from metalx.random import (  # noqa: F401
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)


def get_amp_supported_dtype():
    """The low-precision dtypes autocast may use on metalx."""
    return [torch.float16, torch.bfloat16]
