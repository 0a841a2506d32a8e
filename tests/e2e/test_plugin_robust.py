"""libmsmonitor.so under adverse conditions, end to end: kind replacement while running, a
daemon restart while monitoring, invalid configs, buffer pool exhaustion, msPTI errors and
missing/minimal msPTI libraries. Real dynolog (--use_JSON), real dyno, the simulator (the
mssim-train workload or a Python driver of its bulk producer) with the native poller."""
import collections
import os
import signal
import tempfile
import time

from conftest import binpath, run_dyno
from daemon_util import set_config
from plugin_util import (FillWorkload, Workload, data_lines, kinds_after, thread_names,
                         wait_registered)
from waits import wait_until

KERNEL_MASK = 1 << 2
EXHAUSTED = "Buffer allocation exhausted, allocCnt: 32"


# The result is named by msptiGetResultString when the library has it, else by our table.
ENABLE_FAILED = "MsptiMonitor enableActivity failed, kind: {} ({})"
PRELOAD_HINT = "; this kind needs libmspti.so in LD_PRELOAD (CANN < 9.0.0, see FAQ)"


def _wait_any(w, lines, timeout=20.0):
    """Wait until one of the exact `lines` is in the plugin log."""
    wait_until(lambda: any(line in w.plugin_log() for line in lines), timeout, f"one of {lines}",
               diag=lambda: w.plugin_log()[-4000:])


def _start(daemon, kinds, *extra, interval="1"):
    r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--report-interval-s", interval,
                 "--mspti-activity-kind", kinds, *extra)
    assert r.returncode == 0, r.stderr + r.stdout


def _start_rejected(daemon, kinds, reason, code=3):
    """A start the process refuses is exit 3 with its reason; one it takes only in part is
    `applied, partly` with what is missing, exit 6 (docs/cli.md#outcomes-and-exit-codes)."""
    r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
                 "--mspti-activity-kind", kinds, "--wait-s", "60", timeout=120)
    assert r.returncode == code, r.stderr + r.stdout
    assert reason in r.stdout, r.stdout
    return r


def _stop(daemon):
    r = run_dyno(daemon, "npu-monitor", "--npu-monitor-stop")
    assert r.returncode == 0, r.stderr + r.stdout


def _monitor_status(daemon):
    st = run_dyno(daemon, "status")
    assert st.returncode == 0, st.stderr
    return st.stdout


def _kernel_count(daemon):
    return sum(int(op["count"]) for d in data_lines(daemon)
               if d.get("kind") == "OpStats" and d.get("activity") == "Kernel" for op in d["ops"])


def _config(**over):
    """Raw npu-monitor config text as dyno would send it, with fields overridden (None drops)."""
    cfg = collections.OrderedDict([
        ("NPU_MONITOR_START", "true"), ("NPU_MONITOR_STOP", "false"), ("REPORT_INTERVAL_S", "1"),
        ("DURATION", "0"), ("MSPTI_ACTIVITY_KIND", "Kernel"), ("NPU_MONITOR_LOG_FILE", ""),
        ("NPU_MONITOR_EXPORT_TYPE", "DB"), ("NPU_MONITOR_FILTER", ""),
    ])
    for k, v in over.items():
        if v is None:
            cfg.pop(k)
        else:
            cfg[k] = v
    return "".join(f"{k}={v}\n" for k, v in cfg.items())


def test_kind_replacement_while_running(daemon):
    """A new command's kind list replaces the enabled set: after the change only the new kinds
    are reported; the MsptiMonitor thread lives exactly while the session runs."""
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(daemon, tmp)
    try:
        wait_registered(daemon, w.p.pid)
        assert "MsptiMonitor" not in thread_names(w.p.pid)
        _start(daemon, "Kernel")
        w.wait_plugin_log("MsptiMonitor start successfully")
        assert "MsptiMonitor" in thread_names(w.p.pid)
        daemon.wait_log('"kind":"Kernel"', timeout=20)
        _start(daemon, "AclAPI,Communication")
        w.wait_plugin_log("Received NPU configuration successfully", count=2)
        t_change = time.time_ns()
        wait_until(lambda: len(kinds_after(daemon, t_change)) >= 4, 60, "four kinds after the change",
                   diag=lambda: daemon.log()[-4000:])
        assert w.plugin_log().count("MsptiMonitor start successfully") == 1  # same session
        _stop(daemon)
        w.wait_plugin_log("MsptiMonitor stop successfully")
        assert "MsptiMonitor" not in thread_names(w.p.pid)
        assert w.p.poll() is None
    finally:
        w.stop()
    after = kinds_after(daemon, t_change)
    # the report in flight at the change still carries the Kernel records collected before it;
    # later reports hold only the new kinds (a report may lack one of them, e.g. the final
    # partial interval right after a tick holds only late device-side Communication records)
    # (t_change is taken when the config is received, just before it is applied, so a tick can
    # fall in between: allow Kernel in the first two reports after it, never later)
    seen = set()
    for ts, kinds in after[2:]:
        assert kinds <= {"AclAPI", "Communication"}, (ts, kinds)
        seen |= kinds
    assert seen == {"AclAPI", "Communication"}


