#!/bin/sh
# Multi-task heads (issue 39): MMoE, PLE and a shared bottom against one
# single-task model per task (DIN on the click; DIN on the conversion,
# trained on the clicked rows), 3 seeds each, on pstrain gen --history=30
# --tasks=2 data (a click, and a conversion observed only after a click).
# Usage: multitask.sh OUTDIR  (prints one line per run)
set -e
cd "$(dirname "$0")/../.."
D=$1; mkdir -p $D
P=build/bin/pstrain
$P gen --rows=300000 --seed=7 --history=30 --tasks=2 --out=$D/train.csv
$P gen --rows=50000 --seed=7 --first_row=300000 --history=30 --tasks=2 --out=$D/eval.csv
# Single-task DIN on the conversion label alone (its rows: the clicked ones).
sed -e 's/"heads": \[{"name": "click", "input": "top"}\]/"heads": [{"name": "convert", "input": "top", "label": "converted"}]/' \
    examples/models/din.json > $D/din_convert.json
grep -q '"label": "converted"' $D/din_convert.json
for seed in 1 2 3; do
  for m in mmoe ple shared_bottom din din_convert; do
    f=examples/models/$m.json
    [ $m = din_convert ] && f=$D/din_convert.json
    $P local --servers=1 --workers=2 --train_data=$D/train.csv --eval_data=$D/eval.csv \
        --schema=$D/train.csv.schema.json --model_file=$f --batch_size=256 --seed=$seed \
        --metrics_out=$D/$m.$seed.jsonl > $D/$m.$seed.log 2>&1
    line=$(grep '"event":"summary"' $D/$m.$seed.jsonl | tr ',' '\n' | \
           grep -E '"(click|convert)\.eval_(auc|rows)"|"eval_auc"|samples_per_sec' | tr '\n' ' ')
    echo "seed=$seed model=$m $line"
  done
done
