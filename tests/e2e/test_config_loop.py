"""Issue 22: every command ends in a per-process outcome. Real dynolog, real dyno, simulated
ranks (mssim-train with libmsmonitor.so and the native poller): each case shows a line per
process with its outcome and reason, and dyno's exit code says whether all applied."""
import json
import os
import re
import subprocess
import tempfile
import time

import pytest

from conftest import binpath, run_dyno
from daemon_util import rpc_json
from plugin_util import Workload, wait_registered

# Short polls keep the 50 repetitions quick; waits are generous (a loaded machine), and dyno
# returns as soon as every process answered, so they cost nothing when things work.
POLL = {"MSMONITOR_POLL_INTERVAL_S": "0.2"}
WAIT = ("--wait-s", "60")


def outcomes(stdout):
    """The JSON outcome list dyno printed (`outcomes = [...]`), one per triggered process."""
    for line in stdout.splitlines():
        if line.startswith("outcomes = "):
            return json.loads(line[len("outcomes = "):])
    raise AssertionError("no outcomes line in:\n" + stdout)


def npu_monitor(daemon, *args):
    return run_dyno(daemon, "npu-monitor", *args, timeout=120)


def workloads(daemon, n, extra_env=None):
    ws = []
    for i in range(n):
        env = dict(POLL, RANK=str(i))
        env.update(extra_env or {})
        w = Workload(daemon, tempfile.mkdtemp(prefix="mcl"), extra_env=env)
        ws.append(w)
    for w in ws:
        wait_registered(daemon, w.p.pid)
    return ws


def wait_status(daemon, pid, want, timeout=60.0):
    """The process's npumonitor status in getStatus reaches `want`."""
    deadline = time.monotonic() + timeout
    while True:
        st = rpc_json(daemon.port, {"fn": "getStatus"}) or {}
        for p in st.get("processes", []):
            if p["pid"] == pid and p["npumonitor"] == want:
                return p
        if time.monotonic() > deadline:
            raise AssertionError(f"pid {pid} never reached {want}: {st}")
        time.sleep(0.05)


@pytest.fixture
def one(daemon):
    ws = workloads(daemon, 1)
    yield ws[0]
    for w in ws:
        w.stop()


