"""Issue 9 item 5: metric data that could not be delivered while the daemon was down is kept
in a bounded backlog and delivered after it is back. A metric session (simulator workload,
native poller) outlives a `kill -9` of the daemon and its restart on the same socket
directory and port: every report interval of the outage reaches the restarted daemon (no gap
in the per-tick PluginStats timestamps). With a tiny backlog cap the oldest are dropped, and
the drops are counted: one plugin log line with the total, `dropped_offline` in `dyno status`
and in the stop line."""
import json
import re
import signal
import tempfile
import time

from conftest import Daemon, run_dyno
from plugin_util import Workload, data_lines, wait_registered
from waits import wait_until

FAST_RETRY = {"MSMONITOR_RETRY_INITIAL_S": "0.2", "MSMONITOR_RETRY_MAX_S": "1"}
OUTAGE_S = 3.0


def ticks(daemon, pid):
    """Timestamps (ns) of the PluginStats datagrams of `pid`: one per report interval."""
    return sorted(int(d["timestamp"]) for d in data_lines(daemon)
                  if d.get("kind") == "PluginStats" and d.get("pid") == pid)


def now_ns():
    return time.time_ns()


def status_entry(daemon, pid):
    r = run_dyno(daemon, "status")
    if r.returncode != 0 or "{" not in r.stdout:
        return {}
    line = next(l for l in r.stdout.splitlines() if l.startswith("{"))
    return next((p for p in json.loads(line)["processes"] if p["pid"] == pid), {})


def stop_session(daemon, w):
    """npu-monitor-stop, repeated until the restarted daemon applies it (it targets a process
    only once its re-registration and status reports are in); returns the plugin log."""
    def stop():
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-stop")
        effective = '"commandStatus":"effective"' in r.stdout
        assert r.returncode == (0 if effective else 5), r.stderr + r.stdout  # 5: reached no process yet
        return effective
    wait_until(stop, 20, "an effective npu-monitor-stop", lambda: w.plugin_log()[-3000:])
    return w.wait_plugin_log("MsptiMonitor session stats: ")


def start_session(daemon, w):
    wait_registered(daemon, w.p.pid)
    r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
                 "--mspti-activity-kind", "Kernel")
    assert r.returncode == 0, r.stderr + r.stdout
    w.wait_plugin_log("MsptiMonitor start successfully")
    wait_until(lambda: len(ticks(daemon, w.p.pid)) >= 2, 20, "two report ticks", lambda: daemon.log()[-3000:])


def outage(first, w):
    """kill -9 the daemon, keep it down OUTAGE_S, restart it on the same sockets and port.
    Returns (ticks the first daemon saw, kill time ns, restart time ns, the new daemon)."""
    first.stop(signal.SIGKILL)
    t_kill = now_ns()
    before = ticks(first, w.p.pid)          # the restarted daemon's log replaces this file
    time.sleep(OUTAGE_S)                     # the outage itself: nothing to wait for
    t_back = now_ns()
    second = Daemon(extra=["--use_JSON"], sockdir=first.sockdir, port=first.port)
    return before, t_kill, t_back, second


def test_outage_intervals_delivered_after_restart():
    first = Daemon(extra=["--use_JSON"])
    second = None
    w = Workload(first, tempfile.mkdtemp(prefix="mmbl"), extra_env=FAST_RETRY)
    try:
        start_session(first, w)
        before, t_kill, t_back, second = outage(first, w)
        pid = w.p.pid
        # the backlog reaches the new daemon, then the ticks go on
        wait_until(lambda: any(t > t_back + 2_000_000_000 for t in ticks(second, pid)), 30,
                   "ticks after the restart", lambda: second.log()[-3000:] + w.plugin_log()[-3000:])
        after = ticks(second, pid)
        inside = [t for t in after if t_kill < t < t_back]
        assert len(inside) >= int(OUTAGE_S) - 1, (inside, t_kill, t_back)
        # no gap of report intervals across the outage (1 s interval; slack for send retries)
        allts = sorted(set(before) | set(after))
        gaps = [(b - a) / 1e9 for a, b in zip(allts, allts[1:])]
        assert max(gaps) < 1.8, gaps
        # the kernel sums of those intervals came too, in order (oldest first)
        kernels = [int(d["timestamp"]) for d in data_lines(second) if d.get("kind") == "Kernel"]
        assert any(t_kill < t < t_back for t in kernels)
        assert after == [int(d["timestamp"]) for d in data_lines(second)
                         if d.get("kind") == "PluginStats" and d.get("pid") == pid]
        log = w.plugin_log()
        assert log.count("sending metric data to the daemon failed") == 1, log[-4000:]
        assert "sending metric data to the daemon works again" in log
        assert "dropped from the full backlog" not in log
        log = stop_session(second, w)
        assert re.search(r"MsptiMonitor session stats: .* dropped_offline=0 ", log), log[-2000:]
    finally:
        w.stop()
        first.stop()
        if second:
            second.stop()


def test_tiny_backlog_drops_oldest_and_counts():
    first = Daemon(extra=["--use_JSON"])
    second = None
    env = dict(FAST_RETRY, MSMONITOR_DATA_BACKLOG_BYTES="600")
    w = Workload(first, tempfile.mkdtemp(prefix="mmbl"), extra_env=env)
    try:
        start_session(first, w)
        before, t_kill, t_back, second = outage(first, w)
        pid = w.p.pid
        log = wait_until(lambda: (lambda l: l if "dropped from the full backlog" in l else None)(w.plugin_log()),
                         30, "the drop total line", lambda: w.plugin_log()[-3000:])
        assert log.count("backlog is full; dropping the oldest") == 1, log[-4000:]
        m = re.search(r"dyno: (\d+) metric datagrams dropped from the full backlog while the daemon was "
                      r"unreachable \((\d+) in total\)", log)
        assert m and int(m.group(1)) > 0 and m.group(1) == m.group(2), log[-3000:]
        dropped = int(m.group(1))
        # the session's counters carry them to the daemon and `dyno status`. The backlog is
        # delivered oldest first, and its payloads carry the counters of when they were built
        # (during the outage, before the last drops), so the status reaches the total only with
        # the first interval built after the reconnection.
        seen = []
        wait_until(lambda: seen.append((status_entry(second, pid).get("session_stats") or {})
                                       .get("dropped_offline")) or seen[-1] == dropped,
                   20, f"dropped_offline == {dropped} in dyno status", lambda: f"values seen: {seen}")
        assert all(v is None or v <= dropped for v in seen), seen  # never more than were dropped
        # what fit the cap (the newest of the outage) still arrived
        assert ticks(second, pid)
        log = stop_session(second, w)
        line = [l for l in log.splitlines() if "MsptiMonitor session stats: " in l][-1]
        assert f" dropped_offline={dropped} " in line and line.startswith("W"), line  # WARNING
    finally:
        w.stop()
        first.stop()
        if second:
            second.stop()
