#!/usr/bin/env bash
# The one-run GPU check (issue 41): builds what it needs for the GPU it
# finds (or takes a bundle built elsewhere), runs every GPU test, the DLRM
# bench on the GPU and on the CPU, and short `pstrain local` jobs with CUDA
# workers in ps and allreduce mode. Writes JSON lines (gpu-check.jsonl) and
# every log under --out. Without a GPU it says so, writes {"gpu": false}
# and exits 0. Run `scripts/gpu-check.sh --help` for the flags.
set -uo pipefail

usage() {
  cat <<'EOF'
usage: scripts/gpu-check.sh --out DIR [--build-dir DIR | --prebuilt BUNDLE]
                            [--jobs N] [--batches "1024 8192 32768"] [--dry-run]

The whole GPU check in one run, for a machine with an NVIDIA GPU:
  1. prints nvidia-smi, the CUDA toolkit's and NCCL's versions;
  2. configures and builds only the targets it needs (gpu_tests, pstrain,
     pstrain_bench, pstrain_coordinator, pstrain_server, pstrain_worker) with
     -DCMAKE_CUDA_ARCHITECTURES from nvidia-smi's compute capability (9.0 ->
     90) and -j of the machine's cores, through ccache when there is one;
     or, with --prebuilt, takes the binaries and libraries of a bundle that
     scripts/gpu-bundle.sh made on another machine (a folder or .tar.gz);
  3. runs every GPU test (the gpu_tests binary: ctest -L gpu);
  4. runs pstrain_bench train for DLRM on --device=cuda and --device=cpu at
     each batch size, in local mode and with 1 server + 1 worker (ps),
     sampling the GPU's utilisation with nvidia-smi while each CUDA run lasts;
  5. runs short `pstrain local` jobs with CUDA workers in ps mode (beside the
     same job on the CPU: their eval AUCs compared) and in allreduce mode
     (NCCL; two ranks on one GPU where NCCL takes them, else one, saying so).
Everything goes under --out: gpu-check.jsonl (one JSON object a line:
check = gpu, toolkit, build, gpu_tests, bench, utilization, job, summary)
and a log per step. Exit code: 0 when every step passed or there is no GPU
(then the one line {"check":"gpu","gpu":false,...}), 1 when a step failed,
2 for bad arguments.

  --out DIR          where the JSON lines and logs go (created; required)
  --build-dir DIR    build tree to configure and build in (default: build-gpu)
  --prebuilt BUNDLE  skip the build: a folder or .tar.gz from scripts/gpu-bundle.sh
  --jobs N           parallel build jobs (default: the machine's cores)
  --batches "..."    the bench's batch sizes (default: "1024 8192 32768")
  --dry-run          find the GPU and print each step's command without running it
  -h, --help         this text

On the device tool of this project's workplace (a bundle built here, the
tree sent along):
  scripts/gpu-bundle.sh --out .gpu-bundle.tar.gz
  run: scripts/gpu-check.sh --prebuilt .gpu-bundle.tar.gz --out /tmp/g
       (carry: [".gpu-bundle.tar.gz"], timeout_s: 540; docs/gpu.md has the
       whole call, which brings the JSON lines and the logs back)
EOF
}

OUT=""
BUILD_DIR="build-gpu"
PREBUILT=""
JOBS="$(nproc 2>/dev/null || echo 4)"
BATCHES="1024 8192 32768"
DRY_RUN=0

