#!/usr/bin/env bash
# gpu-check.sh: the prepared check of the CUPTI backend on a machine with an NVIDIA GPU
# (docs/design/session.md#cupti-backend item 3). Builds msmonitor, compiles a small CUDA program with the local nvcc,
# runs it under CUDA_INJECTION64_PATH=libmsmonitor.so with a local dynolog, collects
# Kernel/MemCpy/Marker in metric mode and in JSONL export, traces an nputrace window (the
# program's own NVTX `step <N>` ranges delimit it: it never calls a step function), and
# checks kernel names and counts against what the program launched. One PASS/FAIL line per
# check, then a summary; exit 0 only if every check passed. Bounded to ~5 minutes.
# `--check-trace DIR START STOP NAME=COUNT[,...] MEMCPYS` runs only the trace-file check
# (no GPU needed; the e2e test runs it on a trace of the simulated CUPTI).
set -u

usage() {
    cat <<EOF
usage: $0 [--build-dir DIR] [--no-build] [--steps N] [--keep] [--help]
       $0 --check-trace DIR START STOP NAME=COUNT[,NAME=COUNT...] MEMCPYS
  --build-dir DIR  build msmonitor in DIR (default: <repo>/build-gpu)
  --no-build       use an existing build in --build-dir
  --steps N        training steps of the CUDA program (default 20; 1..10000)
  --keep           keep the work directory (printed at the end)
  --check-trace    only check the one nputrace file in DIR: window [START, STOP), exactly
                   COUNT kernels named NAME each, MEMCPYS memcpys, the `step <N>` ranges
Runs one short scripted check on an NVIDIA GPU; needs nvidia-smi, nvcc and libcupti.
EOF
}

# check_trace DIR START STOP NAME=COUNT,... MEMCPYS: PASS/FAIL lines on stdout.
check_trace() {
    python3 - "$@" <<'PY'
import collections, glob, gzip, json, os, re, sys
d, start, stop, want, cpys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
files = [f for f in glob.glob(os.path.join(d, "msmonitor_trace_*_rank*_step*.json*"))
         if re.search(r"_step\d+-\d+\.json(\.gz)?$", f)]
if len(files) != 1:
    print("FAIL nputrace file: %d trace files in %s (expected 1)" % (len(files), d))
    sys.exit(0)
f = files[0]
ok = re.search(r"_step%d-%d\.json(\.gz)?$" % (start, stop), f)
print(("PASS" if ok else "FAIL") + " nputrace file: %s" % os.path.basename(f))
try:
    with (gzip.open if f.endswith(".gz") else open)(f, "rt") as fh:
        tr = json.load(fh)
except ValueError as e:
    print("FAIL nputrace JSON: %s: %s" % (os.path.basename(f), e))
    sys.exit(0)
hdr = tr.get("msmonitor", {})
ok = (hdr.get("startStep"), hdr.get("stopStep")) == (start, stop) and hdr.get("activityBackend") == "cupti"
print(("PASS" if ok else "FAIL") + " nputrace JSON: window [%s, %s) backend %s" % (
    hdr.get("startStep"), hdr.get("stopStep"), hdr.get("activityBackend")))
xs = [e for e in tr.get("traceEvents", []) if e.get("ph") == "X"]
got = collections.Counter(e["name"] for e in xs if e.get("args", {}).get("kind") == "Kernel")
exp = collections.Counter({k: int(v) for k, v in (kv.split("=", 1) for kv in want.split(",") if kv)})
print(("PASS" if got == exp else "FAIL") + " nputrace kernels: %s (expected %s)" % (
    ", ".join("%s %d" % kv for kv in sorted(got.items())) or "none",
    ", ".join("%s %d" % kv for kv in sorted(exp.items()))))
n = sum(e.get("args", {}).get("kind") == "MemCpy" for e in xs)
print(("PASS" if n == cpys else "FAIL") + " nputrace memcpys: %d/%d" % (n, cpys))
steps = sorted((e["name"] for e in xs if e.get("args", {}).get("kind") == "Marker" and e["name"].startswith("step ")),
               key=lambda s: int(s[5:]) if s[5:].isdigit() else -1)
ok = steps == ["step %d" % i for i in range(start, stop)]
print(("PASS" if ok else "FAIL") + " nputrace step ranges: %s" % (", ".join(steps) or "none"))
PY
}

