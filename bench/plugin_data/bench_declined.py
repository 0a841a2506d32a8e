#!/usr/bin/env python3
"""bench_declined: which remedy reduces records lost to declined activity buffers (the status
mark `dropping_declined`, docs/troubleshooting.md#dropped-records). Real dynolog, real dyno, the
plugin over the msPTI simulator; per case a fresh daemon and workload, an npu-monitor session
of RUN_S seconds (default 6), then the session's `consumed` and `dropped_declined` counters.

Bursts (the simulator's bulk producer, 50 000 Kernel records every 50 ms; BURST / PAUSE
override): the buffer pool's size against the burst, with 4 KiB buffers
(MSMONITOR_TEST_BUFFER_SIZE, a test knob) as the baseline, next to a 1 s report interval, a
filter, fewer kinds and larger buffers. Then a training loop at a fixed rate (mssim-train, 256
layers, 50 steps/s) with four kinds against one, and larger buffers. Figures only.

  /usr/bin/python3 bench/plugin_data/bench_declined.py [BUILD_DIR]
"""
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
os.environ["MSMON_BUILD_DIR"] = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                                                os.path.join(HERE, "..", "..", "build"))
from conftest import Daemon, run_dyno  # noqa: E402
from daemon_util import rpc_json  # noqa: E402
from plugin_util import FillWorkload, Workload, wait_registered  # noqa: E402

RUN_S = float(os.environ.get("RUN_S", "6"))
BURST, PAUSE = int(os.environ.get("BURST", "50000")), float(os.environ.get("PAUSE", "0.05"))
KERNEL, API = 1 << 2, 1 << 3
SMALL = {"MSMONITOR_TEST_BUFFER_SIZE": "4096"}


def session(make, *args):
    """One session with a fresh daemon and workload: (consumed, declined)."""
    d = Daemon(extra=[])
    try:
        w = make(d)
        try:
            wait_registered(d, w.p.pid)
            run_dyno(d, "npu-monitor", "--npu-monitor-start", *args, "--wait-s", "30", timeout=120)
            time.sleep(RUN_S)
            run_dyno(d, "npu-monitor", "--npu-monitor-stop", "--wait-s", "30", timeout=120)
            s = {}
            for _ in range(200):   # the stop's final counters
                st = rpc_json(d.port, {"fn": "getStatus"}) or {}
                p = next((p for p in st.get("processes", []) if p["pid"] == w.p.pid), {})
                s = p.get("session_stats") or {}
                if s.get("consumed", 0) + s.get("dropped_declined", 0) > 0 and p.get("npumonitor") == "Idle":
                    break
                time.sleep(0.05)
        finally:
            w.finish() if hasattr(w, "finish") else w.stop()
        return s.get("consumed", 0), s.get("dropped_declined", 0)
    finally:
        d.stop()


def row(name, got):
    con, dec = got
    print(f"  {name:58s} consumed {con:>10}  declined {dec:>10}  lost {100.0 * dec / max(con + dec, 1):5.1f} %",
          flush=True)


def fill(env, mask=KERNEL):
    return lambda d: FillWorkload(d, tempfile.mkdtemp(prefix="mmbd"), mask, BURST, PAUSE, extra_env=env)


def loop(env):
    e = {"MSSIM_WL_RATE": "50", "MSSIM_WL_LAYERS": "256", "MSSIM_WL_KERNEL_SCALE": "0.001", "MSSIM_DUMP": ""}
    e.update(env)
    return lambda d: Workload(d, tempfile.mkdtemp(prefix="mmbd"), extra_env=e)


print(f"bursts of {BURST} records every {PAUSE} s, {RUN_S:g} s sessions; the pool holds 32 buffers:")
row("4 KiB buffers, Kernel, interval 60 s (baseline)", session(fill(SMALL), "--mspti-activity-kind", "Kernel"))
row("4 KiB buffers, Kernel, interval 1 s", session(fill(SMALL), "--mspti-activity-kind", "Kernel",
                                                   "--report-interval-s", "1"))
row("4 KiB buffers, Kernel, --filter Kernel:k0", session(fill(SMALL), "--mspti-activity-kind", "Kernel",
                                                          "--filter", "Kernel:k0"))
row("4 KiB buffers, API instead of Kernel,API (same burst)", session(fill(SMALL, KERNEL | API),
                                                                     "--mspti-activity-kind", "API"))
row("64 KiB buffers, Kernel", session(fill({"MSMONITOR_TEST_BUFFER_SIZE": "65536"}), "--mspti-activity-kind", "Kernel"))
row("1 MiB buffers, Kernel", session(fill({"MSMONITOR_TEST_BUFFER_SIZE": "1048576"}), "--mspti-activity-kind",
                                     "Kernel"))
row("8 MiB buffers (the default), Kernel", session(fill({}), "--mspti-activity-kind", "Kernel"))
print("a training loop (mssim-train, 256 layers, 50 steps/s):")
FOUR = "Kernel,API,Marker,MemCpy"
row("4 KiB buffers, " + FOUR, session(loop(SMALL), "--mspti-activity-kind", FOUR))
row("4 KiB buffers, Kernel (fewer kinds)", session(loop(SMALL), "--mspti-activity-kind", "Kernel"))
row("1 MiB buffers, " + FOUR, session(loop({"MSMONITOR_TEST_BUFFER_SIZE": "1048576"}), "--mspti-activity-kind", FOUR))
row("8 MiB buffers (the default), " + FOUR, session(loop({}), "--mspti-activity-kind", FOUR))
