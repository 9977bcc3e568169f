#!/bin/bash
# A table larger than RAM on one server with --server_memory_budget=1GB (issue 18;
# bench/results/2026-12-03-tier-1g.md). Root: the server runs in a cgroup-v1 memory group
# of LIMIT_MB (default 1280: the budget plus room for the slot file's page cache), and its
# /proc/PID/status is sampled every 5 s into DIR/rss.tsv.
#
# usage: bench/tier_1g.sh BIN_DIR DIR [extra pstrain local flags]
#   DIR/train.tsv and DIR/eval.tsv must exist, e.g.
#   pstrain gen --rows=17000000 --out=DIR/train.tsv --sparse_fields=1 --new_id_rate=0.97 --seed=7
#   pstrain gen --rows=200000 --first_row=17000000 --out=DIR/eval.tsv --sparse_fields=1 \
#     --new_id_rate=0.97 --seed=7
# env: TRAIN (default DIR/train.tsv), KEEP_CKPT=1 (keep DIR/ckpt, e.g. with
#   --new_job --restore=latest), LIMIT_MB.
set -u
B=$1
D=$2
shift 2
rm -rf "$D/tier" "$D/rss.tsv"
[ -z "${KEEP_CKPT:-}" ] && rm -rf "$D/ckpt"
mkdir -p "$D/tier"
CG=/sys/fs/cgroup/memory/pstrain-tier-1g
mkdir -p $CG && echo $(( ${LIMIT_MB:-1280} * 1024 * 1024 )) > $CG/memory.limit_in_bytes
"$B/pstrain" local --bin_dir="$B" --servers=1 --workers=2 --train_data="${TRAIN:-$D/train.tsv}" \
  --eval_data="$D/eval.tsv" --sparse_fields=1 --embedding_dim=64 --bottom_mlp=128,64 \
  --batch_size=1024 --server_memory_budget=1GB --tier_dir="$D/tier" --checkpoint_dir="$D/ckpt" \
  "$@" > "$D/job.log" 2>&1 &
JOB=$!
SP=""
for _ in $(seq 1 100); do
  SP=$(pgrep -P $JOB -f pstrain_server | head -1)
  [ -n "$SP" ] && break
  sleep 0.2
done
[ -z "$SP" ] && { echo "no server started; see $D/job.log"; wait $JOB; exit 1; }
echo "$SP" > $CG/tasks
echo "server pid $SP in $CG"
T0=$(date +%s)
printf "secs\tvmrss_mib\trss_anon_mib\trss_file_mib\tcgroup_mib\n" > "$D/rss.tsv"
while kill -0 $JOB 2>/dev/null; do
  if [ -r /proc/$SP/status ]; then
    st=$(awk '/VmRSS|RssAnon|RssFile/{printf "%d\t", $2/1024}' /proc/$SP/status)
    printf "%s\t%s%s\n" $(( $(date +%s) - T0 )) "$st" $(( $(cat $CG/memory.usage_in_bytes) / 1048576 )) >> "$D/rss.tsv"
  fi
  sleep 5
done
wait $JOB
rc=$?
echo "job exit $rc; max RssAnon $(awk -F'\t' 'NR>1 && $3>m {m=$3} END {print m}' "$D/rss.tsv") MiB;" \
  "cgroup max $(( $(cat $CG/memory.max_usage_in_bytes) / 1048576 )) MiB"
grep -E "RESULT|disk tier|restored" "$D/job.log"
rmdir $CG 2>/dev/null
exit $rc