if [ "${1:-}" = --check-trace ]; then
    if [ $# -ne 6 ]; then
        echo "gpu-check: --check-trace needs DIR START STOP NAME=COUNT[,...] MEMCPYS" >&2; exit 2
    fi
    for n in "$3" "$4" "$6"; do
        case "$n" in ''|*[!0-9]*) echo "gpu-check: --check-trace: '$n' is not a number" >&2; exit 2 ;; esac
    done
    out=$(check_trace "$2" "$3" "$4" "$5" "$6")
    echo "$out"
    p=$(grep -c '^PASS' <<<"$out"); f=$(grep -c '^FAIL' <<<"$out")
    echo "SUMMARY: $p passed, $f failed"
    [ "$f" = 0 ]
    exit $?
fi

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$REPO/build-gpu"
DO_BUILD=1
STEPS=20
KEEP=0
while [ $# -gt 0 ]; do
    case "$1" in
    --build-dir) [ $# -ge 2 ] || { echo "gpu-check: --build-dir needs a directory" >&2; exit 2; }
                 BUILD=$2; shift 2 ;;
    --no-build) DO_BUILD=0; shift ;;
    --steps) [ $# -ge 2 ] || { echo "gpu-check: --steps needs a number" >&2; exit 2; }
             case "$2" in ''|*[!0-9]*) echo "gpu-check: --steps '$2' is not a number in 1..10000" >&2; exit 2 ;; esac
             if [ "$2" -lt 1 ] || [ "$2" -gt 10000 ]; then
                 echo "gpu-check: --steps '$2' is not a number in 1..10000" >&2; exit 2
             fi
             STEPS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-check: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done

PASS=0
FAIL=0
pass() { echo "PASS $1"; PASS=$((PASS + 1)); }
fail() { echo "FAIL $1: $2"; FAIL=$((FAIL + 1)); }
summary() {
    echo "SUMMARY: $PASS passed, $FAIL failed${1:+ ($1)}"
    [ "$KEEP" = 1 ] && [ -n "${WORK:-}" ] && echo "work directory: $WORK"
    [ "$FAIL" = 0 ]
    exit $?
}
DEADLINE=$(( $(date +%s) + 290 ))
# Seconds left of the 5-minute budget, at least 1 (timeout 0 would mean "no limit").
left() { local l=$(( DEADLINE - $(date +%s) )); [ "$l" -lt 1 ] && l=1; echo "$l"; }

# ---- prerequisites: nothing is built or started without a GPU ----
if ! command -v nvidia-smi >/dev/null 2>&1; then
    fail gpu "no NVIDIA GPU: nvidia-smi not found (this check needs a machine with an NVIDIA GPU and driver)"
    summary "no GPU: nothing else was run"
fi
GPUS=$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${GPUS:-0}" -lt 1 ]; then
    fail gpu "no NVIDIA GPU: nvidia-smi -L lists no device"
    summary "no GPU: nothing else was run"
fi
pass "gpu ($GPUS device(s): $(timeout 20 nvidia-smi -L | head -1))"

CUDA=${CUDA_HOME:-}
[ -z "$CUDA" ] && command -v nvcc >/dev/null 2>&1 && CUDA=$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)
[ -z "$CUDA" ] && CUDA=/usr/local/cuda
NVCC=$(command -v nvcc 2>/dev/null || echo "$CUDA/bin/nvcc")
if [ ! -x "$NVCC" ]; then
    fail nvcc "nvcc not found (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin)"
    summary
fi
CUPTI=
for c in "$CUDA/extras/CUPTI/lib64/libcupti.so" "$CUDA/lib64/libcupti.so" "$CUDA/targets/x86_64-linux/lib/libcupti.so"; do
    [ -e "$c" ] && { CUPTI=$c; break; }
done
if [ -z "$CUPTI" ]; then
    fail cupti "libcupti.so not found under $CUDA (extras/CUPTI/lib64, lib64)"
    summary
fi
pass "toolkit (nvcc $NVCC, CUPTI $CUPTI)"

