#!/usr/bin/env bash
# The stress suite of issue 17 (tests/stress/run_stress.py): 8 threads on their own
# streams for several minutes, OOM recovery, compile_shader from several processes on
# one disk cache. Not part of .ci/run (CI runs a 10-second version in
# tests/python/test_stress_smoke.py). Records its report in bench/results.
#   bash scripts/stress.sh [seconds]        (default 300)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-300}"
tag="sim-$(uname -s | tr A-Z a-z)-$(uname -m)"
python3 tests/stress/run_stress.py --seconds "$seconds" --report "bench/results/stress-$tag.json"
