"""The CUPTI backend end to end on our simulated CUPTI (src/sim/cupti): an unmodified program
(mssim-cuda-app, linked against the simulated CUDA entry) gets libmsmonitor.so injected through
CUDA_INJECTION64_PATH at cuInit, registers with a real dynolog, and npu-monitor metric mode, DB
and JSONL export must report exactly the simulator's ground truth (MSSIM_CUPTI_DUMP)."""
import collections
import glob
import json
import os
import sqlite3
import tempfile

from conftest import BUILD, Proc, run_dyno, binpath
from plugin_util import data_lines, thread_names, wait_registered, Workload
from waits import wait_equal, wait_until

SIMDIR = os.path.join(BUILD, "src", "sim", "cupti")
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


class CudaApp(Proc):
    """mssim-cuda-app with the plugin injected by the simulated driver; it waits for go()
    before its first step so collection can be started first."""

    def __init__(self, daemon, tmpdir, steps=20, rate=50, extra_env=None, unset=()):
        self.dump = os.path.join(tmpdir, "dump.jsonl")
        self.ready = os.path.join(tmpdir, "ready")
        self.gofile = os.path.join(tmpdir, "go")
        env = daemon.client_env() if daemon is not None else dict(os.environ)
        env.pop("MSMONITOR_BACKEND", None)
        env.update({
            "CUDA_INJECTION64_PATH": binpath("libmsmonitor.so"),
            "MSMONITOR_USE_DAEMON": "1",
            "MSMONITOR_NATIVE_POLL": "1",
            "MSMONITOR_CUPTI_LIB": os.path.join(SIMDIR, "libcupti.so"),
            "MSMONITOR_LOG_PATH": tmpdir,
            "MSSIM_CUPTI_DUMP": self.dump,
        })
        if extra_env:
            env.update(extra_env)
        for k in unset:
            env.pop(k, None)
        argv = [os.path.join(SIMDIR, "mssim-cuda-app"), "--steps", str(steps), "--rate", str(rate),
                "--ready-file", self.ready, "--go-file", self.gofile]
        super().__init__(argv, env=env, logname="cudaapp", tmpdir=tmpdir)
        wait_until(lambda: os.path.exists(self.ready), 60, "the cuda app to be ready", diag=self.log, alive=self)

    plugin_log = Workload.plugin_log
    wait_plugin_log = Workload.wait_plugin_log
    ground_truth = Workload.ground_truth

    def go(self):
        open(self.gofile, "w").close()


def _run(daemon, kinds, *extra, steps=20, env=None):
    tmp = tempfile.mkdtemp(prefix="mmc")
    app = CudaApp(daemon, tmp, steps=steps, extra_env=env)
    try:
        wait_registered(daemon, app.p.pid)
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
                     "--mspti-activity-kind", kinds, *extra)
        assert r.returncode == 0, r.stderr + r.stdout
        app.wait_plugin_log("MsptiMonitor start successfully")
        assert "MsptiMonitor" in thread_names(app.p.pid)
        app.go()
        app.p.wait(60)  # the atexit stop sends the final interval / closes the files
    finally:
        app.stop()
    assert app.p.returncode == 0, app.log()
    log = app.plugin_log()
    assert "Loaded CUPTI library from " + os.path.join(SIMDIR, "libcupti.so") in log, log[-3000:]
    return app, tmp


def _truth(app):
    kern, nccl, cpy, api = collections.Counter(), collections.Counter(), collections.Counter(), collections.Counter()
    kdur = collections.Counter()
    for r in app.ground_truth():
        if r["kind"] == "CONCURRENT_KERNEL":
            kern[r["name"]] += 1
            kdur[r["deviceId"]] += r["end"] - r["start"]
            if r["name"].startswith("ncclDevKernel_"):
                nccl[r["deviceId"]] += 1
        elif r["kind"] == "MEMCPY":
            cpy[r["deviceId"]] += r["bytes"]
        elif r["kind"] == "RUNTIME":
            api[r["name"].rsplit("_v", 1)[0]] += 1
    return kern, kdur, nccl, cpy, api


def _reported(daemon, kind):
    dur, cnt = collections.Counter(), collections.Counter()
    for d in data_lines(daemon):
        if d.get("kind") == kind:
            dur[int(d["deviceId"])] += int(d["duration"])
        elif d.get("kind") == "OpStats" and d.get("activity") == kind:
            for op in d["ops"]:
                cnt[op["name"]] += int(op["count"])
    return dur, cnt


