#!/usr/bin/env bash
# Online training against a frozen model on a drifting stream (issue 19).
#
# Writes a stream of P partitions (`pstrain gen --stream --drift=D`: from one
# partition to the next a D fraction of every field's values turns into new
# ids with new teacher weights), then:
#   online: one job follows the whole stream; each partition's AUC is its
#           progressive (test-then-train) AUC from --metrics_out;
#   frozen: a job trains on partition 1 only and saves the model; each later
#           partition is scored by `pstrain predict` with that model.
# Prints one JSON line per partition and a summary line.
#
# usage: bench/stream_drift.sh [BIN_DIR] [ROWS_PER_PARTITION] [PARTITIONS] [DRIFT] [MODEL]
set -euo pipefail
bin=${1:-build/bin}
rows=${2:-50000}
parts=${3:-10}
drift=${4:-0.1}
model=${5:-dlrm}
work=$(mktemp -d /tmp/pstrain-drift-XXXXXX)
trap 'rm -rf "$work"' EXIT
common=(--servers=1 --workers=2 --model="$model" --batch_size=256)

"$bin/pstrain" gen --stream="$work/stream" --rows="$rows" --partitions="$parts" --drift="$drift" \
  > "$work/gen.log"
names=($(cd "$work/stream" && find . -name _SUCCESS | sed 's|^\./||; s|/_SUCCESS$||' | sort))

"$bin/pstrain" local "${common[@]}" --train_stream="$work/stream" --stream_end="${names[-1]}" \
  --metrics_out="$work/online.jsonl" > "$work/online.log" 2>&1
"$bin/pstrain" local "${common[@]}" --train_stream="$work/stream" --stream_end="${names[0]}" \
  --save_model="$work/frozen" > "$work/frozen.log" 2>&1

online_sum=0 frozen_sum=0 later=0
for i in "${!names[@]}"; do
  name=${names[$i]}
  online=$(grep "\"partition\":\"$name\"" "$work/online.jsonl" | tail -1 |
           sed 's/.*"progressive_auc":\([-0-9.eE]*\).*/\1/')
  frozen=null
  if (( i > 0 )); then
    frozen=$("$bin/pstrain" predict --model="$work/frozen" --data="$work/stream/$name/part-0.tsv" 2>&1 |
             sed -n 's/.*AUC \([0-9.]*\).*/\1/p' | head -1)
    online_sum=$(echo "$online_sum + $online" | bc -l)
    frozen_sum=$(echo "$frozen_sum + $frozen" | bc -l)
    later=$((later + 1))
  fi
  oracle=$(sed 's/.*"oracle_auc":\([-0-9.eE]*\).*/\1/' "$work/stream/$name/_meta.json")
  echo "{\"bench\":\"stream_drift\",\"partition\":\"$name\",\"index\":$i,\"online_progressive_auc\":$online,\"frozen_auc\":$frozen,\"oracle_auc\":$oracle}"
done
echo "{\"bench\":\"stream_drift\",\"summary\":true,\"model\":\"$model\",\"rows_per_partition\":$rows,\"partitions\":$parts,\"drift\":$drift,\"mean_online_auc_after_1\":$(printf '%.5f' "$(echo "$online_sum / $later" | bc -l)"),\"mean_frozen_auc_after_1\":$(printf '%.5f' "$(echo "$frozen_sum / $later" | bc -l)")}"
