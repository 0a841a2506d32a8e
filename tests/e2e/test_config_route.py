"""The route of a config (docs/design/session.md#the-route-of-a-config) in the FAQ's default
mode: the Python package in dyno mode (MSMONITOR_USE_DAEMON=1, no LD_PRELOAD), a real dynolog,
the real dyno, simulated training jobs (`python -m mssim.train`). Each case is one the
closed loop got wrong before:
- every rank of a job answers the config it applied from the job's segment, and dyno prints
  one outcome per rank;
- an armed nputrace window is part of the session: an npu-monitor start is refused with the
  reason while it waits;
- two single-process jobs started from one shell are two jobs (two segments, two answers),
  and a job that goes on after another one, or after its own poller rank, ended stays
  monitored;
- a config applied only in part (a kind msPTI refuses without LD_PRELOAD) says so, with its
  own exit code, while the rest of it collects."""
import glob
import json
import os
import re
import signal

import pytest

from conftest import Proc, run_dyno
from daemon_util import rpc_json
from python_util import PYTHON, children_of, py_env, require_packages
from waits import wait_until

WAIT = ("--wait-s", "60")


@pytest.fixture(autouse=True)
def _built():
    require_packages()


def outcomes(stdout):
    """The JSON outcome list dyno printed (`outcomes = [...]`)."""
    for line in stdout.splitlines():
        if line.startswith("outcomes = "):
            return json.loads(line[len("outcomes = "):])
    raise AssertionError("no outcomes line in:\n" + stdout)


def status(daemon):
    return rpc_json(daemon.port, {"fn": "getStatus"}) or {}


def proc_of(daemon, pid):
    for p in status(daemon).get("processes", []):
        if p.get("pid") == pid:
            return p
    return None


def exited(pid):
    """The process is gone, or a zombie its parent has not reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def runs_poller(pid):
    """The process runs its job's poller thread (MsMonitorPoll)."""
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() == "MsMonitorPoll":
                    return True
    except OSError:
        pass
    return False


def job_env(daemon, tmp_path, **extra):
    shm = tmp_path / "shm"
    shm.mkdir(exist_ok=True)
    env = py_env(daemon.client_env(), MSMONITOR_USE_DAEMON=1, MSMONITOR_POLL_INTERVAL_S=0.3, MSMONITOR_SHM_DIR=shm,
                 MSMONITOR_LOG_PATH=tmp_path, **extra)
    for k in ("MSSIM_CHECK_PRELOAD", "MSMONITOR_JOB_KEY", "MASTER_PORT", "WORLD_SIZE", "RANK"):
        env.pop(k, None)          # the FAQ's default: the simulator's rules on, no launcher
    # no msPTI in LD_PRELOAD (a sanitizer tree keeps its runtime there)
    pre = [p for p in env.get("LD_PRELOAD", "").split(":") if p and "libmspti" not in p]
    if pre:
        env["LD_PRELOAD"] = ":".join(pre)
    else:
        env.pop("LD_PRELOAD", None)
    return env


def start_job(daemon, tmp_path, ranks, name="train", **extra):
    job = Proc([PYTHON, "-m", "mssim.train", "--ranks", str(ranks), "--steps", "0", "--rate", "20"],
               env=job_env(daemon, tmp_path, **extra), logname=name, tmpdir=str(tmp_path))
    job.wait_log("started: device", count=ranks, timeout=60)
    return job


def wait_ranks(daemon, pids, what="every rank listed with its health"):
    """Each pid is listed by getStatus with a health report (its rank, its job): only then does
    the daemon know it as a rank of its job."""
    def ok():
        found = {p["pid"]: p for p in status(daemon).get("processes", []) if p.get("health")}
        return found if all(pid in found for pid in pids) else None
    return wait_until(ok, 60, what, diag=lambda: json.dumps(status(daemon))[-3000:])


def one_rank_ready(daemon, tmp_path):
    """A 1-rank dyno-mode job whose rank the daemon knows, polling, past its first second:
    (job, the rank's pid)."""
    job = start_job(daemon, tmp_path, 1)
    [pid] = wait_until(lambda: children_of(job.p.pid) or None, 30, "the rank process")
    wait_ranks(daemon, [pid])
    wait_polled(daemon)
    return job, pid


def wait_polled(daemon):
    def ok():
        return any(p.get("polling") for p in status(daemon).get("processes", []))
    wait_until(ok, 60, "a polling process", diag=lambda: json.dumps(status(daemon))[-3000:])



