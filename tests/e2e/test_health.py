"""Issue 22, live health: each case runs the real daemon, the real dyno and simulated ranks, and
must end in a status mark with its reason (getStatus `health.marks`, the `! pid …` lines of
`dyno status`) and a failed check in `dyno doctor`: a filter that keeps nothing (case 7), a
job dropping declined buffers while the session runs (case 9), CUPTI taken because msPTI was
not found (case 6), a dead pid (gone at once), and in dyno mode every rank listed, a rank that
never steps (case 4), and a rank that attaches after the config was published."""
import json
import os
import re
import signal
import subprocess
import tempfile
import time

from conftest import BUILD, Proc, binpath, run_dyno
from daemon_util import rpc_json
from dyn_util import dyn_rank, plugin_log, rank_env, wait_until
from plugin_util import FillWorkload, Workload, wait_registered

FAIL = "\u2718"
KERNEL_MASK = 1 << 2


def status(daemon):
    return rpc_json(daemon.port, {"fn": "getStatus"}) or {}


def proc_of(daemon, pid):
    return next((p for p in status(daemon).get("processes", []) if p["pid"] == pid), None)


def marks_of(daemon, pid):
    p = proc_of(daemon, pid) or {}
    return {m["code"]: m["text"] for m in p.get("health", {}).get("marks", [])}


