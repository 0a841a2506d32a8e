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
    rc = subprocess.call([sys.executable, os.path.abspath(__file__), BUILD], env=env)
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


sim.run_workload(on_step_end=on_step, steps=0, steps_per_s=0, step_markers=0)
dynamic_profile.finalize()


def med(a, b):
    return statistics.median(times[s][0] for s in range(a, b)) / 1e3


base = statistics.median([times[s][0] for s in list(range(110, 150)) + list(range(360, 400))]) / 1e3
traced = med(152, 350)
print(f"simulator step (msPTI sim, 4 layers, max speed), median: untraced {base:.1f} us (baseline), "
      f"inside a trace window {traced:.1f} us ({(traced / base - 1) * 100:+.1f} %)")
print(f"step opening the window (msPTI subscribe + enable): {times[150][1] / 1e3:.1f} us in step(); "
      f"closing step (flush + write of 200 steps' trace): {times[350][1] / 1e3:.1f} us in step()")
files = sorted(f for f in os.listdir(OUT) if f.endswith(".json"))
print(f"files: {', '.join(files)}")
print(f"closing step with --analyse (analysis in the step): {times[470][1] / 1e3:.1f} us; with --analyse "
      f"--async-mode (child process): {times[570][1] / 1e3:.1f} us")
