"""msmonitor.dynamic_profile shm attach vs `cleanup-shm` (docs/design/ipc.md#shared-memory-handoff): cleanup never
removes a segment a live process uses, and a rank that opened the file just before cleanup
unlinked it does not keep a segment no other rank can find."""
import json
import os

import pytest

from conftest import Proc
from python_util import PYTHON, py_env, require_packages, run_py

SHM_SIZE = 1 << 20


@pytest.fixture(autouse=True)
def _built():
    require_packages()


def opened_by(pid, path):
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == path for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def test_attach_sees_segment_unlinked_while_blocked(tmp_path):
    """A cleaner holds LOCK_EX (as cleanup-shm does across its check and unlink); a rank that
    opened the file meanwhile must, once the cleaner unlinked it, create a fresh segment at
    the path instead of keeping the orphaned one."""
    import fcntl
    shm = tmp_path / "shm"
    shm.mkdir()
    path = str(shm / "DynamicProfileNpuShm2099010100")
    with open(path, "wb") as f:
        f.write(b" " * SHM_SIZE)
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    code = f"""
import json, os, sys
from msmonitor.dynamic_profile import attach_or_create
fd, creator = attach_or_create({path!r})
a, b = os.fstat(fd), os.stat({path!r})
print(json.dumps({{"creator": creator, "same": (a.st_ino, a.st_dev) == (b.st_ino, b.st_dev)}}), flush=True)
"""
    rank = Proc([PYTHON, "-c", code], env=py_env(), logname="rank", tmpdir=str(tmp_path))
    try:
        from waits import wait_until
        wait_until(lambda: opened_by(rank.p.pid, path), 30, "the rank to open the segment", diag=rank.log,
                   alive=rank, interval=0.01)
        os.unlink(path)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        fd = -1
        rank.wait_log('"creator"', timeout=30)
        out = json.loads([ln for ln in rank.log().splitlines() if '"creator"' in ln][-1])
        assert out == {"creator": True, "same": True}
        assert os.path.getsize(path) == SHM_SIZE
    finally:
        if fd >= 0:
            os.close(fd)
        rank.stop()


def test_cleanup_keeps_segment_open_without_flock(tmp_path):
    """Other frameworks' processes (torch_npu) only open/map the segment; it stays."""
    shm = tmp_path / "shm"
    shm.mkdir()
    live = shm / "DynamicProfileNpuShm2099010101"
    live.write_bytes(b" " * 4096)
    holder = Proc([PYTHON, "-c", "import mmap, os, time\n"
                   f"fd = os.open({str(live)!r}, os.O_RDWR); m = mmap.mmap(fd, 4096); os.close(fd)\n"
                   "print('mapped', flush=True); time.sleep(600)"], logname="holder", tmpdir=str(tmp_path))
    try:
        holder.wait_log("mapped")
        r = run_py(f"import msmonitor, json; print(json.dumps(msmonitor.cleanup_stale_shm({str(shm)!r})))",
                   cwd=str(tmp_path))
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout.strip().splitlines()[-1]) == []
        assert live.exists()
    finally:
        holder.stop()


def test_poller_survives_exit_of_the_thread_that_called_init(make_daemon, tmp_path):
    """init() from a short-lived thread must not cost the node its poller (a thread of the
    creator rank, not of the calling thread): a config is still published."""
    from conftest import run_dyno
    from waits import wait_polling
    daemon = make_daemon()
    shm = tmp_path / "shm"
    shm.mkdir()
    env = py_env(daemon.client_env(), MSMONITOR_USE_DAEMON=1, MSMONITOR_POLL_INTERVAL_S=0.2,
                 MSMONITOR_SHM_DIR=shm, RANK=0)
    code = """
import os, sys, threading, time
from msmonitor import dynamic_profile as dp
ok = []
def starter():
    ok.append(dp.init() and dp._STATE.info()["polling"])
th = threading.Thread(target=starter)
th.start()
th.join()
assert ok == [True], ok
print("starter thread exited", flush=True)
while True:
    dp.step()
    time.sleep(0.05)
"""
    job = Proc([PYTHON, "-c", code], env=env, logname="rank", tmpdir=str(tmp_path))
    try:
        job.wait_log("starter thread exited", timeout=30)
        job.wait_log("Init dynolog success !", timeout=30)
        wait_polling(daemon, run_dyno)
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel",
                     "--report-interval-s", "1")
        assert '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr
        job.wait_log("config published", timeout=30)
    finally:
        job.stop()
