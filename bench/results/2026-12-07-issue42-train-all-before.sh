#!/bin/sh
# Issue 42's must-show "pstrain_bench train --mode=all, five runs each, medians" before any
# change: CPU-us a sample of the model alone (local), the tables in one process (tables)
# and the parameter-server path (ps, 1 server + 1 worker over TCP loopback), DLRM, the
# synthetic 300,000 rows, batch 1024 and 256, runs interleaved. Usage: ... > out.jsonl
set -e
cd "$(dirname "$0")/../.."
for run in 1 2 3 4 5; do
  for b in 1024 256; do
    build/bin/pstrain_bench train --mode=all --batch_size=$b --log_level=warn 2>/dev/null |
      grep '^{' | sed "s/^{/{\"run\":$run,/"
  done
done
