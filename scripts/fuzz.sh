#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a
# bounded time: FUZZ_SECONDS (default 60) per target. Exit code non-zero on
# any crash, leak or sanitizer report; the crashing input is left in the
# build folder and named in the output.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-60}
B=${FUZZ_BUILD:-build-fuzz}
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not installed (scripts/install-deps.sh installs it with PSTRAIN_FULL_DEPS=1)" >&2
  exit 1
fi
CC=clang CXX=clang++ cmake -S . -B "$B" -G Ninja -DPSTRAIN_FUZZ=ON -DPSTRAIN_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$B.configure.log" 2>&1 || { cat "$B.configure.log"; exit 1; }
cmake --build "$B" --target codec_fuzzer criteo_fuzzer decompress_fuzzer parquet_fuzzer
for t in codec criteo decompress parquet; do
  corpus="$B/fuzz-corpus/$t"
  mkdir -p "$corpus"
  cp -n tests/fuzz/corpus/$t/* "$corpus"/ 2>/dev/null || true
  echo "fuzz: ${t}_fuzzer for ${SECONDS_EACH}s"
  (cd "$B" && "./bin/${t}_fuzzer" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 "fuzz-corpus/$t" 2>&1 | tail -n 15)
done
echo "fuzz: no crash"
