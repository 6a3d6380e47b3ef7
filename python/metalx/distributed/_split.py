"""torch.distributed.split_group on groups whose metalx device has metalx's backend.

torch's split_group splits every backend of the parent group (ProcessGroup.split_group,
in C++) into a new group. For metalx the new group should do what a group made by
new_group does: run its metalx collectives on the new group's Gloo, the one split for
the CPU device. Splitting metalx's backend on its own would rendezvous a second Gloo
beside that one (which with torch 2.13 can leave a rank waiting forever), so
ProcessGroup.split_group is wrapped: metalx is left out of the C++ split and metalx's
backend is attached to the child over the child's CPU Gloo.

torch 2.13 itself splits a Gloo backend once per device it serves ("gloo" registers one
Gloo for cpu and cuda): two rendezvous on the same store, which intermittently leaves a
rank waiting forever (on CPU-only torch too). For groups that serve metalx the wrapper
splits each Gloo once, for its first device, and registers the child's Gloo for the
parent's other devices.

Saying it can be split also makes torch's new_group (for a default group bound to a
device) call `perform_nocolor_split` on ranks left out of the new group, which NCCL
needs to take part in its communicator split; a new Gloo group is made by its members
alone, so metalx's backend does nothing there (torch 2.13's Gloo lacks the method).

Before splitting, torch deep-copies the `options` of the parent's backend for the
accelerator (metalx). Gloo's options are a C++ object Python cannot copy (with torch
2.13 a Gloo parent fails there: "cannot pickle '_Options' object"), so metalx's backend
reports its Gloo's options in a subclass that copies itself, field by field.
"""

import functools

_MARK = "_metalx_splits_gloo"
_OPTIONS_CLASS = None


def _copyable_options_class():
    from torch.distributed import ProcessGroupGloo

    class GlooOptions(ProcessGroupGloo._Options):
        """Gloo's process-group options that copy.deepcopy can copy."""

        def __deepcopy__(self, memo):
            return copy_of(self)

    return GlooOptions


def copy_of(options):
    """A copyable copy of Gloo's process-group `options` (devices shared, as a split
    Gloo group shares its parent's)."""
    global _OPTIONS_CLASS
    if _OPTIONS_CLASS is None:
        _OPTIONS_CLASS = _copyable_options_class()
    copy = _OPTIONS_CLASS()
    copy._devices = list(options._devices)
    copy._threads = options._threads
    copy._timeout = options._timeout
    copy.global_ranks_in_group = list(options.global_ranks_in_group)
    copy.group_name = options.group_name
    return copy


def _one_device_per_gloo(pg, devices):
    """`devices` with one device per Gloo backend of `pg` (the others' backends are
    split once each, as torch does), and {device left out: the device whose Gloo it
    shares}."""
    from torch.distributed import ProcessGroupGloo

    split, sharing, seen = [], {}, []
    for device in devices:
        backend = pg._get_backend(device)
        if isinstance(backend, ProcessGroupGloo):
            first = next((d for b, d in seen if b is backend), None)
            if first is not None:
                sharing[device] = first
                continue
            seen.append((backend, device))  # holds `backend`: the same object comes back for it
        split.append(device)
    return split, sharing


def _wrap_split_group(split_group):
    import torch
    from torch._C._distributed_c10d import ProcessGroup

    from metalx import _C
    from metalx.distributed._process_groups import serves_metalx

    metalx = torch.device("metalx")

    @functools.wraps(split_group)
    def split_group_with_metalx(self, ranks, timeout=None, opts=None, group_name=None, group_desc=None,
                                device_types=None):
        if not serves_metalx(self):
            return split_group(self, ranks, timeout=timeout, opts=opts, group_name=group_name,
                               group_desc=group_desc, device_types=device_types)
        wanted = [torch.device(d) for d in (device_types or self._device_types)]
        with_metalx = any(d.type == "metalx" for d in wanted)
        others = [d for d in wanted if d.type != "metalx"]
        if with_metalx and not any(d.type == "cpu" for d in others):
            others.append(torch.device("cpu"))  # metalx's Gloo is the CPU device's
        # CPU first: torch wants the default backend's first device (CPU for Gloo) split
        others.sort(key=lambda d: d.type != "cpu")
        split, sharing = _one_device_per_gloo(self, others)
        child = split_group(self, ranks, timeout=timeout, opts=opts, group_name=group_name, group_desc=group_desc,
                            device_types=split)
        if child is not None:
            for device, first in sharing.items():
                child._register_backend(device, ProcessGroup.BackendType.GLOO, child._get_backend(first))
            if with_metalx:
                _C._distributed_attach_gloo(child, cpu_gloo=True)
        return child

    setattr(split_group_with_metalx, _MARK, True)
    return split_group_with_metalx


def _no_split_needed(backend, device):
    """Ranks outside a new Gloo group take no part in making it."""


def register() -> None:
    from torch._C._distributed_c10d import ProcessGroup

    from metalx import _C

    if not isinstance(getattr(_C.GlooBackend, "options", None), property):
        _C.GlooBackend.options = property(lambda backend: copy_of(backend._gloo_options),
                                          doc="the Gloo backend's options (a copy)")
    if not hasattr(_C.GlooBackend, "perform_nocolor_split"):
        _C.GlooBackend.perform_nocolor_split = _no_split_needed
    if not getattr(ProcessGroup.split_group, _MARK, False):
        ProcessGroup.split_group = _wrap_split_group(ProcessGroup.split_group)
