"""A refused command is a non-zero exit, and what dyno, dynolog and the doctor say is true
(docs/cli.md#exit-codes, docs/troubleshooting.md): `ineffective` exits 5; the processes
--process-limit left out are named; the doctor prints one total, says where the segments live,
and does not tell root to run as root; an outcome's rank is the one status shows; a job stopped
by SIGTERM leaves no segment and a takeover names a kill; cleanup-shm removes every file dyno
mode makes; the declined-buffer advice names what helps; a zombie rank is gone. Real dynolog,
real dyno; jobs in the FAQ's default mode (the Python package in dyno mode,
MSMONITOR_USE_DAEMON=1, no LD_PRELOAD) unless a case needs the native plugin."""
import glob
import json
import os
import re
import signal
import subprocess
import tempfile

import pytest

from conftest import Proc, binpath, run_dyno
from daemon_util import rpc_json
from plugin_util import FillWorkload, Workload, wait_registered
from python_util import PYTHON, py_env, require_packages
from waits import wait_polling, wait_status, wait_until

FAIL, INFO = "\u2718", "\u2139"
WAIT = ("--wait-s", "60")
KERNEL_MASK = 1 << 2

# A plain training script: no SIGTERM handler of its own, nothing but init() and step().
JOB = r"""
import os, time
from msmonitor import dynamic_profile
print(f"faq_job: pid {os.getpid()} init {dynamic_profile.init()}", flush=True)
while True:
    dynamic_profile.step()
    time.sleep(0.05)
"""


def faq_job(daemon, shm, tmpdir, name="job", **extra):
    """One process in the FAQ's default mode; returns its Proc once init() succeeded."""
    require_packages()
    env = py_env(daemon.client_env(), MSMONITOR_USE_DAEMON=1, MSMONITOR_SHM_DIR=str(shm),
                 MSMONITOR_POLL_INTERVAL_S="0.3", MSMONITOR_STEP_HOOK="none", **extra)
    for k in ("MSMONITOR_NATIVE_POLL", "RANK", "RANK_ID", "LOCAL_RANK", "WORLD_SIZE"):
        env.pop(k, None)
    p = Proc([PYTHON, "-c", JOB], env=env, logname=name, tmpdir=str(tmpdir))
    p.wait_log("init True", timeout=120)
    return p


def outcomes(stdout):
    for line in stdout.splitlines():
        if line.startswith("outcomes = "):
            return json.loads(line[len("outcomes = "):])
    raise AssertionError("no outcomes line in:\n" + stdout)


def doctor(daemon, env, *args):
    r = subprocess.run([binpath("dyno"), "--hostname", "localhost", "--port", str(daemon.port), "doctor", *args],
                       env=env, capture_output=True, text=True, timeout=120)
    r.lines = r.stdout.splitlines()
    return r


def doctor_env(daemon, shm):
    e = daemon.client_env(MSMONITOR_SHM_DIR=str(shm))
    e.pop("MSMONITOR_USE_DAEMON", None)
    return e


def proc_of(daemon, pid):
    st = rpc_json(daemon.port, {"fn": "getStatus"}) or {}
    return next((p for p in st.get("processes", []) if p["pid"] == pid), None)


def marks_of(daemon, pid):
    p = proc_of(daemon, pid) or {}
    return {m["code"]: m["text"] for m in p.get("health", {}).get("marks", [])}


# --- item: a refused command exits non-zero ---------------------------------------------------

def test_ineffective_exits_5(daemon, tmp_path):
    """No process registered: `ineffective`, a Note and exit 5 (also with --no-wait); then a
    job in the FAQ's mode runs npu-monitor (exit 0) and an nputrace is refused: exit 5."""
    r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", *WAIT)
    assert r.returncode == 5, r.stdout + r.stderr
    assert '"commandStatus":"ineffective"' in r.stdout and "Note: command not applied (ineffective)" in r.stdout
    r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--no-wait")
    assert r.returncode == 5, r.stdout + r.stderr
    r = run_dyno(daemon, "nputrace", "--start-step", "-1", "--iterations", "2", "--log-file", str(tmp_path / "t"))
    assert r.returncode == 5, r.stdout + r.stderr
    shm = tmp_path / "shm"
    shm.mkdir(mode=0o700)
    job = faq_job(daemon, shm, tmp_path)
    try:
        wait_polling(daemon, run_dyno)
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", *WAIT, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert outcomes(r.stdout)[0]["outcome"] == "applied"
        wait_status(daemon.port, monitor="Running")
        r = run_dyno(daemon, "nputrace", "--start-step", "-1", "--iterations", "2", "--log-file",
                     str(tmp_path / "t"), *WAIT, timeout=120)
        assert r.returncode == 5, r.stdout + r.stderr
        assert '"commandStatus":"ineffective"' in r.stdout and "Note: command not applied" in r.stdout
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-stop", *WAIT, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        job.stop(timeout=30)


