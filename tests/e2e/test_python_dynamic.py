"""msmonitor.dynamic_profile with `python -m mssim.train` (docs/design/ipc.md#shared-memory-handoff, docs/design/ipc.md#shared-memory-handoff):
two ranks, one creator + poller, the shm handoff of an npu-monitor config to both ranks,
step markers in each rank's DB, clean-up at exit; the stale-file rule; cleanup-shm; a
missing daemon."""
import glob
import json
import os
import signal
import sqlite3
import struct
import time

import pytest

from conftest import Proc, run_dyno
from dyn_util import seg_name
from python_util import PYTHON, children_of, py_env, require_packages, run_py
from waits import wait_polling, wait_until

SHM_SIZE = 1 << 20


@pytest.fixture(autouse=True)
def _built():
    require_packages()


def shm_files(d):
    return sorted(glob.glob(os.path.join(d, "DynamicProfileNpuShm*")))


def procs_mentioning(text):
    """Live processes whose command line contains `text` (the poller carries the shm path)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def poller_ranks(launcher_pid):
    """Rank processes of a job that run the node's poller thread (MsMonitorPoll)."""
    found = []
    for pid in children_of(launcher_pid):
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    if f.read().strip() == "MsMonitorPoll":
                        found.append(pid)
                        break
        except OSError:
            continue
    return found


def db_done(path):
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return bool(db.execute("SELECT 1 FROM sqlite_master WHERE name='STRING_IDS'").fetchone())
        finally:
            db.close()
    except sqlite3.Error:
        return False


def test_two_ranks_shm_handoff(make_daemon, tmp_path):
    daemon = make_daemon()
    shm = tmp_path / "shm"
    shm.mkdir()
    out = tmp_path / "out"
    env = py_env(daemon.client_env(), MSMONITOR_USE_DAEMON=1, MSMONITOR_POLL_INTERVAL_S=0.3,
                 MSMONITOR_SHM_DIR=shm)
    job = Proc([PYTHON, "-m", "mssim.train", "--ranks", "2", "--steps", "0", "--rate", "10"], env=env,
               logname="train", tmpdir=str(tmp_path))
    try:
        log = job.wait_log("started: device", count=2, timeout=30)
        job.wait_log("Init dynolog success !", timeout=30)
        assert log.count("as creator") <= 1
        files = shm_files(shm)
        assert len(files) == 1 and os.path.getsize(files[0]) == SHM_SIZE
        assert os.path.basename(files[0]).startswith("DynamicProfileNpuShm-")   # one segment per job
        assert len(poller_ranks(job.p.pid)) == 1       # exactly one poller per node
        wait_polling(daemon, run_dyno)
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Marker,Kernel",
                     "--report-interval-s", "1", "--duration", "2", "--log-file", str(out))
        assert '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr
        job.wait_log("config published", timeout=15)
        with open(files[0], "rb") as f:
            raw = f.read()
        assert len(raw) == SHM_SIZE
        assert struct.unpack("<I", raw[:4])[0] > 0
        # the daemon's text as delivered, not a re-encoding (docs/design/ipc.md#segment)
        text = raw[8:].rstrip(b" ").decode()
        cfg = dict(line.strip().split("=", 1) for line in text.splitlines() if "=" in line)
        assert cfg["NPU_MONITOR_START"] == "true" and cfg["REQUEST_TRACE_ID"].isdigit()
        assert cfg["MSPTI_ACTIVITY_KIND"] == "Marker,Kernel"
        # Both ranks started their own session and wrote their own DB at the duration expiry.
        wait_until(lambda: len(glob.glob(str(out / "*.db"))) == 2 and all(map(db_done, glob.glob(str(out / "*.db")))),
                   30, "two finished DB files")
        dbs = sorted(glob.glob(str(out / "*.db")))
        assert [p.rsplit("_", 1)[1] for p in dbs] == ["0.db", "1.db"]
        for p in dbs:
            db = sqlite3.connect(p)
            steps = [v for (v,) in db.execute(
                "SELECT s.value FROM MSTX_EVENTS m JOIN STRING_IDS s ON s.id = m.message")]
            kernels = db.execute("SELECT COUNT(*) FROM COMPUTE_TASK_INFO").fetchone()[0]
            db.close()
            assert steps and all(v.startswith("step ") for v in steps)
            assert kernels > 0
        # The creator rank reports its step to the daemon (at most once per second).
        st = wait_polling(daemon, run_dyno)
        assert any(p["current_step"] > 1 and p["nputrace"] == "Idle" for p in st["processes"]), st
    finally:
        job.stop(signal.SIGTERM, timeout=30)
    files = shm_files(shm)
    assert files == []                      # the creator unlinked the segment
    wait_until(lambda: not procs_mentioning(str(shm)), 10, "the poller to exit")
    assert "finished" in job.log()


