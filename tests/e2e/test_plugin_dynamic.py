"""The dyno-mode C API (msmon_dynamic_init/step, docs/design/ipc.md#shared-memory-handoff, docs/design/ipc.md#shared-memory-handoff) end to end:
two C ranks (tests/unit/plugin/control/dyn_rank over the simulator) and a real dynolog; one
creator with the poller thread, the shm handoff of an npu-monitor config so each rank writes
its own JSONL files with kernels and `step <N>` markers, the creator's step status, clean-up at
exit; the stale-file rule with its exact text; a missing daemon."""
import glob
import json
import os
import signal
import struct
import time

from conftest import Proc, run_dyno
from dyn_util import dyn_rank, plugin_log, rank_env, seg_name
from python_util import PKG, PYTHON, py_env
from waits import wait_polling, wait_until

SHM_SIZE = 1 << 20
PREFIX = "DynamicProfileNpuShm"


def shm_files(d):
    return sorted(glob.glob(os.path.join(str(d), PREFIX + "*")))


def jsonl_lines(out, pid):
    lines = []
    for f in sorted(glob.glob(os.path.join(str(out), f"msmonitor_{pid}_*.jsonl"))):
        with open(f) as fh:
            for line in fh:
                if line.endswith("\n"):
                    lines.append(json.loads(line))
    return lines


def test_two_c_ranks_shm_handoff(make_daemon, tmp_path):
    daemon = make_daemon()
    shm = tmp_path / "shm"
    shm.mkdir()
    out = tmp_path / "out"
    ranks = []
    try:
        for r in (0, 1):
            logdir = tmp_path / f"rank{r}"
            logdir.mkdir()
            ranks.append((Proc([dyn_rank()], env=rank_env(daemon.client_env(), shm, logdir, r),
                               logname=f"rank{r}", tmpdir=str(logdir)), logdir))
        for p, _ in ranks:
            p.wait_log("init 0", timeout=30)
        # No wait for the next second: a rank applies any config published after it attached,
        # within the second of its init too (docs/design/ipc.md#ranks).
        creators = [p for p, d in ranks if "as creator" in plugin_log(d)]
        assert len(creators) == 1, [plugin_log(d) for _, d in ranks]
        creator, creator_dir = [(p, d) for p, d in ranks if p is creators[0]][0]
        files = shm_files(shm)
        assert len(files) == 1 and os.path.getsize(files[0]) == SHM_SIZE
        assert os.path.basename(files[0]).startswith(PREFIX) and len(os.path.basename(files[0])) == len(PREFIX) + 17
        assert glob.glob(str(shm / "*.tmp")) == []

        st = wait_polling(daemon, run_dyno)
        # Only the creator's poller thread registers and polls.
        assert [p["pid"] for p in st["processes"] if p.get("polling")] == [creator.p.pid], st
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel,Marker",
                     "--report-interval-s", "1", "--log-file", str(out), "--export-type", "Jsonl")
        assert '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr
        wait_until(lambda: "config published" in plugin_log(creator_dir), 15, "the poller to publish")
        with open(files[0], "rb") as f:
            raw = f.read()
        assert len(raw) == SHM_SIZE
        assert struct.unpack("<I", raw[:4])[0] >= int(time.time()) - 60
        # the daemon's text as delivered, not a re-encoding (docs/design/ipc.md#segment)
        text = raw[8:].rstrip(b" ").decode()
        cfg = dict(line.strip().split("=", 1) for line in text.splitlines() if "=" in line)
        assert cfg["NPU_MONITOR_START"] == "true" and cfg["REQUEST_TRACE_ID"].isdigit()
        assert cfg["MSPTI_ACTIVITY_KIND"] == "Kernel,Marker"
        assert "is_valid" not in cfg

        # Each rank runs its own session and writes its own files (pid in the name).
        def both_have_kernels_and_steps():
            for p, _ in ranks:
                lines = jsonl_lines(out, p.p.pid)
                if not any(d.get("kind") == "Kernel" for d in lines):
                    return False
                if not any(d.get("kind") == "Marker" and str(d.get("name", "")).startswith("step ") for d in lines):
                    return False
            return True
        def diag():
            return "\n".join(f"--- rank pid {p.p.pid} files {glob.glob(str(out / f'*{p.p.pid}*'))}\n"
                             f"{plugin_log(d)[-3000:]}\n{p.log()[-1000:]}" for p, d in ranks)
        wait_until(both_have_kernels_and_steps, 30, "kernel and step-marker lines from both ranks", diag)
        for p, d in ranks:
            assert "MsptiMonitor start successfully" in plugin_log(d)

        # The creator reports its step (at most once per second) with nputrace Idle.
        def creator_status():
            o = run_dyno(daemon, "status").stdout
            s = json.loads(o[o.index("{"):]) if "{" in o else {}
            return [p for p in s.get("processes", []) if p["pid"] == creator.p.pid and p["current_step"] > 1]
        wait_until(creator_status, 15, "the creator's step status")
        assert creator_status()[0]["nputrace"] == "Idle"
    finally:
        rcs = [p.stop(signal.SIGTERM, timeout=30) for p, _ in ranks]
    assert rcs == [0, 0], [p.log() for p, _ in ranks]
    for p, _ in ranks:
        assert "dyn_rank: finished" in p.log()
    assert shm_files(shm) == []                  # the creator unlinked the segment
    assert os.listdir(shm) == []


