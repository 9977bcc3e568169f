#!/bin/bash
# The built-in networks before and after they became graphs: pstrain_bench
# train --mode=local (the model alone, one thread) of b11f8be (the classes)
# and of this commit (the graph model), interleaved, 6 runs each, the order
# of the pair alternating (the second of a pair ran up to 4 % apart from
# the first, either way).
#   OLD=/tmp/old/build/bin/pstrain_bench (git worktree add /tmp/old b11f8be;
#   cmake -G Ninja -DCMAKE_BUILD_TYPE=Release; ninja pstrain_bench)
#   NEW=build/bin/pstrain_bench
set -e
OLD=${OLD:-/tmp/old/build/bin/pstrain_bench}
NEW=${NEW:-build/bin/pstrain_bench}
for model in dlrm dcn_v2 deepfm wide_deep deep_tower lr; do
  for run in 1 2 3 4 5 6; do
    order="old new"; [ $((run % 2)) = 0 ] && order="new old"
    for which in $order; do
      bin=$OLD; [ $which = new ] && bin=$NEW
      $bin train --mode=local --model=$model --batch_size=1024 2>/dev/null |
        sed "s/^{/{\"build\":\"$which\",\"run\":$run,/"
    done
  done
done
