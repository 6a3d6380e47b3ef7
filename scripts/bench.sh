#!/usr/bin/env bash
# Runs the benchmarks and records their results under bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_system.sh
build=build/runtime
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMETALX_BUILD_TORCH=OFF -DMETALX_BUILD_BENCH=ON -DMETALX_BUILD_TESTS=ON >/dev/null
cmake --build "$build" --target metalx_runtime_bench
"$build/bench/metalx_runtime_bench" "bench/results/runtime-sim-$(uname -s | tr A-Z a-z)-$(uname -m).json"
# The device against CPU torch (needs metalx installed: scripts/install_dev.sh).
python3 bench/torch_bench.py --out "bench/results/torch-sim-$(uname -s | tr A-Z a-z)-$(uname -m).json"
# Copy/compute overlap across streams: kernels on every core, then with one core left
# to the copy engine (see the script's docstring).
tag="sim-$(uname -s | tr A-Z a-z)-$(uname -m)"
python3 bench/stream_overlap_bench.py --out "bench/results/streams-$tag.json"
METALSIM_THREADS=$(( $(nproc) > 1 ? $(nproc) - 1 : 1 )) \
  python3 bench/stream_overlap_bench.py --out "bench/results/streams-copy-engine-core-$tag.json"
# torch.distributed through Gloo: all_reduce of metalx vs CPU tensors, and a DDP step
# (2 processes on 127.0.0.1).
python3 bench/distributed_bench.py --out "bench/results/distributed-$tag.json"
