#!/usr/bin/env bash
# The README's demo: dynolog + a simulated 2-rank training job (SIMULATOR, no NPU needed) +
# `dyno npu-monitor` writing DB files, then a summary read back from them and an HTML report.
# Environment: BUILD_DIR (default <repo>/build), DEMO_SKIP_SETUP=1 (skip deps + build),
# DEMO_STEPS (default 100 at 5 steps/s), DEMO_DIR (keep outputs there; default a temp dir).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
PY=${MSMON_PYTHON:-/usr/bin/python3}
STEPS=${DEMO_STEPS:-100}

say() { printf '[demo] %s\n' "$*"; }

if [ "${DEMO_SKIP_SETUP:-0}" != 1 ]; then
  "$ROOT/scripts/install-deps.sh"
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target dynolog dyno mspti_sim msmon_python_pkg
fi
for f in src/daemon/dynolog src/cli/dyno src/sim/libmspti.so python/pkg/msmonitor/lib64/IPCMonitor_C.so; do
  [ -e "$BUILD_DIR/$f" ] || { echo "demo: $BUILD_DIR/$f is missing (build first)" >&2; exit 1; }
done

WORK=${DEMO_DIR:-$(mktemp -d /tmp/msmonitor-demo.XXXXXX)}
mkdir -p "$WORK/sock" "$WORK/out"
chmod 0700 "$WORK/sock"
export MSMONITOR_SOCKET_DIR="$WORK/sock"
PORT=${DEMO_PORT:-$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}

DAEMON_PID=""
TRAIN_PID=""
cleanup() {
  # The job runs in its own process group: signal the whole group (ranks and poller), even
  # when the launcher itself is already gone.
  if [ -n "$TRAIN_PID" ]; then
    kill -TERM -- "-$TRAIN_PID" 2>/dev/null || true
    wait "$TRAIN_PID" 2>/dev/null || true
  fi
  if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
    kill -TERM "$DAEMON_PID" 2>/dev/null || true
    wait "$DAEMON_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_for() {   # wait_for SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@"; do
    if [ $SECONDS -ge $deadline ]; then echo "demo: timed out waiting for $what" >&2; return 1; fi
    sleep 0.2
  done
}

say "outputs in $WORK"
say "starting dynolog on port $PORT (sockets in $MSMONITOR_SOCKET_DIR)"
"$BUILD_DIR/src/daemon/dynolog" --port "$PORT" --enable_ipc_monitor >"$WORK/dynolog.log" 2>&1 &
DAEMON_PID=$!
wait_for 10 "dynolog" test -S "$WORK/sock/dynolog.sock"

say "starting the simulated 2-rank training job ($STEPS steps at 5 steps/s)"
# The plugin logs go next to the DB files: the whole run in one directory.
MSMONITOR_USE_DAEMON=1 MSMONITOR_MSPTI_LIB="$BUILD_DIR/src/sim/libmspti.so" MSMONITOR_LOG_PATH="$WORK/out" \
  PYTHONPATH="$BUILD_DIR/python/pkg${PYTHONPATH:+:$PYTHONPATH}" \
  setsid "$PY" -m mssim.train --ranks 2 --steps "$STEPS" --rate 5 >"$WORK/train.log" 2>&1 &
TRAIN_PID=$!
wait_for 30 "the job to register with dynolog" grep -q "Init dynolog success" "$WORK/train.log"
wait_for 30 "both ranks to start" sh -c "[ \$(grep -c 'started: device' '$WORK/train.log') -ge 2 ]"
# A config can only be delivered to a process that has polled once (the poll carries its pids).
polling() { "$BUILD_DIR/src/cli/dyno" --port "$PORT" status 2>/dev/null | grep -q '"polling":true'; }
wait_for 30 "the poller's first poll" polling
# A rank applies a config only if it was written in a later whole second than the rank
# started (docs/design/ipc.md#ranks, as torch_npu does): let the ranks' start second pass.
t_started=$(date +%s)
wait_for 5 "the next second" sh -c "[ \$(date +%s) -gt $t_started ]"

say "dyno npu-monitor --npu-monitor-start ... --duration 10 --log-file $WORK/out"
"$BUILD_DIR/src/cli/dyno" --port "$PORT" npu-monitor --npu-monitor-start \
  --mspti-activity-kind Marker,Kernel,API,Communication --report-interval-s 2 --duration 10 \
  --log-file "$WORK/out" 2>&1 | sed 's/^/    /'

say "waiting for the job to finish"
rc=0
wait "$TRAIN_PID" || rc=$?
TRAIN_PID=""
if [ $rc -ne 0 ]; then
  echo "demo: training job failed ($rc); log:" >&2
  tail -20 "$WORK/train.log" >&2
  exit 1
fi
"$BUILD_DIR/src/cli/dyno" --port "$PORT" status 2>/dev/null | sed 's/^/    /' || true
say "summary of $(ls "$WORK"/out/*.db 2>/dev/null | wc -l) DB file(s):"
PYTHONPATH="$BUILD_DIR/python/pkg${PYTHONPATH:+:$PYTHONPATH}" "$PY" "$ROOT/scripts/demo_summary.py" "$WORK/out"
say "rendering the HTML report (python -m msmonitor report; hint for any --log-file run, docs/report.md)"
PYTHONPATH="$BUILD_DIR/python/pkg${PYTHONPATH:+:$PYTHONPATH}" \
  "$PY" -m msmonitor report "$WORK/out" -o "$WORK/report.html" 2>&1 | sed 's/^/    /'
say "report: $WORK/report.html (open it in a browser; it needs no network)"
say "done; logs and DB files are in $WORK"