def test_daemon_restart_while_monitoring(make_daemon):
    """Kill dynolog while a session runs; a new dynolog on the same socket directory and port
    gets the registration, the Running status and the data, without restarting the job."""
    d1 = make_daemon(extra=["--use_JSON"])
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(d1, tmp)
    try:
        wait_registered(d1, w.p.pid)
        _start(d1, "Kernel")
        w.wait_plugin_log("MsptiMonitor start successfully")
        d1.wait_log('"kind":"Kernel"', timeout=20)
        d1.stop(sig=signal.SIGKILL)
        d2 = make_daemon(extra=["--use_JSON"], sockdir=d1.sockdir, port=d1.port)
        wait_registered(d2, w.p.pid)
        w.wait_plugin_log("registering again")
        d2.wait_log('"kind":"Kernel"', timeout=20)
        wait_until(lambda: '"npumonitor":"Running"' in _monitor_status(d2), 30, "npumonitor Running",
                   diag=lambda: _monitor_status(d2), interval=0.2)
        assert w.p.poll() is None
        _stop(d2)
        w.wait_plugin_log("MsptiMonitor stop successfully")
        assert w.plugin_log().count("MsptiMonitor start successfully") == 1
    finally:
        w.stop()
    assert w.p.returncode == 0, w.log()


def test_invalid_raw_configs_rejected(daemon):
    """Configs dyno would never send, delivered raw through the daemon: each is rejected with
    the docs/design/session.md#applying-a-config log line, nothing starts, no status is reported, the process keeps running."""
    cases = [
        # issue 22: only NPU_MONITOR_START is required; an absent key takes its default
        (_config(NPU_MONITOR_STOP="maybe"), "Invalid value for NPU_MONITOR_STOP = 'maybe' (true or false)"),
        (_config(MSPTI_ACTIVITY_KIND="Kernel,kernel"),
         "Invalid value for MSPTI_ACTIVITY_KIND = 'Kernel,kernel' (comma list of Marker, Kernel, API, "
         "Hccl, Memory, MemSet, MemCpy, Communication, AclAPI, NodeAPI, RuntimeAPI)"),
        (_config(REPORT_INTERVAL_S="4294967296"),
         "Invalid value for REPORT_INTERVAL_S = '4294967296' (digits only, at most 4294967295)"),
        (_config(DURATION="1e3"), "Invalid value for DURATION = '1e3' (decimal number of seconds)"),
        (_config(NPU_MONITOR_FILTER="Kernel:" + "M" * 1020),
         "Invalid value for NPU_MONITOR_FILTER = 'Kernel:MMM"),
    ]
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(daemon, tmp)
    try:
        wait_registered(daemon, w.p.pid)
        for cfg, line in cases:
            rep = set_config(daemon.port, cfg, pids=[0])
            assert rep is not None
            w.wait_plugin_log(line)
            assert w.p.poll() is None
        assert "MsptiMonitor start successfully" not in w.plugin_log()
        assert '"npumonitor":"Idle"' in _monitor_status(daemon)
        # still serviceable
        set_config(daemon.port, _config(), pids=[0])
        w.wait_plugin_log("MsptiMonitor start successfully")
        daemon.wait_log('"kind":"Kernel"', timeout=20)
    finally:
        w.stop()
    assert w.p.returncode == 0, w.log()


