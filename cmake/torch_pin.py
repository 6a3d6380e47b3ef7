"""scikit-build-core dynamic-metadata provider: the wheel's exact torch requirement.

metalx's C++ extension is compiled against the torch installed in the building
Python (cmake/torch_backend.cmake finds the same one), so the wheel requires exactly
that release: "torch==2.13.0" for 2.13.0 or 2.13.0+cpu (the local "+cpu" part names
a build variant of the same release, which PEP 440 matching ignores).
"""

from importlib import metadata


def _installed_torch_release() -> str:
    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        raise RuntimeError(
            "metalx is built against the torch installed in the building Python, and "
            "none is installed there. Install it first and build without build "
            "isolation:\n"
            "    pip install torch==2.13.0\n"
            "    pip install --no-build-isolation .\n"
            "(An isolated build environment never has torch: metalx deliberately does "
            "not list torch as a build requirement, which would download another one.)"
        ) from None
    return version.split("+", 1)[0]


def dynamic_metadata(settings, project):
    if settings:
        raise RuntimeError(f"torch_pin takes no settings, got {sorted(settings)}")
    return {"dependencies": [f"torch=={_installed_torch_release()}"]}
