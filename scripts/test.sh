#!/usr/bin/env bash
# The project's test command: sets up a fresh machine (system packages, Python
# packages, torch==2.13.0), builds metalx and runs every test. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_system.sh
bash scripts/test_runtime.sh
