"""libmsmonitor.so end to end in metric mode: real dynolog (--use_JSON), real dyno, the
simulator workload with the plugin's native poller. The daemon's data lines must carry exactly
the counts and summed durations of the simulator's ground truth."""
import collections
import os
import tempfile

from conftest import run_dyno
from plugin_util import Workload, data_lines, thread_names, wait_registered
from waits import wait_equal


def _start(daemon, *extra):
    r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", *extra)
    assert r.returncode == 0, r.stderr + r.stdout


def _stop(daemon):
    r = run_dyno(daemon, "npu-monitor", "--npu-monitor-stop")
    assert r.returncode == 0, r.stderr + r.stdout


def _truth_kernel_sums(recs):
    dur = collections.Counter()
    cnt = collections.Counter()
    for r in recs:
        if r["kind"] == "Kernel":
            dur[r["deviceId"]] += r["end"] - r["start"]
            cnt[r["name"]] += 1
    return dur, cnt


def _reported(daemon, kind):
    dur = collections.Counter()
    cnt = collections.Counter()
    for d in data_lines(daemon):
        if d.get("kind") == kind:
            dur[int(d["deviceId"])] += int(d["duration"])
        elif d.get("kind") == "OpStats" and d.get("activity") == kind:
            for op in d["ops"]:
                cnt[op["name"]] += int(op["count"])
    return dur, cnt


def _settled_kernels(daemon, truth_dur, truth_cnt):
    """The daemon's Kernel durations and counts reach the ground truth: the exited workload's
    final report may still be queued in the daemon's socket (waits.wait_equal)."""
    return wait_equal(lambda: _reported(daemon, "Kernel"), (truth_dur, truth_cnt), 30,
                      "the daemon's Kernel totals to match the ground truth")


def _run_to_exit(daemon, interval, steps="40"):
    """Monitor a workload of `steps` steps until it exits on its own: the atexit stop sends the
    final partial interval, and every device record has been appended by then."""
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(daemon, tmp, args=("--steps", steps))
    try:
        wait_registered(daemon, w.p.pid)
        _start(daemon, "--report-interval-s", interval, "--mspti-activity-kind", "Kernel,Marker")
        w.wait_plugin_log("MsptiMonitor start successfully")
        assert "MsptiMonitor" in thread_names(w.p.pid)
        w.p.wait(120)
    finally:
        w.stop()
    assert w.p.returncode == 0, w.log()
    return w


def test_metric_counts_match_ground_truth(daemon):
    w = _run_to_exit(daemon, "1")
    truth_dur, truth_cnt = _truth_kernel_sums(w.ground_truth())
    assert sum(truth_cnt.values()) > 0
    _settled_kernels(daemon, truth_dur, truth_cnt)
    assert "MsMonitorPoll" not in w.log()  # quiet by default: nothing but errors on stderr


def test_final_partial_interval_reported(daemon):
    """A long interval never ticks: everything arrives with the final report at stop (D6)."""
    w = _run_to_exit(daemon, "3600")
    truth_dur, truth_cnt = _truth_kernel_sums(w.ground_truth())
    assert sum(truth_cnt.values()) > 0
    _settled_kernels(daemon, truth_dur, truth_cnt)


def test_stop_command_mid_run(daemon):
    """An explicit stop while kernels are in flight: the thread goes away, what was reported
    is a subset of the ground truth (device records still in the pipeline may be missed)."""
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(daemon, tmp)
    try:
        wait_registered(daemon, w.p.pid)
        _start(daemon, "--report-interval-s", "1", "--mspti-activity-kind", "Kernel")
        w.wait_plugin_log("MsptiMonitor start successfully")
        daemon.wait_log('"kind":"Kernel"', timeout=20)
        _stop(daemon)
        w.wait_plugin_log("MsptiMonitor stop successfully")
        assert "MsptiMonitor" not in thread_names(w.p.pid)
        st = run_dyno(daemon, "status")
        assert '"npumonitor":"Idle"' in st.stdout, st.stdout
    finally:
        w.stop()
    _, truth_cnt = _truth_kernel_sums(w.ground_truth())
    _, cnt = _reported(daemon, "Kernel")
    assert sum(cnt.values()) > 0
    for name, n in cnt.items():
        assert n <= truth_cnt[name]


def test_duration_expiry_back_to_idle(daemon):
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(daemon, tmp)
    try:
        wait_registered(daemon, w.p.pid)
        _start(daemon, "--report-interval-s", "1", "--duration", "0.5", "--mspti-activity-kind", "Kernel")
        w.wait_plugin_log("MsptiMonitor run duration: 0.5s expired")
        w.wait_plugin_log("MsptiMonitor stop successfully")
        st = run_dyno(daemon, "status")
        assert '"npumonitor":"Idle"' in st.stdout, st.stdout
        # nputrace is accepted again
        tr = run_dyno(daemon, "nputrace", "--start-step", "10", "--iterations", "1", "--log-file", tmp)
        assert tr.returncode == 0, tr.stdout + tr.stderr
    finally:
        w.stop()


def test_invalid_config_keeps_running(daemon):
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(daemon, tmp)
    try:
        wait_registered(daemon, w.p.pid)
        # a log path that cannot be created: rejected, process keeps running, status Idle
        bad = os.path.join(tmp, "file")
        open(bad, "w").close()
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel",
                     "--log-file", os.path.join(bad, "sub"), "--wait-s", "60", timeout=120)
        # issue 22: dyno says so, with the process's reason, exit 3
        assert r.returncode == 3, r.stderr + r.stdout
        assert "rejected (Idle): outfile: cannot access log path" in r.stdout, r.stdout
        w.wait_plugin_log("Invalid log path, mspti monitor start failed")
        assert w.p.poll() is None
        _start(daemon, "--report-interval-s", "1", "--mspti-activity-kind", "Kernel")
        w.wait_plugin_log("MsptiMonitor start successfully")
    finally:
        w.stop()


def test_daemon_absent_at_start(make_daemon):
    sockdir = tempfile.mkdtemp(prefix="mmd", dir="/tmp")
    tmp = tempfile.mkdtemp(prefix="mmw")

    class _Env:
        def client_env(self):
            env = dict(os.environ)
            env["MSMONITOR_SOCKET_DIR"] = sockdir
            env["HOME"] = sockdir
            return env

    w = Workload(_Env(), tmp)
    try:
        w.wait_plugin_log("UNIX Socket path is not exist or not writable")
        d = make_daemon(extra=["--use_JSON"], sockdir=sockdir)
        wait_registered(d, w.p.pid)
        _start(d, "--report-interval-s", "1", "--mspti-activity-kind", "Kernel")
        w.wait_plugin_log("MsptiMonitor start successfully")
        d.wait_log('"kind":"Kernel"', timeout=20)
    finally:
        w.stop()
