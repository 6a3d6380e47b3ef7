"""metalx: Apple GPUs as a PyTorch device ("metalx").

`import torch` loads metalx by itself (entry point `torch.backends`: `_autoload`),
so after it `torch.metalx` and `tensor.to("metalx")` work. With
TORCH_DEVICE_BACKEND_AUTOLOAD=0, `import metalx` does the same explicitly.

Two ways in, one loader (`_loader.load`):
- autoload: `import torch` imports this package, then calls `_autoload()`, which
  turns any failure into a warning so that `import torch` itself never fails;
- explicit `import metalx`: a failure raises ImportError with the same message.
"""

__version__ = "0.1.0"

# Defined before `import torch` below: importing torch first from here runs the
# autoload entry point, which finds this package half-imported and needs `_autoload`.
from metalx._loader import autoload as _autoload, load, torch_is_importing as _torch_is_importing

import torch  # noqa: E402  (see above)

# While torch is importing, this is the entry point's import: leave the loading to
# _autoload(), which torch calls next and which must not raise. `metalx.load()`
# re-raises a failed autoload's error for callers who want an exception.
if not _torch_is_importing():
    load()

__all__ = ["load", "__version__"]