def test_invalid_flags_rejected_by_dyno_before_the_node(daemon):
    """dyno refuses what the plugin would reject (bad kind, over-long filter): nothing reaches
    the node, whose session keeps running undisturbed."""
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(daemon, tmp)
    try:
        wait_registered(daemon, w.p.pid)
        _start(daemon, "Kernel")
        w.wait_plugin_log("MsptiMonitor start successfully")
        for args in (["--mspti-activity-kind", "kernel"], ["--filter", "Kernel:" + "x" * 1100]):
            r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", *args)
            assert r.returncode != 0, r.stdout
        n = _kernel_count(daemon)
        wait_until(lambda: _kernel_count(daemon) > n, 60, "more kernels (the session still runs)")
        assert w.plugin_log().count("Received NPU configuration successfully") == 1
        assert w.p.poll() is None
    finally:
        w.stop()


def test_buffer_exhaustion_drops_without_crash(daemon):
    """4 KiB buffers and bursts of 50000 records: all 32 buffers are outstanding before the
    simulator completes any, requests are declined with the FAQ line, the simulator counts the
    drops, and every record that was appended is still reported."""
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = FillWorkload(daemon, tmp, KERNEL_MASK, 50000, 0.05,
                     extra_env={"MSMONITOR_TEST_BUFFER_SIZE": "4096"})
    try:
        wait_registered(daemon, w.p.pid)
        _start(daemon, "Kernel")
        w.wait_plugin_log("MsptiMonitor start successfully")
        w.wait_plugin_log(EXHAUSTED)
        n = len(data_lines(daemon))
        daemon.wait_log('"kind":"Kernel"', timeout=20,
                        count=daemon.log().count('"kind":"Kernel"') + 2)  # monitoring continues
        assert len(data_lines(daemon)) > n
        assert w.p.poll() is None
    finally:
        stats = w.finish()
    assert w.p.returncode == 0, w.log()
    assert stats["records_dropped_declined"] > 0 and stats["buffers_declined"] > 0, stats
    assert stats["records_appended"] > 0
    assert _kernel_count(daemon) == stats["records_appended"]
    assert "MsptiMonitor stop successfully" in w.plugin_log()


def test_enable_error_profile_8_0_hccl(daemon):
    """msPTI 8.0 knows no Hccl kind (invalid parameter): the exact enableActivity error, the
    other kinds of the command are still enabled."""
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(daemon, tmp, extra_env={"MSSIM_PROFILE": "8.0"})
    try:
        wait_registered(daemon, w.p.pid)
        # the start applies partly, naming the kind, and runs with the kinds that could be enabled
        _start_rejected(daemon, "Kernel,Hccl", "applied, partly (Running): Hccl not enabled (mspti could not enable "
                                               "Hccl: MsptiMonitor enableActivity failed, kind: Hccl", code=6)
        _wait_any(w, [ENABLE_FAILED.format("Hccl", r) for r in
                      ("MSPTI_ERROR_INVALID_PARAMETER", "One or more of the parameters is invalid.")])
        daemon.wait_log('"kind":"Kernel"', timeout=20)
        assert '"npumonitor":"Running"' in _monitor_status(daemon)
    finally:
        w.stop()
    assert not [d for d in data_lines(daemon) if d.get("kind") == "Hccl"]


def test_enable_error_26_0_without_preload(daemon):
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(daemon, tmp, extra_env={"MSSIM_PROFILE": "26.0"})
    try:
        wait_registered(daemon, w.p.pid)
        _start_rejected(daemon, "Memory,Kernel", "applied, partly (Running): Memory not enabled (mspti could not "
                                                 "enable Memory: MsptiMonitor enableActivity failed, kind: Memory",
                        code=6)
        _wait_any(w, [ENABLE_FAILED.format("Memory", r) + PRELOAD_HINT for r in
                      ("MSPTI_ERROR_WITHOUT_LD_PRELOAD", "The operation requires LD_PRELOAD injection.")])
        daemon.wait_log('"kind":"Kernel"', timeout=20)
    finally:
        w.stop()
    assert not [d for d in data_lines(daemon) if d.get("kind") == "Memory"]


def test_mspti_lib_missing(daemon):
    """MSMONITOR_MSPTI_LIB is authoritative: a missing file means no backend, the start is
    refused with the docs/design/session.md#backends line, the status stays Idle and the job runs on."""
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(daemon, tmp, extra_env={"MSMONITOR_MSPTI_LIB": os.path.join(tmp, "nope", "libmspti.so")})
    try:
        wait_registered(daemon, w.p.pid)
        _start_rejected(daemon, "Kernel", "rejected (Idle): msPTI library not found")
        w.wait_plugin_log("msPTI library not found, mspti monitor start failed")
        assert "MsptiMonitor start successfully" not in w.plugin_log()
        assert "MsptiMonitor" not in thread_names(w.p.pid)
        assert '"npumonitor":"Idle"' in _monitor_status(daemon)
        assert w.p.poll() is None
    finally:
        w.stop()
    assert w.p.returncode == 0, w.log()


