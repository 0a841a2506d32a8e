"""`dyno doctor`: each FAQ check both passing and failing — daemon down/up, version mismatch
(a fake RPC server answering getVersion with another version), registrations, npu-monitor/
nputrace state, library and drop counters (when the status carries them), socket files, the
target's MSMONITOR_USE_DAEMON, leftover shm with and without a live owner, log-dir space —
plus many hosts and the exit code."""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading

import pytest

from conftest import SOURCE, Daemon, binpath, free_port
from waits import wait_until

OK, FAIL, INFO = "\u2714", "\u2718", "\u2139"
VERSION = open(os.path.join(SOURCE, "VERSION")).readline().strip()


def status(processes=(), mon="Idle", trace="Idle"):
    return {"current_step": -1, "npumonitor": mon, "nputrace": trace, "processes": list(processes)}


def proc(pid, job=0, polling=True, mon="Idle", trace="Idle", **extra):
    p = {"current_step": -1, "job_id": job, "npumonitor": mon, "nputrace": trace, "pid": pid,
         "polling": polling}
    p.update(extra)
    return p


class FakeDaemon:
    """Answers framed RPCs by method: replies[fn] (dict -> JSON); unknown fn: close."""

    def __init__(self, replies, unix_path=None):
        self.replies = replies
        self.stop_ev = threading.Event()
        self.socks = []
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        self.socks.append(s)
        if unix_path:
            u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            u.bind(unix_path)
            self.socks.append(u)
        self.threads = []
        for sk in self.socks:
            sk.listen(16)
            sk.settimeout(0.1)
            t = threading.Thread(target=self._run, args=(sk,), daemon=True)
            t.start()
            self.threads.append(t)

    def _run(self, sk):
        while not self.stop_ev.is_set():
            try:
                c, _ = sk.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with c:
                c.settimeout(5)
                head = c.recv(4, socket.MSG_WAITALL)
                if len(head) != 4:
                    continue
                body = c.recv(struct.unpack("<i", head)[0], socket.MSG_WAITALL)
                rep = self.replies.get(json.loads(body).get("fn"))
                if rep is not None:
                    data = json.dumps(rep, separators=(",", ":"), sort_keys=True).encode()
                    c.sendall(struct.pack("<I", len(data)) + data)

    def close(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join()
        for s in self.socks:
            s.close()


@pytest.fixture
def env(tmp_path):
    """Private socket and shm directories for dyno (the shm dir is checked besides /dev/shm)."""
    sock = tmp_path / "sock"
    shm = tmp_path / "shm"
    sock.mkdir()
    shm.mkdir()
    e = dict(os.environ, MSMONITOR_SOCKET_DIR=str(sock), MSMONITOR_SHM_DIR=str(shm), HOME=str(sock))
    e.pop("MSMONITOR_USE_DAEMON", None)
    return e


@pytest.fixture
def fake():
    made = []

    def _make(replies, unix_path=None):
        f = FakeDaemon(replies, unix_path)
        made.append(f)
        return f

    yield _make
    for f in made:
        f.close()


def doctor(port, env, *args, hostname="localhost", prefix=()):
    argv = list(prefix) + [binpath("dyno"), "--hostname", hostname, "--port", str(port), "doctor"]
    argv += list(args)
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    r.checks = [ln for ln in r.stdout.splitlines() if ln[:1] in (OK, FAIL, INFO) or "] " in ln[:40]]
    return r


def line(r, mark, text):
    """The one check line with `mark` containing `text`."""
    hits = [ln for ln in r.checks if ln.lstrip("[]").find(mark + " ") >= 0 and text in ln]
    assert hits, f"no {mark} line with {text!r}:\n{r.stdout}\n{r.stderr}"
    return hits[0]


def no_line(r, mark, text):
    assert not [ln for ln in r.checks if mark + " " in ln and text in ln], r.stdout


def good_replies(processes=None, **st):
    return {"getVersion": {"version": VERSION},
            "getStatus": status(processes if processes is not None else [proc(os.getpid())], **st)}


# --- daemon reachable / down, versions ---------------------------------------------------

def test_daemon_down(env):
    r = doctor(free_port(), env)
    assert r.returncode == 1
    line(r, FAIL, "daemon not reachable over RPC at localhost:")
    assert "systemctl start dynolog" in r.stdout
    # one total, on stdout; nothing repeats it on stderr
    assert [ln for ln in r.stdout.splitlines() if ln.startswith("doctor: ")][-1].endswith(" failed")
    assert "checks failed" not in r.stderr and "doctor:" not in r.stderr


def test_daemon_up_and_sockets_present(env):
    d = Daemon(sockdir=env["MSMONITOR_SOCKET_DIR"])
    try:
        r = doctor(d.port, env)
        line(r, OK, "daemon reachable over RPC")
        line(r, OK, f"dyno and dynolog are both version {VERSION}")
        line(r, OK, "dynolog.sock present in $MSMONITOR_SOCKET_DIR=")
        line(r, OK, "dyno.sock present")
        # a fresh daemon has no process: that check fails and says how to fix it
        line(r, FAIL, "no process registered for any job")
        assert "MSMONITOR_USE_DAEMON=1" in line(r, FAIL, "no process registered")
        assert r.returncode == 1
    finally:
        d.stop()


def test_sockets_missing(env, fake):
    f = fake(good_replies())
    r = doctor(f.port, env)
    line(r, FAIL, "dynolog.sock missing in $MSMONITOR_SOCKET_DIR=")
    line(r, FAIL, "dyno.sock missing")
    assert r.returncode == 1


def test_sockets_home_named(env, fake):
    """Without MSMONITOR_SOCKET_DIR the home directory and its user are named."""
    f = fake(good_replies())
    e = dict(env)
    e.pop("MSMONITOR_SOCKET_DIR")
    r = doctor(f.port, e)
    import pwd
    pw = pwd.getpwuid(os.getuid())
    sock_line = [ln for ln in r.checks if "dynolog.sock" in ln][0]
    assert f"in {pw.pw_dir}, the home of {pw.pw_name}" in sock_line


def test_version_mismatch(env, fake):
    f = fake({"getVersion": {"version": "0.0.1"}, "getStatus": status([proc(os.getpid())])})
    r = doctor(f.port, env)
    line(r, OK, "daemon reachable")
    line(r, FAIL, f"versions differ: dyno {VERSION}, dynolog 0.0.1")
    assert r.returncode == 1


def test_old_daemon_without_getstatus(env, fake):
    f = fake({"getVersion": {"version": VERSION}})
    r = doctor(f.port, env)
    line(r, OK, "both version")
    line(r, FAIL, "did not answer getStatus")


# --- registrations, state, library, drops (from getStatus) ---------------------------------

def test_processes_for_job(env, fake):
    f = fake(good_replies([proc(4242, job=7), proc(4250, job=7, polling=False), proc(5000, job=8)]))
    r = doctor(f.port, env, "--job-id", "7")
    line(r, OK, "2 processes registered for job 7: 4242 (polling), 4250")
    line(r, INFO, "last poll age: not reported by this daemon")
    r = doctor(f.port, env, "--job-id", "9")
    line(r, FAIL, "no process registered for job 9")
    r = doctor(f.port, env, "--job-id", "8")
    line(r, OK, "1 process registered for job 8: 5000 (polling)")


def test_no_poller(env, fake):
    f = fake(good_replies([proc(4250, polling=False)]))
    r = doctor(f.port, env)
    line(r, FAIL, "none of them polls for configs")


def test_poll_age_when_reported(env, fake):
    f = fake(good_replies([proc(4242, last_poll_age_ms=1500)]))
    r = doctor(f.port, env)
    line(r, OK, "pid 4242: last_poll_age_ms = 1500")
    no_line(r, INFO, "last poll age")


def test_pid_registered_or_not(env, fake):
    child = subprocess.Popen(["sleep", "60"], env=dict(env, MSMONITOR_USE_DAEMON="1"))
    try:
        f = fake(good_replies([proc(child.pid)]))
        r = doctor(f.port, env, "--pid", str(child.pid))
        line(r, OK, f"pid {child.pid} is known to the daemon")
        f2 = fake(good_replies([proc(1)]))
        r = doctor(f2.port, env, "--pid", str(child.pid))
        line(r, FAIL, f"pid {child.pid} is not registered")
    finally:
        child.kill()
        child.wait()


def test_state(env, fake):
    r = doctor(fake(good_replies()).port, env)
    line(r, OK, "npu-monitor Idle, nputrace Idle: either can be started")
    r = doctor(fake(good_replies([proc(4250, mon="Running")], mon="Running")).port, env)
    line(r, OK, "npu-monitor Running (pid 4250), nputrace Idle")
    r = doctor(fake(good_replies([proc(4250, trace="Running")], trace="Running")).port, env)
    line(r, OK, "nputrace Running (pid 4250)")
    r = doctor(fake(good_replies([proc(1, mon="Running"), proc(2, trace="Running")],
                                 mon="Running", trace="Running")).port, env)
    line(r, FAIL, "npu-monitor runs in pid 1 while nputrace runs in pid 2")
    r = doctor(fake(good_replies(mon="unknown")).port, env)
    line(r, FAIL, "unknown state")


def test_library_and_drops_not_reported(env, fake):
    r = doctor(fake(good_replies()).port, env)
    line(r, INFO, "library per process: not reported by this daemon")
    line(r, INFO, "session drop counters: not reported")
    no_line(r, FAIL, "pid ")


def test_library_found_or_not(env, fake):
    r = doctor(fake(good_replies([proc(4242, mspti_library="/opt/cann/lib64/libmspti.so")])).port, env)
    line(r, OK, "pid 4242: mspti_library = /opt/cann/lib64/libmspti.so")
    r = doctor(fake(good_replies([proc(4242, mspti_library="")])).port, env)
    assert "LD_PRELOAD" in line(r, FAIL, "pid 4242: mspti_library empty (no library found)")


def test_drop_counters(env, fake):
    r = doctor(fake(good_replies([proc(4242, session={"dropped_records": 0})])).port, env)
    line(r, OK, "pid 4242: dropped_records = 0")
    r = doctor(fake(good_replies([proc(4242, session={"dropped_records": 12})])).port, env)
    assert "--mspti-activity-kind" in line(r, FAIL, "pid 4242: dropped_records = 12 records dropped")
    r = doctor(fake(good_replies([proc(4242, sessions=[{"dropped_queue": 0}, {"dropped_write": 3}])])).port,
               env)
    line(r, OK, "pid 4242: dropped_queue = 0")
    line(r, FAIL, "pid 4242: dropped_write = 3 records dropped")


def _stats(**over):
    st = {k: 0 for k in ("before_start", "bytes_written", "consumed", "cpu_ns", "dropped_declined",
                         "dropped_queue", "dropped_write", "filtered", "kept", "written")}
    st.update(over)
    return st


def test_session_stats(env, fake):
    """The daemon's own per-session counters (getStatus `session_stats`)."""
    r = doctor(fake(good_replies([proc(4242, session_stats=_stats(consumed=10, kept=7, filtered=3))])).port,
               env)
    line(r, OK, "pid 4242: session consumed 10, kept 7, filtered 3, written 0, 0 dropped")
    no_line(r, INFO, "drop counters")
    r = doctor(fake(good_replies([proc(4242, session_stats=_stats(dropped_declined=4, dropped_queue=1))])).port,
               env)
    # each reason its own line and fix (issue 22): a full buffer pool is not a full disk
    got = line(r, FAIL, "pid 4242: dropping 100% of records: 4 buffer requests declined")
    assert "Buffer allocation exhausted" in got
    got = line(r, FAIL, "pid 4242: 1 records dropped at the full output queue")
    assert "--filter" in got
    assert r.returncode == 1
    r = doctor(fake(good_replies([proc(4242, session_stats=_stats(consumed=10, kept=10, dropped_write=2))])).port,
               env)
    got = line(r, FAIL, "pid 4242: 2 records lost to write errors (a full disk?)")
    assert "free space" in got and "Buffer allocation" not in got
    assert r.returncode == 1


def test_health_marks_fail(env, fake):
    """Every mark the daemon puts on a process (getStatus `health.marks`) is a failed check with
    its text; a process without marks passes the health check."""
    marks = [{"code": "no_step", "text": "no step since the config (published 9.0 s ago; last step: never) - fix: x"},
             {"code": "dropping_declined", "text": "judged by the session line instead"}]
    r = doctor(fake(good_replies([proc(4242, health={"gone": False, "marks": marks, "rank": 1}),
                                  proc(4243, health={"gone": False, "marks": [], "rank": 0})])).port, env)
    line(r, FAIL, "pid 4242: no step since the config (published 9.0 s ago; last step: never)")
    no_line(r, FAIL, "judged by the session line instead")
    assert r.returncode == 1
    r = doctor(fake(good_replies([proc(4243, health={"gone": False, "marks": [], "rank": 0})])).port, env)
    line(r, OK, "live health of 1 process: no marks")


def test_real_job_end_to_end(env):
    """The real daemon and a simulated job with the plugin: registered, env var set, and once
    npu-monitor runs, the daemon's own session counters appear as a passing line."""
    from plugin_util import Workload, wait_registered
    from conftest import run_dyno
    d = Daemon(sockdir=env["MSMONITOR_SOCKET_DIR"])
    w = None
    try:
        r = doctor(d.port, env)
        line(r, INFO, "session drop counters: not reported")   # no session yet: not a failure
        w = Workload(d, tempfile.mkdtemp(prefix="mmdoc"))
        wait_registered(d, w.p.pid)
        r = run_dyno(d, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
                     "--mspti-activity-kind", "Kernel")
        assert r.returncode == 0, r.stderr + r.stdout
        w.wait_plugin_log("MsptiMonitor start successfully")
        r = wait_until(lambda: (lambda r: r if [ln for ln in r.checks if f"pid {w.p.pid}: session consumed" in ln]
                                else None)(doctor(d.port, env, "--pid", str(w.p.pid))), 60,
                       "doctor to see the session consume", interval=0.3)
        line(r, OK, f"pid {w.p.pid}: session consumed")
        line(r, OK, f"pid {w.p.pid} has MSMONITOR_USE_DAEMON=1")
        line(r, OK, f"npu-monitor Running (pid {w.p.pid})")
        line(r, OK, "process registered for any job")
    finally:
        if w:
            w.stop()
        d.stop()


# --- the target process's environment --------------------------------------------------------

@pytest.mark.parametrize("value,mark,text", [("1", OK, "has MSMONITOR_USE_DAEMON=1"),
                                             (None, FAIL, "lacks MSMONITOR_USE_DAEMON"),
                                             ("0", FAIL, "has MSMONITOR_USE_DAEMON=0 (must be 1)")])
def test_env_var(env, fake, value, mark, text):
    cenv = dict(env)
    if value is not None:
        cenv["MSMONITOR_USE_DAEMON"] = value
    child = subprocess.Popen(["sleep", "60"], env=cenv)
    try:
        r = doctor(fake(good_replies([proc(child.pid)])).port, env, "--pid", str(child.pid))
        got = line(r, mark, f"pid {child.pid} {text}")
        if mark == FAIL:
            assert "export MSMONITOR_USE_DAEMON=1" in got
    finally:
        child.kill()
        child.wait()


def test_env_var_no_such_process(env, fake):
    child = subprocess.Popen(["true"])
    child.wait()
    r = doctor(fake(good_replies()).port, env, "--pid", str(child.pid))
    line(r, FAIL, f"no process {child.pid} on this node")


def test_env_var_unreadable(env, fake):
    if os.geteuid() == 0:
        pytest.skip("root reads every /proc/<pid>/environ")
    r = doctor(fake(good_replies()).port, env, "--pid", "1")
    line(r, INFO, "could not read /proc/1/environ")


# --- leftover shared memory --------------------------------------------------------------------

def test_stale_shm(env, fake):
    shm = env["MSMONITOR_SHM_DIR"]
    stale = os.path.join(shm, "DynamicProfileNpuShm2026010100")
    opened = os.path.join(shm, "DynamicProfileNpuShm2026010101")
    mapped = os.path.join(shm, "DynamicProfileNpuShm2026010102")
    for p in (stale, opened, mapped):
        with open(p, "wb") as fh:
            fh.write(b"\0" * 4096)
    # one held open by a live process, one only mapped (its fd closed)
    holder = subprocess.Popen(["sleep", "60"], stdin=open(opened, "rb"))
    mapper = subprocess.Popen([sys.executable, "-c",
                               "import mmap,sys,time\n"
                               f"f=open({mapped!r},'r+b'); m=mmap.mmap(f.fileno(),4096); f.close()\n"
                               "print('ready', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert mapper.stdout.readline().strip() == "ready"
        f = fake(good_replies())
        r = doctor(f.port, env)
        got = line(r, FAIL, f"1 leftover dyno-mode file in {shm} (")
        assert "with no live owner" in got
        assert got.endswith(f"fix: rm -f -- {stale} (docs/troubleshooting.md#leftover-segments)"), got
        os.unlink(stale)
        r = doctor(f.port, env)
        assert "2 in use by live processes" in line(r, OK, f"no leftover dyno-mode files in {shm} (")
    finally:
        for p in (holder, mapper):
            p.kill()
            p.wait()
    r = doctor(f.port, env)
    got = line(r, FAIL, f"2 leftover dyno-mode files in {shm} (")
    assert f"rm -f -- {opened} {mapped}" in got or f"rm -f -- {mapped} {opened}" in got


# --- disk space of the log directory ---------------------------------------------------------

def test_log_dir(env, fake, tmp_path):
    f = fake(good_replies())
    r = doctor(f.port, env, "--log-dir", str(tmp_path))
    st = os.statvfs(str(tmp_path))
    avail = st.f_bavail * st.f_frsize
    if avail >= (1 << 30) and avail * 20 >= st.f_blocks * st.f_frsize:
        line(r, OK, f"log dir {tmp_path}:")
    else:
        line(r, FAIL, f"log dir {tmp_path}: only")
    r = doctor(f.port, env, "--log-dir", str(tmp_path / "missing"))
    line(r, FAIL, f"log dir {tmp_path / 'missing'}: No such file or directory")
    # a nearly full filesystem (a 2 MiB tmpfs, root only)
    if os.geteuid() == 0 and shutil.which("unshare"):
        small = tmp_path / "small"
        small.mkdir()
        r = doctor(f.port, env, "--log-dir", str(small),
                   prefix=["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=2m none {small} && exec \"$@\"", "sh"])
        line(r, FAIL, f"log dir {small}: only 0.00 GiB free")


# --- usage, many hosts, exit code ------------------------------------------------------------

def test_usage_errors(env):
    for args in (["--pid", "x"], ["--pid", "0"], ["--job-id", "-1"], ["--bogus"]):
        r = doctor(1, env, *args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)


def test_many_hosts(env, fake):
    f = fake(good_replies())
    r = doctor(f.port, env, hostname="localhost,127.0.0.1,doctor-no-such-host.invalid")
    out = r.stdout
    assert "[localhost] " + OK + " daemon reachable" in out
    assert "[127.0.0.1] " + OK + " daemon reachable" in out
    assert "[doctor-no-such-host.invalid] " + FAIL + " daemon not reachable" in out
    assert "[doctor-no-such-host.invalid] " + INFO + " doctor-no-such-host.invalid is not this node" in out
    assert "Summary: 3 hosts, " in out and r.returncode == 1


def test_all_checks_pass_exit_0(env, fake, tmp_path):
    """Everything healthy: sockets present, a registered polling process with the env var,
    no leftover shm (a private /dev/shm, as other jobs may leave files in the real one)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare for a private /dev/shm")
    sockdir = env["MSMONITOR_SOCKET_DIR"]
    dsock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dsock.bind(os.path.join(sockdir, "dynolog.sock"))
    child = subprocess.Popen(["sleep", "60"], env=dict(env, MSMONITOR_USE_DAEMON="1"))
    try:
        f = fake(good_replies([proc(child.pid)]), unix_path=os.path.join(sockdir, "dyno.sock"))
        for host in ("localhost", "unix:"):
            r = doctor(f.port, env, "--pid", str(child.pid), "--log-dir", str(tmp_path), hostname=host,
                       prefix=["unshare", "-m", "sh", "-c", "mount -t tmpfs none /dev/shm && exec \"$@\"", "sh"])
            assert r.returncode == 0, r.stdout + r.stderr
            assert not [ln for ln in r.checks if FAIL in ln], r.stdout
            assert r.stdout.splitlines()[-1].endswith(" failed") and " 0 failed" in r.stdout.splitlines()[-1]
    finally:
        child.kill()
        child.wait()
        dsock.close()
