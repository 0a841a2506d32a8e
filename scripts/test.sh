#!/usr/bin/env bash
# Set up and run every test: install deps, build (normal + ASan/UBSan), run ctest in both.
# Unit tests, fuzz replays and the pytest end-to-end suite all run under ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
JOBS=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$JOBS"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMSMON_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$JOBS"
status=0
echo "== tests (release build) =="
(cd build && ctest --output-on-failure -j"$JOBS") || status=1
echo "== tests (ASan+UBSan build) =="
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
   ctest --output-on-failure -j"$JOBS") || status=1
exit $status
