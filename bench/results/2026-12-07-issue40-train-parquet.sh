#!/bin/bash
# Issue 40 must-show: ps-mode DLRM at batch 1024 reading Parquet against reading
# the same rows as TSV, CPU-us a sample, in the same run (rounds interleaved).
# The inputs are bench/parquet_reader.sh's (1,000,000 `pstrain gen` rows as TSV and
# as four Parquet files written by parquet-wasm 0.8.0); run that first.
# Usage: bench/results/2026-12-07-issue40-train-parquet.sh [ROUNDS] > out.jsonl
set -euo pipefail
ROUNDS=${1:-3}
W=${PARQUET_READER_DATA:-/tmp/pstrain_parquet_reader}
B=${BENCH:-build/bin/pstrain_bench}
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
# The Criteo layout by column number: the same fields, in the same order, as the
# Parquet schema's names, so both give the same ids and dense values.
python3 -c "
import json
json.dump({'separator': 'tab', 'num_columns': 40, 'label': 0, 'dense_transform': 'log1p_clamp',
           'dense': list(range(1, 14)), 'sparse': list(range(14, 40))}, open('$S/criteo_tsv.json', 'w'))"
for round in $(seq "$ROUNDS"); do
  for input in tsv snappy_dict zstd_dict snappy_plain zstd_plain; do
    if [ $input = tsv ]; then
      args=(--train_data=$W/rows-1000000.tsv --schema=$S/criteo_tsv.json)
    else
      args=(--train_data=$W/rows-1000000-rg131072-$input.parquet --schema=$W/criteo_parquet.json)
    fi
    for mode in ps tables; do
      "$B" train --mode=$mode --batch_size=1024 "${args[@]}" --log_level=warn 2>/dev/null |
        grep '^{' | sed "s/^{/{\"round\":$round,\"input\":\"$input\",/"
    done
  done
done
