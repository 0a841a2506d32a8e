#!/usr/bin/env bash
# Set up and run every test: install deps, build (release, ASan+UBSan, and a ThreadSanitizer
# build of the simulator consumer suite), run ctest in each.
# Unit tests, fuzz replays and the pytest end-to-end suite all run under ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
JOBS=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$JOBS"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMSMON_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$JOBS"
# ThreadSanitizer: the simulator's consumer suite (completion callbacks on many threads).
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DMSMON_TSAN=ON >/dev/null
cmake --build build-tsan -j"$JOBS" --target test_sim
status=0
echo "== tests (release build) =="
(cd build && ctest --output-on-failure -j"$JOBS") || status=1
echo "== tests (ASan+UBSan build) =="
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
   ctest --output-on-failure -j"$JOBS") || status=1
echo "== simulator consumer suite (ThreadSanitizer build) =="
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ctest --output-on-failure -R '^test_sim$') || status=1
exit $status
