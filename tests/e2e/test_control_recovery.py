"""The control layer's poller never gives up (docs/design/session.md#control-sources, docs/design/ipc.md#shared-memory-handoff, docs/plugin.md "Daemon
absent or restarted"): a job started before the daemon registers once the daemon is up and is
monitored; a daemon killed mid-job (stale socket) and restarted gets the job back; a job killed
with `kill -9` leaves its segment, and the next job in the same hour takes it over (one
WARNING), registers and is monitored. C ranks (dyn_rank) and the Python module (mssim.train)."""
import glob
import json
import os
import shutil
import signal
import tempfile
import time

import pytest

from conftest import Proc, run_dyno
from dyn_util import dyn_rank, plugin_log, rank_env
from python_util import PYTHON, py_env, require_packages
from waits import wait_polling, wait_until

PREFIX = "DynamicProfileNpuShm"
FAST_RETRY = {"MSMONITOR_RETRY_INITIAL_S": "0.2", "MSMONITOR_RETRY_MAX_S": "1"}


class Job:
    """Two dyn_rank ranks sharing one segment directory."""

    def __init__(self, base_env, shm, root, name):
        self.ranks = []
        for r in (0, 1):
            d = root / f"{name}{r}"
            d.mkdir()
            p = Proc([dyn_rank()], env=rank_env(base_env, shm, d, r, **FAST_RETRY), logname="rank", tmpdir=str(d))
            self.ranks.append((p, d))
        for p, _ in self.ranks:
            p.wait_log("init 0", timeout=30)

    def logs(self):
        return [plugin_log(d) for _, d in self.ranks]

    def creator(self):
        found = [p for p, d in self.ranks if "as creator" in plugin_log(d)]
        assert len(found) == 1, self.logs()
        return found[0]

    def creator_log(self):
        return plugin_log([d for p, d in self.ranks if p is self.creator()][0])

    def stop(self, sig=signal.SIGTERM):
        return [p.stop(sig, timeout=30) for p, _ in self.ranks]


def jsonl_kernels(out, pid):
    n = 0
    for f in glob.glob(os.path.join(str(out), f"msmonitor_{pid}_*.jsonl")):
        with open(f) as fh:
            n += sum(1 for line in fh if line.endswith("\n") and json.loads(line).get("kind") == "Kernel")
    return n


def monitor_and_expect_data(daemon, pids, out, diag):
    """npu-monitor start answers effective and each pid writes kernel records."""
    t = int(time.time())
    # A rank acts on a config only if its whole-second time is later than the second it
    # joined in (docs/design/ipc.md#ranks).
    wait_until(lambda: int(time.time()) > t, 2, "the next second")
    r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel",
                 "--report-interval-s", "1", "--log-file", str(out), "--export-type", "Jsonl")
    assert '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr
    wait_until(lambda: all(jsonl_kernels(out, pid) > 0 for pid in pids), 30, "kernel records from every rank", diag)


def polling_pids(daemon):
    o = run_dyno(daemon, "status").stdout
    s = json.loads(o[o.index("{"):]) if "{" in o else {}
    return [p["pid"] for p in s.get("processes", []) if p.get("polling")]


@pytest.fixture
def sockdir():
    d = tempfile.mkdtemp(prefix="mmd", dir="/tmp")  # short: sun_path holds 108 bytes
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_job_started_before_the_daemon(sockdir, make_daemon, tmp_path):  # daemon stops first
    shm = tmp_path / "shm"
    shm.mkdir()
    out = tmp_path / "out"
    base = dict(os.environ, MSMONITOR_SOCKET_DIR=sockdir, HOME=sockdir)
    job = Job(base, shm, tmp_path, "early")
    try:
        wait_until(lambda: "Init dynolog failed !" in job.creator_log(), 15, "the first failed registration")
        t0 = time.monotonic()
        daemon = make_daemon(sockdir=sockdir)
        # Registered within one retry period (the cap, 1 s here) of the daemon starting.
        wait_until(lambda: job.creator().p.pid in polling_pids(daemon), 10, "the job to register",
                   lambda: job.creator_log()[-3000:])
        assert time.monotonic() - t0 < 1 + 3, "not registered within one retry period"
        log = job.creator_log()
        assert log.count("Init dynolog failed !") == 1, log     # one line, not one per retry
        assert "Init dynolog success ! (the daemon is up now)" in log
        monitor_and_expect_data(daemon, [p.p.pid for p, _ in job.ranks], out,
                                lambda: "\n".join(job.logs())[-4000:])
    finally:
        rcs = job.stop()
    assert rcs == [0, 0]
    assert os.listdir(shm) == []


