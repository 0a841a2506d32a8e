#!/usr/bin/env bash
# libFuzzer run of every parser target (tests/fuzz/fuzz_*.c): a clang build with ASan+UBSan
# and coverage (build-fuzz/, -DMSMON_FUZZ=ON); each target starts from its committed corpus
# (tests/fuzz/corpus/<target>/) plus its built-in seeds. The stage has one wall-clock budget
# for fuzzing, FUZZ_TOTAL_SECONDS (default 250 s), shared by however many targets exist:
# FUZZ_JOBS targets run at a time (default: the number of cores), so each gets
# FUZZ_TOTAL_SECONDS / ceil(targets / FUZZ_JOBS) seconds, but never less than FUZZ_MIN_SECONDS
# (default 10 s; with very many targets the floor wins and the stage grows past the budget,
# which the summary line says). FUZZ_SECONDS, when set, fixes the per-target time instead.
# With the clang build the stage stays about 5 minutes on 2 cores however many targets are
# added. Prints executions and coverage per target.
# A crash, leak, timeout or sanitizer report fails the run; the reproducer is left under
# build-fuzz/fuzz-artifacts/ and the line printed says how to keep it as a regression input
# (tests/fuzz/corpus/<target>/, replayed by ctest from then on).
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL=${FUZZ_TOTAL_SECONDS:-250}
MINSECS=${FUZZ_MIN_SECONDS:-10}
SECS=${FUZZ_SECONDS:-}
JOBS=${FUZZ_JOBS:-$(nproc)}
for v in FUZZ_TOTAL_SECONDS="$TOTAL" FUZZ_MIN_SECONDS="$MINSECS" ${SECS:+FUZZ_SECONDS="$SECS"}; do
  case "${v#*=}" in ''|*[!0-9]*) echo "fuzz.sh: ${v%%=*}='${v#*=}' is not a whole number of seconds" >&2; exit 2;; esac
done
case "$JOBS" in ''|0|*[!0-9]*) echo "fuzz.sh: FUZZ_JOBS='$JOBS' is not a positive whole number" >&2; exit 2;; esac
command -v clang >/dev/null || { echo "fuzz.sh: clang not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMSMON_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_all
out=build-fuzz/fuzz-artifacts
rm -rf "$out"
mkdir -p "$out"

# One target: fresh working corpus (committed files + built-in seeds), fixed time budget.
run_target() {
  local bin=$1 name corpus
  name=$(basename "$bin")
  corpus=build-fuzz/corpus/$name
  rm -rf "$corpus"
  mkdir -p "$corpus"
  if [ -d "tests/fuzz/corpus/$name" ]; then cp -r "tests/fuzz/corpus/$name/." "$corpus/"; fi
  "${bin}_seeds" --write-seeds "$corpus"
  if "$bin" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
       -print_final_stats=1 -artifact_prefix="$out/$name-" "$corpus" >"$out/$name.log" 2>&1; then
    echo ok >"$out/$name.status"
  else
    echo FAIL >"$out/$name.status"
  fi
}

targets=()
for bin in build-fuzz/tests/fuzz/fuzz_*; do
  case "$bin" in *_seeds) continue;; esac
  [ -x "$bin" ] || continue
  targets+=("$bin")
done
[ "${#targets[@]}" -gt 0 ] || { echo "fuzz.sh: no fuzz targets were built" >&2; exit 1; }
# JOBS lanes run side by side; each lane runs `lanes` targets one after another
lanes=$(( (${#targets[@]} + JOBS - 1) / JOBS ))
if [ -z "$SECS" ]; then
  # one budget for the stage, whatever the number of targets
  SECS=$(( TOTAL / lanes ))
  [ "$SECS" -ge "$MINSECS" ] || SECS=$MINSECS
fi
echo "fuzz: ${#targets[@]} targets, ${SECS}s each, $JOBS at a time: about $(( lanes * SECS ))s of fuzzing (budget ${TOTAL}s)"
running=0
for bin in "${targets[@]}"; do
  run_target "$bin" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

status=0
total=0
printf '%-20s %-4s %12s %10s %8s %8s %8s\n' target res execs exec/s cov ft corpus | tee "$out/summary.txt"
for bin in "${targets[@]}"; do
  name=$(basename "$bin")
  log=$out/$name.log
  res=$(cat "$out/$name.status" 2>/dev/null || echo FAIL)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  # the last status line ("#N DONE cov: C ft: F corp: K/...") carries the final coverage
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.*corp: \([0-9]*\).*/\1/p' <<<"$last")
  printf '%-20s %-4s %12s %10s %8s %8s %8s\n' "$name" "$res" "${execs:-?}" \
    "$(( ${execs:-0} / (SECS > 0 ? SECS : 1) ))" "${cov:-?}" "${ft:-?}" "${corp:-?}" | tee -a "$out/summary.txt"
  total=$((total + ${execs:-0}))
  if [ "$res" != ok ]; then
    status=1
    tail -30 "$log"
    for a in "$out/$name"-crash-* "$out/$name"-leak-* "$out/$name"-timeout-* "$out/$name"-oom-*; do
      [ -e "$a" ] || continue
      echo "reproducer: $a -- keep it as a regression input after the fix:"
      echo "  cp $a tests/fuzz/corpus/$name/$(basename "$a" | sed "s/^$name-//")"
    done
  fi
done
echo "fuzz: ${#targets[@]} targets, $total executions, ${SECS}s each, $JOBS at a time (budget ${TOTAL}s, about $(( lanes * SECS ))s used)" | tee -a "$out/summary.txt"
exit $status
