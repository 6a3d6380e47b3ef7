#!/usr/bin/env bash
# CI subset of PyTorch's upstream op/module suites on metalx (~100 OpInfos, 15
# ModuleInfos, 6 dtypes incl. float64/complex64; budget: <= 10 minutes on 2 cores).
# Known failures live in tests/upstream/expectations/torch-<X.Y>.json; a listed test that
# passes fails the run. Assumes metalx is installed (scripts/install_dev.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export METALX_UPSTREAM_SCOPE=subset
export METALX_SUMMARY_JSON=${METALX_SUMMARY_JSON:-upstream-subset-summary.json}
exec python3 -m pytest tests/upstream -q -p no:cacheprovider "$@"