def test_injected_metric_counts_match_ground_truth(daemon):
    app, _ = _run(daemon, "Kernel,Marker,AclAPI")
    kern, kdur, _, _, api = _truth(app)
    assert kern["gemm_fwd"] == 20 and kern[NCCL] == 20
    # the exited app's final report may still be queued in the daemon's socket
    wait_equal(lambda: _reported(daemon, "Kernel"), (kdur, kern), 30, "the daemon's Kernel totals")
    acl = wait_equal(lambda: _reported(daemon, "AclAPI")[1], api, 30, "the daemon's AclAPI totals")
    assert acl["cudaLaunchKernel"] == 80  # the _v7000 suffix is stripped
    assert any(d.get("kind") == "Marker" for d in data_lines(daemon))


def test_injected_db_export(daemon):
    app, tmp = _run(daemon, "Kernel,Communication", "--log-file", os.path.join(tmp_dir := tempfile.mkdtemp(), "o"),
                    "--export-type", "DB")
    kern, _, _, _, _ = _truth(app)
    files = glob.glob(os.path.join(tmp_dir, "o", f"msmonitor_{app.p.pid}_*_*.db"))
    assert len(files) == 1, os.listdir(os.path.join(tmp_dir, "o"))
    db = sqlite3.connect(files[0])
    s = dict(db.execute("SELECT id, value FROM STRING_IDS"))
    got = collections.Counter()
    truth = collections.Counter()
    for r in app.ground_truth():
        if r["kind"] == "CONCURRENT_KERNEL":
            truth[(r["correlationId"], r["start"], r["end"], r["deviceId"], r["streamId"], r["name"])] += 1
    for (corr, start, end, dev, stream, name, typ) in db.execute(
            "SELECT t.connectionId, t.startNs, t.endNs, t.deviceId, t.streamId, c.name, t.taskType "
            "FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId"):
        assert s[typ] == "KERNEL_CUDA"
        got[(corr, start, end, dev, stream, s[name])] += 1
    db.close()
    assert sum(truth.values()) == 80
    assert got == truth


def test_injected_jsonl_export(daemon):
    out = os.path.join(tempfile.mkdtemp(), "o")
    app, _ = _run(daemon, "Kernel,MemCpy,Communication", "--log-file", out, "--export-type", "Jsonl")
    truth_k, truth_c, truth_m = collections.Counter(), collections.Counter(), collections.Counter()
    for r in app.ground_truth():
        if r["kind"] == "CONCURRENT_KERNEL":
            truth_k[(r["correlationId"], r["start"], r["end"], r["deviceId"], r["streamId"], r["name"])] += 1
            if r["name"].startswith("ncclDevKernel_"):
                truth_c[(r["correlationId"], r["start"], r["end"])] += 1
        elif r["kind"] == "MEMCPY":
            truth_m[(r["correlationId"], r["start"], r["end"], r["bytes"])] += 1
    got_k, got_c, got_m = collections.Counter(), collections.Counter(), collections.Counter()
    comm = []
    for f in sorted(glob.glob(os.path.join(out, f"msmonitor_{app.p.pid}_*_*.jsonl"))):
        with open(f) as fh:
            for line in fh:
                d = json.loads(line)
                if d["kind"] == "Kernel":
                    got_k[(d["correlationId"], d["startNs"], d["endNs"], d["deviceId"], d["streamId"], d["name"])] += 1
                elif d["kind"] == "MemCpy":
                    got_m[(d["correlationId"], d["startNs"], d["endNs"], d["bytes"])] += 1
                elif d["kind"] == "Communication":
                    got_c[(d["correlationId"], d["startNs"], d["endNs"])] += 1
                    comm.append(d)
    assert sum(truth_k.values()) == 80 and sum(truth_m.values()) == 20
    assert got_k == truth_k
    assert got_m == truth_m
    assert got_c == truth_c
    assert comm and all(c["name"] == "AllReduce" and c["algType"] == "RING" for c in comm), comm[:2]


def test_cupti_lib_missing_keeps_app_running(daemon):
    """An explicit MSMONITOR_CUPTI_LIB that does not exist: start refused, the app runs on."""
    tmp = tempfile.mkdtemp(prefix="mmc")
    app = CudaApp(daemon, tmp, steps=5, extra_env={"MSMONITOR_CUPTI_LIB": os.path.join(tmp, "nope.so")})
    try:
        wait_registered(daemon, app.p.pid)
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel",
                     "--wait-s", "60", timeout=120)
        # issue 22: the refused start is dyno's outcome with the reason, exit 3
        assert r.returncode == 3, r.stderr + r.stdout
        assert "rejected (Idle): CUPTI library not found" in r.stdout, r.stdout
        app.wait_plugin_log("CUPTI library not found (searched: MSMONITOR_CUPTI_LIB=")
        app.go()
        app.p.wait(30)
    finally:
        app.stop()
    assert app.p.returncode == 0, app.log()