WORK=$(mktemp -d /tmp/msmon-gpucheck.XXXXXX)
cleanup() {
    [ -n "${DPID:-}" ] && kill "$DPID" 2>/dev/null
    [ "$KEEP" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT

# ---- build ----
if [ "$DO_BUILD" = 1 ]; then
    if timeout "$(left)" cmake -S "$REPO" -B "$BUILD" >"$WORK/cmake.log" 2>&1 &&
       timeout "$(left)" cmake --build "$BUILD" -j"$(nproc)" >>"$WORK/cmake.log" 2>&1; then
        pass "build ($BUILD)"
    else
        fail build "see $WORK/cmake.log: $(tail -3 "$WORK/cmake.log" | tr '\n' ' ')"
        KEEP=1
        summary
    fi
fi
find_bin() { find "$BUILD" -name "$1" -type f -perm -u+x 2>/dev/null | grep -v CMakeFiles | head -1; }
PLUGIN=$(find "$BUILD" -name libmsmonitor.so -not -path '*CMakeFiles*' 2>/dev/null | head -1)
DYNOLOG=$(find_bin dynolog)
DYNO=$(find_bin dyno)
if [ -z "$PLUGIN" ] || [ -z "$DYNOLOG" ] || [ -z "$DYNO" ]; then
    fail artifacts "libmsmonitor.so, dynolog or dyno missing under $BUILD"
    summary
fi

# ---- the CUDA program: known kernel names (extern "C": unmangled), counts, copies, and an
# NVTX range `step <N>` (push/pop, 1-based) around each step; it never calls msmonitor ----
N_ADD=3
N_SCALE=2
cat >"$WORK/app.cu" <<'CU'
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
extern "C" __global__ void msmon_gpucheck_add(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }
extern "C" __global__ void msmon_gpucheck_scale(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 0.5f; }
int main(int argc, char **argv) {
    int steps = atoi(argv[1]), n = 1 << 20;
    const char *ready = argv[2], *go = argv[3];
    float *d, *h = (float *)calloc(n, sizeof(float));
    if (cudaFree(0) != cudaSuccess) { fprintf(stderr, "no CUDA device\n"); return 3; }
    fclose(fopen(ready, "w"));
    for (int w = 0; access(go, F_OK) != 0; w++) { if (w > 60000) return 4; usleep(1000); }
    cudaMalloc(&d, n * sizeof(float));
    for (int s = 1; s <= steps; s++) {
        char name[32]; /* NVTX copies the message */
        snprintf(name, sizeof(name), "step %d", s); /* what the nputrace window follows */
        nvtxRangePushA(name);
        cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
        for (int k = 0; k < 3; k++) msmon_gpucheck_add<<<(n + 255) / 256, 256>>>(d, n);
        for (int k = 0; k < 2; k++) msmon_gpucheck_scale<<<(n + 255) / 256, 256>>>(d, n);
        cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
        nvtxRangePop();
        usleep(20000);
    }
    cudaFree(d);
    cudaDeviceSynchronize();
    return 0;
}
CU
if timeout "$(left)" "$NVCC" -O2 -o "$WORK/app" "$WORK/app.cu" -I"$CUDA/include" >"$WORK/nvcc.log" 2>&1; then
    pass "nvcc app"
else
    fail "nvcc app" "$(tail -3 "$WORK/nvcc.log" | tr '\n' ' ')"
    summary
fi

# ---- a local daemon ----
PORT=$(( 20000 + RANDOM % 20000 ))
mkdir -p "$WORK/sock"
MSMONITOR_SOCKET_DIR="$WORK/sock" HOME="$WORK/sock" "$DYNOLOG" --port "$PORT" --enable_ipc_monitor --use_JSON \
    >"$WORK/dynolog.log" 2>&1 &
DPID=$!
for _ in $(seq 100); do grep -q "Listening to connections on port" "$WORK/dynolog.log" 2>/dev/null && break; sleep 0.1; done
if ! grep -q "Listening to connections on port" "$WORK/dynolog.log"; then
    fail daemon "dynolog did not start: $(tail -3 "$WORK/dynolog.log" | tr '\n' ' ')"
    summary
fi
pass "daemon (port $PORT)"

dyno() { MSMONITOR_SOCKET_DIR="$WORK/sock" HOME="$WORK/sock" timeout 30 "$DYNO" --hostname localhost --port "$PORT" "$@"; }

# registered PID: the daemon logged a registration whose pid list holds PID. $! is the pid of
# `timeout`, so the app itself registers as its child: PID is the app's first ancestor there.
registered() { grep -Eq "Registered process \(([0-9]+, )*$1[,)]" "$WORK/dynolog.log"; }

# run_app NAME EXTRA_DYNO_ARGS...: start the app injected, start collection, let it run to exit.
# NAME nputrace: `dyno nputrace EXTRA_DYNO_ARGS...` instead of npu-monitor.
run_app() {
    local name=$1; shift
    local cmd=(npu-monitor --npu-monitor-start --report-interval-s 1 --mspti-activity-kind Kernel,MemCpy,Marker)
    local started="MsptiMonitor start successfully"
    if [ "$name" = nputrace ]; then
        cmd=(nputrace)
        started="nputrace: armed for steps"
    fi
    local dir="$WORK/$name"
    mkdir -p "$dir"
    MSMONITOR_SOCKET_DIR="$WORK/sock" HOME="$WORK/sock" CUDA_INJECTION64_PATH="$PLUGIN" \
        NVTX_INJECTION64_PATH="$CUPTI" MSMONITOR_CUPTI_LIB="$CUPTI" MSMONITOR_USE_DAEMON=1 \
        MSMONITOR_NATIVE_POLL=1 MSMONITOR_LOG_PATH="$dir" \
        timeout "$(left)" "$WORK/app" "$STEPS" "$dir/ready" "$dir/go" >"$dir/app.log" 2>&1 &
    local apid=$!
    for _ in $(seq 300); do
        [ -e "$dir/ready" ] && registered "$apid" && break
        kill -0 "$apid" 2>/dev/null || break # the app died (no device, injection failed)
        sleep 0.1
    done
    if ! registered "$apid"; then
        fail "$name register" "the injected app did not register (app: $(tail -2 "$dir/app.log" | tr '\n' ' '))"
        kill "$apid" 2>/dev/null
        return 1
    fi
    if ! dyno "${cmd[@]}" "$@" >"$dir/dyno.log" 2>&1; then
        fail "$name start" "dyno ${cmd[0]} failed: $(tail -2 "$dir/dyno.log" | tr '\n' ' ')"
        kill "$apid" 2>/dev/null
        return 1
    fi
    # the native poller picks the config up within its 2 s period
    for _ in $(seq 150); do grep -qs "$started" "$dir"/msmonitor_log/*.log && break; sleep 0.1; done
    if ! grep -qs "$started" "$dir"/msmonitor_log/*.log; then
        fail "$name start" "no '$started' in the plugin log ($dir/msmonitor_log)"
        kill "$apid" 2>/dev/null
        return 1
    fi
    touch "$dir/go"
    if ! wait "$apid"; then
        fail "$name app" "exited non-zero: $(tail -3 "$dir/app.log" | tr '\n' ' ')"
        return 1
    fi
    if grep -qs "Loaded CUPTI library from" "$dir"/msmonitor_log/*.log; then
        pass "$name injection (CUPTI backend loaded)"
    else
        fail "$name injection" "no 'Loaded CUPTI library' in the plugin log ($dir/msmonitor_log)"
    fi
}

EXPECT_ADD=$(( STEPS * N_ADD ))
EXPECT_SCALE=$(( STEPS * N_SCALE ))
EXPECT_CPY=$(( STEPS * 2 ))

# 1. metric mode: OpStats counts per kernel name, MemCpy and Marker lines
if run_app metric; then
    sleep 1
    python3 - "$WORK/dynolog.log" "$EXPECT_ADD" "$EXPECT_SCALE" <<'PY' >"$WORK/metric.out"
import collections, json, sys
cnt, kinds = collections.Counter(), collections.Counter()
for line in open(sys.argv[1], errors="replace"):
    if "Received data message : " not in line:
        continue
    d = json.loads(line.split("Received data message : ", 1)[1])
    kinds[d.get("kind")] += 1
    if d.get("kind") == "OpStats" and d.get("activity") == "Kernel":
        for op in d["ops"]:
            cnt[op["name"]] += int(op["count"])
ok = cnt["msmon_gpucheck_add"] == int(sys.argv[2]) and cnt["msmon_gpucheck_scale"] == int(sys.argv[3])
print(("PASS" if ok else "FAIL") + " metric kernel counts: add %d/%s scale %d/%s" % (
    cnt["msmon_gpucheck_add"], sys.argv[2], cnt["msmon_gpucheck_scale"], sys.argv[3]))
print(("PASS" if kinds["MemCpy"] > 0 else "FAIL") + " metric MemCpy lines: %d" % kinds["MemCpy"])
print(("PASS" if kinds["Marker"] > 0 else "FAIL") + " metric Marker lines: %d (NVTX via NVTX_INJECTION64_PATH)" % kinds["Marker"])
PY
    while read -r verdict rest; do
        if [ "$verdict" = PASS ]; then pass "$rest"; else fail "${rest%%:*}" "${rest#*: }"; fi
    done <"$WORK/metric.out"
fi

# 2. JSONL export: kernel lines on device 0 with the launched names and counts, memcpys
if run_app jsonl --log-file "$WORK/jsonl/out" --export-type Jsonl; then
    python3 - "$WORK/jsonl/out" "$EXPECT_ADD" "$EXPECT_SCALE" "$EXPECT_CPY" <<'PY' >"$WORK/jsonl.out"
import collections, glob, json, os, sys
k, dev, cpy = collections.Counter(), collections.Counter(), 0
for f in glob.glob(os.path.join(sys.argv[1], "*.jsonl")):
    for line in open(f):
        d = json.loads(line)
        if d["kind"] == "Kernel":
            k[d["name"]] += 1
            dev[d["deviceId"]] += 1
        elif d["kind"] == "MemCpy":
            cpy += 1
ok = k["msmon_gpucheck_add"] == int(sys.argv[2]) and k["msmon_gpucheck_scale"] == int(sys.argv[3])
print(("PASS" if ok else "FAIL") + " jsonl kernel lines: add %d/%s scale %d/%s" % (
    k["msmon_gpucheck_add"], sys.argv[2], k["msmon_gpucheck_scale"], sys.argv[3]))
print(("PASS" if dev.get(0, 0) > 0 else "FAIL") + " jsonl kernels on device 0: %s" % dict(dev))
print(("PASS" if cpy == int(sys.argv[4]) else "FAIL") + " jsonl memcpy lines: %d/%s" % (cpy, sys.argv[4]))
PY
    while read -r verdict rest; do
        if [ "$verdict" = PASS ]; then pass "$rest"; else fail "${rest%%:*}" "${rest#*: }"; fi
    done <"$WORK/jsonl.out"
fi

# 3. nputrace: a window of the program's steps [S, S+K), delimited by its NVTX `step <N>`
# ranges (the start of `step S+K` closes it; with fewer steps the exit ends it)
if [ "$STEPS" -ge 5 ]; then TS=3; TK=2; else TS=1; TK=$STEPS; fi
if run_app nputrace --start-step "$TS" --iterations "$TK" --log-file "$WORK/nputrace/out" --activities NPU; then
    for _ in $(seq 100); do ls "$WORK/nputrace/out"/msmonitor_trace_*.json* >/dev/null 2>&1 && break; sleep 0.1; done
    check_trace "$WORK/nputrace/out" "$TS" $((TS + TK)) \
        "msmon_gpucheck_add=$((TK * N_ADD)),msmon_gpucheck_scale=$((TK * N_SCALE))" $((TK * 2)) >"$WORK/nputrace.out"
    while read -r verdict rest; do
        if [ "$verdict" = PASS ]; then pass "$rest"; else fail "${rest%%:*}" "${rest#*: }"; fi
    done <"$WORK/nputrace.out"
fi

# 4. optional: PyTorch with CUDA, a tiny training loop injected the same way
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    mkdir -p "$WORK/torch"
    if CUDA_INJECTION64_PATH="$PLUGIN" MSMONITOR_CUPTI_LIB="$CUPTI" MSMONITOR_LOG_PATH="$WORK/torch" \
        timeout 60 python3 -c '
import torch
m = torch.nn.Linear(64, 64).cuda(); o = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(10):
    o.zero_grad(); m(torch.randn(32, 64, device="cuda")).sum().backward(); o.step()
torch.cuda.synchronize()' >"$WORK/torch/out.log" 2>&1; then
        pass "torch loop runs with the plugin injected"
    else
        fail "torch loop" "$(tail -3 "$WORK/torch/out.log" | tr '\n' ' ')"
    fi
else
    echo "SKIP torch: PyTorch with CUDA not available"
fi
[ "$FAIL" = 0 ] || KEEP=1
summary
