#!/usr/bin/env bash
# The full in-wheel upstream suite: every OpInfo of op_db over every dtype it supports
# (compare-with-CPU, out=, in-place, gradients) and every ModuleInfo of module_db.
# Long (compare-with-CPU alone: ~20 min on one core); not part of CI.
#   scripts/test_upstream_full.sh                      # everything
#   scripts/test_upstream_full.sh -k test_compare_cpu  # only compare-with-CPU
# Runs as METALX_SHARDS (default 8) pytest processes so that a crash costs one shard;
# then prints the merged summary (tests, pass rate, time, ops native vs CPU fallback)
# and writes it to upstream-full-summary.json. Exit 1 on failures or crashed shards.
set -uo pipefail
cd "$(dirname "$0")/.."
export METALX_UPSTREAM_SCOPE=full
shards=${METALX_SHARDS:-8}
out=${METALX_FULL_OUT:-upstream-results/full}
mkdir -p "$out"
rm -f "$out"/shard-*.json
status=0
for ((i = 0; i < shards; i++)); do
  METALX_SHARD="$i/$shards" METALX_SUMMARY_JSON="$out/shard-$i.json" \
    python3 -m pytest tests/upstream -q -p no:cacheprovider --tb=no "$@" > "$out/shard-$i.log" 2>&1
  rc=$?
  echo "shard $i/$shards: pytest exit $rc ($(tail -n 1 "$out/shard-$i.log"))"
  # 0 passed, 1 tests failed, 5 nothing selected; anything else (e.g. 139) crashed.
  case $rc in 0|5) ;; 1) status=1 ;; *) status=1; echo "  shard $i CRASHED: see $out/shard-$i.log (partial summary kept)" ;; esac
done
python3 -m metalx.testing.summary upstream-full-summary.json "$out"/shard-*.json
exit $status
