#!/usr/bin/env bash
# make demo: generate a train and an eval set, train the demo job
# (examples/jobs/dlrm.json: dlrm on a local cluster of 2 servers and 2
# workers), print one summary line.
set -euo pipefail
BUILD=${1:-build}
BIN=$BUILD/bin
OUT=$BUILD/demo
TRAIN_ROWS=${DEMO_TRAIN_ROWS:-500000}
EVAL_ROWS=${DEMO_EVAL_ROWS:-50000}
mkdir -p "$OUT"

# The data depends only on the row counts and the seed: reuse it when present.
if [[ ! -s $OUT/train.tsv.meta.json ]] || ! grep -q "\"rows\":$TRAIN_ROWS," "$OUT/train.tsv.meta.json"; then
  "$BIN/pstrain" gen --rows="$TRAIN_ROWS" --seed=1 --out="$OUT/train.tsv"
fi
if [[ ! -s $OUT/eval.tsv.meta.json ]] || ! grep -q "\"rows\":$EVAL_ROWS," "$OUT/eval.tsv.meta.json"; then
  "$BIN/pstrain" gen --rows="$EVAL_ROWS" --seed=1 --first_row="$TRAIN_ROWS" --out="$OUT/eval.tsv"
fi

rm -f "$OUT/metrics.jsonl"
# The coordinator's dashboard (live while the job runs): DEMO_DASHBOARD_PORT
# pins the port, DEMO_DASHBOARD_PORT=0 turns it off; default a free port.
DASHBOARD_PORT=${DEMO_DASHBOARD_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo 0)}
# The job is examples/jobs/dlrm.json (pstrain job show --job=... prints it);
# the data paths follow $BUILD.
"$BIN/pstrain" local --job="$(dirname "$0")/../examples/jobs/dlrm.json" \
  --dashboard_port="$DASHBOARD_PORT" \
  --train_data="$OUT/train.tsv" --eval_data="$OUT/eval.tsv" \
  --eval_meta="$OUT/eval.tsv.meta.json" \
  --metrics_out="$OUT/metrics.jsonl" "${@:2}"

summary=$(tail -n 1 "$OUT/metrics.jsonl")
field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" <<<"$summary"; }
echo
printf 'pstrain demo: eval AUC %.4f (oracle %.4f), eval logloss %.4f, %.0f samples/s, wall %.1f s  [%s]\n' \
  "$(field eval_auc)" "$(field oracle_auc)" "$(field eval_logloss)" "$(field samples_per_sec)" \
  "$(field wall_seconds)" "$OUT/metrics.jsonl"
"$BIN/pstrain" plot "$OUT/metrics.jsonl" --out="$OUT/curves.html" --names=demo >/dev/null &&
  echo "pstrain demo: training curves in $OUT/curves.html"
