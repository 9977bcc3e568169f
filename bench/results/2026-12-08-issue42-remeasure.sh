#!/usr/bin/env bash
# Issue 42, item 4: every mode of the scaling bench again with the code of
# 2026-12-08 (PushPull, the getpid cache): DLRM and deep_tower (3 x 128
# tower), ASP, BSP and allreduce (bcube), 10 and 1 Gbit/s, W = 1, 2, 4, 8,
# each with `pstrain plan --hosts`'s prediction from its own calibration.
# Root (network namespaces, cgroup-v1 quotas). One JSON line a point in OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/issue42-remeasure}
mkdir -p "$OUT"
TOWER=(--model=deep_tower "--model_flags=--tower_layers=3 --tower_width=128")
run() {
  local name=$1
  shift
  echo "== $name $(date -u +%H:%M:%S)" >&2
  python3 bench/scale.py --bin-dir=build/bin --rows_per_worker=200000 --calibrate "$@" \
    > "$OUT/$name.jsonl"
}
run dlrm-asp --consistency=asp
run dlrm-bsp --consistency=bsp
run dlrm-allreduce --mode=allreduce
run deep-tower-asp --consistency=asp "${TOWER[@]}"
run deep-tower-bsp --consistency=bsp "${TOWER[@]}"
run deep-tower-allreduce --mode=allreduce "${TOWER[@]}"
echo "== done $(date -u +%H:%M:%S)" >&2
