#!/bin/sh
# DIN speed per core (issue 39): examples/models/din.json in pstrain_bench
# train --mode=local and in pstrain local (1 server + 1 worker), against the
# same network in PyTorch (bench/torch_din.py), one thread each, batch 1024,
# on the same pstrain gen --history=30 rows; interleaved, 3 rounds.
# Needs Debian's python3-torch (bench/torch_setup.sh). Usage: din-speed.sh OUTDIR
set -e
cd "$(dirname "$0")/../.."
D=$1; mkdir -p $D
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
[ -f $D/train.csv ] || build/bin/pstrain gen --rows=100000 --seed=7 --history=30 --out=$D/train.csv
for round in 1 2 3; do
  build/bin/pstrain_bench train --mode=local --model_file=examples/models/din.json \
      --train_data=$D/train.csv --schema=$D/train.csv.schema.json --batch_size=1024 \
      --local_batches=32 --seconds=10 2>/dev/null | grep '"bench"'
  /usr/bin/python3 bench/torch_din.py --data=$D/train.csv --batch_size=1024 --rows=32768 --seconds=10
  /usr/bin/time -f '{"bench":"pstrain_local_1s1w","cpu_user":%U,"cpu_sys":%S,"wall":%e}' \
    build/bin/pstrain local --servers=1 --workers=1 --train_data=$D/train.csv \
      --schema=$D/train.csv.schema.json --model_file=examples/models/din.json --batch_size=1024 \
      --epochs=3 2>&1 | grep -E 'RESULT|"bench"'
done