def test_stale_segment_of_live_creator_disables_dyno_mode(tmp_path):
    """A live creator's segment older than the rank (MSMONITOR_SHM_STALE_S) is never touched:
    the rank prints the stale text and runs with dyno mode off."""
    shm = tmp_path / "shm"
    shm.mkdir()
    nosock = tmp_path / "nosock"
    nosock.mkdir()
    path = shm / seg_name("stale")
    holder = Proc([PYTHON, "-c", "import sys, time\n"
                   "from msmonitor.dynamic_profile import attach_or_create\n"
                   f"fd, creator = attach_or_create({str(path)!r})\n"
                   "print('held', creator, flush=True); time.sleep(600)"],
                  env=py_env(MSMONITOR_LOG_PATH=tmp_path), logname="holder", tmpdir=str(tmp_path))
    try:
        holder.wait_log("held True", timeout=30)
        wait_until(lambda: time.time() - os.stat(path).st_ctime > 0.05, 2, "the file to age")
        env = py_env(MSMONITOR_USE_DAEMON=1, MSMONITOR_SHM_DIR=shm, MSMONITOR_SHM_STALE_S=0,
                     MSMONITOR_SOCKET_DIR=nosock, MSMONITOR_JOB_KEY="stale")
        r = run_py("import sys; from mssim.train import main; sys.exit(main(['--ranks', '1', '--steps', '3', "
                   "'--rate', '0']))", env=env, cwd=str(tmp_path))
        text = r.stdout + r.stderr
        assert r.returncode == 0, text
        assert "There may exist shared memory before this task" in text
        assert f"Please remove: {path}" in text
        assert "rm -f" in text
        assert "dyno mode off" in text
        assert "took over" not in text
        assert path.exists()                    # never removed by a rank
    finally:
        holder.stop()


def test_leftover_segment_is_taken_over(tmp_path):
    """A leftover nobody holds the creator lock of (a killed job's) costs the next job
    nothing: its rank takes it over with one WARNING and removes it at exit."""
    shm = tmp_path / "shm"
    shm.mkdir()
    nosock = tmp_path / "nosock"
    nosock.mkdir()
    path = shm / seg_name("left")
    path.write_bytes(b"\0" * SHM_SIZE)
    path.chmod(0o600)
    env = py_env(MSMONITOR_USE_DAEMON=1, MSMONITOR_SHM_DIR=shm, MSMONITOR_SHM_STALE_S=0,
                 MSMONITOR_SOCKET_DIR=nosock, MSMONITOR_JOB_KEY="left")
    r = run_py("import sys; from mssim.train import main; sys.exit(main(['--ranks', '1', '--steps', '3', "
               "'--rate', '0']))", env=env, cwd=str(tmp_path))
    text = r.stdout + r.stderr
    assert r.returncode == 0, text
    assert text.count("took over") == 1, text
    assert "as creator" in text and "dyno mode on" in text
    assert not path.exists()


def test_daemon_absent_job_runs_and_cleans_up(tmp_path):
    shm = tmp_path / "shm"
    shm.mkdir()
    nosock = tmp_path / "nosock"
    nosock.mkdir()
    env = py_env(MSMONITOR_USE_DAEMON=1, MSMONITOR_SHM_DIR=shm, MSMONITOR_SOCKET_DIR=nosock)
    r = run_py("import sys; from mssim.train import main; sys.exit(main(['--ranks', '2', '--steps', '5', "
               "'--rate', '0']))", env=env, cwd=str(tmp_path), timeout=120)
    text = r.stdout + r.stderr
    assert r.returncode == 0, text
    # The poller may or may not have got as far as "Init dynolog failed !" before the
    # creator finished; either way nothing hangs and nothing is left behind.
    assert text.count("finished 5 steps") == 2
    assert shm_files(shm) == []
    assert not procs_mentioning(str(shm))


def test_use_daemon_parsing(tmp_path):
    r = run_py("""
import json
from msmonitor.dynamic_profile import use_daemon_enabled as f
print(json.dumps([f({}), f({"MSMONITOR_USE_DAEMON": "1"}), f({"MSMONITOR_USE_DAEMON": " 1 "}),
                  f({"MSMONITOR_USE_DAEMON": "2"}), f({"MSMONITOR_USE_DAEMON": "yes"}),
                  f({"KINETO_USE_DAEMON": "1"})]))""", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [False, True, True, False, False, True]
    assert "MSMONITOR_USE_DAEMON='yes' value not valid, will be set to 0 !" in r.stderr
    assert "KINETO_USE_DAEMON is deprecated" in r.stderr


def test_cleanup_shm_removes_only_dead_segments(tmp_path):
    shm = tmp_path / "shm"
    shm.mkdir()
    dead = shm / "DynamicProfileNpuShm2020010100"
    live = shm / "DynamicProfileNpuShm2020010101"
    other = shm / "unrelated"
    for p in (dead, live, other):
        p.write_bytes(b" " * 16)
    holder = Proc([PYTHON, "-c", "import fcntl, os, sys, time\n"
                   f"fd = os.open({str(live)!r}, os.O_RDWR); fcntl.flock(fd, fcntl.LOCK_SH)\n"
                   "print('held', flush=True); time.sleep(600)"], logname="holder", tmpdir=str(tmp_path))
    try:
        holder.wait_log("held")
        r = run_py(f"import sys; from msmonitor.__main__ import main; sys.exit(main(['cleanup-shm', '--dir', {str(shm)!r}]))",
                   cwd=str(tmp_path))
        assert r.returncode == 0, r.stderr
        assert f"removed {dead}" in r.stdout
        assert not dead.exists() and live.exists() and other.exists()
    finally:
        holder.stop()
    r = run_py(f"import msmonitor, json; print(json.dumps(msmonitor.cleanup_stale_shm({str(shm)!r})))",
               cwd=str(tmp_path))
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [str(live)]
