#!/bin/sh
# Issue 42, a step's push and the next pull in one message (KvClient::PushPull):
# CPU-us a sample and samples/s of `pstrain_bench train --mode=ps` with
# --push_with_pull=true and false, interleaved, five runs each, ASP at batch 256 and
# 1024 and BSP at batch 256, one server; then the system calls a step (strace -c -f,
# 100,000 rows = 391 steps at batch 256) with 1 and 4 servers, each way.
# Usage: bench/results/2026-12-07-issue42-push-with-pull.sh OUT_DIR
set -e
out=${1:?usage: $0 OUT_DIR}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
for run in 1 2 3 4 5; do
  for cfg in "asp 256" "asp 1024" "bsp 256"; do
    set -- $cfg
    for w in true false; do
      build/bin/pstrain_bench train --mode=ps --consistency=$1 --batch_size=$2 --push_with_pull=$w \
        --log_level=warn 2>/dev/null | grep '^{' | sed "s/^{/{\"run\":$run,/" >> "$out/cpu.jsonl"
    done
  done
done
for S in 1 4; do
  for w in true false; do
    strace -f -c -o "$out/strace_s${S}_$w.txt" build/bin/pstrain_bench train --mode=ps \
      --batch_size=256 --servers=$S --train_rows=100000 --push_with_pull=$w --log_level=warn \
      > /dev/null 2>&1
  done
done