def test_daemon_restart_mid_job(make_daemon, tmp_path):
    shm = tmp_path / "shm"
    shm.mkdir()
    out = tmp_path / "out"
    first = make_daemon()
    job = Job(first.client_env(), shm, tmp_path, "r")
    try:
        wait_until(lambda: job.creator().p.pid in polling_pids(first), 15, "the job to register")
        # kill -9: the socket files stay behind (stale, refused).
        first.stop(signal.SIGKILL)
        assert os.path.exists(first.sock("dynolog.sock"))
        wait_until(lambda: "lost the daemon" in job.creator_log(), 40, "the poller to notice",
                   lambda: job.creator_log()[-3000:])
        second = make_daemon(sockdir=first.sockdir)
        wait_until(lambda: job.creator().p.pid in polling_pids(second), 10, "the job to register again",
                   lambda: job.creator_log()[-3000:])
        wait_until(lambda: "the daemon is back" in job.creator_log(), 10, "the recovery line")
        log = job.creator_log()
        assert log.count("lost the daemon") == 1, log
        assert log.count("the daemon is back") == 1, log
        assert f"Registered process ({job.creator().p.pid}" in second.log()
        monitor_and_expect_data(second, [p.p.pid for p, _ in job.ranks], out,
                                lambda: "\n".join(job.logs())[-4000:])
    finally:
        rcs = job.stop()
    assert rcs == [0, 0]


def test_killed_job_segment_taken_over(make_daemon, tmp_path):
    shm = tmp_path / "shm"
    shm.mkdir()
    out = tmp_path / "out"
    daemon = make_daemon()
    killed = Job(daemon.client_env(), shm, tmp_path, "killed")
    wait_until(lambda: killed.creator().p.pid in polling_pids(daemon), 15, "the first job to register")
    killed.stop(signal.SIGKILL)
    left = glob.glob(str(shm / (PREFIX + "*")))
    assert len(left) == 1                       # the killed job's leftover
    job = Job(daemon.client_env(), shm, tmp_path, "next")
    try:
        logs = job.logs()
        assert sum(log.count("took over") for log in logs) == 1, logs   # one WARNING
        creator = job.creator()
        assert "took over" in job.creator_log() and "W" + time.strftime("%m%d") in job.creator_log()
        wait_until(lambda: creator.p.pid in polling_pids(daemon), 15, "the new job to register",
                   lambda: job.creator_log()[-3000:])
        monitor_and_expect_data(daemon, [p.p.pid for p, _ in job.ranks], out,
                                lambda: "\n".join(job.logs())[-4000:])
    finally:
        rcs = job.stop()
    assert rcs == [0, 0]
    assert os.listdir(shm) == []


def test_python_killed_job_segment_taken_over(make_daemon, tmp_path):
    """The same with msmonitor.dynamic_profile: a killed 2-rank mssim.train job's segment is
    taken over by the job relaunched on the same rendezvous (MASTER_ADDR:MASTER_PORT, hence the
    same job key), which registers and is monitored."""
    require_packages()
    shm = tmp_path / "shm"
    shm.mkdir()
    out = tmp_path / "out"
    daemon = make_daemon()
    env = py_env(daemon.client_env(), MSMONITOR_USE_DAEMON=1, MSMONITOR_POLL_INTERVAL_S=0.3,
                 MSMONITOR_SHM_DIR=shm, MASTER_ADDR="127.0.0.1", MASTER_PORT="29555", **FAST_RETRY)
    argv = [PYTHON, "-m", "mssim.train", "--ranks", "2", "--steps", "0", "--rate", "20"]
    first = Proc(argv, env=env, logname="first", tmpdir=str(tmp_path))
    try:
        first.wait_log("started: device", count=2, timeout=30)
        first.wait_log("Init dynolog success !", timeout=30)
    finally:
        first.stop(signal.SIGKILL)              # the whole process group, no clean-up
    left = glob.glob(str(shm / (PREFIX + "*")))
    assert len(left) == 1
    job = Proc(argv, env=env, logname="next", tmpdir=str(tmp_path))
    try:
        log = job.wait_log("started: device", count=2, timeout=30)
        job.wait_log("Init dynolog success !", timeout=30)
        log = job.log()
        assert log.count("took over") == 1, log
        assert "[WARNING]" in [ln for ln in log.splitlines() if "took over" in ln][0]
        wait_polling(daemon, run_dyno)
        t = int(time.time())
        wait_until(lambda: int(time.time()) > t, 2, "the next second")
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel",
                     "--report-interval-s", "1", "--duration", "2", "--log-file", str(out))
        assert '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr
        wait_until(lambda: len(glob.glob(str(out / "*.db"))) == 2, 30, "a DB file from each rank",
                   lambda: job.log()[-3000:])
    finally:
        job.stop(signal.SIGTERM, timeout=30)
    assert os.listdir(shm) == []