def test_start_applied_and_status_shows_config(daemon, one):
    r = npu_monitor(daemon, "--npu-monitor-start", *WAIT)
    assert r.returncode == 0, r.stdout + r.stderr
    [o] = outcomes(r.stdout)
    assert (o["pid"], o["rank"], o["outcome"], o["state"], o["host"]) == (
        one.p.pid, 0, "applied", "Running", "localhost")
    assert re.search(r"^Outcome: localhost pid %d rank 0: applied \(Running\)$" % one.p.pid, r.stdout, re.M)
    assert "Outcomes: 1 applied, 0 rejected" in r.stdout
    # getStatus keeps the last config per process under its own key
    p = wait_status(daemon, one.p.pid, "Running")
    assert p["config"]["outcome"] == "applied" and p["config"]["state"] == "Running"
    assert re.fullmatch(r"\d+", p["config"]["id"])
    r = npu_monitor(daemon, "--npu-monitor-stop", *WAIT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert outcomes(r.stdout)[0]["state"] == "Idle"


def test_case1_stop_right_after_start_is_never_lost(daemon, one):
    """Case 1, 50 times: a start at once followed by a stop; the stop always wins, the start
    is either applied or reported superseded, and the process ends Idle every time."""
    seen = set()
    for i in range(50):
        r1 = npu_monitor(daemon, "--npu-monitor-start", "--no-wait")
        assert r1.returncode == 0, r1.stdout + r1.stderr
        assert "outcomes = " not in r1.stdout          # --no-wait returns at once
        r2 = npu_monitor(daemon, "--npu-monitor-stop", *WAIT)
        assert r2.returncode == 0, (i, r2.stdout, r2.stderr)
        [o] = outcomes(r2.stdout)
        assert (o["outcome"], o["state"]) == ("applied", "Idle"), (i, r2.stdout)
        p = wait_status(daemon, one.p.pid, "Idle")
        seen.add(p["config"]["outcome"])
    assert seen == {"applied"}
    # the replaced starts were reported: the daemon says which ones it superseded
    assert one.plugin_log().count("MsptiMonitor start successfully") <= 50


def test_superseded_start_reports_exit_code(daemon, one):
    """The first of two commands sent within one poll is reported superseded, exit 3."""
    # stop the poller's clock: a SIGSTOPped process cannot poll between the two commands
    os.kill(one.p.pid, 19)
    try:
        r1 = npu_monitor(daemon, "--npu-monitor-start", "--no-wait")
        assert r1.returncode == 0
        r2 = npu_monitor(daemon, "--npu-monitor-start", "--wait-s", "0.5")
    finally:
        os.kill(one.p.pid, 18)
    # the second command itself was not answered in time: exit 4, "no answer"
    assert r2.returncode == 4, r2.stdout + r2.stderr
    assert outcomes(r2.stdout)[0]["outcome"] == "no answer"
    st = rpc_json(daemon.port, {"fn": "getStatus"})
    # a third command while the second is pending: the second becomes superseded; run with
    # the process still stopped so nothing can poll in between
    os.kill(one.p.pid, 19)
    try:
        tok = "supersede-test"
        rep = rpc_json(daemon.port, {"fn": "setKinetOnDemandRequest", "pids": [0], "job_id": 0,
                                     "config": "NPU_MONITOR_START=true\nNPU_MONITOR_STOP=false",
                                     "client_token": tok})
        assert rep["activityProfilersTriggered"] == [one.p.pid] and rep["processesSkipped"] == 0
        rpc_json(daemon.port, {"fn": "setKinetOnDemandRequest", "pids": [0], "job_id": 0,
                               "config": "NPU_MONITOR_START=false\nNPU_MONITOR_STOP=true"})
        got = rpc_json(daemon.port, {"fn": "getConfigOutcomes", "client_token": tok})["outcomes"]
    finally:
        os.kill(one.p.pid, 18)
    assert [(g["pid"], g["outcome"]) for g in got] == [(one.p.pid, "superseded")]
    assert got[0]["reason"] == "replaced by a newer command before the process polled"
    assert st is not None


def test_case2_start_with_new_settings_restarts(daemon, one, tmp_path):
    """Case 2: a start with another --log-file (and --duration) during a session restarts it
    with the new settings; directory B is created and the duration expires."""
    a, b = tmp_path / "A", tmp_path / "B"
    r = npu_monitor(daemon, "--npu-monitor-start", "--log-file", str(a), *WAIT)
    assert r.returncode == 0, r.stdout + r.stderr
    r = npu_monitor(daemon, "--npu-monitor-start", "--log-file", str(b), "--duration", "1", *WAIT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert outcomes(r.stdout)[0]["state"] == "Running"
    one.wait_plugin_log("restarting the session")
    assert b.is_dir()
    # the old session's files were closed before the new one opened (one stop line each)
    one.wait_plugin_log("MsptiMonitor stop successfully")
    # the new duration runs out: the process goes Idle by itself
    one.wait_plugin_log("MsptiMonitor run duration: 1s expired", timeout=60)
    wait_status(daemon, one.p.pid, "Idle")


def test_case5_every_process_triggered_and_process_limit(daemon):
    ws = workloads(daemon, 5)
    try:
        r = npu_monitor(daemon, "--npu-monitor-start", *WAIT)
        assert r.returncode == 0, r.stdout + r.stderr
        o = outcomes(r.stdout)
        assert sorted(x["pid"] for x in o) == sorted(w.p.pid for w in ws)
        assert {x["outcome"] for x in o} == {"applied"}
        r = npu_monitor(daemon, "--npu-monitor-stop", "--process-limit", "2", *WAIT)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Matched 5 processes; 3 skipped by --process-limit (not triggered)" in r.stdout
        assert len(outcomes(r.stdout)) == 2
        assert '"processesSkipped":3' in r.stdout
    finally:
        for w in ws:
            w.stop()


def test_unknown_key_is_named_in_the_outcome(daemon, one):
    """Item 5: a typo in a key (NPU_MONITR_FILTER) is named in the outcome instead of passing
    silently; the rest of the config applies. (Case 7, a filter that keeps nothing, is a valid
    config: its mark is the status's filter_keeps_nothing.)"""
    cfg = ("NPU_MONITOR_START=true\nNPU_MONITOR_STOP=false\nMSPTI_ACTIVITY_KIND=Marker\n"
           "NPU_MONITR_FILTER=Kernel:MatMul")
    tok = "typo-1"
    rpc_json(daemon.port, {"fn": "setKinetOnDemandRequest", "pids": [0], "job_id": 0,
                           "config": cfg, "client_token": tok})
    deadline = time.monotonic() + 60
    while True:
        got = rpc_json(daemon.port, {"fn": "getConfigOutcomes", "client_token": tok})["outcomes"]
        if got and got[0]["outcome"] == "applied":
            break
        assert time.monotonic() < deadline, got
        time.sleep(0.05)
    assert got[0]["reason"] == "unknown key 'NPU_MONITR_FILTER' ignored"
    r = npu_monitor(daemon, "--npu-monitor-stop", *WAIT)
    assert r.returncode == 0


def test_case8_config_without_duration_applies_with_defaults(daemon, one):
    """Case 8: an older dyno sends no DURATION (nor export type): applied with defaults."""
    tok = "old-dyno"
    rpc_json(daemon.port, {"fn": "setKinetOnDemandRequest", "pids": [0], "job_id": 0,
                           "config": "NPU_MONITOR_START=true\nNPU_MONITOR_STOP=false\n"
                                     "REPORT_INTERVAL_S=60\nMSPTI_ACTIVITY_KIND=Marker",
                           "client_token": tok})
    deadline = time.monotonic() + 60
    while True:
        got = rpc_json(daemon.port, {"fn": "getConfigOutcomes", "client_token": tok})["outcomes"]
        if got and got[0]["outcome"] not in ("pending", "delivered"):
            break
        assert time.monotonic() < deadline, got
        time.sleep(0.05)
    assert (got[0]["outcome"], got[0]["state"], got[0]["reason"]) == ("applied", "Running", "")
    assert "Missing required key" not in one.plugin_log()
    assert npu_monitor(daemon, "--npu-monitor-stop", *WAIT).returncode == 0


def test_invalid_value_rejected_with_reason(daemon, one):
    """A value the plugin refuses is rejected with the job log's own line; exit 3."""
    rpc_json(daemon.port, {"fn": "setKinetOnDemandRequest", "pids": [0], "job_id": 0,
                           "config": "NPU_MONITOR_START=true\nDURATION=soon", "client_token": "bad-1"})
    deadline = time.monotonic() + 60
    while True:
        got = rpc_json(daemon.port, {"fn": "getConfigOutcomes", "client_token": "bad-1"})["outcomes"]
        if got and got[0]["outcome"] == "rejected":
            break
        assert time.monotonic() < deadline, got
        time.sleep(0.05)
    assert got[0]["reason"] == "Invalid value for DURATION = 'soon' (decimal number of seconds)"
    assert got[0]["state"] == "Idle"


def test_backend_cannot_enable_kind_is_rejected(daemon):
    """Issue item 8 (outcome half): a kind the vendor library refuses is a rejection naming
    the backend and kind, not Running with 0 records; the session it would start is stopped."""
    [w] = workloads(daemon, 1, extra_env={"MSSIM_PROFILE": "8.0"})
    try:
        # msPTI 8.0 knows Marker, Kernel and API only
        r = npu_monitor(daemon, "--npu-monitor-start", "--mspti-activity-kind", "Memory", *WAIT)
        assert r.returncode == 3, r.stdout + r.stderr
        [o] = outcomes(r.stdout)
        assert o["outcome"] == "rejected" and o["state"] == "Idle", o
        assert o["reason"].startswith("mspti could not enable Memory: MsptiMonitor enableActivity failed, "
                                      "kind: Memory"), o
        assert re.search(r"^Outcome: localhost pid %d rank 0: rejected \(Idle\): mspti could not enable Memory"
                         % w.p.pid, r.stdout, re.M)
        # and the process is Idle, not Running with nothing enabled
        wait_status(daemon, w.p.pid, "Idle")
    finally:
        w.stop()


def test_no_process_answer_exit_code(daemon, one):
    """A process that cannot answer (stopped) is 'no answer' after --wait-s, exit 4."""
    os.kill(one.p.pid, 19)
    try:
        r = npu_monitor(daemon, "--npu-monitor-start", "--wait-s", "0.3")
    finally:
        os.kill(one.p.pid, 18)
    assert r.returncode == 4, r.stdout + r.stderr
    [o] = outcomes(r.stdout)
    assert o["outcome"] == "no answer"
    assert "not delivered: the process did not poll within 0.3 s" in o["reason"]
    assert '"commandStatus":"effective"' in r.stdout   # kept, for scripts that grep it


def test_wait_ends_at_the_command_deadline(daemon, one):
    """--timeout-s bounds the whole command, the outcome wait included: with --wait-s far
    beyond it, dyno gives up at --timeout-s (no answer, exit 4) and opens no connection past
    it (each used to reach the daemon as an empty frame: 'Invalid message size = 0')."""
    os.kill(one.p.pid, 19)
    try:
        r = run_dyno(daemon, "--timeout-s", "5", "npu-monitor", "--npu-monitor-start", "--wait-s", "600",
                     timeout=120)
    finally:
        os.kill(one.p.pid, 18)
    assert r.returncode == 4, r.stdout + r.stderr
    [o] = outcomes(r.stdout)
    assert o["outcome"] == "no answer"
    assert "Invalid message size" not in daemon.log()


def test_unacknowledged_client(daemon):
    """A client that never acknowledges (the upstream plugin, Kineto) keeps working: it gets
    the config, and dyno reports delivered (unacknowledged) with exit code 0."""
    from ipcclient import IpcClient
    c = IpcClient(daemon.sockdir)
    try:
        assert c.register(npu=0) is not None
        c.status("trace", "Idle")
        c.status("monitor", "Idle")
        assert c.poll() == ""
        argv = [binpath("dyno"), "--hostname", "localhost", "--port", str(daemon.port),
                "npu-monitor", "--npu-monitor-start", *WAIT]
        p = subprocess.Popen(argv, env=daemon.client_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            cfg = ""
            while "NPU_MONITOR_START=true" not in (cfg or ""):
                assert time.monotonic() < deadline, "the config never arrived"
                cfg = c.poll(timeout=0.2)
            assert "REQUEST_TRACE_ID=" in cfg
            out, err = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert p.returncode == 0, out + err
        [o] = outcomes(out)
        assert (o["pid"], o["outcome"]) == (os.getpid(), "delivered (unacknowledged)")
        st = rpc_json(daemon.port, {"fn": "getStatus"})
        [q] = [q for q in st["processes"] if q["pid"] == os.getpid()]
        assert q["config"]["outcome"] == "delivered (unacknowledged)"
    finally:
        c.close()


def test_case3_nputrace_start_step_passed_is_rejected(daemon, tmp_path):
    """Case 3: dyno-mode ranks already past --start-step: the creator rank rejects the config
    with its log line, dyno prints it and exits 3 (no 'Trace output files' promise kept)."""
    from dyn_util import dyn_rank, plugin_log, rank_env, wait_until
    from conftest import Proc
    shm = tmp_path / "shm"
    shm.mkdir()
    logdir = tmp_path / "rank0"
    logdir.mkdir()
    env = rank_env(daemon.client_env(), shm, logdir, 0, MSSIM_WL_RATE=20, WORLD_SIZE=1,
                   MSSIM_CHECK_PRELOAD=0, MSMONITOR_POLL_INTERVAL_S="0.2")
    p = Proc([dyn_rank()], env=env, logname="rank0", tmpdir=str(logdir))
    try:
        p.wait_log("init 0", timeout=30)

        def step():
            st = rpc_json(daemon.port, {"fn": "getStatus"}) or {}
            return max([q["current_step"] for q in st.get("processes", []) if q["pid"] == p.p.pid] or [-1])
        wait_until(lambda: step() >= 3, 60, "the rank to pass step 3", lambda: plugin_log(logdir))
        r = run_dyno(daemon, "nputrace", "--start-step", "1", "--iterations", "2",
                     "--log-file", str(tmp_path / "out"), *WAIT, timeout=120)
        assert r.returncode == 3, r.stdout + r.stderr
        [o] = outcomes(r.stdout)
        assert (o["pid"], o["outcome"]) == (p.p.pid, "rejected"), o
        assert "start step 1 already passed" in o["reason"], o
        assert '"commandStatus":"effective"' in r.stdout
    finally:
        p.stop(timeout=30)


def test_option_not_for_this_target_is_named(daemon, one, tmp_path):
    """Item 5: --async-mode on a process that is not PyTorch: applied, and the outcome names
    the option that does not apply."""
    r = run_dyno(daemon, "nputrace", "--start-step", "-1", "--iterations", "2", "--log-file",
                 str(tmp_path / "t"), "--analyse", "--async-mode", *WAIT, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    [o] = outcomes(r.stdout)
    assert (o["outcome"], o["state"]) == ("applied", "Ready"), o
    assert o["reason"] == "--async-mode applies to PyTorch processes only; ignored by this native process"
