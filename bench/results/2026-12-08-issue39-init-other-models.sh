#!/usr/bin/env bash
# The new default start U(+-0.1) against U(+-0.05) for the other built-in
# networks that take the default (deepfm keeps its own U(+-0.01)): pstrain gen
# worlds 1-3, 1M training rows, 100k eval rows, one pass, eval AUC. $1: the
# work folder of `bench/init_quality.py --data=gen --seeds=1,2,3` (its
# train1.tsv, eval1.tsv, ...).
W=${1:-/tmp/pstrain-init.875unmzw}
for model in wide_deep dcn_v2 lr; do
  for seed in 1 2 3; do
    for s in 0.05 0.1; do
      m=/tmp/mi-$model-$seed-$s.jsonl; rm -f $m
      "$(dirname "$0")"/../../build/bin/pstrain train --model=$model --train_data=$W/train$seed.tsv --eval_data=$W/eval$seed.tsv \
        --embedding_init=uniform:$s --metrics_out=$m --log_every_secs=600 > /dev/null 2>&1
      python3 -c "
import json
s=[json.loads(l) for l in open('$m') if '\"summary\"' in l or 'summary' in l][-1]
print(json.dumps({'model':'$model','world':$seed,'init':'u:$s','eval_auc':round(s['eval_auc'],5)}))"
    done
  done
done
