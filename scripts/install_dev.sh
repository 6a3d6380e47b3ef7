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

# System build tools, only those missing (apt-get needs root or sudo).
missing=()
have_cmake_325() {
  command -v cmake >/dev/null &&
    printf '3.25\n%s\n' "$(cmake --version | head -n1 | awk '{print $3}')" | sort -V -C
}
have_cmake_325 || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
command -v g++ >/dev/null || missing+=(g++)
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
command -v ccache >/dev/null || missing+=(ccache)
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "install_dev: installing ${missing[*]} with apt-get"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# torch first, exactly the release metalx is developed against; then the build
# backend and what the tests (and torch's own test utilities) need.
"$PYTHON" -m pip install "torch==${TORCH_VERSION}"
"$PYTHON" -m pip install "scikit-build-core>=1.1" pytest numpy expecttest hypothesis

if command -v ccache >/dev/null; then
  # CMake takes these from the environment as the default compiler launchers.
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
"$PYTHON" -m pip install --no-build-isolation -v .

echo "install_dev: done; run the tests with: $PYTHON -m pytest tests/python -q"
