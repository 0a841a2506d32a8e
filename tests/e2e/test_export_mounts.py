"""Issue 5 on real file systems, through dyno and a simulator workload: a full disk (a tiny
tmpfs) and a read-only mount as the --log-file directory. The training process keeps running,
the failure is logged naming the file and the error, and what was committed stays readable.
mount(8) needs root; the tests are skipped where it is not permitted."""
import contextlib
import glob
import os
import shutil
import sqlite3
import subprocess
import tempfile

import pytest

from conftest import run_dyno
from plugin_util import Workload, wait_registered
from waits import wait_until

KINDS = "Kernel,API,AclAPI,RuntimeAPI,Marker"


@contextlib.contextmanager
def tmpfs(size, read_only=False):
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    d = tempfile.mkdtemp(prefix="mmfs")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", d],
                       capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(d)
        pytest.skip("mount not permitted here: " + r.stderr.strip())
    try:
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", d], check=True)
        yield d
    finally:
        subprocess.run(["umount", "-l", d], check=False)
        os.rmdir(d)


def _status(daemon):
    r = run_dyno(daemon, "status")
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_disk_full_rolls_back_and_keeps_committed_batches(daemon):
    tmp = tempfile.mkdtemp(prefix="mmx")
    with tmpfs("192k") as fs:
        out = os.path.join(fs, "out")
        w = Workload(daemon, tmp)
        try:
            wait_registered(daemon, w.p.pid)
            r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
                         "--mspti-activity-kind", KINDS, "--log-file", out, "--export-type", "DB")
            assert r.returncode == 0, r.stderr + r.stdout
            w.wait_plugin_log("MsptiMonitor start successfully")
            # the tmpfs fills within a few report ticks: the batch is rolled back and logged
            log = w.wait_plugin_log("batch discarded, monitoring continues", timeout=60)
            line = next(l for l in log.splitlines() if "batch discarded" in l)
            assert "/out/msmonitor_" in line and ".db" in line
            assert "full" in line.lower()
            assert w.p.poll() is None                      # training keeps running
            ticks = log.count("batch discarded")
            w.wait_plugin_log("batch discarded", count=ticks + 1, timeout=30)  # next batch retried
            assert '"npumonitor":"Running"' in _status(daemon)
            r = run_dyno(daemon, "npu-monitor", "--npu-monitor-stop")
            assert r.returncode == 0
            w.wait_plugin_log("MsptiMonitor stop successfully", timeout=30)
            assert w.p.poll() is None
        finally:
            w.stop()
        files = glob.glob(os.path.join(out, "msmonitor_*.db"))
        assert len(files) == 1, os.listdir(out)
        db = sqlite3.connect(files[0])
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        # batches committed before the disk filled are intact (each table's batch is its own
        # transaction, docs/design/outputs.md#db-file, so tables may stop at different ticks)
        rows = {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert rows.get("TASK", 0) > 0, rows
        assert db.execute("SELECT count(DISTINCT globalTaskId) = count(*) FROM TASK").fetchone()[0] == 1
        db.close()


def test_read_only_log_dir_is_refused_and_process_keeps_running(daemon):
    tmp = tempfile.mkdtemp(prefix="mmx")
    with tmpfs("64k", read_only=True) as fs:
        w = Workload(daemon, tmp)
        try:
            wait_registered(daemon, w.p.pid)
            # an existing read-only directory, then one that would have to be created
            for i, target in enumerate((fs, os.path.join(fs, "sub"))):
                r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
                             "--mspti-activity-kind", "Kernel", "--log-file", target, "--wait-s", "60",
                             timeout=120)
                # issue 22: the refusal is dyno's outcome, with the reason, exit 3
                assert r.returncode == 3, r.stderr + r.stdout
                assert "rejected (Idle): " in r.stdout, r.stdout
                w.wait_plugin_log("Invalid log path, mspti monitor start failed", count=i + 1, timeout=30)
            assert "MsptiMonitor start successfully" not in w.plugin_log()
            wait_until(lambda: '"npumonitor":"Idle"' in _status(daemon), 30, "npumonitor Idle",
                       diag=lambda: _status(daemon))
            assert w.p.poll() is None
            assert os.listdir(fs) == []
        finally:
            w.stop()
