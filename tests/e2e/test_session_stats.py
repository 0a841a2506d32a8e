"""Issue 9 item 4: a session's counters are data. Through the real daemon, dyno and the
simulator workload: each report interval the plugin sends its PluginStats, the daemon keeps
the latest per pid, and `dyno status` shows them in that process's entry; the plugin logs
the same counters in one line at stop."""
import json
import os
import re
import tempfile

from conftest import run_dyno
from plugin_util import Workload, wait_registered
from waits import wait_until


def _status(daemon):
    r = run_dyno(daemon, "status")
    assert r.returncode == 0, r.stderr + r.stdout
    line = next(l for l in r.stdout.splitlines() if l.startswith("{"))
    return json.loads(line)


def _stats_of(daemon, pid, timeout=20.0, pred=lambda s: True):
    def found():
        for p in _status(daemon)["processes"]:
            s = p.get("session_stats")
            if p["pid"] == pid and s and pred(s):
                return s
        return None
    return wait_until(found, timeout, f"session_stats for pid {pid}", diag=lambda: repr(_status(daemon)),
                      interval=0.2)


def test_dyno_status_shows_session_counters(daemon):
    tmp = tempfile.mkdtemp(prefix="mmst")
    w = Workload(daemon, tmp)
    try:
        wait_registered(daemon, w.p.pid)
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
                     "--mspti-activity-kind", "Kernel", "--filter", "Kernel:MatMul")
        assert r.returncode == 0, r.stderr + r.stdout
        w.wait_plugin_log("MsptiMonitor start successfully")
        w.wait_plugin_log("MsptiMonitor filter: 'Kernel:MatMul'")   # what msmonitor report shows
        s = _stats_of(daemon, w.p.pid, pred=lambda s: s["kept"] > 0 and s["filtered"] > 0)
        # the filter keeps the MatMul family and drops the rest; nothing is lost
        assert s["consumed"] == s["kept"] + s["filtered"] + s["before_start"]
        assert s["dropped_queue"] == s["dropped_declined"] == s["dropped_write"] == 0
        assert s["cpu_ns"] > 0
        # the counters move with the session
        later = _stats_of(daemon, w.p.pid, pred=lambda t: t["consumed"] > s["consumed"])
        assert later["kept"] >= s["kept"]
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-stop")
        assert r.returncode == 0, r.stderr + r.stdout
        log = w.wait_plugin_log("MsptiMonitor session stats: ")
        m = re.findall(r"MsptiMonitor session stats: consumed=(\d+) kept=(\d+) filtered=(\d+)", log)[-1]
        final = _stats_of(daemon, w.p.pid, pred=lambda t: t["consumed"] == int(m[0]))
        assert (final["kept"], final["filtered"]) == (int(m[1]), int(m[2]))
    finally:
        w.stop()


def _proc_entry(daemon, pid, key, timeout=20.0):
    return wait_until(lambda: next((p for p in _status(daemon)["processes"] if p["pid"] == pid and key in p), None),
                      timeout, f"{key} for pid {pid}", diag=lambda: repr(_status(daemon)), interval=0.2)


def test_dyno_status_and_doctor_show_the_vendor_library(daemon):
    """Issue 15: after registering, each process tells the daemon which msPTI library it
    loaded (PluginInfo); `dyno status` shows it and `dyno doctor` checks it."""
    from conftest import binpath
    tmp = tempfile.mkdtemp(prefix="mmlib")
    w = Workload(daemon, tmp)
    try:
        wait_registered(daemon, w.p.pid)
        p = _proc_entry(daemon, w.p.pid, "library")
        assert p["backend"] == "mspti"
        assert p["library"] == binpath("libmspti.so")
        r = run_dyno(daemon, "doctor", "--pid", str(w.p.pid))
        assert f"pid {w.p.pid}: library = {binpath('libmspti.so')}" in r.stdout, r.stdout
    finally:
        w.stop()
    # a process that found no msPTI library: reported as "", and doctor fails with the fix
    tmp = tempfile.mkdtemp(prefix="mmlib")
    w = Workload(daemon, tmp, extra_env={"MSMONITOR_MSPTI_LIB": os.path.join(tmp, "missing", "libmspti.so"),
                                         "MSSIM_CHECK_PRELOAD": "0"})
    try:
        wait_registered(daemon, w.p.pid)
        p = _proc_entry(daemon, w.p.pid, "library")
        assert p["library"] == ""
        r = run_dyno(daemon, "doctor", "--pid", str(w.p.pid))
        assert r.returncode == 1
        assert f"pid {w.p.pid}: library empty (no library found)" in r.stdout, r.stdout
    finally:
        w.stop()