def test_stale_segment_of_live_creator_disables_dyno_mode(tmp_path):
    """A segment whose creator is alive is never touched: older than the rank by more than
    MSMONITOR_SHM_STALE_S, it gets the stale text and dyno mode stays off."""
    shm = tmp_path / "shm"
    shm.mkdir()
    nosock = tmp_path / "nosock"
    nosock.mkdir()
    path = shm / seg_name("stale")
    cdir = tmp_path / "creator"
    cdir.mkdir()
    creator = Proc([dyn_rank()], env=rank_env(os.environ, shm, cdir, 0, MSMONITOR_SOCKET_DIR=nosock,
                                              MSMONITOR_JOB_KEY="stale"),
                   logname="creator", tmpdir=str(cdir))
    try:
        creator.wait_log("init 0", timeout=30)
        assert path.exists()
        # Inode times are coarse (one tick): make the file clearly older than the rank's /proc
        # entry, which a concurrent /proc scan may instantiate right after the fork.
        wait_until(lambda: time.time() - os.stat(path).st_ctime > 0.05, 2, "the file to age")
        before = path.read_bytes()[:64]
        env = rank_env(os.environ, shm, tmp_path, 1, MSMONITOR_SHM_STALE_S=0, MSMONITOR_SOCKET_DIR=nosock,
                       MSSIM_WL_STEPS=3, MSSIM_WL_RATE=0, MSMONITOR_JOB_KEY="stale")
        p = Proc([dyn_rank()], env=env, logname="stale", tmpdir=str(tmp_path))
        assert p.p.wait(60) == 0, p.log()
        p.stop()
        text = p.log()
        want = (f"There may exist shared memory before this task. If no job is using it, run "
                f"`rm -f {shm}/{PREFIX}*` (see `ls -la {shm}/{PREFIX}*`). Please remove: {path}")
        assert want in text                          # ERROR lines also go to stderr
        assert "init -116" in text                   # -ESTALE: dyno mode off, the job runs on
        assert "finished 3 steps" in text
        assert path.exists() and os.path.getsize(path) == SHM_SIZE   # never removed by a rank
        assert path.read_bytes()[:64] == before      # nor modified
        assert "took over" not in plugin_log(tmp_path)
    finally:
        assert creator.stop(signal.SIGTERM, timeout=30) == 0, creator.log()
    assert not path.exists()                         # its creator removed it


