#!/bin/sh
# pstrain container entrypoint: runs the binary of one role.
#
#   PSTRAIN_ROLE   coordinator | server | worker | gen | health | local | pstrain | shell
#                  (or give the role as the first argument: `docker run IMAGE worker ...`)
#
# Flags come from PSTRAIN_<FLAG> variables, which the binaries read themselves
# (every flag can be set that way; a flag on the command line wins), and from
# the arguments, which are passed on unchanged.
#
# Variables of this script (not flags of any binary):
#   PSTRAIN_ROLE            the role, as above
#   PSTRAIN_BIN_DIR         folder of the pstrain binaries (default: /opt/pstrain/bin;
#                           the multi-host test points it at a build folder)
#   PSTRAIN_GEN_DIR         gen: folder of the data set (default /data)
#   PSTRAIN_GEN_SEED        gen: seed of the synthetic world (default 1)
#   PSTRAIN_GEN_TRAIN_ROWS  gen: rows of DIR/train.tsv (default 1000000)
#   PSTRAIN_GEN_EVAL_ROWS   gen: rows of DIR/eval.tsv (default 100000)
#   PSTRAIN_GEN_FORCE       gen: 1 = write the files even when they are already there
#
# Role `gen` without arguments writes one world: DIR/train.tsv (rows
# [0, TRAIN_ROWS)) and DIR/eval.tsv (rows [TRAIN_ROWS, TRAIN_ROWS+EVAL_ROWS)),
# both with the same seed, plus their .meta.json files; it does nothing when
# both meta files already describe that world. With arguments it is plain
# `pstrain gen ARGS`.
#
# For roles server and worker, an unset PSTRAIN_ADVERTISE_HOST becomes this
# container's IP address (`hostname -i`): replicas of one service share its
# name, so the address is what tells them apart. Set it (even to "") to keep
# the binary's own default (the host name).
#
# For role worker, an unset PSTRAIN_NODE_ID becomes this container's host
# name: it survives restarts of the container, so the coordinator gives a
# restarted worker container its rank back (re-admission).
set -eu

BIN_DIR=${PSTRAIN_BIN_DIR:-/opt/pstrain/bin}
ROLE=${PSTRAIN_ROLE:-}
if [ -z "$ROLE" ] && [ $# -gt 0 ]; then
  case "$1" in
    coordinator|server|worker|gen|health|local|pstrain|shell) ROLE=$1; shift ;;
  esac
fi

log() { echo "entrypoint: $*" >&2; }

node_identity() {
  if [ -z "${PSTRAIN_NODE_ID+set}" ]; then
    export PSTRAIN_NODE_ID="$(hostname)"
  fi
}

advertise_address() {
  if [ -z "${PSTRAIN_ADVERTISE_HOST+set}" ]; then
    addr=$(hostname -i 2>/dev/null | awk '{print $1}') || addr=""
    if [ -n "$addr" ]; then
      export PSTRAIN_ADVERTISE_HOST="$addr"
      log "advertising $addr"
    fi
  fi
}

# True when FILE.meta.json exists with these rows, seed and first row.
world_file_ok() {
  meta="$1.meta.json"
  [ -s "$1" ] && [ -s "$meta" ] &&
    grep -q "\"rows\":$2[,}]" "$meta" &&
    grep -q "\"seed\":$3[,}]" "$meta" &&
    grep -q "\"first_row\":$4[,}]" "$meta"
}

gen_world() {
  dir=${PSTRAIN_GEN_DIR:-/data}
  seed=${PSTRAIN_GEN_SEED:-1}
  train_rows=${PSTRAIN_GEN_TRAIN_ROWS:-1000000}
  eval_rows=${PSTRAIN_GEN_EVAL_ROWS:-100000}
  mkdir -p "$dir"
  if [ "${PSTRAIN_GEN_FORCE:-0}" != 1 ] &&
     world_file_ok "$dir/train.tsv" "$train_rows" "$seed" 0 &&
     world_file_ok "$dir/eval.tsv" "$eval_rows" "$seed" "$train_rows"; then
    log "$dir already holds the world (seed $seed, $train_rows + $eval_rows rows)"
    return 0
  fi
  "$BIN_DIR/pstrain" gen --seed="$seed" --first_row=0 --rows="$train_rows" --out="$dir/train.tsv"
  "$BIN_DIR/pstrain" gen --seed="$seed" --first_row="$train_rows" --rows="$eval_rows" \
    --out="$dir/eval.tsv"
}

case "$ROLE" in
  coordinator) exec "$BIN_DIR/pstrain_coordinator" "$@" ;;
  server) advertise_address; exec "$BIN_DIR/pstrain_server" "$@" ;;
  worker) advertise_address; node_identity; exec "$BIN_DIR/pstrain_worker" "$@" ;;
  gen)
    if [ $# -gt 0 ]; then exec "$BIN_DIR/pstrain" gen "$@"; fi
    gen_world ;;
  health) exec "$BIN_DIR/pstrain" health "$@" ;;
  local) exec "$BIN_DIR/pstrain" local "$@" ;;
  pstrain) exec "$BIN_DIR/pstrain" "$@" ;;
  shell) exec /bin/sh "$@" ;;
  *)
    log "set PSTRAIN_ROLE (or the first argument) to coordinator, server, worker, gen, health," \
        "local, pstrain or shell (got '${ROLE}')"
    exit 2 ;;
esac
