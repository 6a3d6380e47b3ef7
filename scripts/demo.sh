#!/usr/bin/env bash
# The main job: sets up a fresh machine, builds and installs metalx, and trains a small
# model on the metalx device, checked against the CPU, with a report of which ops ran
# on metalx and which fell back to the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_dev.sh
python3 examples/demo.py "$@"