def test_every_rank_of_a_job_answers(make_daemon, tmp_path):
    """Item: one outcome per rank. Both ranks of a 2-rank dyno-mode job answer the config
    their poller received, under its id; dyno prints both, `rank` as status has it, and
    getStatus keeps each rank's outcome."""
    daemon = make_daemon()
    job = start_job(daemon, tmp_path, 2)
    try:
        pids = wait_until(lambda: children_of(job.p.pid) if len(children_of(job.p.pid)) == 2 else None, 30,
                          "two rank processes")
        listed = wait_ranks(daemon, pids)
        wait_polled(daemon)
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1", *WAIT, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        got = outcomes(r.stdout)
        assert sorted((o["pid"], o["outcome"], o["state"]) for o in got) == \
            sorted((pid, "applied", "Running") for pid in pids), r.stdout
        assert sorted(o["rank"] for o in got) == [0, 1]
        for o in got:   # the rank status shows for that pid
            assert o["rank"] == listed[o["pid"]]["health"]["rank"], (o, listed[o["pid"]])
        assert "Outcomes: 2 applied, 0 rejected" in r.stdout
        for pid in pids:
            assert re.search(r"^Outcome: localhost pid %d rank [01]: applied \(Running\)$" % pid, r.stdout, re.M)
        # each rank's own outcome is kept by getStatus, under the one id of the command
        ids = set()
        for pid in pids:
            p = proc_of(daemon, pid)
            assert p and p["config"]["outcome"] == "applied", p
            ids.add(p["config"]["id"])
        assert len(ids) == 1
        assert "ignored ConfigAck" not in daemon.log()
        # the job key came from its launcher's children (a world of 2): the log names the way
        # to keep two such jobs apart
        assert "MSMONITOR_JOB_KEY" in job.log()
        # a second command right away (the same second) reaches both ranks too
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-stop", *WAIT, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert sorted((o["outcome"], o["state"]) for o in outcomes(r.stdout)) == [("applied", "Idle")] * 2
    finally:
        job.stop(signal.SIGTERM, timeout=30)


