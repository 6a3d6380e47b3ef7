#!/usr/bin/env bash
# Sets up a development machine for metalx from scratch (Python, pip and apt only)
# and installs metalx into the current Python.
#
#   scripts/install_dev.sh            # PYTHON=python3 by default
#
# metalx compiles against the installed torch and pins it exactly, so torch is
# installed first and metalx is built without build isolation (an isolated build
# would download another torch).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TORCH_VERSION=2.13.0

# System build tools, only those missing.
bash scripts/setup_system.sh

# torch first, exactly the release metalx is developed against; then the build
# backend and what the tests (and torch's own test utilities) need.
"$PYTHON" -m pip install "torch==${TORCH_VERSION}"
"$PYTHON" -m pip install "scikit-build-core>=1.1" pytest numpy expecttest hypothesis

if command -v ccache >/dev/null; then
  # CMake takes these from the environment as the default compiler launchers.
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
"$PYTHON" -m pip install --no-build-isolation ${PIP_VERBOSE:--q} .

echo "install_dev: done; run the tests with: $PYTHON -m pytest tests/python -q"
