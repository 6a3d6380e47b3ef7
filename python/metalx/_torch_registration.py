"""Makes "metalx" a device name in torch: the Python half of the registration."""

from metalx import _nn_policies, _torch_module

BACKEND_NAME = "metalx"


def register(torch):
    # Each step is guarded because torch allows it once per process, and loading can
    # be reached twice (autoload, then an explicit import).
    current = torch._C._get_privateuse1_backend_name()
    if current != BACKEND_NAME:
        if current != "privateuseone":
            raise RuntimeError(
                f"torch's PrivateUse1 device is already taken by the backend {current!r}; "
                f"metalx cannot be used in the same process"
            )
        torch.utils.rename_privateuse1_backend(BACKEND_NAME)
    if not hasattr(torch, BACKEND_NAME):
        torch._register_device_module(BACKEND_NAME, _torch_module)
    if not hasattr(torch.Tensor, f"is_{BACKEND_NAME}"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_storage=True
        )
    # torch.nn numeric policies keyed by device type (see _nn_policies).
    _nn_policies.register(torch, BACKEND_NAME)
    # torch.distributed: Gloo serves metalx tensors (metalx/distributed/).
    from metalx import distributed

    distributed.install()
    # torch.multiprocessing: metalx tensors passed between processes share memory.
    from metalx import _process_sharing

    _process_sharing.install()
