#!/bin/sh
# Multi-task heads (issue 39): MMoE, PLE and a shared bottom against one
# single-task model per task (DIN on the click; DIN on the conversion, whose
# label exists on the clicked rows only), 3 seeds each, on pstrain gen
# --history=30 --tasks=2 data (a click, and a conversion observed only after
# a click). CPU: user + system seconds of `pstrain local` and its processes.
# Usage: multitask.sh OUTDIR EPOCHS "MODELS"   (one line per run)
#   the runs of 2026-12-07: multitask.sh /tmp/mtb 1 "mmoe ple shared_bottom din din_convert"
#                           multitask.sh /tmp/mtb 3 "mmoe din din_convert"
set -e
cd "$(dirname "$0")/../.."
D=$1; EPOCHS=${2:-1}; MODELS=${3:-"mmoe ple shared_bottom din din_convert"}
mkdir -p $D
P=build/bin/pstrain
[ -f $D/train.csv ] || $P gen --rows=300000 --seed=7 --history=30 --tasks=2 --out=$D/train.csv
[ -f $D/eval.csv ] || $P gen --rows=50000 --seed=7 --first_row=300000 --history=30 --tasks=2 --out=$D/eval.csv
# Single-task DIN on the conversion label alone.
sed -e 's/"heads": \[{"name": "click", "input": "top"}\]/"heads": [{"name": "convert", "input": "top", "label": "converted"}]/' \
    examples/models/din.json > $D/din_convert.json
grep -q '"label": "converted"' $D/din_convert.json
for seed in 1 2 3; do
  for m in $MODELS; do
    f=examples/models/$m.json
    [ $m = din_convert ] && f=$D/din_convert.json
    /usr/bin/time -f "%U %S" -o $D/$m.$EPOCHS.$seed.time \
      $P local --servers=1 --workers=2 --train_data=$D/train.csv --eval_data=$D/eval.csv \
        --schema=$D/train.csv.schema.json --model_file=$f --batch_size=256 --seed=$seed \
        --epochs=$EPOCHS --metrics_out=$D/$m.$EPOCHS.$seed.jsonl > $D/$m.$EPOCHS.$seed.log 2>&1
    line=$(grep '"event":"summary"' $D/$m.$EPOCHS.$seed.jsonl | tr ',' '\n' | \
           grep -E '"(click|convert)\.eval_(auc|rows)"|"eval_auc"' | tr '\n' ' ')
    echo "epochs=$EPOCHS seed=$seed model=$m $line cpu_user_sys=$(cat $D/$m.$EPOCHS.$seed.time)"
  done
done
