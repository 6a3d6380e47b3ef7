#!/usr/bin/env bash
# Syntax-checks the Apple-only Objective-C++ sources (backend/runtime/metal/*.mm) on a
# machine without Apple's SDK: clang parses each one against the minimal Metal and
# Foundation declarations in tests/apple_syntax/ (written from Apple's documentation).
# Catches plain C++ mistakes in the Metal driver. Then scripts/check_apple_api.py checks
# every Objective-C message the driver sends against Apple's own declarations
# (metal-cpp, fetched from PyPI at check time): selector names, receiver classes,
# argument and result types, and APIs newer than the minimum macOS without an
# @available guard. Neither can tell whether the driver behaves correctly (only a Mac can).
set -euo pipefail
cd "$(dirname "$0")/.."

CLANG=${CLANG:-}
if [[ -z "$CLANG" ]]; then
  for c in clang++ clang; do
    if command -v "$c" >/dev/null; then CLANG=$c; break; fi
  done
fi
if [[ -z "$CLANG" ]]; then
  echo "check_apple_syntax: installing clang" >&2
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang >/dev/null
  CLANG=clang++
fi

shopt -s nullglob
sources=(backend/runtime/metal/*.mm)
if [[ ${#sources[@]} -eq 0 ]]; then
  echo "check_apple_syntax: no .mm sources found" >&2
  exit 1
fi

# -fobjc-runtime=macosx: the Objective-C dialect of Apple's runtime (ARC, modern
# literals), which Linux's default GNU runtime setting would refuse. -fblocks: blocks
# are on by default only on Apple targets.
flags=(-fsyntax-only -x objective-c++ -std=c++17 -fobjc-arc -fblocks
       -fobjc-runtime=macosx-14.0 -Werror -Wall -Wno-unused-function
       -Wno-unguarded-availability-new
       -isystem tests/apple_syntax -I backend/runtime/include -I backend/runtime/metal
       -DMETALX_HAVE_METAL=1)

status=0
for f in "${sources[@]}"; do
  if "$CLANG" "${flags[@]}" "$f"; then
    echo "ok    $f"
  else
    echo "FAIL  $f" >&2
    status=1
  fi
done
if [[ $status -ne 0 ]]; then
  echo "check_apple_syntax: the Metal driver does not parse against Apple's API (above)" >&2
  exit $status
fi

# Against Apple's declarations (a hard check: CI reaches PyPI).
CLANG="$CLANG" "${PYTHON:-python3}" scripts/check_apple_api.py
