#!/usr/bin/env bash
# Set up and run every test: install deps, build (release, ASan+UBSan, and a ThreadSanitizer
# build of the concurrent suites), run ctest in each, then a timed libFuzzer run of every parser
# (scripts/fuzz.sh). Unit tests, fuzz replays and the pytest end-to-end suite run under ctest.
# Each stage prints its duration.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)
T0=$SECONDS
stage_start=$SECONDS
stage() {   # stage NAME: closes the previous stage's timer and opens a new one
  local now=$SECONDS
  [ -n "${STAGE:-}" ] && printf '== stage %s took %ds ==\n' "$STAGE" $((now - stage_start))
  STAGE=$1
  stage_start=$now
  [ -n "$STAGE" ] && printf '== stage %s ==\n' "$STAGE"
  return 0
}
stage deps
./scripts/install-deps.sh
stage "build (release)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$JOBS"
stage "build (ASan+UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMSMON_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$JOBS"
stage "build (TSan)"
# ThreadSanitizer: the suites with completion callbacks and sessions on many threads, and the
# Prometheus store rendered on one thread while another writes.
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DMSMON_TSAN=ON >/dev/null
cmake --build build-tsan -j"$JOBS" --target test_sim test_pc_monitor test_pc_backend_mspti test_pc_backend_cupti_sim \
  test_proc_trace test_pc_health test_thr test_asyncw test_export_jsonl test_export_db test_pipeline_outputs \
  test_daemon_promfam
status=0
stage "tests (release build)"
(cd build && ctest --output-on-failure -j"$JOBS") || status=1
stage "tests (ASan+UBSan build)"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
   ctest --output-on-failure -j"$JOBS") || status=1
stage "tests (ThreadSanitizer build)"
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
   ctest --output-on-failure -R '^(test_sim|test_pc_monitor|test_pc_backend_mspti|test_pc_backend_cupti_sim|test_proc_trace|test_pc_health|test_thr|test_asyncw|test_export_jsonl|test_export_db|test_pipeline_outputs|test_daemon_promfam)$') || status=1
stage "fuzz (libFuzzer, clang, ASan+UBSan)"
./scripts/fuzz.sh || status=1   # one budget for the stage: FUZZ_TOTAL_SECONDS (default 250 s, fuzz.sh)
stage ""
printf '== all stages took %ds ==\n' $((SECONDS - T0))
exit $status
