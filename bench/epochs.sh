#!/usr/bin/env bash
# Quality over several epochs: one generated job (DLRM by default) trained
# for EPOCHS passes by `pstrain train`, evaluated after every epoch, under a
# baseline and each regularization / schedule option. One JSON line per
# (run, epoch) with the eval AUC and logloss, then a line per run with the
# best epoch. CTR models overfit from the second epoch (the embedding rows of
# rare ids memorize their few rows); this shows by how much, and what each
# option buys.
#
#   bench/epochs.sh [BUILD_BIN_DIR] [TRAIN_ROWS] [EPOCHS] [-- extra pstrain train flags]
#   e.g. bench/epochs.sh build/bin 1000000 3 -- --model=dcn_v2
# NEW_ID_RATE (default 0.3: a long tail of ids) and SEED (1) shape the data;
# RUNS (default: all) picks runs by name, e.g. RUNS="base dropout".
set -euo pipefail
bin=${1:-build/bin}
rows=${2:-1000000}
epochs=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
[[ ${1:-} == -- ]] && shift
extra=("$@")
seed=${SEED:-1}
new_id_rate=${NEW_ID_RATE:-0.3}
work=$(mktemp -d /tmp/pstrain-epochs.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$bin/pstrain" gen --rows="$rows" --out="$work/train.tsv" --seed="$seed" \
  --new_id_rate="$new_id_rate" >/dev/null
"$bin/pstrain" gen --rows=$((rows / 10)) --first_row="$rows" --out="$work/eval.tsv" \
  --seed="$seed" --new_id_rate="$new_id_rate" >/dev/null
batch=1024
steps_per_epoch=$(( (rows + batch - 1) / batch ))

declare -A flags=(
  [base]=""
  [emb_l2]="--table_weight_decay=emb.*=1e-4"
  [dropout]="--dropout=0.2"
  [warmup]="--warmup_steps=200"
  [lr_half]="--lr=0.025"
  [lr_decay]="--lr_decay_steps=$((2 * steps_per_epoch))"
  [zero_rows]="--untrained_rows=zeros"
  [zero_rows_dropout]="--untrained_rows=zeros --dropout=0.2"
)
order=(base emb_l2 dropout warmup lr_half lr_decay zero_rows zero_rows_dropout)
for name in ${RUNS:-${order[@]}}; do
  metrics="$work/$name.jsonl"
  # shellcheck disable=SC2086
  "$bin/pstrain" train --train_data="$work/train.tsv" --eval_data="$work/eval.tsv" \
    --epochs="$epochs" --eval_every_steps="$steps_per_epoch" --batch_size="$batch" \
    --log_every_secs=600 --metrics_out="$metrics" ${flags[$name]} "${extra[@]}" \
    >"$work/$name.log" 2>&1 || { echo "run $name failed:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
  python3 - "$name" "${flags[$name]} ${extra[*]}" "$steps_per_epoch" "$metrics" <<'PY'
import json, sys
name, flags, per_epoch, path = sys.argv[1], sys.argv[2].strip(), int(sys.argv[3]), sys.argv[4]
evals = {}
for line in open(path):
    r = json.loads(line)
    if r.get("event") == "eval":
        evals[r["step"]] = r  # the last record of a step (the final eval repeats it)
best = None
for step in sorted(evals):
    r = evals[step]
    epoch = round(step / per_epoch, 2)
    print(json.dumps({"bench": "epochs", "run": name, "flags": flags, "epoch": epoch,
                      "eval_auc": r["eval_auc"], "eval_logloss": r["eval_logloss"]}))
    if best is None or r["eval_auc"] > best[1]:
        best = (epoch, r["eval_auc"])
print(json.dumps({"bench": "epochs", "run": name, "flags": flags, "best_epoch": best[0],
                  "best_auc": best[1]}))
PY
done
