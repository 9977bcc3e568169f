#!/usr/bin/env bash
# Freshness of served predictions (issue 19): a stream job exports the model
# every EXPORT_SECS (--export_every_secs) while `pstrain serve` serves the
# folder: MODE full exports the whole model to --save_model, MODE delta
# writes versions to --export_dir (deltas, a base every 10); for every version served, the lag between the export
# (model.json written) and the server answering with it, from the server's
# "serving model version ... exported X s ago" lines, plus whether requests
# kept succeeding meanwhile (a client scoring one row every 50 ms).
# Prints one JSON line per version and a summary (p50/p95/max lag).
#
# usage: bench/freshness.sh [BIN_DIR] [PARTITIONS] [ROWS_PER_PARTITION] [EXPORT_SECS] [POLL_SECS] [MODE]
set -euo pipefail
bin=${1:-build/bin}
parts=${2:-12}
rows=${3:-40000}
every=${4:-10}
poll=${5:-1}
mode=${6:-full}
case "$mode" in
  full) served=model; ready=model/model.json ;;
  delta) served=export; ready=export/LATEST ;;
  *) echo "MODE is full or delta, not $mode" >&2; exit 2 ;;
esac
work=$(mktemp -d /tmp/pstrain-fresh-XXXXXX)
pids=()
cleanup() {
  touch "$work/done"
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if [ "$mode" = full ]; then
  export_flags=(--save_model="$work/model")
else
  export_flags=(--export_dir="$work/export" --save_model="$work/model")
fi
port=$(( 20000 + RANDOM % 20000 ))
mkdir -p "$work/stream"
# Partitions land every 5 s: the job trains as they come, for about parts*5 s.
"$bin/pstrain" gen --stream="$work/stream" --rows="$rows" --partitions="$parts" --interval_secs=5 \
  > "$work/gen.log" 2>&1 &
pids+=($!)
"$bin/pstrain" serve --model_dir="$work/$served" --wait_for_model --host=127.0.0.1 --port="$port" --poll_secs="$poll" \
  > "$work/serve.log" 2>&1 &
pids+=($!)
line=""
( ok=0 bad=0
  while [ ! -e "$work/done" ]; do
    if [ -e "$work/$ready" ]; then
      if [ -z "$line" ]; then line=$(head -1 "$work/stream/2026-12-01/00/part-0.tsv" | cut -f2-); fi
      code=$(curl -s -o /dev/null -w '%{http_code}' --data-binary "$line" "http://127.0.0.1:$port/predict" || echo 000)
      # Before the first version is up the server answers 503: not counted.
      if [ "$code" = 200 ]; then ok=$((ok + 1)); elif [ "$ok" -gt 0 ]; then bad=$((bad + 1)); echo "$code" >> "$work/codes"; fi
    fi
    sleep 0.05
  done
  echo "$ok $bad" > "$work/client" ) &
client=$!
pids+=($client)
"$bin/pstrain" local --servers=1 --workers=2 --model=dlrm --train_stream="$work/stream" \
  --stream_idle_secs=15 "${export_flags[@]}" --export_every_secs="$every" \
  > "$work/train.log" 2>&1
sleep $((poll + 2))  # the final export taken up too
touch "$work/done"
wait "$client"
read -r ok bad < "$work/client"
codes=$(sort "$work/codes" 2>/dev/null | uniq -c | tr -s ' ' | tr '\n' ';' || true)
if [ "$mode" = full ]; then
  exports=$(grep -c "saved to" "$work/train.log" || true)
else
  exports=$(grep -c "export: version" "$work/train.log" || true)
fi
lags=$(sed -n 's/.*serving model version \([0-9a-fv]*\) (step \([0-9]*\).*exported \([0-9.]*\)s ago.*/\1 \2 \3/p' "$work/serve.log")
echo "$lags" | while read -r version step lag; do
  [ -n "$version" ] && echo "{\"bench\":\"freshness\",\"version\":\"$version\",\"step\":$step,\"lag_seconds\":$lag}"
done
sorted=($(echo "$lags" | awk '{print $3}' | sort -g))
n=${#sorted[@]}
pct() { local i; i=$(awk -v n="$n" -v q="$1" 'BEGIN { i = int(q * n + 0.999999) - 1; if (i < 0) i = 0; print i }'); echo "${sorted[$i]}"; }
echo "{\"bench\":\"freshness\",\"summary\":true,\"mode\":\"$mode\",\"export_every_secs\":$every,\"poll_secs\":$poll,\"exports\":$exports,\"versions_served\":$n,\"lag_p50_seconds\":$(pct 0.5),\"lag_p95_seconds\":$(pct 0.95),\"lag_max_seconds\":${sorted[$((n - 1))]},\"requests_ok\":$ok,\"requests_failed\":$bad,\"failed_codes\":\"$codes\"}"
