#!/usr/bin/env bash
# docker-compose validates docker/docker-compose.yml, alone and with the GPU
# overlay: `config -q` must exit 0 and print nothing (no error, no warning
# such as an unset variable). Skips (77) without docker-compose. Needs no
# Docker engine.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
if ! command -v docker-compose >/dev/null 2>&1; then
  echo "SKIP: docker-compose is not installed"
  exit 77
fi
# Only the defaults written in the files count, not this shell's settings.
unset COMPOSE_FILE COMPOSE_PROJECT_NAME WORKERS PSTRAIN_IMAGE PSTRAIN_GPU_IMAGE \
      TRAIN_ROWS EVAL_ROWS DATA_SEED MODEL EPOCHS BATCH_SIZE CONSISTENCY \
      PARTITIONS PARTITION_ROWS PARTITION_INTERVAL_SECS DRIFT STREAM_IDLE_SECS \
      EXPORT_EVERY_SECS SERVE_PORT CHECKPOINT_EVERY_SECS
cd "$repo"
fail=0
check() {
  local label=$1; shift
  local out rc
  out=$(docker-compose "$@" config -q 2>&1)
  rc=$?
  if [[ $rc -ne 0 || -n "$out" ]]; then
    echo "FAIL: $label: docker-compose $* config -q exited $rc:"
    echo "$out"
    fail=1
  else
    echo "ok: $label"
  fi
}
check "compose" -f docker/docker-compose.yml
check "compose+gpu" -f docker/docker-compose.yml -f docker/docker-compose.gpu.yml
WORKERS=4 check "compose, WORKERS=4" -f docker/docker-compose.yml
check "compose online" -f docker/docker-compose.online.yml
exit $fail
