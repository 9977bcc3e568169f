#!/bin/sh
# Interleaved: the built-in network (--model) and the same network as a model file.
cd /work/main
for round in 1 2 3 4 5; do
  for model in dlrm dcn_v2; do
    for batch in 256 1024; do
      build/bin/pstrain_bench train --mode=local --batch_size=$batch --model=$model 2>/dev/null | tail -1
      build/bin/pstrain_bench train --mode=local --batch_size=$batch --model_file=examples/models/$model.json 2>/dev/null | tail -1
    done
  done
done
for round in 1 2 3; do
  build/bin/pstrain_bench train --mode=ps --batch_size=1024 --model=dlrm 2>/dev/null | tail -1
  build/bin/pstrain_bench train --mode=ps --batch_size=1024 --model_file=examples/models/dlrm.json 2>/dev/null | tail -1
done
