"""Gives every process group that uses Gloo for the metalx device metalx's backend.

torch makes one Gloo backend per process group and registers it for every device
"gloo" serves; Gloo itself accepts only CPU (and CUDA) tensors. After torch has
created a process group (`_new_process_group_helper`, which `init_process_group`,
`new_group` and `new_subgroups` all go through), metalx registers for its metalx device
a backend that wraps that same Gloo backend (`metalx._C._distributed_attach_gloo`):
metalx and CPU collectives of the group then share one Gloo context, in order.

torch has no hook for this, so the helper is wrapped in place; the wrapper only adds
the registration after torch's own code has run.

With TORCH_DISTRIBUTED_DEBUG=DETAIL torch registers Gloo inside a checker
(`_ProcessGroupWrapper`) that compares each collective's fingerprint (op, shapes,
dtypes, devices) across ranks before running it. The checker must see the metalx
tensors, not the CPU views metalx hands Gloo, or its mismatch reports would say the
tensors are on the CPU; so for metalx the order is turned round: a checker of its own
(over a helper Gloo group on the group's store) around metalx's backend around the
group's Gloo.
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


def _checker_class():
    from torch.distributed import distributed_c10d as c10d

    return getattr(c10d, "_ProcessGroupWrapper", None)


def _serves_metalx_backend(backend) -> bool:
    from metalx import _C

    checker = _checker_class()
    if checker is not None and isinstance(backend, checker):
        backend = backend.wrapped_pg
    return _C._distributed_is_metalx_gloo(backend)


def _attach_checked(pg, checker, store) -> None:
    """metalx's backend over the Gloo inside torch's DETAIL `checker`, in a checker of
    its own: fingerprints then carry the metalx tensors' device."""
    from torch.distributed import distributed_c10d as c10d

    from metalx import _C

    if store is None:
        raise RuntimeError("TORCH_DISTRIBUTED_DEBUG=DETAIL: metalx needs the process group's store to check its "
                           "collectives; create groups with init_process_group/new_group")
    gloo = checker.wrapped_pg
    # The helper group rendezvouses on keys of its own (torch's checker uses
    # "<device>/<PG_WRAPPER_STORE_PREFIX>:<group name>").
    keys = c10d.PrefixStore(f"metalx/{c10d.PG_WRAPPER_STORE_PREFIX}", store)
    helper = c10d.ProcessGroupGloo(keys, pg.rank(), pg.size(), timeout=gloo.options._timeout)
    checked = c10d._ProcessGroupWrapper(_C._distributed_gloo_backend(gloo), helper)
    _C._distributed_register_for_metalx(pg, checked)


def serve_metalx(pg, store=None) -> bool:
    """Registers metalx's Gloo backend in `pg` if `pg` uses Gloo for metalx tensors.
    `store`: the group's store, for the helper group of TORCH_DISTRIBUTED_DEBUG=DETAIL."""
    from torch.distributed import ProcessGroup

    from metalx import _C

    if not isinstance(pg, ProcessGroup) or _metalx_device() not in pg._device_types:
        return False
    backend = pg._get_backend(_metalx_device())
    if _serves_metalx_backend(backend):
        return True
    if not _is_gloo(backend):
        return False
    checker = _checker_class()
    if checker is not None and isinstance(backend, checker):
        _attach_checked(pg, backend, store)
    else:
        _C._distributed_attach_gloo(pg)
    return True


def serves_metalx(pg=None) -> bool:
    """Whether collectives of `pg` (default: the default group) take metalx tensors."""
    from torch.distributed import ProcessGroup, distributed_c10d as c10d

    pg = pg if pg is not None else c10d._get_default_group()
    return (isinstance(pg, ProcessGroup) and _metalx_device() in pg._device_types
            and _serves_metalx_backend(pg._get_backend(_metalx_device())))


def register() -> None:
    from torch.distributed import distributed_c10d as c10d

    helper = c10d._new_process_group_helper
    if getattr(helper, _MARK, False):
        return

    @functools.wraps(helper)
    def new_process_group_helper(*args, **kwargs):
        result = helper(*args, **kwargs)
        serve_metalx(result[0], result[1])
        return result

    setattr(new_process_group_helper, _MARK, True)
    c10d._new_process_group_helper = new_process_group_helper
