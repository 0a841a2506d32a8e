"""A root training rank trusts only its daemon (issue 23 items 1 and 2, issue 22 case 10), with
real processes: another uid (nobody, through setpriv) in a user and mount namespace of its own
binds the daemon's socket path and sends config replies to the rank's abstract address; the
same user pre-creates the dyno-mode segment directory and segment (0666) under the names the
rank will use. The rank must refuse both, keep being monitored through its real daemon, and
two jobs on one node must each get their own segment and both be monitored."""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile

import pytest

from conftest import Proc, run_dyno
from dyn_util import wait_until
from plugin_util import Workload, wait_registered
from python_util import PYTHON, py_env, require_packages

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

# The fake daemon: in its own mount namespace a tmpfs hides the real socket directory, so it
# can bind the very path the rank expects replies from; then it floods every plugin socket
# listed in /proc/net/unix with a `req` reply carrying its config until told to stop.
FAKE_DAEMON = r"""
import os, socket, struct, subprocess, sys, time
sockdir, cfg, stop = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
subprocess.run(["mount", "-t", "tmpfs", "none", sockdir], check=True)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(os.path.join(sockdir, "dynolog.sock"))
reply = struct.pack("<Q32s", len(cfg), b"req".ljust(32, b"\0")) + cfg
print("bound", flush=True)
deadline = time.monotonic() + 120
while not os.path.exists(stop) and time.monotonic() < deadline:
    with open("/proc/net/unix") as f:   # '@' stands for each NUL of an abstract name
        names = {ln.split()[-1] for ln in f if ln.split()[-1].startswith("@dynoconfigclient")}
    for n in names:
        try:
            s.sendto(reply, n.replace("@", "\0").encode())
        except OSError:
            pass
    time.sleep(0.002)
"""


def nobody_dir(prefix):
    """A directory nobody can read scripts from and write its stop flag into."""
    d = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    os.chmod(d, 0o777)
    return d


def victim_dir():
    """Stands for /etc/<dir>: root's, and nothing may ever be written there."""
    d = tempfile.mkdtemp(prefix="mmvictim", dir="/tmp")
    os.chmod(d, 0o755)
    return d


def attack_cfg(victim):
    return ("NPU_MONITOR_START=true\nNPU_MONITOR_STOP=false\nREPORT_INTERVAL_S=1\nDURATION=-1\n"
            f"MSPTI_ACTIVITY_KIND=Kernel\nNPU_MONITOR_EXPORT_TYPE=DB\nNPU_MONITOR_LOG_FILE={victim}")