def test_process_limit_names_the_skipped(daemon):
    """--process-limit: one line per process left out, with and without waiting."""
    ws = [Workload(daemon, tempfile.mkdtemp(prefix="mlm"), extra_env={"MSMONITOR_POLL_INTERVAL_S": "0.2"})
          for _ in range(3)]
    try:
        for w in ws:
            wait_registered(daemon, w.p.pid)
        pids = {w.p.pid for w in ws}
        for extra in (WAIT, ("--no-wait",)):
            r = run_dyno(daemon, "npu-monitor", "--npu-monitor-stop", "--process-limit", "1", *extra, timeout=120)
            assert r.returncode == 0, r.stdout + r.stderr
            reply = json.loads(r.stdout.split("response = ", 1)[1].splitlines()[0])
            skipped = {int(m) for m in re.findall(r"^Skipped: localhost pid (\d+): not triggered \(--process-limit\)$",
                                                   r.stdout, re.M)}
            assert skipped == pids - set(reply["activityProfilersTriggered"]), r.stdout
            assert len(skipped) == 2 and "Matched 3 processes; 2 skipped by --process-limit" in r.stdout
    finally:
        for w in ws:
            w.stop()


# --- item: messages ---------------------------------------------------------------------------

def test_unknown_subcommand_lists_every_command():
    r = subprocess.run([binpath("dyno"), "nosuch"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    h = subprocess.run([binpath("dyno"), "--help"], capture_output=True, text=True, timeout=30).stdout
    names = re.findall(r"^  (\S+) ", h.split("Subcommands:", 1)[1].split("Global flags:", 1)[0], re.M)
    assert {"doctor", "steps"} <= set(names)
    listed = r.stderr.split("(", 1)[1].split(")", 1)[0].split(", ")
    assert sorted(listed) == sorted(names), r.stderr


def test_doctor_one_total_and_no_root_advice_to_root(daemon, tmp_path):
    """One total on stdout, nothing more on stderr; a leftover's line does not tell root to run
    as root (some /proc/<pid> may stay closed even to root: a sandbox, no CAP_SYS_PTRACE)."""
    shm = tmp_path / "shm"
    shm.mkdir(mode=0o700)
    with open(shm / "DynamicProfileNpuShm-0123456789abcdef", "wb") as f:
        f.write(b"\0" * 4096)
    r = doctor(daemon, doctor_env(daemon, shm))
    assert r.returncode == 1, r.stdout + r.stderr
    totals = [ln for ln in r.lines if re.search(r"\bchecks\b.*\bfailed\b", ln)]
    assert len(totals) == 1 and re.fullmatch(r"doctor: \d+ checks, \d+ failed", totals[0]), r.stdout
    assert "checks failed" not in r.stderr and "doctor:" not in r.stderr, r.stderr
    got = [ln for ln in r.lines if FAIL in ln and "leftover" in ln and str(shm) in ln]
    assert got, r.stdout
    if os.geteuid() == 0:
        assert "run as root" not in got[0], got[0]


def test_outcome_rank_is_the_status_rank(daemon, tmp_path):
    """A single-process job without RANK: status says rank 0, and so does its outcome line."""
    shm = tmp_path / "shm"
    shm.mkdir(mode=0o700)
    job = faq_job(daemon, shm, tmp_path)
    try:
        wait_polling(daemon, run_dyno)
        wait_until(lambda: (proc_of(daemon, job.p.pid) or {}).get("health", {}).get("rank") is not None, 60,
                   "the job's health report")
        rank = proc_of(daemon, job.p.pid)["health"]["rank"]
        assert rank == 0
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", *WAIT, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert re.search(r"^Outcome: localhost pid %d rank 0: applied" % job.p.pid, r.stdout, re.M), r.stdout
        assert outcomes(r.stdout)[0]["rank"] == 0
        assert proc_of(daemon, job.p.pid)["config"]["rank"] == 0
    finally:
        job.stop(timeout=30)


def test_sigterm_leaves_nothing_and_cleanup_knows_every_file(daemon, tmp_path):
    """A job stopped by SIGTERM removes its segment and steps file: the next job of the same key
    takes nothing over. A job killed with SIGKILL leaves both: the doctor names both, the next
    job's takeover line names a kill, and cleanup-shm removes both."""
    shm = tmp_path / "shm"
    shm.mkdir(mode=0o700)
    key = {"MSMONITOR_JOB_KEY": "loopmsg-term"}
    first = faq_job(daemon, shm, tmp_path, "first", **key)
    assert sorted(os.listdir(shm))[0].startswith("DynamicProfileNpuShm-") and len(os.listdir(shm)) == 2
    assert first.stop(signal.SIGTERM, timeout=30) == -signal.SIGTERM   # still dies of SIGTERM
    assert os.listdir(shm) == []
    second = faq_job(daemon, shm, tmp_path, "second", **key)
    assert "took over" not in second.log(), second.log()
    second.stop(signal.SIGKILL)
    left = sorted(os.listdir(shm))
    assert [n.split("-")[0] for n in left] == ["DynamicProfileNpuShm", "msmonitor_steps.DynamicProfileNpuShm"], left
    r = doctor(daemon, doctor_env(daemon, shm))
    got = [ln for ln in r.lines if FAIL in ln and "2 leftover dyno-mode files in " + str(shm) in ln]
    assert got and all(str(shm / n) in got[0] for n in left), r.stdout
    third = faq_job(daemon, shm, tmp_path, "third", **key)
    took = [ln for ln in third.log().splitlines() if "took over" in ln]
    assert len(took) == 1 and "was killed" in took[0] and "SIGKILL" in took[0], third.log()
    third.stop(signal.SIGKILL)
    env = py_env(daemon.client_env())
    c = subprocess.run([PYTHON, "-m", "msmonitor", "cleanup-shm", "--dir", str(shm)], env=env, capture_output=True,
                       text=True, timeout=60)
    assert c.returncode == 0, c.stdout + c.stderr
    assert os.listdir(shm) == [], (os.listdir(shm), c.stdout)
    assert c.stdout.count("removed ") == 2, c.stdout


def test_doctor_says_where_segments_live(daemon, tmp_path):
    """The FAQ's `ls -la /dev/shm/DynamicProfileNpuShm*` finds nothing: in a shared directory
    the segments live in msmonitor-<uid>/ under it, and the doctor says so."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)   # like /dev/shm
    job = faq_job(daemon, shared, tmp_path)
    try:
        private = shared / f"msmonitor-{os.geteuid()}"
        assert glob.glob(str(shared / "DynamicProfileNpuShm*")) == []
        assert len(glob.glob(str(private / "DynamicProfileNpuShm*"))) == 1
        r = doctor(daemon, doctor_env(daemon, shared))
        got = [ln for ln in r.lines if ln.startswith(INFO) and "segments are in " + str(private) in ln]
        assert got and f"ls -la {private}/" in got[0] and "docs/troubleshooting.md#" in got[0], r.stdout
    finally:
        job.stop(timeout=30)


def test_zombie_rank_is_gone(daemon, tmp_path):
    """A killed rank its parent has not reaped yet (state Z) is marked gone."""
    shm = tmp_path / "shm"
    shm.mkdir(mode=0o700)
    job = faq_job(daemon, shm, tmp_path)
    try:
        wait_polling(daemon, run_dyno)
        os.kill(job.p.pid, signal.SIGKILL)      # not reaped: Proc.stop() would
        wait_until(lambda: open(f"/proc/{job.p.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z", 30,
                   "the rank to be a zombie")
        wait_until(lambda: "gone" in marks_of(daemon, job.p.pid), 30, "the gone mark",
                   lambda: json.dumps(proc_of(daemon, job.p.pid)))
        assert proc_of(daemon, job.p.pid)["polling"] is False
    finally:
        job.stop(timeout=30)


def test_declined_buffer_advice_names_what_helps(daemon):
    """The advice is the measured one (docs/troubleshooting.md#dropped-records): the interval and
    the filter do not help; fewer kinds and full-size buffers do, and the doctor finds the test
    knob that shrank them in the job's environment."""
    w = FillWorkload(daemon, tempfile.mkdtemp(prefix="mlm"), KERNEL_MASK, 50000, 0.05,
                     extra_env={"MSMONITOR_TEST_BUFFER_SIZE": "4096"})
    try:
        wait_registered(daemon, w.p.pid)
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel",
                     "--report-interval-s", "1", *WAIT, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        wait_until(lambda: "dropping_declined" in marks_of(daemon, w.p.pid), 60, "the declined mark")
        text = marks_of(daemon, w.p.pid)["dropping_declined"]
        assert "fewer --mspti-activity-kind" in text and "MSMONITOR_TEST_BUFFER_SIZE" in text, text
        assert "--report-interval-s or a --filter does not help" in text, text
        e = daemon.client_env()
        e.pop("MSMONITOR_USE_DAEMON", None)
        got = [ln for ln in doctor(daemon, e).lines if FAIL in ln and "buffer requests declined" in ln]
        assert got and "MSMONITOR_TEST_BUFFER_SIZE=4096" in got[0] and "does not help" in got[0], got
        run_dyno(daemon, "npu-monitor", "--npu-monitor-stop", *WAIT, timeout=120)
    finally:
        w.finish()
