#!/bin/sh
# Issue 42, pulls in half precision (--pull_dtype=fp16): eval AUC and logloss of DLRM
# trained with `pstrain local` (2 servers, 2 workers) on 1,000,000 generated rows,
# evaluated on the next 200,000, with --pull_dtype=fp32 and fp16: BSP seeds 1-3
# (deterministic for a seed), ASP seeds 1-6. Usage: ... OUT_DIR
set -e
out=${1:?usage: $0 OUT_DIR}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
build/bin/pstrain gen --out="$out/train" --rows=1000000 --seed=7
build/bin/pstrain gen --out="$out/eval" --rows=200000 --seed=7 --first_row=1000000
run() {  # consistency seed dtype
  line=$(build/bin/pstrain local --servers=2 --workers=2 --consistency=$1 --seed=$2 \
    --pull_dtype=$3 --train_data="$out/train" --eval_data="$out/eval" --epochs=1 2>&1 |
    grep RESULT)
  echo "$1 seed=$2 $3 $line"
}
for seed in 1 2 3; do for d in fp32 fp16; do run bsp $seed $d; done; done
for seed in 1 2 3 4 5 6; do for d in fp32 fp16; do run asp $seed $d; done; done
