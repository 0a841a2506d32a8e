"""Issue 9 item 4: a session's counters are data. Through the real daemon, dyno and the
simulator workload: each report interval the plugin sends its PluginStats, the daemon keeps
the latest per pid, and `dyno status` shows them in that process's entry; the plugin logs
the same counters in one line at stop."""
import json
import re
import tempfile
import time

from conftest import run_dyno
from plugin_util import Workload, wait_registered


def _status(daemon):
    r = run_dyno(daemon, "status")
    assert r.returncode == 0, r.stderr + r.stdout
    line = next(l for l in r.stdout.splitlines() if l.startswith("{"))
    return json.loads(line)


def _stats_of(daemon, pid, timeout=20.0, pred=lambda s: True):
    deadline = time.monotonic() + timeout
    while True:
        for p in _status(daemon)["processes"]:
            s = p.get("session_stats")
            if p["pid"] == pid and s and pred(s):
                return s
        assert time.monotonic() < deadline, f"no session_stats for pid {pid}: {_status(daemon)}"
        time.sleep(0.2)


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
