#!/bin/bash
# The built-in networks before and after they became graphs train the same
# parameters: one epoch of pstrain local (1 server, 1 worker) on the same
# pstrain gen rows with pstrain of b11f8be (the classes; OLD) and of this
# commit (NEW), each model saved; every table file compared byte for byte,
# and the two exports' predictions.
#   OLD=/tmp/old/build/bin/pstrain (git worktree add /tmp/old b11f8be;
#   cmake -G Ninja -DCMAKE_BUILD_TYPE=Release; ninja pstrain)
set -e
OLD=${OLD:-/tmp/old/build/bin/pstrain}
NEW=${NEW:-$PWD/build/bin/pstrain}
D=$(mktemp -d /tmp/one-path-params.XXXXXX)
$NEW gen --rows=100000 --seed=7 --out=$D/train.tsv > /dev/null 2>&1
$NEW gen --rows=10000 --seed=7 --first_row=100000 --out=$D/eval.tsv > /dev/null 2>&1
for model in dlrm dcn_v2 deepfm wide_deep deep_tower lr; do
  for which in old new; do
    bin=$OLD; [ $which = new ] && bin=$NEW
    $bin local --model=$model --servers=1 --workers=1 --train_data=$D/train.tsv \
      --eval_data=$D/eval.tsv --eval_meta= --timeout=120 --save_model=$D/$model.$which \
      > $D/$model.$which.log 2>&1
    $bin predict --model=$D/$model.$which --data=$D/eval.tsv --out=$D/$model.$which.scores \
      > $D/$model.$which.predict 2>&1
  done
  same=0; differ=0
  for f in $(cd $D/$model.old && find . -type f -name '*.tbl' | sort); do
    if cmp -s $D/$model.old/$f $D/$model.new/$f; then same=$((same+1)); else differ=$((differ+1)); fi
  done
  scores=$(cmp -s $D/$model.old.scores $D/$model.new.scores && echo identical || echo differ)
  # The largest difference of one row's prediction, and both exports' AUC.
  maxdiff=$(paste $D/$model.old.scores $D/$model.new.scores |
    awk 'BEGIN{m=0} {d=$1-$2; if (d<0) d=-d; if (d>m) m=d} END{printf "%.2e", m}')
  old_auc=$(grep -o 'AUC [0-9.]*' $D/$model.old.predict | head -1 | cut -d' ' -f2)
  new_auc=$(grep -o 'AUC [0-9.]*' $D/$model.new.predict | head -1 | cut -d' ' -f2)
  echo "{\"model\":\"$model\",\"table_files_identical\":$same,\"table_files_differing\":$differ,\"predictions\":\"$scores\",\"max_prediction_difference\":$maxdiff,\"old_auc\":$old_auc,\"new_auc\":$new_auc}"
done
rm -rf $D
