"""bench_trace_torch: what the step that closes an nputrace window costs in a PyTorch process
(docs/benchmarks.md, docs/nputrace.md#analysis---analyse---async-mode).

One rank in dyno mode (msmonitor.dynamic_profile over the msPTI simulator, no daemon: the
configs are written into the segment the way the creator's poller does) trains a small MLP with
Debian's python3-torch and calls dynamic_profile.step() after each iteration (the optimizer hook
is off so the call can be timed). Two windows of the same length with --activities CPU,NPU
--analyse: the first synchronous, the second with --async-mode. For the step that closes each,
the time in dynamic_profile.step() beyond a plain step is split into torch.profiler's own work
on the stepping thread (its stop, which builds the events, and its export when that runs on the
step: export_chrome_trace is torch's code, when it runs is ours) and the rest, ours (the window
close, the renames, the analysis hand-off), next to the synchronous figure; then the worst later
step (where the synchronous analysis runs, and where the hand-off ran before --async-mode moved
it to the worker).
Usage: /usr/bin/python3 bench/trace/bench_trace_torch.py [BUILD_DIR]"""
import mmap
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..",
                                                                             "build"))
if os.environ.get("_BENCH_CHILD") != "1":
    tmp = tempfile.mkdtemp(prefix="mmbtorch")
    env = dict(os.environ, _BENCH_CHILD="1", MSMONITOR_USE_DAEMON="1", MSMONITOR_SHM_DIR=os.path.join(tmp, "shm"),
               MSMONITOR_MSPTI_LIB=os.path.join(BUILD, "src", "sim", "libmspti.so"), MSSIM_CHECK_PRELOAD="0",
               MSMONITOR_LOG_PATH=os.path.join(tmp, "log"), MSMONITOR_SOCKET_DIR=os.path.join(tmp, "sock"),
               MSMONITOR_RETRY_INITIAL_S="30", MSMONITOR_NO_OPTIMIZER_HOOK="1", BENCH_TMP=tmp, RANK="0",
               PYTHONPATH=os.path.join(BUILD, "python", "pkg"))
    for d in ("shm", "sock", "log"):
        os.makedirs(os.path.join(tmp, d), mode=0o700)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), BUILD], env=env, capture_output=True, text=True)
    sys.stdout.write("".join(l + "\n" for l in r.stdout.splitlines() if not l.startswith("analysis of ")))
    if r.returncode:
        sys.stderr.write(r.stderr[-3000:])
    subprocess.call(["rm", "-rf", tmp])
    sys.exit(r.returncode)

try:
    import torch
    import torch.profiler as tp
except ImportError:
    print("torch is not importable (Debian: apt-get install python3-torch); nothing measured")
    sys.exit(0)
from msmonitor import dynamic_profile  # noqa: E402

OUT = os.path.join(os.environ["BENCH_TMP"], "traces")
WINDOW = int(os.environ.get("BENCH_WINDOW_STEPS", "20"))

# torch.profiler's own work, timed where it runs on the stepping thread: its stop and its export
TORCH = {"stop": 0, "export": 0}


def timed(fn, what):
    def wrapper(*a, **k):
        if threading.current_thread() is not threading.main_thread():
            return fn(*a, **k)
        t0 = time.perf_counter_ns()
        try:
            return fn(*a, **k)
        finally:
            TORCH[what] += time.perf_counter_ns() - t0
    return wrapper


tp.profile.__exit__ = timed(tp.profile.__exit__, "stop")
tp.profile.export_chrome_trace = timed(tp.profile.export_chrome_trace, "export")

assert dynamic_profile.init()
fd = os.open(dynamic_profile._STATE.path, os.O_RDWR)  # pylint: disable=protected-access
mm = mmap.mmap(fd, dynamic_profile.SHM_SIZE)
torch.manual_seed(0)
model = torch.nn.Sequential(*[m for _ in range(6) for m in (torch.nn.Linear(256, 256), torch.nn.ReLU())])
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def publish(asynchronous):
    t = int(time.time())  # a rank acts on a strictly newer whole-second stamp
    while int(time.time()) <= t:
        time.sleep(0.01)
    cfg = {"ACTIVITIES_LOG_FILE": OUT, "PROFILE_START_STEP": "-1", "ACTIVITIES_ITERATIONS": str(WINDOW),
           "PROFILE_ACTIVITIES": "CPU,NPU", "PROFILE_ANALYSE": "true", "is_valid": True}
    if asynchronous:
        cfg["PROFILE_ASYNC_MODE"] = "true"
    dynamic_profile.write_config(mm, cfg)


dyn = dynamic_profile._dynamic()  # pylint: disable=protected-access


def train_step():
    x = torch.randn(64, 256)
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    state = dyn.trace_info()["state"]
    TORCH["stop"] = TORCH["export"] = 0
    t0 = time.perf_counter_ns()
    dynamic_profile.step()
    return time.perf_counter_ns() - t0, state, dyn.trace_info()["state"], (TORCH["stop"], TORCH["export"])


plain = [train_step()[0] for _ in range(40)][10:]   # untraced, nothing armed: the baseline
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
runs = {"sync": [], "async": []}   # mode -> [(closing step ns, (stop ns, export ns), worst later step ns)]
for mode in ("sync", "async") * REPEAT:   # interleaved: both modes see the same machine
    close = None
    after = []
    publish(mode == "async")
    for i in range(10000):
        dt, before, now, torch_ns = train_step()
        if close is not None:
            after.append(dt)
            if len(after) >= 40:
                break
        elif before == 1 and now != 1:
            close = (dt, torch_ns)   # the step that closed the window
    runs[mode].append(close + (max(after),))
dynamic_profile.finalize()


def ms(ns):
    return ns / 1e6


print(f"torch {torch.__version__} (CPU{'' if torch.autograd.kineto_available() else ', no Kineto'}), "
      f"a 6-layer MLP, windows of {WINDOW} steps with --activities CPU,NPU --analyse; time in "
      f"dynamic_profile.step():")
base = statistics.median(plain)
print(f"  plain step {ms(base):.3f} ms (baseline, median of 30 untraced steps); medians of {REPEAT} windows per mode:")
for mode in ("sync", "async"):
    rows = runs[mode]
    extra = statistics.median(r[0] - base for r in rows)
    stop = statistics.median(r[1][0] for r in rows)
    export = statistics.median(r[1][1] for r in rows)
    ours = [r[0] - base - r[1][0] - r[1][1] for r in rows]
    later = statistics.median(r[2] - base for r in rows)
    label = "synchronous:" if mode == "sync" else "--async-mode:"
    print(f"  {label:14s} the step closing the window +{ms(extra):.1f} ms = torch.profiler's own stop {ms(stop):.1f} ms "
          f"+ its export on the step {ms(export):.1f} ms + ours {ms(statistics.median(ours)):.2f} ms "
          f"(max {ms(max(ours)):.2f}); worst of the next 40 steps +{ms(later):.1f} ms")
