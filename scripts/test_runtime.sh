#!/usr/bin/env bash
# Builds and runs the runtime's C++ tests (interface, simulator, kernel toolchain),
# once as shipped and once with AddressSanitizer (METALSIM_SANITIZE), which also
# checks that kernels writing out of bounds are caught.
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

run_suite() {  # build-dir, extra cmake args...
  local build=$1
  shift
  cmake -S . -B "$build" -G Ninja -DMETALX_BUILD_TORCH=OFF -DMETALX_BUILD_TESTS=ON "${launcher[@]}" "$@" >/dev/null
  cmake --build "$build"
  (cd "$build" && ctest --output-on-failure --timeout 300)
}

run_suite build/runtime -DCMAKE_BUILD_TYPE=Release -DMETALX_BUILD_BENCH=ON
# The sanitized build compiles the kernels for the baseline ISA only: the ISA builds are
# the same source, and the plain suite above runs the ISA selection. It saves two
# thirds of the slowest compile in CI.
run_suite build/runtime-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMETALSIM_SANITIZE=ON -DMETALSIM_KERNEL_ISAS=baseline