def test_mspti_minimal_library(daemon):
    """libmspti_minimal.so (only the mandatory symbols): the session works, every record the
    simulator appended is reported."""
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = FillWorkload(daemon, tmp, KERNEL_MASK, 2000, 0.05, sim_lib=binpath("libmspti_minimal.so"))
    try:
        wait_registered(daemon, w.p.pid)
        _start(daemon, "Kernel")
        w.wait_plugin_log("MsptiMonitor start successfully")
        assert "libmspti_minimal.so" in w.plugin_log()
        daemon.wait_log('"kind":"Kernel"', timeout=20, count=2)
    finally:
        stats = w.finish()
    assert w.p.returncode == 0, w.log()
    assert stats["records_appended"] > 0
    assert _kernel_count(daemon) == stats["records_appended"]


def test_daemon_absent_logged_once(make_daemon):
    """While no daemon listens the poller retries every 2 s; only the first failure is an
    ERROR (and reaches the job's stderr), repeats are DEBUG, the recovery is logged once."""
    sockdir = tempfile.mkdtemp(prefix="mmd", dir="/tmp")
    tmp = tempfile.mkdtemp(prefix="mmw")

    class _Env:
        def client_env(self):
            env = dict(os.environ)
            env.update({"MSMONITOR_SOCKET_DIR": sockdir, "HOME": sockdir})
            return env

    w = Workload(_Env(), tmp, extra_env={"MSMONITOR_LOG_LEVEL": "DEBUG"})
    try:
        w.wait_plugin_log("Failed to send register ctxt", count=3)
        log = w.plugin_log().splitlines()
        errors = [line for line in log if line.startswith("E")]
        assert len([e for e in errors if "Failed to send register ctxt" in e]) == 1, errors
        assert len([e for e in errors if "not exist or not writable" in e]) == 1, errors
        assert w.log().count("Failed to send register ctxt") == 1
        d = make_daemon(extra=["--use_JSON"], sockdir=sockdir)
        wait_registered(d, w.p.pid)
        w.wait_plugin_log("dyno: the daemon is reachable again")
        _start(d, "Kernel")
        w.wait_plugin_log("MsptiMonitor start successfully")
    finally:
        w.stop()


_LOAD_ONLY = r"""
import ctypes, glob, json, os, sys, time

def threads():
    out = []
    for comm in glob.glob("/proc/self/task/*/comm"):
        try:
            out.append(open(comm).read().strip())
        except OSError:
            pass
    return sorted(out)

before = threads()
lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
after_load = threads()
rc = lib.msmon_native_poll_start()
deadline = time.monotonic() + float(sys.argv[2])
while "MsMonitorPoll" not in threads() and time.monotonic() < deadline:
    time.sleep(0.01)
after_start = threads()
lib.msmon_native_poll_stop()
print(json.dumps({"before": before, "after_load": after_load, "rc": rc, "after_start": after_start}))
"""


def test_loading_starts_nothing(daemon):
    """Issue 24 item 6: no thread is started from the library's constructor, even with the
    native-poller variables set; the poller starts at the first call that asks for it
    (docs/plugin.md). Fails if a constructor starts the poller: its thread would be listed
    right after the load."""
    import subprocess
    from python_util import PYTHON, last_json
    from waits import TIMEOUT_SCALE
    env = daemon.client_env(MSMONITOR_USE_DAEMON="1", MSMONITOR_NATIVE_POLL="1",
                            MSMONITOR_MSPTI_LIB=binpath("libmspti.so"))
    r = subprocess.run([PYTHON, "-c", _LOAD_ONLY, binpath("libmsmonitor.so"), str(30 * TIMEOUT_SCALE)],
                       env=env, capture_output=True, text=True, timeout=120 * TIMEOUT_SCALE)
    assert r.returncode == 0, r.stderr[-3000:]
    got = last_json(r.stdout)
    assert got["after_load"] == got["before"], got
    assert got["rc"] == 0 and "MsMonitorPoll" in got["after_start"], (got, r.stderr[-3000:])
