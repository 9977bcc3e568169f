#!/bin/sh
# BST with the candidate item appended to its sequence (self_attention "input": "item")
# against bst.json as it was (history only), 3 seeds each, on the data of
# 2026-12-07-issue39-din-init.sh. Usage: bst-candidate.sh OUTDIR
set -e
cd "$(dirname "$0")/../.."
D=$1; mkdir -p $D
P=build/bin/pstrain
[ -f $D/train.csv ] || $P gen --rows=300000 --seed=7 --history=30 --out=$D/train.csv
[ -f $D/eval.csv ] || $P gen --rows=50000 --seed=7 --first_row=300000 --history=30 --out=$D/eval.csv
# The history-only variant: bst.json without the layer's "input".
sed 's/"sequence": "history", "input": "item",/"sequence": "history",/' examples/models/bst.json > $D/bst_history_only.json
sed 's/"sequence": "history",/"sequence": "history", "input": "item",/' $D/bst_history_only.json > $D/bst_candidate.json
for seed in ${SEEDS:-1 2 3 4 5 6}; do
  for m in bst_history_only bst_candidate; do
    line=$($P local --servers=1 --workers=2 --train_data=$D/train.csv --eval_data=$D/eval.csv \
        --batch_size=256 --seed=$seed --schema=$D/train.csv.schema.json --model_file=$D/$m.json 2>&1 | grep RESULT)
    echo "seed=$seed model=$m $line"
  done
done