@pytest.fixture
def userns():
    r = subprocess.run(NOBODY + ["unshare", "-U", "-m", "-r", "true"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("unprivileged user namespaces are not available: " + r.stderr.strip())
    if os.geteuid() != 0:
        pytest.skip("the attack needs a root rank and a second uid")


def test_fake_daemon_reply_from_another_uid_is_refused(make_daemon, tmp_path, userns):
    d = make_daemon()
    victim = victim_dir()
    work = nobody_dir("mmatk")
    script = os.path.join(work, "fake.py")
    with open(script, "w") as f:
        f.write(FAKE_DAEMON)
    os.chmod(script, 0o644)
    stop = os.path.join(work, "stop")
    w = Workload(d, str(tmp_path))
    fake = None
    try:
        wait_registered(d, w.p.pid)
        fake = Proc(NOBODY + ["unshare", "-U", "-m", "-r", PYTHON, script, d.sockdir, attack_cfg(victim), stop],
                    logname="fake", tmpdir=work)
        fake.wait_log("bound", timeout=20)
        # the rank reads the forged replies in place of its daemon's: refused, with the sender
        log = w.wait_plugin_log("uid 65534: sender is neither root nor this process's user", timeout=60)
        assert re.search(r"refused a datagram from pid \d+ uid 65534", log), log
        assert "refused so far" in log
        open(stop, "w").close()
        assert fake.p.wait(30) == 0, fake.log()
        # still served by the real daemon: its config reaches the rank and is applied
        out = tmp_path / "out"
        r = run_dyno(d, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel",
                     "--report-interval-s", "1", "--log-file", str(out))
        assert '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr
        wait_until(lambda: glob.glob(str(out / "*.db")), 30, "the rank's own DB file",
                   lambda: w.plugin_log()[-3000:])
    finally:
        open(stop, "w").close()
        if fake:
            fake.stop()
        w.stop()
        shutil.rmtree(work, ignore_errors=True)
    assert os.listdir(victim) == [], os.listdir(victim)
    os.rmdir(victim)


# nobody squats every name the job's ranks would use in the shared directory: this uid's
# private directory (0777) with a 0666 segment in it, and the segment name at the top level,
# each holding a config that would make the root rank write into the victim directory.
SQUAT = r"""
import os, struct, sys, time
shared, uid, name, victim = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
cfg = {"NPU_MONITOR_START": "true", "NPU_MONITOR_STOP": "false", "REPORT_INTERVAL_S": "1",
       "MSPTI_ACTIVITY_KIND": "Kernel", "NPU_MONITOR_EXPORT_TYPE": "DB", "NPU_MONITOR_LOG_FILE": victim}
text = "\n".join(k + "=" + v for k, v in cfg.items()).encode()
blob = struct.pack("<Ii", int(time.time()) + 3600, -1) + text + b" " * ((1 << 20) - 8 - len(text))
priv = os.path.join(shared, "msmonitor-" + uid)
os.mkdir(priv)
os.chmod(priv, 0o777)
for d in (shared, priv):
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(blob)
    os.chmod(p, 0o666)
print("squatted", flush=True)
"""


def creator_pids(text):
    return {int(m) for m in re.findall(r"\[msmonitor\.dynamic_profile (\d+)\] rank \d+ attached to .* as creator",
                                       text)}


def polling_pids(daemon):
    o = run_dyno(daemon, "status").stdout
    s = json.loads(o[o.index("{"):]) if "{" in o else {}
    return {p["pid"] for p in s.get("processes", []) if p.get("polling")}


def start_job(env, tmp, name):
    job = Proc([PYTHON, "-m", "mssim.train", "--ranks", "2", "--steps", "0", "--rate", "20"], env=env,
               logname=name, tmpdir=str(tmp))
    job.wait_log("started: device", count=2, timeout=60)
    job.wait_log("Init dynolog success !", timeout=60)
    return job


def test_squatted_segment_is_refused_and_the_job_still_monitored(make_daemon, tmp_path):
    require_packages()
    if os.geteuid() != 0:
        pytest.skip("the squat needs a root rank and a second uid")
    d = make_daemon()
    shared = nobody_dir("mmshm")            # stands for /dev/shm
    os.chmod(shared, 0o1777)
    victim = victim_dir()
    env = py_env(d.client_env(), MSMONITOR_USE_DAEMON=1, MSMONITOR_POLL_INTERVAL_S=0.3, MSMONITOR_SHM_DIR=shared,
                 MASTER_ADDR="127.0.0.1", MASTER_PORT="29611", MSMONITOR_LOG_PATH=tmp_path)
    env.pop("XDG_RUNTIME_DIR", None)
    env.pop("MSMONITOR_JOB_KEY", None)
    key = subprocess.run([PYTHON, "-c", "from msmonitor.dynamic_profile import shm_name; print(shm_name())"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    work = nobody_dir("mmsq")
    script = os.path.join(work, "squat.py")
    with open(script, "w") as f:
        f.write(SQUAT)
    os.chmod(script, 0o644)
    r = subprocess.run(NOBODY + [PYTHON, script, shared, str(os.geteuid()), key, victim], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0 and "squatted" in r.stdout, r.stderr
    job = None
    try:
        job = start_job(env, tmp_path, "job")
        log = job.log()
        assert f"{shared}/msmonitor-0: owned by uid 65534, not by uid 0; not using it" in log, log
        assert "have its owner or root remove it" in log
        assert f"the job's segment lives in {d.sockdir}/msmonitor-shm instead" in log, log
        assert os.path.exists(os.path.join(d.sockdir, "msmonitor-shm", key))
        wait_until(lambda: creator_pids(job.log()) & polling_pids(d), 30, "the job's creator to poll")
        out = tmp_path / "out"
        r = run_dyno(d, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel",
                     "--report-interval-s", "1", "--duration", "2", "--log-file", str(out))
        assert '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr
        wait_until(lambda: len(glob.glob(str(out / "*.db"))) == 2, 30, "a DB file from each rank",
                   lambda: job.log()[-3000:])
    finally:
        if job:
            job.stop(signal.SIGTERM, timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    assert os.listdir(victim) == [], os.listdir(victim)
    # the squatter's files are left alone (not ours to remove), and unchanged in mode
    assert os.stat(os.path.join(shared, key)).st_mode & 0o777 == 0o666
    shutil.rmtree(shared, ignore_errors=True)
    os.rmdir(victim)


def test_two_jobs_on_one_node_are_both_monitored(make_daemon, tmp_path):
    """Issue 22 case 10: two jobs on one node in the same hour each get their own segment and
    poller, both are listed by `dyno status`, and one config reaches all four ranks."""
    require_packages()
    d = make_daemon()
    shm = tmp_path / "shm"
    shm.mkdir()
    jobs = []
    try:
        for port in ("29621", "29622"):
            env = py_env(d.client_env(), MSMONITOR_USE_DAEMON=1, MSMONITOR_POLL_INTERVAL_S=0.3,
                         MSMONITOR_SHM_DIR=shm, MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                         MSMONITOR_LOG_PATH=tmp_path)
            env.pop("MSMONITOR_JOB_KEY", None)
            jobs.append(start_job(env, tmp_path, "job" + port))
        creators = [creator_pids(j.log()) for j in jobs]
        assert all(len(c) == 1 for c in creators), [j.log() for j in jobs]
        assert len(glob.glob(str(shm / "DynamicProfileNpuShm-*"))) == 2
        both = creators[0] | creators[1]
        wait_until(lambda: both <= polling_pids(d), 30, "both jobs' creators in dyno status",
                   lambda: run_dyno(d, "status").stdout)
        out = tmp_path / "out"
        r = run_dyno(d, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel",
                     "--report-interval-s", "1", "--duration", "2", "--log-file", str(out))
        assert '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr
        wait_until(lambda: len(glob.glob(str(out / "*.db"))) == 4, 30, "a DB file from each of the 4 ranks",
                   lambda: "\n".join(j.log()[-2000:] for j in jobs))
    finally:
        for j in jobs:
            j.stop(signal.SIGTERM, timeout=30)
    assert os.listdir(shm) == []


# A daemon of the rank's own uid whose config values carry CR and ESC: the rank may refuse the
# values, but whatever it logs of them is escaped (issue 23 item 4).
RAW_DAEMON = r"""
import os, socket, struct, sys
sockdir, cfg = sys.argv[1], sys.argv[2].encode("utf-8", "surrogateescape")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(os.path.join(sockdir, "dynolog.sock"))
print("bound", flush=True)
while True:
    d, addr = s.recvfrom(70000)
    if len(d) >= 40 and d[8:40].split(b"\0")[0] == b"req" and addr:
        s.sendto(struct.pack("<Q32s", len(cfg), b"req".ljust(32, b"\0")) + cfg, addr)
"""


def test_config_values_reach_the_rank_log_escaped(tmp_path):
    sockdir = tempfile.mkdtemp(prefix="mmraw", dir="/tmp")
    forged = "1\rE1204 00:00:00.000000 1 forged.c:1] FORGED\x1b[2J\x1b]0;t\x07"
    cfg = f"NPU_MONITOR_START=true\nNPU_MONITOR_STOP=false\nMSPTI_ACTIVITY_KIND=Kernel\nREPORT_INTERVAL_S={forged}\n"
    fake = Proc([PYTHON, "-c", RAW_DAEMON, sockdir, cfg], logname="raw", tmpdir=sockdir)
    w = None
    try:
        fake.wait_log("bound", timeout=20)

        class RawDaemon:
            def client_env(self):
                return dict(os.environ, MSMONITOR_SOCKET_DIR=sockdir, HOME=sockdir)

        w = Workload(RawDaemon(), str(tmp_path))
        log = w.wait_plugin_log("Invalid value for REPORT_INTERVAL_S = '1\\rE1204 00:00:00.000000 1 forged.c:1] "
                                "FORGED\\x1b[2J\\x1b]0;t\\x07'", timeout=60)
        for text in (log, w.log()):   # the file and the rank's stderr
            assert "\r" not in text and "\x1b" not in text and "\x07" not in text, repr(text[-2000:])
        assert "FORGED" in w.log()    # ERROR lines reach stderr too, escaped
    finally:
        if w:
            w.stop()
        fake.stop()
        shutil.rmtree(sockdir, ignore_errors=True)
