#!/bin/sh
# DIN (and BST) against its sum-pooling base and DLRM without the history, 3 seeds each,
# on pstrain gen --history data. Usage: din.sh OUTDIR
set -e
cd /work/main
D=$1; mkdir -p $D
P=build/bin/pstrain
$P gen --rows=300000 --seed=7 --history=30 --out=$D/train.csv
$P gen --rows=50000 --seed=7 --first_row=300000 --history=30 --out=$D/eval.csv
# The same columns without the history, for the model that ignores it.
sed -e 's/"sparse": \["user", "item", "category",/"ignore": ["history", "history_category"], "sparse": ["user", "item", "category"]/' \
    -e "/multi_hot/d" $D/train.csv.schema.json > $D/no_history.schema.json
for seed in 1 2 3; do
  for m in din bst history_sum dlrm dlrm05; do
    if [ $m = dlrm05 ]; then
      args="--schema=$D/no_history.schema.json --model=dlrm --embedding_init=uniform:0.5"
    elif [ $m = dlrm ]; then
      args="--schema=$D/no_history.schema.json --model=dlrm"
    else
      args="--schema=$D/train.csv.schema.json --model_file=examples/models/$m.json"
    fi
    line=$($P local --servers=1 --workers=2 --train_data=$D/train.csv --eval_data=$D/eval.csv \
        --batch_size=256 --seed=$seed $args 2>&1 | grep RESULT)
    echo "seed=$seed model=$m $line"
  done
done
