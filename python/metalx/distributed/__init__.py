"""torch.distributed on metalx: collectives on metalx tensors through Gloo.

metalx device memory is CPU-addressable, so Gloo, torch's CPU communication backend,
reduces metalx tensors in place (backend/distributed/). What this package adds to
torch.distributed, once metalx is loaded (`install()`):

- "gloo" serves the metalx device: `init_process_group("gloo")`,
  `init_process_group(device_id=torch.device("metalx", i))` and
  `init_process_group("cpu:gloo,metalx:gloo")` give process groups whose collectives
  take metalx tensors (`_backend_maps`);
- every process group created with Gloo for metalx gets metalx's backend for that
  device (`_process_groups`);
- torch.distributed.split_group splits such groups (`_split`).
"""

from metalx.distributed._process_groups import serves_metalx

__all__ = ["install", "serves_metalx"]


def install() -> None:
    """Teaches torch.distributed (when torch has it) that Gloo serves metalx tensors."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        return
    from metalx import _C
    from metalx.distributed import _backend_maps, _process_groups, _split

    _C._distributed_define_types()
    _backend_maps.register()
    _process_groups.register()
    _split.register()
