"""Gives every process group that uses Gloo for the metalx device metalx's backend.

torch makes one Gloo backend per process group and registers it for every device
"gloo" serves; Gloo itself accepts only CPU (and CUDA) tensors. After torch has
created a process group (`_new_process_group_helper`, which `init_process_group`,
`new_group` and `new_subgroups` all go through), metalx registers for its metalx device
a backend that wraps that same Gloo backend (`metalx._C._distributed_attach_gloo`):
metalx and CPU collectives of the group then share one Gloo context, in order.

torch has no hook for this, so the helper is wrapped in place; the wrapper only adds
the registration after torch's own code has run.
"""

import functools

_MARK = "_metalx_serves_gloo"


def _is_gloo(backend) -> bool:
    from torch.distributed import distributed_c10d as c10d

    if isinstance(backend, c10d.ProcessGroupGloo):
        return True
    # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps each backend in a checking wrapper.
    wrapper = getattr(c10d, "_ProcessGroupWrapper", None)
    return wrapper is not None and isinstance(backend, wrapper) and _is_gloo(backend.wrapped_pg)


def _metalx_device():
    import torch

    return torch.device("metalx")


def serve_metalx(pg) -> bool:
    """Registers metalx's Gloo backend in `pg` if `pg` uses Gloo for metalx tensors."""
    from torch.distributed import ProcessGroup

    from metalx import _C

    if not isinstance(pg, ProcessGroup) or _metalx_device() not in pg._device_types:
        return False
    if _C._distributed_serves_metalx(pg):
        return True
    if not _is_gloo(pg._get_backend(_metalx_device())):
        return False
    _C._distributed_attach_gloo(pg)
    return True


def serves_metalx(pg=None) -> bool:
    """Whether collectives of `pg` (default: the default group) take metalx tensors."""
    from torch.distributed import ProcessGroup, distributed_c10d as c10d

    from metalx import _C

    pg = pg if pg is not None else c10d._get_default_group()
    return (isinstance(pg, ProcessGroup) and _metalx_device() in pg._device_types
            and _C._distributed_serves_metalx(pg))


def register() -> None:
    from torch.distributed import distributed_c10d as c10d

    helper = c10d._new_process_group_helper
    if getattr(helper, _MARK, False):
        return

    @functools.wraps(helper)
    def new_process_group_helper(*args, **kwargs):
        result = helper(*args, **kwargs)
        serve_metalx(result[0])
        return result

    setattr(new_process_group_helper, _MARK, True)
    c10d._new_process_group_helper = new_process_group_helper