def test_armed_trace_refuses_npu_monitor(make_daemon, tmp_path):
    """Item: an armed window is part of the session. `dyno nputrace` far ahead answers
    applied (Ready); a later `dyno npu-monitor --npu-monitor-start` is refused by the process
    with the reason and exit 3 (it used to be applied, and the trace was lost at the window)."""
    daemon = make_daemon()
    job, pid = one_rank_ready(daemon, tmp_path)
    try:
        traces = tmp_path / "traces"
        r = run_dyno(daemon, "nputrace", "--log-file", str(traces), "--iterations", "2", "--start-step", "1000000",
                     *WAIT, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        [o] = outcomes(r.stdout)
        assert (o["pid"], o["outcome"], o["state"]) == (pid, "applied", "Ready"), r.stdout
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", *WAIT, timeout=120)
        assert r.returncode == 3, r.stdout + r.stderr
        [o] = outcomes(r.stdout)
        assert (o["pid"], o["outcome"], o["state"]) == (pid, "rejected", "Ready"), r.stdout
        assert o["reason"] == ("npu-monitor start refused: an nputrace window for steps [1000000, 1000002) is "
                               "armed in this process (one activity subscriber); start npu-monitor after the window")
        # nothing started: the window is still armed and npu-monitor idle
        p = proc_of(daemon, pid)
        assert p["npumonitor"] != "Running" and p["nputrace"] == "Ready", p
        assert "MsptiMonitor start successfully" not in open(glob.glob(str(tmp_path / "msmonitor_log" / "*.log"))[0]).read()
    finally:
        job.stop(signal.SIGTERM, timeout=30)


def test_two_jobs_from_one_shell_are_two_jobs(make_daemon, tmp_path):
    """Item: a job's key never joins two launches. Two plain single-process jobs started from
    one shell get a segment each and answer each for itself; when the first ends, the second
    is still monitored (it used to share the first's segment: one answer for two jobs, then
    `ineffective`)."""
    daemon = make_daemon()
    env = job_env(daemon, tmp_path)
    worker = f"{PYTHON} -m mssim.train --worker --steps 0 --rate 20"
    shell = Proc(["/bin/sh", "-c", f"{worker} & {worker} & wait"], env=env, logname="shell", tmpdir=str(tmp_path))
    try:
        shell.wait_log("started: device", count=2, timeout=60)
        pids = wait_until(lambda: children_of(shell.p.pid) if len(children_of(shell.p.pid)) == 2 else None, 30,
                          "two jobs")
        segs = wait_until(lambda: glob.glob(str(tmp_path / "shm" / "DynamicProfileNpuShm-*")) or None, 30,
                          "the segments")
        wait_until(lambda: len(glob.glob(str(tmp_path / "shm" / "DynamicProfileNpuShm-*"))) == 2, 30,
                   "a segment per job", diag=lambda: repr(segs))
        assert all(runs_poller(pid) for pid in pids)          # each job polls for itself
        wait_ranks(daemon, pids)
        wait_until(lambda: sum(1 for p in status(daemon).get("processes", []) if p.get("polling")) == 2, 60,
                   "both jobs polling")
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", *WAIT, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert sorted((o["pid"], o["outcome"]) for o in outcomes(r.stdout)) == sorted((p, "applied") for p in pids)
        # the first job ends; the second goes on, monitored
        os.kill(pids[0], signal.SIGTERM)
        wait_until(lambda: exited(pids[0]), 60, "the first job's exit")
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-stop", *WAIT, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert '"commandStatus":"effective"' in r.stdout
        assert [(o["pid"], o["outcome"], o["state"]) for o in outcomes(r.stdout)] == [(pids[1], "applied", "Idle")]
        assert proc_of(daemon, pids[1])["polling"] is True
    finally:
        shell.stop(signal.SIGTERM, timeout=30)


def test_job_goes_on_after_its_poller_rank_ends(make_daemon, tmp_path):
    """Item: a surviving job stays monitored. The rank that ran the job's poller ends first;
    another rank of the job takes the poller over at its next step, and the next command
    reaches the job (it used to answer `ineffective`)."""
    daemon = make_daemon()
    job = start_job(daemon, tmp_path, 2)
    try:
        pids = wait_until(lambda: children_of(job.p.pid) if len(children_of(job.p.pid)) == 2 else None, 30,
                          "two rank processes")
        [poller] = wait_until(lambda: [p for p in pids if runs_poller(p)] or None, 30, "the job's poller rank")
        [other] = [p for p in pids if p != poller]
        wait_ranks(daemon, pids)
        os.kill(poller, signal.SIGTERM)
        job.wait_log("runs the poller of", timeout=60)
        wait_until(lambda: runs_poller(other), 30, "the other rank's poller thread")
        wait_until(lambda: exited(poller), 60, "the poller rank's exit")
        wait_until(lambda: (proc_of(daemon, other) or {}).get("polling"), 60, "the other rank polling")
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", *WAIT, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert [(o["pid"], o["outcome"], o["state"]) for o in outcomes(r.stdout)] == [(other, "applied", "Running")]
    finally:
        job.stop(signal.SIGTERM, timeout=30)


def test_partly_applied_has_its_own_outcome(make_daemon, tmp_path):
    """Item: a partial application says so. Without LD_PRELOAD msPTI refuses Hccl; Kernel,Hccl
    answers `applied, partly (Running): Hccl not enabled (...)` with exit 6 (it used to say
    rejected, exit 3), and Kernel records keep coming."""
    daemon = make_daemon()
    job, pid = one_rank_ready(daemon, tmp_path)
    try:
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel,Hccl",
                     "--report-interval-s", "1", *WAIT, timeout=120)
        assert r.returncode == 6, r.stdout + r.stderr
        [o] = outcomes(r.stdout)
        assert (o["pid"], o["outcome"], o["state"]) == (pid, "applied, partly", "Running"), r.stdout
        assert o["reason"].startswith("Hccl not enabled (mspti could not enable Hccl: "), o
        assert "MSPTI_ERROR_WITHOUT_LD_PRELOAD" in o["reason"] or "LD_PRELOAD" in o["reason"], o
        assert re.search(r"^Outcome: localhost pid %d rank 0: applied, partly \(Running\): Hccl not enabled" % pid,
                         r.stdout, re.M)
        assert "Outcomes: 0 applied, 0 rejected, 0 superseded, 0 delivered (unacknowledged), 0 no answer, " \
               "1 applied partly" in r.stdout
        # the part that applied collects: Kernel records are counted
        wait_until(lambda: ((proc_of(daemon, pid) or {}).get("session_stats") or {}).get("consumed", 0) > 0, 60,
                   "records counted", diag=lambda: json.dumps(proc_of(daemon, pid)))
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-stop", *WAIT, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        job.stop(signal.SIGTERM, timeout=30)
