"""bench_trace_step: step-time overhead of nputrace on the simulator job (docs/benchmarks.md).

One rank in dyno mode (msmonitor.dynamic_profile over the msPTI simulator, no daemon: the
configs are written into the segment the way the creator's poller does) runs the simulator's
built-in training step as fast as the simulated device allows. Figures, all measured in this
run: the median step time untraced (baseline) and inside a 200-step trace window; the step
that opens the window and the one that closes it (writes the trace file); then the closing
step of a window with --analyse (analysis in the step) and with --analyse --async-mode
(analysis in a child process).
Usage: /usr/bin/python3 bench/trace/bench_trace_step.py [BUILD_DIR]"""
import mmap
import os
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..",
                                                                             "build"))
if os.environ.get("_BENCH_CHILD") != "1":
    tmp = tempfile.mkdtemp(prefix="mmbstep")
    os.makedirs(os.path.join(tmp, "shm"))
    env = dict(os.environ, _BENCH_CHILD="1", MSMONITOR_USE_DAEMON="1", MSMONITOR_SHM_DIR=os.path.join(tmp, "shm"),
               MSMONITOR_MSPTI_LIB=os.path.join(BUILD, "src", "sim", "libmspti.so"), MSSIM_CHECK_PRELOAD="0",
               MSMONITOR_LOG_PATH=os.path.join(tmp, "log"), MSMONITOR_SOCKET_DIR=os.path.join(tmp, "sock"),
               MSMONITOR_RETRY_INITIAL_S="30", MSMON_BUILD_DIR=BUILD, BENCH_TMP=tmp, RANK="0",
               PYTHONPATH=os.path.join(BUILD, "python", "pkg"))
    os.makedirs(env["MSMONITOR_SOCKET_DIR"])
    rc = 0
    for scale in ("1", "0.05"):  # the default kernel durations, then a host-bound step
        env["BENCH_SCALE"] = scale
        env["MSMONITOR_SHM_DIR"] = os.path.join(tmp, "shm" + scale)
        os.makedirs(env["MSMONITOR_SHM_DIR"])
        r = subprocess.run([sys.executable, os.path.abspath(__file__), BUILD], env=env, capture_output=True,
                           text=True)
        sys.stdout.write("".join(l + "\n" for l in r.stdout.splitlines() if l.startswith("  ") or l.startswith("kernel")))
        rc = rc or r.returncode
        if r.returncode:
            sys.stderr.write(r.stderr[-3000:])
    subprocess.call(["rm", "-rf", tmp])
    sys.exit(rc)

import mssim  # noqa: E402
from msmonitor import dynamic_profile  # noqa: E402

TMP = os.environ["BENCH_TMP"]
OUT = os.path.join(TMP, "traces")
sim = mssim.load()
assert dynamic_profile.init()
seg = dynamic_profile._STATE.path  # pylint: disable=protected-access
fd = os.open(seg, os.O_RDWR)
mm = mmap.mmap(fd, dynamic_profile.SHM_SIZE)
times = {}
plan = []          # (publish at step, config)
last = [time.perf_counter_ns()]


def publish(cfg):
    # A rank acts on a strictly newer whole-second stamp: wait for the next second.
    t = int(time.time())
    while int(time.time()) <= t:
        time.sleep(0.01)
    dynamic_profile.write_config(mm, dict(cfg, is_valid=True))


def window(start, iters, **extra):
    cfg = {"ACTIVITIES_LOG_FILE": OUT, "PROFILE_START_STEP": str(start), "ACTIVITIES_ITERATIONS": str(iters),
           "PROFILE_ACTIVITIES": "NPU"}
    cfg.update(extra)
    return cfg


PLAN = {100: window(150, 200), 400: window(450, 20, PROFILE_ANALYSE="true"),
        500: window(550, 20, PROFILE_ANALYSE="true", PROFILE_ASYNC_MODE="true")}
END = 620


def on_step(step):
    if step in PLAN:
        publish(PLAN[step])
        last[0] = time.perf_counter_ns()   # the pause is not a step
        dynamic_profile.step()
        return
    t0 = time.perf_counter_ns()
    dynamic_profile.step()
    now = time.perf_counter_ns()
    times[step + 1] = (now - last[0], now - t0)  # step+1: libmsmonitor's number of the step that begins
    last[0] = now
    if step >= END:
        sim.stop_workload()


SCALE = float(os.environ["BENCH_SCALE"])
sim.run_workload(on_step_end=on_step, steps=0, steps_per_s=0, step_markers=0, kernel_scale=SCALE)
dynamic_profile.finalize()


def med(a, b):
    return statistics.median(times[s][0] for s in range(a, b)) / 1e3


def worst(a, b):
    return max(times[s][1] for s in range(a, b)) / 1e3


base = statistics.median([times[s][0] for s in list(range(110, 150)) + list(range(360, 400))]) / 1e3
traced = med(152, 350)
plain = statistics.median(times[s][1] for s in range(110, 150)) / 1e3
print(f"kernel scale {SCALE:g} (msPTI simulator, 4 layers, as fast as the simulated device allows):")
print(f"  step time, median: untraced {base:.1f} us (baseline), inside a 200-step trace window {traced:.1f} us "
      f"({(traced / base - 1) * 100:+.2f} %)")
print(f"  time in dynamic_profile.step(): plain step {plain:.1f} us; step opening the window (subscribe + enable) "
      f"{times[150][1] / 1e3:.1f} us; step closing it {times[350][1] / 1e3:.1f} us (the flush and file write run on "
      f"the session thread)")
print(f"  worst step() after a 20-step window with --analyse: {worst(470, 500):.1f} us (analysis in the step); "
      f"with --analyse --async-mode: {worst(570, 600):.1f} us (child process)")