die_usage() {
  echo "gpu-check: $*" >&2
  echo "gpu-check: see scripts/gpu-check.sh --help" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  arg="$1"
  case "$arg" in
    -h|--help) usage; exit 0 ;;
    --dry-run) DRY_RUN=1; shift; continue ;;
    --out=*|--build-dir=*|--prebuilt=*|--jobs=*|--batches=*)
      name="${arg%%=*}"; value="${arg#*=}"; shift ;;
    --out|--build-dir|--prebuilt|--jobs|--batches)
      [ $# -ge 2 ] || die_usage "$arg needs a value"
      name="$arg"; value="$2"; shift 2 ;;
    *) die_usage "unknown argument '$arg'" ;;
  esac
  [ -n "$value" ] || die_usage "$name needs a value"
  case "$name" in
    --out) OUT="$value" ;;
    --build-dir) BUILD_DIR="$value" ;;
    --prebuilt) PREBUILT="$value" ;;
    --jobs)
      [[ "$value" =~ ^[1-9][0-9]*$ ]] || die_usage "--jobs=$value: want a whole number >= 1"
      JOBS="$value" ;;
    --batches)
      for b in $value; do
        [[ "$b" =~ ^[1-9][0-9]*$ ]] || die_usage "--batches: '$b' is not a batch size"
      done
      BATCHES="$value" ;;
  esac
done
[ -n "$OUT" ] || die_usage "--out DIR is required"
if [ -n "$PREBUILT" ] && [ ! -e "$PREBUILT" ]; then
  die_usage "--prebuilt $PREBUILT: no such folder or file"
fi
mkdir -p "$OUT" || die_usage "--out $OUT: cannot create it"
OUT="$(cd "$OUT" && pwd)"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
JSONL="$OUT/gpu-check.jsonl"
: > "$JSONL"
START=$(date +%s.%N)
FAILED=()

