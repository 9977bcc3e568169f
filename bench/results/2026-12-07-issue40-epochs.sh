#!/bin/sh
# Issue 40's reader must-show, with a long-lived reader's epochs beside the new reader per
# pass: pstrain_bench reader over the same 1,000,000 rows as TSV and as four Parquet files
# (bench/parquet_reader.sh writes them into $W), 5 interleaved rounds, 1 and 2 reader
# threads. Usage: issue40-epochs.sh [ROUNDS] > out.jsonl
set -e
cd "$(dirname "$0")/../.."
W=${W:-/tmp/pstrain_parquet_reader}
B=${BENCH:-build/bin/pstrain_bench}
for round in $(seq 1 ${1:-5}); do
  for threads in 1 2; do
    for v in tsv snappy_dict snappy_plain zstd_dict zstd_plain; do
      if [ $v = tsv ]; then a="--reader_data=$W/rows-1000000.tsv"
      else a="--reader_data=$W/rows-1000000-rg131072-$v.parquet --reader_schema=$W/criteo_parquet.json"; fi
      $B reader $a --reader_threads=$threads --reader_passes=3 --log_level=warn 2>/dev/null |
        sed "s/^{/{\"round\":$round,\"variant\":\"$v\",/"
    done
  done
done
