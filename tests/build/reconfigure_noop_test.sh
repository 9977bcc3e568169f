#!/usr/bin/env bash
# Runs the configure step again on the build folder the tests were built in
# (what every make target does first), then the build, and checks that the
# build compiled, linked and generated nothing. Stops the build at its
# first such step (the test then fails, naming it and why).
set -uo pipefail
SRC=$1 BUILD=$2 CMAKE=$3 NINJA=$4
LOG=$BUILD/reconfigure_noop_test.log
"$CMAKE" -S "$SRC" -B "$BUILD" > "$LOG" 2>&1 || { cat "$LOG"; exit 1; }
# ninja -n cannot tell: in a dry run the globbed folders always look
# changed, so it only plans to re-run CMake. Build for real instead.
first=$("$NINJA" -C "$BUILD" -d explain 2>&1 | tee -a "$LOG" |
        grep -m1 -E '^\[[0-9]+/[0-9]+\] (Building|Linking|Generating)')
if [[ -z $first ]]; then
  echo "build.reconfigure_is_a_noop: after a second configure nothing was compiled"
  exit 0
fi
echo "after a second configure the build had work to do (it should have none): $first"
echo "why (ninja -d explain):"
grep explain "$LOG" | grep -v -E 'VerifyGlobs|verify_globs' | head -10
exit 1