def test_leftover_segment_is_taken_over(tmp_path):
    """A file nobody holds the creator lock of (a killed job's) is taken over, whatever its
    age: the rank becomes the creator, logs one WARNING, and removes it at exit."""
    shm = tmp_path / "shm"
    shm.mkdir()
    nosock = tmp_path / "nosock"
    nosock.mkdir()
    path = shm / seg_name("left")
    path.write_bytes(b"\0" * SHM_SIZE)
    path.chmod(0o600)
    wait_until(lambda: time.time() - os.stat(path).st_ctime > 0.05, 2, "the file to age")
    env = rank_env(os.environ, shm, tmp_path, 0, MSMONITOR_SHM_STALE_S=0, MSMONITOR_SOCKET_DIR=nosock,
                   MSSIM_WL_STEPS=3, MSSIM_WL_RATE=0, MSMONITOR_JOB_KEY="left")
    p = Proc([dyn_rank()], env=env, logname="left", tmpdir=str(tmp_path))
    assert p.p.wait(60) == 0, p.log()
    p.stop()
    assert "init 0" in p.log() and "finished 3 steps" in p.log()
    log = plugin_log(tmp_path)
    assert log.count("took over") == 1, log
    assert "as creator" in log
    assert not path.exists()


def test_daemon_absent_job_runs_and_cleans_up(tmp_path):
    shm = tmp_path / "shm"
    shm.mkdir()
    nosock = tmp_path / "nosock"
    nosock.mkdir()
    procs = []
    try:
        for r in (0, 1):
            env = rank_env(os.environ, shm, tmp_path, r, MSMONITOR_SOCKET_DIR=nosock, MSSIM_WL_STEPS=20,
                           MSSIM_WL_RATE=50)
            procs.append(Proc([dyn_rank()], env=env, logname=f"absent{r}", tmpdir=str(tmp_path)))
        rcs = [p.p.wait(60) for p in procs]
    finally:
        for p in procs:
            p.stop()
    assert rcs == [0, 0], [p.log() for p in procs]
    for p in procs:
        assert "init 0" in p.log() and "finished 20 steps" in p.log()
    assert "Init dynolog failed !" in plugin_log(tmp_path)
    assert shm_files(shm) == []


HOLDER = """
import mmap, os, sys, time
sys.path.insert(0, sys.argv[1])
from msmonitor.dynamic_profile import SHM_SIZE, attach_or_create, write_config
path, flag, out = sys.argv[2:5]
fd, creator = attach_or_create(path)
mm = mmap.mmap(fd, SHM_SIZE)
print("held creator" if creator else "held", flush=True)
while not os.path.exists(flag):
    time.sleep(0.02)
write_config(mm, {"NPU_MONITOR_START": "true", "NPU_MONITOR_STOP": "false", "DURATION": "-1",
                  "MSPTI_ACTIVITY_KIND": "Kernel", "REPORT_INTERVAL_S": "1",
                  "NPU_MONITOR_EXPORT_TYPE": "Jsonl", "NPU_MONITOR_LOG_FILE": out})
print("written", flush=True)
time.sleep(600)
"""


def test_python_written_segment_drives_c_rank(tmp_path):
    """Interop: the segment created and written by msmonitor.dynamic_profile's own functions
    (its KEY=value text) is attached and applied by a C rank."""
    shm = tmp_path / "shm"
    shm.mkdir()
    nosock = tmp_path / "nosock"
    nosock.mkdir()
    out = tmp_path / "out"
    path = shm / seg_name("interop")
    flag = tmp_path / "flag"
    hdir = tmp_path / "holder"
    hdir.mkdir()
    holder = Proc([PYTHON, "-c", HOLDER, PKG, str(path), str(flag), str(out)],
                  env=py_env(MSMONITOR_LOG_PATH=hdir), logname="holder", tmpdir=str(hdir))
    rank = None
    try:
        holder.wait_log("held creator", timeout=30)
        rank = Proc([dyn_rank()], env=rank_env(os.environ, shm, tmp_path, 3, MSMONITOR_SOCKET_DIR=nosock,
                                               MSMONITOR_JOB_KEY="interop"),
                    logname="crank", tmpdir=str(tmp_path))
        rank.wait_log("init 0", timeout=30)
        assert "as creator" not in plugin_log(tmp_path)
        flag.write_text("go")
        holder.wait_log("written", timeout=10)
        wait_until(lambda: any(d.get("kind") == "Kernel" for d in jsonl_lines(out, rank.p.pid)), 30,
                   "kernel lines from the C rank", lambda: plugin_log(tmp_path)[-3000:])
    finally:
        rc = rank.stop(signal.SIGTERM, timeout=30) if rank else 0
        holder.stop()
    assert rc == 0, rank.log()
    assert path.exists()                         # the C rank was not the creator: not removed