_PY_WORKLOAD = r"""
import ctypes, os, sys, time
sys.path.insert(0, os.environ["MSMON_E2E_PYPATH"])
from mssim import cupti
sim = cupti.load()
plugin = ctypes.CDLL(os.environ["MSMON_E2E_PLUGIN"], mode=ctypes.RTLD_GLOBAL)
plugin.msmon_native_poll_start()  # loading starts nothing (docs/plugin.md)
open(sys.argv[1], "w").close()
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
for step in range(10):
    r = sim.range_start("step")
    sim.kernel("py_gemm", 10000)
    sim.nccl(duration_ns=20000)
    sim.memcpy(4096)
    sim.range_end(r)
    time.sleep(0.02)
sim.add_dropped(7)
# a report tick must see the dropped count: the test says when it has (argv[3] appears)
while not os.path.exists(sys.argv[3]):
    time.sleep(0.01)
plugin.msmon_native_poll_stop()
plugin.msmon_finalize()
print("STATS", sim.stats(), flush=True)
"""


class PyProc(Proc):
    plugin_log = Workload.plugin_log
    wait_plugin_log = Workload.wait_plugin_log


def _run_py_workload(daemon, kinds, extra_env, unset=()):
    """Run _PY_WORKLOAD (the plugin loaded with ctypes, the poller started by its call) through
    one npu-monitor session; returns its plugin log."""
    from conftest import SOURCE
    tmp = tempfile.mkdtemp(prefix="mmc")
    ready, go, seen = os.path.join(tmp, "ready"), os.path.join(tmp, "go"), os.path.join(tmp, "seen")
    env = daemon.client_env()
    env.update({"MSMONITOR_USE_DAEMON": "1", "MSMONITOR_NATIVE_POLL": "1", "MSMONITOR_LOG_PATH": tmp,
                "MSMON_E2E_PYPATH": os.path.join(SOURCE, "python"), "MSMON_E2E_PLUGIN": binpath("libmsmonitor.so"),
                "PYTHONDONTWRITEBYTECODE": "1"})
    env.update(extra_env)
    for k in unset:
        env.pop(k, None)
    w = PyProc(["/usr/bin/python3", "-c", _PY_WORKLOAD, ready, go, seen], env=env, logname="py", tmpdir=tmp)
    try:
        wait_until(lambda: os.path.exists(ready), 60, "the Python workload to be ready", diag=w.log, alive=w)
        wait_registered(daemon, w.p.pid)
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
                     "--mspti-activity-kind", kinds)
        assert r.returncode == 0, r.stderr + r.stdout
        w.wait_plugin_log("MsptiMonitor start successfully")
        open(go, "w").close()
        w.wait_plugin_log("CUPTI dropped 7 records", timeout=60)
        open(seen, "w").close()
        w.p.wait(60)
    finally:
        w.stop()
    assert w.p.returncode == 0, w.log()
    return w.plugin_log()


def test_python_workload_on_simulated_cuda(daemon):
    """A Python workload drives the simulated CUPTI through mssim.cupti, the plugin loaded with
    MSMONITOR_BACKEND=cupti: Kernel and Communication metrics match, CUPTI's dropped count is
    logged."""
    log = _run_py_workload(daemon, "Kernel,Communication",
                           {"MSMONITOR_BACKEND": "cupti", "MSMONITOR_CUPTI_LIB": os.path.join(SIMDIR, "libcupti.so")})
    _, cnt = _reported(daemon, "Kernel")
    assert cnt["py_gemm"] == 10 and sum(cnt.values()) == 20, cnt
    _, comm = _reported(daemon, "Communication")
    assert comm == {"AllReduce": 10}, comm
    assert "CUPTI dropped 7 records" in log, log[-3000:]


def test_fallback_when_mspti_absent(daemon):
    """No MSMONITOR_BACKEND, no library path, no msPTI anywhere: the plugin falls back to CUPTI
    and finds the copy the program already mapped (RTLD_NOLOAD,
    docs/design/session.md#cupti-backend), with one WARNING naming what was searched."""
    log = _run_py_workload(daemon, "Kernel", {}, unset=("MSMONITOR_BACKEND", "MSMONITOR_CUPTI_LIB",
                                                         "MSMONITOR_MSPTI_LIB", "ASCEND_HOME_PATH", "CUDA_HOME"))
    warn = [ln for ln in log.splitlines() if "CUPTI chosen because msPTI was not found (searched: " in ln]
    assert len(warn) == 1 and warn[0].startswith("W"), log[-3000:]
    assert "Loaded CUPTI library from " + os.path.join(SIMDIR, "libcupti.so") in log, log[-3000:]
    _, cnt = _reported(daemon, "Kernel")
    assert cnt["py_gemm"] == 10 and sum(cnt.values()) == 20, cnt
