#!/usr/bin/env bash
# libFuzzer run of every parser target (tests/fuzz/fuzz_*.c): a clang build with ASan+UBSan
# and coverage (build-fuzz/, -DMSMON_FUZZ=ON), each target started from its built-in seeds
# and run for FUZZ_SECONDS (default 20). A crash, leak or sanitizer report fails the run and
# leaves the reproducer under build-fuzz/fuzz-artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${FUZZ_SECONDS:-20}
case "$SECS" in ''|*[!0-9]*) echo "fuzz.sh: FUZZ_SECONDS='$SECS' is not a whole number of seconds" >&2; exit 2;; esac
command -v clang >/dev/null || { echo "fuzz.sh: clang not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMSMON_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_all
out=build-fuzz/fuzz-artifacts
mkdir -p "$out"
status=0
for bin in build-fuzz/tests/fuzz/fuzz_*; do
  case "$bin" in *_seeds) continue;; esac
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  corpus=build-fuzz/corpus/$name
  mkdir -p "$corpus"
  "${bin}_seeds" --write-seeds "$corpus"
  if "$bin" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$out/$name-" "$corpus" >"$out/$name.log" 2>&1; then
    printf 'fuzz %-22s ok   %s\n' "$name" "$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$out/$name.log" | grep -o '[0-9]*$') runs in ${SECS}s"
  else
    printf 'fuzz %-22s FAIL (see %s)\n' "$name" "$out/$name.log"
    tail -30 "$out/$name.log"
    status=1
  fi
done
exit $status
