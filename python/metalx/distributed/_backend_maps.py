"""torch.distributed's device <-> backend tables: Gloo serves metalx.

`Backend.backend_capability["gloo"]` lists the devices a process group made with
"gloo" registers Gloo for; `Backend.default_device_backend_map` picks the backend of
`init_process_group(device_id=...)` without a backend name (and of the accelerator
when no backend is named at all).
"""

DEVICE = "metalx"


def register() -> None:
    from torch.distributed import Backend

    devices = Backend.backend_capability.setdefault(Backend.GLOO, [])
    if DEVICE not in devices:
        devices.append(DEVICE)
    Backend.default_device_backend_map.setdefault(DEVICE, Backend.GLOO)