def wait_mark(daemon, pid, code, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        m = marks_of(daemon, pid)
        if code in m:
            return m[code]
        if time.monotonic() > deadline:
            raise AssertionError(f"no {code} mark on pid {pid}: {proc_of(daemon, pid)}")
        time.sleep(0.2)


def status_line(daemon, pid, code):
    """`dyno status` prints the marks on stderr, `! pid <pid>[ rank <r>]: <code>: …`, and keeps
    stdout the reply alone (scripts parse it as JSON); the multi-host table has them too."""
    r = run_dyno(daemon, "status")
    assert r.returncode == 0, r.stdout + r.stderr
    json.loads(r.stdout[r.stdout.index("{"):])
    hits = [ln for ln in r.stderr.splitlines() if ln.startswith(f"! pid {pid}") and f": {code}: " in ln]
    assert hits, r.stdout + r.stderr
    r = run_dyno(daemon, "status", hostname="localhost,127.0.0.1")   # the merged table
    assert any(ln.strip().startswith(f"! pid {pid}") and f": {code}: " in ln for ln in r.stdout.splitlines()), \
        r.stdout + r.stderr
    return hits[0]


def doctor_fails(daemon, text):
    r = run_dyno(daemon, "doctor")
    hits = [ln for ln in r.stdout.splitlines() if ln.startswith(FAIL) and text in ln]
    assert hits and r.returncode != 0, r.stdout + r.stderr
    return hits[0]


def start_monitor(daemon, *extra):
    r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1", *extra)
    assert r.returncode == 0 and '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr


def test_filter_keeps_nothing(daemon):
    tmp = tempfile.mkdtemp(prefix="mmh")
    w = Workload(daemon, tmp)
    try:
        wait_registered(daemon, w.p.pid)
        wait_until(lambda: (proc_of(daemon, w.p.pid) or {}).get("health", {}).get("backend"), 30, "a health report")
        h = proc_of(daemon, w.p.pid)["health"]
        assert h["backend"] == "mspti" and h["library"].endswith("libmspti.so") and h["fallback"] == ""
        assert h["mode"] == "native" and h["gone"] is False and h["marks"] == []
        start_monitor(daemon, "--mspti-activity-kind", "Kernel", "--filter", "Kernel:NoSuchKernelInThisJob")
        text = wait_mark(daemon, w.p.pid, "filter_keeps_nothing")
        assert "0 kept" in text and "--filter" in text
        interval = proc_of(daemon, w.p.pid)["health"]["interval"]
        assert interval["kept"] == 0
        assert "filter keeps nothing" in status_line(daemon, w.p.pid, "filter_keeps_nothing")
        doctor_fails(daemon, f"pid {w.p.pid}: the filter keeps nothing")
    finally:
        w.stop()


def test_declined_buffers_show_while_running(daemon):
    """Case 9: the declined buffers count while the session runs, not only at its stop."""
    tmp = tempfile.mkdtemp(prefix="mmh")
    w = FillWorkload(daemon, tmp, KERNEL_MASK, 50000, 0.05, extra_env={"MSMONITOR_TEST_BUFFER_SIZE": "4096"})
    try:
        wait_registered(daemon, w.p.pid)
        start_monitor(daemon, "--mspti-activity-kind", "Kernel")
        text = wait_mark(daemon, w.p.pid, "dropping_declined")
        assert "buffer requests declined" in text and "%" in text
        p = proc_of(daemon, w.p.pid)
        assert p["npumonitor"] == "Running"            # still running: counted live
        assert p["session_stats"]["dropped_declined"] > 0
        assert "dropping_write" not in marks_of(daemon, w.p.pid)
        status_line(daemon, w.p.pid, "dropping_declined")
        got = doctor_fails(daemon, f"pid {w.p.pid}: dropping ")
        assert "buffer requests declined" in got and "Buffer allocation exhausted" in got
        assert "full disk" not in got
    finally:
        w.finish()


CUPTI_SIM = os.path.join(BUILD, "src", "sim", "cupti", "libcupti.so")
IDLE_SCRIPT = r"""
import ctypes, os, signal, sys, time
plugin = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
plugin.msmon_native_poll_start()  # loading starts nothing (docs/plugin.md)
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
open(sys.argv[2], "w").close()
while not stop:
    time.sleep(0.05)
plugin.msmon_native_poll_stop()
plugin.msmon_finalize()
"""


def test_cupti_chosen_because_mspti_missing(daemon):
    """Case 6: no msPTI anywhere, a CUDA toolkit's CUPTI loads: one WARNING naming what was
    searched, and status/doctor say why and what to do."""
    tmp = tempfile.mkdtemp(prefix="mmh")
    ready = os.path.join(tmp, "ready")
    env = daemon.client_env()
    for k in ("MSMONITOR_MSPTI_LIB", "MSMONITOR_BACKEND", "ASCEND_HOME_PATH", "LD_LIBRARY_PATH",
              "CUDA_INJECTION64_PATH"):
        env.pop(k, None)
    env.update({"MSMONITOR_USE_DAEMON": "1", "MSMONITOR_NATIVE_POLL": "1", "MSMONITOR_CUPTI_LIB": CUPTI_SIM,
                "MSMONITOR_LOG_PATH": tmp})
    p = Proc(["/usr/bin/python3", "-c", IDLE_SCRIPT, binpath("libmsmonitor.so"), ready], env=env, logname="idle",
             tmpdir=tmp)
    try:
        wait_until(lambda: os.path.exists(ready), 30, "the process", p.log)
        wait_registered(daemon, p.p.pid)
        text = wait_mark(daemon, p.p.pid, "backend_fallback")
        assert "CUPTI chosen because msPTI was not found (searched: " in text
        assert "libmspti.so via the loader search path" in text and "LD_PRELOAD" in text
        h = proc_of(daemon, p.p.pid)["health"]
        assert h["backend"] == "cupti" and h["library"] == CUPTI_SIM
        log = plugin_log(tmp)
        warns = [ln for ln in log.splitlines() if "CUPTI chosen because msPTI was not found" in ln]
        assert len(warns) == 1 and "W" in warns[0][:2], log[-3000:]
        start_monitor(daemon, "--mspti-activity-kind", "Kernel")
        # nothing runs on the device: Running with 0 records is a mark, not a green status
        assert "no records for" in wait_mark(daemon, p.p.pid, "no_records")
        status_line(daemon, p.p.pid, "backend_fallback")
        doctor_fails(daemon, f"pid {p.p.pid}: CUPTI chosen because msPTI was not found")
        doctor_fails(daemon, f"pid {p.p.pid}: no records for ")
    finally:
        p.stop()


def test_dead_pid_is_gone_at_once(daemon):
    tmp = tempfile.mkdtemp(prefix="mmh")
    w = Workload(daemon, tmp)
    try:
        wait_registered(daemon, w.p.pid)
        assert proc_of(daemon, w.p.pid)["polling"] is True
        w.p.send_signal(signal.SIGKILL)
        w.p.wait(30)
        # the first status after the process is reaped says so: no clean-up period to wait for
        p = proc_of(daemon, w.p.pid)
        assert p is not None and p["polling"] is False and p["health"]["gone"] is True, p
        assert "gone" in marks_of(daemon, w.p.pid)
        status_line(daemon, w.p.pid, "gone")
        doctor_fails(daemon, f"pid {w.p.pid} has exited (gone)")
    finally:
        w.stop()


def test_dyno_mode_ranks_listed_no_step_and_late_attach(daemon, tmp_path):
    shm = tmp_path / "shm"
    shm.mkdir()
    base = daemon.client_env()
    ranks = []

    def start(r, **extra):
        d = tmp_path / f"rank{r}"
        d.mkdir()
        p = Proc([dyn_rank()], env=rank_env(base, shm, d, r, **extra), logname="rank", tmpdir=str(d))
        ranks.append((p, d))
        return p, d

    try:
        creator, _ = start(0)
        wait_registered(daemon, creator.p.pid)
        stepping, _ = start(1)
        idle, _ = start(2, DYN_RANK_NO_STEP=1)
        # every rank is listed with its rank, not only the segment's creator
        want = {creator.p.pid: 0, stepping.p.pid: 1, idle.p.pid: 2}

        def listed():
            seen = {p["pid"]: p.get("health", {}).get("rank") for p in status(daemon).get("processes", [])}
            return all(seen.get(pid) == rank for pid, rank in want.items())
        wait_until(listed, 30, "all three ranks in getStatus", lambda: str(status(daemon)))
        r = run_dyno(daemon, "status", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        merged = json.loads(next(ln for ln in r.stdout.splitlines() if ln.startswith("{")))
        assert {(p["pid"], p["rank"]) for p in merged["processes"]} >= set(want.items())
        # a config published: the rank that never steps is marked, with the fix
        t0 = int(time.time())
        wait_until(lambda: int(time.time()) > t0, 5, "the next whole second")
        # every rank answers for itself: the one that never steps is the one without an answer
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
                     "--mspti-activity-kind", "Kernel", "--wait-s", "5")
        assert r.returncode == 4 and '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr
        assert re.search(r"^Outcome: localhost pid %d rank 2: no answer: delivered, no acknowledgement" % idle.p.pid,
                         r.stdout, re.M), r.stdout
        for pid in (creator.p.pid, stepping.p.pid):
            assert re.search(r"^Outcome: localhost pid %d rank [01]: applied \(Running\)$" % pid, r.stdout, re.M)
        text = wait_mark(daemon, idle.p.pid, "no_step")
        assert "last step: never" in text and "forward hook" in text and "step()" in text
        for pid in (creator.p.pid, stepping.p.pid):
            assert "no_step" not in marks_of(daemon, pid), proc_of(daemon, pid)
            assert proc_of(daemon, pid)["health"]["steps_since_config"] > 0
        status_line(daemon, idle.p.pid, "no_step")
        doctor_fails(daemon, f"pid {idle.p.pid}: no step since the config")
        # a rank that attaches after the config was published applies it at its first step
        wait_until(lambda: "MsptiMonitor start successfully" in plugin_log(ranks[1][1]), 30, "rank 1's session")
        late, late_dir = start(3)
        wait_until(lambda: "MsptiMonitor start successfully" in plugin_log(late_dir), 30,
                   "the late rank's session", lambda: plugin_log(late_dir)[-3000:])
        wait_until(lambda: (proc_of(daemon, late.p.pid) or {}).get("npumonitor") == "Running", 30,
                   "the late rank Running")
        assert "MsptiMonitor start successfully" not in plugin_log(ranks[2][1])  # never stepped
    finally:
        for p, _ in reversed(ranks):
            p.stop(signal.SIGTERM, timeout=30)


FORGE_HEALTH = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
from ipcclient import IpcClient
base = {"kind": "PluginHealth", "duration": 0, "timestamp": 1, "deviceId": -1, "name": "health", "backend": "cupti",
        "library": "/forged", "fallback": "forged", "mode": "dyno", "rank": 9, "step": -1, "step_age_ms": -1,
        "step_period_ms": -1, "config_age_ms": 999999, "steps": 0, "steps_since_config": 0}
with IpcClient(sys.argv[2]) as c:
    c.data(dict(base, pid=int(sys.argv[3])))            # another process's pid: ignored
    c.data(dict(base, pid=os.getpid(), rank="x"))       # its own, malformed: ignored
"""


def test_health_speaks_only_for_its_sender(daemon):
    """A local process cannot put marks on a rank (or list itself) with a forged or malformed
    PluginHealth: each is ignored with one rate-limited WARNING."""
    import sys
    e2e = os.path.dirname(os.path.abspath(__file__))
    tmp = tempfile.mkdtemp(prefix="mmh")
    w = Workload(daemon, tmp)
    try:
        wait_registered(daemon, w.p.pid)
        p = subprocess.Popen([sys.executable, "-c", FORGE_HEALTH, e2e, daemon.sockdir, str(w.p.pid)],
                             env=daemon.client_env())
        assert p.wait(timeout=30) == 0
        daemon.wait_log("data: ignored PluginHealth from pid %d naming pid %d" % (p.pid, w.p.pid))
        daemon.wait_log("data: ignored a malformed PluginHealth")
        h = proc_of(daemon, w.p.pid).get("health", {})
        assert h.get("library") != "/forged" and h.get("rank") != 9 and not h.get("marks"), h
        assert proc_of(daemon, p.pid) is None
    finally:
        w.stop()
