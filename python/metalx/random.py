"""Random number generator state of metalx devices (torch.metalx.manual_seed, ...).

Each device has one default generator living in C++; these functions are thin
wrappers over it, with torch.cuda's signatures.
"""

import torch

from metalx import _C
from metalx._device import _device_index

_default_generators = {}  # device index -> torch.Generator wrapping the C++ one


def default_generator(device=None) -> torch.Generator:
    index = _device_index(device)
    generator = _default_generators.get(index)
    if generator is None:
        generator = _default_generators.setdefault(index, _C.default_generator(index))
    return generator


def get_rng_state(device="metalx") -> torch.Tensor:
    """The generator state of `device` as a CPU uint8 tensor (seed, offset)."""
    return default_generator(device).get_state()


def get_rng_state_all():
    return [get_rng_state(i) for i in range(_C.device_count())]


def set_rng_state(new_state: torch.Tensor, device="metalx") -> None:
    default_generator(device).set_state(new_state)


def set_rng_state_all(new_states) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


def manual_seed(seed: int) -> None:
    """Seeds the current device's generator."""
    default_generator(None).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seeds every device's generator (torch.manual_seed calls this)."""
    for index in range(_C.device_count()):
        default_generator(index).manual_seed(int(seed))


def seed() -> None:
    """Seeds the current device's generator with a non-deterministic number."""
    default_generator(None).seed()


def seed_all() -> None:
    """Seeds every device's generator with one non-deterministic number."""
    value = default_generator(None).seed()
    for index in range(_C.device_count()):
        default_generator(index).manual_seed(value)


def initial_seed() -> int:
    """The seed of the current device's generator."""
    return default_generator(None).initial_seed()