# ---- JSON lines ----
json_str() {  # a JSON string of $1
  local s="$1"
  s="${s//\\/\\\\}"; s="${s//\"/\\\"}"; s="${s//$'\t'/ }"; s="${s//$'\r'/}"; s="${s//$'\n'/ }"
  printf '"%s"' "$s"
}
emit() {  # emit KEY VALUE_JSON ...: one object on a line of gpu-check.jsonl
  local line="{" first=1
  while [ $# -ge 2 ]; do
    [ $first = 1 ] || line+=","
    line+="$(json_str "$1"):$2"
    first=0
    shift 2
  done
  line+="}"
  echo "$line" >> "$JSONL"
  echo "$line"
}
num() { [[ "$1" =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]] && echo "$1" || echo null; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "gpu-check: $*"; }
run_step() {  # run_step LOG CMD...: runs (or, with --dry-run, prints) a command
  local log="$1"; shift
  if [ $DRY_RUN = 1 ]; then
    echo "would run: $*"
    return 0
  fi
  "$@" > "$OUT/$log" 2>&1
}

# ---- 1. the GPU ----
SMI="$(command -v nvidia-smi || true)"
gpu_line=""
if [ -n "$SMI" ]; then
  gpu_line="$("$SMI" --query-gpu=name,compute_cap,memory.total,driver_version \
              --format=csv,noheader,nounits 2>"$OUT/nvidia-smi.err" | head -n 1)"
fi
if [ -z "$gpu_line" ]; then
  reason="no nvidia-smi on PATH"
  [ -n "$SMI" ] && reason="nvidia-smi finds no GPU: $(head -c 300 "$OUT/nvidia-smi.err" 2>/dev/null)"
  say "no GPU here ($reason): nothing to check"
  emit check '"gpu"' gpu false reason "$(json_str "$reason")" seconds "$(since "$START")"
  exit 0
fi
IFS=',' read -r GPU_NAME CAP MEM DRIVER <<< "$gpu_line"
GPU_NAME="$(echo "$GPU_NAME" | sed 's/^ *//; s/ *$//')"
CAP="$(echo "$CAP" | tr -d ' ')"
MEM="$(echo "$MEM" | tr -d ' ')"
DRIVER="$(echo "$DRIVER" | tr -d ' ')"
[[ "$CAP" =~ ^[0-9]+\.[0-9]+$ ]] || { say "nvidia-smi gave compute capability '$CAP'"; exit 1; }
ARCH="${CAP/./}"
emit check '"gpu"' gpu true name "$(json_str "$GPU_NAME")" compute_cap "$(json_str "$CAP")" \
  cuda_arch "$(json_str "$ARCH")" memory_mib "$(num "$MEM")" driver "$(json_str "$DRIVER")"
[ $DRY_RUN = 1 ] || "$SMI" > "$OUT/nvidia-smi.txt" 2>&1
[ $DRY_RUN = 1 ] || cat "$OUT/nvidia-smi.txt"

# ---- the toolkit and NCCL ----
NVCC="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
nvcc_version="$("$NVCC" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\), V\([0-9.]*\).*/\2/p' | head -n 1)"
# NCCL: the library the binaries load, found where the toolkit, the system or
# a Python environment (PyTorch's nvidia-nccl wheel) keeps it.
find_lib() {  # find_lib NAME: the first folder holding NAME
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu /usr/local/lib \
           $(ls -d /opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib /usr/local/lib/python3*/dist-packages/nvidia/*/lib \
                   /usr/lib/python3/dist-packages/nvidia/*/lib 2>/dev/null); do
    [ -e "$d/$1" ] && { echo "$d"; return 0; }
  done
  return 1
}
NCCL_DIR="$(find_lib libnccl.so.2 || true)"
nccl_version=""
for h in /usr/local/cuda/include/nccl.h /usr/include/nccl.h "${NCCL_DIR%/lib}/include/nccl.h"; do
  if [ -f "$h" ]; then
    nccl_version="$(awk '/#define NCCL_MAJOR/{a=$3} /#define NCCL_MINOR/{b=$3} /#define NCCL_PATCH/{c=$3} END{if (a!="") print a"."b"."c}' "$h")"
    [ -n "$nccl_version" ] && break
  fi
done
emit check '"toolkit"' nvcc "$(json_str "${nvcc_version:-not found}")" \
  nccl "$(json_str "${nccl_version:-unknown}")" nccl_lib "$(json_str "${NCCL_DIR:-not found}")"

# ---- 2. the binaries ----
TARGETS="gpu_tests pstrain pstrain_bench pstrain_coordinator pstrain_server pstrain_worker"
t0=$(date +%s.%N)
if [ -n "$PREBUILT" ]; then
  BUNDLE="$PREBUILT"
  if [ -f "$PREBUILT" ]; then
    BUNDLE="$OUT/bundle"
    mkdir -p "$BUNDLE"
    run_step bundle.log tar -xzf "$PREBUILT" -C "$BUNDLE" || { say "cannot unpack $PREBUILT"; exit 1; }
  fi
  BIN="$(cd "$BUNDLE" && pwd)/bin"
  export LD_LIBRARY_PATH="$(cd "$BUNDLE" && pwd)/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  emit check '"build"' prebuilt "$(json_str "$PREBUILT")" seconds "$(since "$t0")"
else
  launcher=()
  if command -v ccache > /dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  if ! run_step configure.log cmake -S "$SRC" -B "$BUILD_DIR" "${generator[@]}" \
       -DCMAKE_BUILD_TYPE=Release -DPSTRAIN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" "${launcher[@]}"; then
    say "configure failed: $OUT/configure.log"; tail -n 30 "$OUT/configure.log"
    emit check '"build"' ok false step '"configure"' log '"configure.log"'
    exit 1
  fi
  # shellcheck disable=SC2086
  if ! run_step build.log cmake --build "$BUILD_DIR" -j "$JOBS" --target $TARGETS; then
    say "build failed: $OUT/build.log"; grep -m 20 -E "error" "$OUT/build.log"
    emit check '"build"' ok false step '"build"' log '"build.log"' seconds "$(since "$t0")"
    exit 1
  fi
  BIN="$(cd "$BUILD_DIR" 2>/dev/null && pwd || echo "$BUILD_DIR")/bin"
  emit check '"build"' ok true jobs "$JOBS" cuda_arch "$(json_str "$ARCH")" \
    ccache "$([ ${#launcher[@]} -gt 0 ] && echo true || echo false)" seconds "$(since "$t0")"
fi
# CUDA's libraries, wherever this machine keeps each (the toolkit, or the
# Python environment's nvidia-* wheels, one folder each).
for lib in libnccl.so.2 libcublasLt.so.13 libcublas.so.13 libcudart.so.13; do
  dir="$(find_lib "$lib" || true)"
  if [ -z "$dir" ]; then
    say "$lib not found: the binaries will not start unless the loader finds it"
  elif [[ ":${LD_LIBRARY_PATH:-}:" != *":$dir:"* ]]; then
    export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
done
export PSTRAIN_BIN_DIR="$BIN"

# ---- 3. the GPU tests ----
t0=$(date +%s.%N)
if run_step gpu_tests.log "$BIN/gpu_tests" --gtest_output="json:$OUT/gpu_tests.json"; then
  tests_ok=true
else
  tests_ok=false; FAILED+=(gpu_tests)
fi
if [ $DRY_RUN = 0 ]; then
  passed=$(grep -c '^\[       OK \]' "$OUT/gpu_tests.log")
  failed=$(grep -c '^\[  FAILED  \] .*(' "$OUT/gpu_tests.log")
  skipped=$(grep -c '^\[  SKIPPED \] .*(' "$OUT/gpu_tests.log")
  # On a machine with a GPU a test that skips says why (NCCL's two ranks on
  # one GPU may); none passing means the binaries do not see the GPU.
  if [ "$passed" = 0 ]; then tests_ok=false; FAILED+=("gpu_tests: none passed"); fi
  emit check '"gpu_tests"' ok $tests_ok passed "$passed" failed "$failed" skipped "$skipped" \
    seconds "$(since "$t0")" log '"gpu_tests.log"'
  grep -E '^\[  (FAILED|SKIPPED) +\] .*\(' "$OUT/gpu_tests.log" | head -n 40
fi

# ---- 4. the bench, GPU against CPU ----
sample_gpu() {  # sample_gpu FILE: utilisation every 100 ms until killed
  exec "$SMI" --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 > "$1" 2>/dev/null
}
for batch in $BATCHES; do
  rows=$(( batch * 40 > 300000 ? batch * 40 : 300000 ))
  for mode in local ps; do
    for device in cuda cpu; do
      log="bench-$mode-$device-$batch.log"
      cmd=("$BIN/pstrain_bench" train --model=dlrm --mode=$mode --device=$device
           --batch_size=$batch --train_rows=$rows)
      if [ $DRY_RUN = 1 ]; then echo "would run: ${cmd[*]}"; continue; fi
      util="$OUT/util-$mode-$batch.csv"
      [ $device = cuda ] && { sample_gpu "$util" & sampler=$!; }
      "${cmd[@]}" > "$OUT/bench.tmp" 2> "$OUT/$log"
      rc=$?
      [ $device = cuda ] && { kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; }
      line="$(grep '^{' "$OUT/bench.tmp" | tail -n 1)"
      if [ $rc -ne 0 ] || [ -z "$line" ]; then
        FAILED+=("bench $mode $device $batch")
        emit check '"bench"' ok false mode "\"$mode\"" device "\"$device\"" batch_size "$batch" \
          error "$(json_str "$(tail -n 3 "$OUT/$log")")"
        continue
      fi
      echo "{\"check\":\"bench\",${line#\{}" | tee -a "$JSONL"
      if [ $device = cuda ]; then
        # The busy part of the run: samples above 0 (start-up and the
        # synthetic file's writing leave the GPU idle).
        awk -v mode=$mode -v batch=$batch '
          { v = $1 + 0; n++; if (v > 0) { busy++; s += v }; if (v > m) m = v }
          END { printf "{\"check\":\"utilization\",\"mode\":\"%s\",\"batch_size\":%d,\"samples\":%d,\"busy_samples\":%d,\"mean_busy_pct\":%.1f,\"max_pct\":%d}\n",
                       mode, batch, n, busy, busy ? s / busy : 0, m }' "$util" | tee -a "$JSONL"
      fi
    done
  done
done
rm -f "$OUT/bench.tmp"

# ---- 5. short pstrain local jobs with CUDA workers ----
DATA="$OUT/data"
run_job() {  # run_job NAME ARGS...: a pstrain local job; emits its line
  local name="$1"; shift
  local t=$(date +%s.%N)
  if [ $DRY_RUN = 1 ]; then echo "would run: $BIN/pstrain local $*"; return 0; fi
  "$BIN/pstrain" local "$@" > "$OUT/job-$name.log" 2>&1
  local rc=$?
  local auc="$(sed -n 's/.*RESULT .*eval_auc=\([0-9.]*\).*/\1/p' "$OUT/job-$name.log" | tail -n 1)"
  emit check '"job"' name "\"$name\"" ok "$([ $rc = 0 ] && echo true || echo false)" rc "$rc" \
    eval_auc "$(num "${auc:-x}")" seconds "$(since "$t")" log "\"job-$name.log\""
  [ $rc = 0 ] || { tail -n 15 "$OUT/job-$name.log"; return 1; }
  echo "$auc" > "$OUT/job-$name.auc"
}
if [ $DRY_RUN = 0 ]; then
  mkdir -p "$DATA"
  "$BIN/pstrain" gen --rows=200000 --out="$DATA/train.tsv" > "$OUT/gen.log" 2>&1 &&
    "$BIN/pstrain" gen --rows=20000 --first_row=200000 --out="$DATA/eval.tsv" >> "$OUT/gen.log" 2>&1 ||
    { FAILED+=(gen); tail -n 5 "$OUT/gen.log"; }
fi
common=(--train_data="$DATA/train.tsv" --eval_data="$DATA/eval.tsv" --batch_size=1024 --epochs=1 --timeout=240)
run_job ps-cuda --servers=1 --workers=1 --device=cuda "${common[@]}" || FAILED+=(ps-cuda)
run_job ps-cpu --servers=1 --workers=1 --device=cpu "${common[@]}" || FAILED+=(ps-cpu)
if [ $DRY_RUN = 0 ] && [ -f "$OUT/job-ps-cuda.auc" ] && [ -f "$OUT/job-ps-cpu.auc" ]; then
  diff=$(awk -v a="$(cat "$OUT/job-ps-cuda.auc")" -v b="$(cat "$OUT/job-ps-cpu.auc")" \
         'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.4f", d }')
  within=$(awk -v d="$diff" 'BEGIN { print (d <= 0.003) ? "true" : "false" }')
  emit check '"auc_cuda_vs_cpu"' mode '"ps"' auc_diff "$diff" within_0_003 "$within"
  [ "$within" = true ] || FAILED+=("ps auc diff $diff")
fi
# allreduce with NCCL: two ranks on this GPU where NCCL takes them, else one.
if ! run_job allreduce-cuda-2 --mode=allreduce --servers=1 --workers=2 --device=cuda "${common[@]}"; then
  say "allreduce with two CUDA workers on one GPU failed (NCCL refuses two ranks on one device?): one rank instead"
  emit check '"note"' text '"two NCCL ranks on one GPU failed (job-allreduce-cuda-2.log); running one"'
  run_job allreduce-cuda-1 --mode=allreduce --servers=1 --workers=1 --device=cuda "${common[@]}" ||
    FAILED+=(allreduce-cuda-1)
fi

# ---- summary ----
failed_json="["
for f in "${FAILED[@]+"${FAILED[@]}"}"; do failed_json+="$(json_str "$f"),"; done
failed_json="${failed_json%,}]"
emit check '"summary"' ok "$([ ${#FAILED[@]} = 0 ] && echo true || echo false)" \
  failed "$failed_json" seconds "$(since "$START")" dry_run "$([ $DRY_RUN = 1 ] && echo true || echo false)"
[ ${#FAILED[@]} = 0 ]
