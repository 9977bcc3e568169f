#!/bin/sh
# Clang's thread-safety analysis over the event loop and the threads that
# act as it (common/loop_ownership.h): the loop's state is marked
# ABSL_GUARDED_BY its LoopOwnership, and this checks every access. The build
# may use GCC, which ignores the annotations, so each file is compiled once
# more, syntax only, by clang++ with the flags CMake recorded for it.
# Usage: thread_safety_check.sh CLANGXX COMPILE_COMMANDS_JSON SOURCE...
# Exit 77 (skipped) without clang++.
set -eu
clangxx=$1
db=$2
shift 2
if ! command -v "$clangxx" >/dev/null 2>&1; then
  echo "no clang++: thread-safety analysis skipped"
  exit 77
fi
status=0
for src in "$@"; do
  # CMake writes one '"command": "..."' line per file, ending in '-c SOURCE'.
  line=$(grep -F '"command": ' "$db" | grep -F -- "-c $src\"" | head -n 1)
  if [ -z "$line" ]; then
    echo "$src: not in $db"
    status=1
    continue
  fi
  # The compiler's flags: drop the compiler, the output and the input.
  flags=$(printf '%s\n' "$line" | sed -e 's/^ *"command": "[^ ]* //' -e 's/ -o [^ ]* / /' \
    -e "s| -c $src\",*\$||" -e 's/\\"/"/g')
  if ! eval "\"$clangxx\" $flags -fsyntax-only -Wno-unknown-warning-option \
      -Wthread-safety -Werror=thread-safety \"$src\""; then
    status=1
  fi
done
[ "$status" -eq 0 ] && echo "thread-safety analysis: $# files clean"
exit "$status"
