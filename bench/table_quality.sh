#!/usr/bin/env bash
# Eval AUC and rows held of one generated long-tailed job under the
# embedding-table options of issue 18, against the unbounded fp32 table in
# the same run: admission + eviction, and fp16/bf16 rows. One JSON line per
# run on stdout.
#
#   bench/table_quality.sh [BUILD_BIN_DIR] [TRAIN_ROWS]
set -euo pipefail
bin=${1:-build/bin}
rows=${2:-1000000}
work=$(mktemp -d /tmp/pstrain-table-quality.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$bin/pstrain" gen --rows="$rows" --out="$work/train.tsv" --seed=9 --new_id_rate=0.3 >/dev/null
"$bin/pstrain" gen --rows=$((rows / 10)) --first_row="$rows" --out="$work/eval.tsv" --seed=9 \
  --new_id_rate=0.3 >/dev/null

run() {
  local name=$1
  shift
  local log="$work/$name.log" metrics="$work/$name.jsonl"
  "$bin/pstrain" local --servers=2 --workers=1 --log_every_secs=600 --seed=3 --batch_size=512 \
    --train_data="$work/train.tsv" --eval_data="$work/eval.tsv" --metrics_out="$metrics" "$@" \
    >"$log" 2>&1 || { echo "run $name failed:" >&2; tail -20 "$log" >&2; exit 1; }
  local auc table_rows evicted
  auc=$(grep -o '"eval_auc":[0-9.]*' "$metrics" | tail -1 | cut -d: -f2)
  table_rows=$(grep -o 'table [^:]*: [0-9]* rows' "$log" | awk '{s += $(NF-1)} END {print s + 0}')
  evicted=$(grep -o '[0-9]* rows evicted for capacity and [0-9]* for ttl' "$log" |
            awk '{s += $1 + $(NF-2)} END {print s + 0}')
  printf '{"bench":"table_quality","run":"%s","flags":"%s","train_rows":%s,"eval_auc":%s,"rows":%s,"evicted":%s}\n' \
    "$name" "$*" "$rows" "$auc" "$table_rows" "$evicted"
}

run unbounded_fp32
run min_count2_max_rows --min_count=2 --max_rows=20000 --evict_policy=lfu
run min_count2_ttl --min_count=2 --ttl_steps=500
run fp16 --embedding_dtype=fp16
run bf16 --embedding_dtype=bf16
