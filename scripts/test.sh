#!/usr/bin/env bash
# The project's test command: sets up a fresh machine (system packages, torch==2.13.0
# and the Python packages the tests need), builds metalx and runs every test: the
# runtime's C++ tests (plain and sanitized), a syntax check of the Apple-only driver, and
# the Python tests of the torch backend (twice: the second time with every built-in
# kernel's buffer accesses checked), and a subset of PyTorch's own op and module
# test suites run on metalx (tests/upstream).
# CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_system.sh
# Every kernel is compiled once per simulator ISA in each build folder (the runtime's
# tests, then the wheel); with paths taken relative to the checkout and one compiler
# for both, the wheel's kernel objects come from ccache instead of a second compile.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
export CC="${CC:-gcc}" CXX="${CXX:-g++}"
bash scripts/check_apple_syntax.sh   # the Metal driver (.mm): parses, and matches Apple's metal-cpp (from PyPI)
bash scripts/test_runtime.sh
bash scripts/install_dev.sh
bash scripts/test_upstream_subset.sh   # PyTorch's own op/module tests (OpInfo subset) on metalx
python3 -m pytest tests/python -q
# Once more with the simulator's shader validation on for metalx's own kernels too: every
# device buffer access of every built-in kernel is checked against its binding (they are
# compiled again from source at first use, ~3 minutes on 2 cores).
METALSIM_SHADER_VALIDATION=all python3 -m pytest tests/python -q
