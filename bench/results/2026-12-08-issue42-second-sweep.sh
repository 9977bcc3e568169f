#!/usr/bin/env bash
# Issue 42: the must-show points (W = 1 and 8 at 10 Gbit/s) a second time,
# for "best of two sweeps": DLRM ASP and BSP, deep_tower ASP, allreduce DLRM.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/issue42-second}
mkdir -p "$OUT"
S=(python3 bench/scale.py --bin-dir=build/bin --rows_per_worker=200000 --workers=1,8 --rates=10gbit)
"${S[@]}" --consistency=asp > "$OUT/dlrm-asp.jsonl"
"${S[@]}" --consistency=bsp > "$OUT/dlrm-bsp.jsonl"
"${S[@]}" --consistency=asp --model=deep_tower "--model_flags=--tower_layers=3 --tower_width=128" \
  > "$OUT/deep-tower-asp.jsonl"
"${S[@]}" --mode=allreduce > "$OUT/dlrm-allreduce.jsonl"
