"""The plugin inside a root training process (issue 13 item 3): its log file is never opened
through a planted symlink nor chmod'ed when it was not created by the plugin, and a
msmonitor_log directory planted as a symlink is refused. The workload is the real simulator
with libmsmonitor.so; the symlinks are planted, under the exact names the plugin will use, by
a wrapper that then execs the workload in the same pid. Regression tests for the probe."""
import os
import stat
import sys
import tempfile

from conftest import Daemon, Proc, binpath
from waits import wait_until

WRAPPER = r"""
import os, sys, time
logdir, victim = sys.argv[1], sys.argv[2]
pid, now = os.getpid(), int(time.time())
os.makedirs(logdir, exist_ok=True)
for t in range(now - 1, now + 30):   # every name the plugin may pick in the next 30 s
    name = time.strftime("msmonitor_%Y%m%d-%H%M%S", time.localtime(t)) + ".%d.log" % pid
    os.symlink(victim, os.path.join(logdir, name))
os.execv(sys.argv[3], sys.argv[3:])
"""


def start(d, tmp, wrapper_args):
    ready = os.path.join(tmp, "ready")
    env = d.client_env(MSMONITOR_USE_DAEMON=1, MSMONITOR_NATIVE_POLL=1,
                       MSMONITOR_MSPTI_LIB=binpath("libmspti.so"), MSMONITOR_LOG_PATH=tmp)
    argv = [binpath("mssim-train"), "--with-plugin", binpath("libmsmonitor.so"), "--steps", "0",
            "--ready-file", ready]
    p = Proc([sys.executable, "-c", WRAPPER] + wrapper_args + argv, env=env, logname="workload",
             tmpdir=tmp)
    wait_until(lambda: os.path.exists(ready), 60, "the workload to be ready", diag=p.log, alive=p)
    return p


def test_planted_log_file_symlink_is_not_followed():
    d = Daemon()
    tmp = tempfile.mkdtemp(prefix="mmsp")
    victim = os.path.join(tempfile.mkdtemp(prefix="mmvictim"), "precious")
    with open(victim, "w") as f:
        f.write("precious\n")
    os.chmod(victim, 0o600)
    w = start(d, tmp, [os.path.join(tmp, "msmonitor_log"), victim])
    try:
        w.wait_log("LOG_PATH: %s/msmonitor_log of Msmonitor is invalid." % tmp)
    finally:
        w.stop()
        d.stop()
    with open(victim) as f:
        assert f.read() == "precious\n"
    assert stat.S_IMODE(os.stat(victim).st_mode) == 0o600


def test_planted_log_directory_symlink_is_refused():
    d = Daemon()
    tmp = tempfile.mkdtemp(prefix="mmsp")
    elsewhere = tempfile.mkdtemp(prefix="mmvictim")
    os.symlink(elsewhere, os.path.join(tmp, "msmonitor_log"))
    # no file symlinks this time: the wrapper plants its names in an unrelated directory
    w = start(d, tmp, [os.path.join(tmp, "unused"), os.path.join(tmp, "nothing")])
    try:
        w.wait_log("LOG_PATH: %s/msmonitor_log of Msmonitor is invalid." % tmp)
    finally:
        w.stop()
        d.stop()
    assert os.listdir(elsewhere) == []


def test_own_log_file_still_written_with_its_mode():
    d = Daemon()
    tmp = tempfile.mkdtemp(prefix="mmsp")
    w = start(d, tmp, [os.path.join(tmp, "unused"), os.path.join(tmp, "nothing")])
    try:
        w.wait_log("msMonitor log will record to %s/msmonitor_log" % tmp)
    finally:
        w.stop()
        d.stop()
    logs = [f for f in os.listdir(os.path.join(tmp, "msmonitor_log")) if f.endswith(".log")]
    assert len(logs) == 1
    assert stat.S_IMODE(os.stat(os.path.join(tmp, "msmonitor_log", logs[0])).st_mode) == 0o640


def _workload_as(d, tmp, exe, prefix, env_extra):
    ready = os.path.join(tmp, "ready")
    env = d.client_env(MSMONITOR_USE_DAEMON=1, MSMONITOR_NATIVE_POLL=1, MSMONITOR_LOG_PATH=tmp,
                       **env_extra)
    argv = prefix + [exe, "--with-plugin", binpath("libmsmonitor.so"), "--steps", "0",
                     "--ready-file", ready]
    p = Proc(argv, env=env, logname="workload", tmpdir=tmp)
    wait_until(lambda: os.path.exists(ready), 60, "the workload to be ready", diag=p.log, alive=p)
    return p


def test_library_variables_ignored_when_set_uid():
    """MSMONITOR_MSPTI_LIB names a library to dlopen: a set-uid-root workload started by
    nobody must not take it from nobody's environment (secure_getenv); a plain root one does.
    The plugin resolves its library at start-up and reports it (PluginInfo) on registering."""
    from plugin_util import wait_registered
    exe_dir = tempfile.mkdtemp(prefix="mmsuid")
    os.chmod(exe_dir, 0o755)
    suid = os.path.join(exe_dir, "mssim-train")
    with open(binpath("mssim-train"), "rb") as src, open(suid, "wb") as dst:
        dst.write(src.read())
    os.chmod(suid, 0o4755)
    evil = "/nonexistent/evil_mspti.so"
    # the set-uid process checks access(2) with its real uid, and the kernel's credentials name
    # the real uid too (nobody): reachable socket files, and nobody allowed
    sockdir = tempfile.mkdtemp(prefix="mmsuidd", dir="/tmp")
    os.chmod(sockdir, 0o755)
    d = Daemon(extra=["--ipc_socket_mode", "0666", "--ipc_allowed_uids", "65534"], sockdir=sockdir)
    try:
        for exe, prefix in ((binpath("mssim-train"), []),
                            (suid, ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])):
            tmp = tempfile.mkdtemp(prefix="mmsp")
            os.chmod(tmp, 0o777)
            w = _workload_as(d, tmp, exe, prefix, {"MSMONITOR_MSPTI_LIB": evil})
            try:
                wait_registered(d, w.p.pid)
                d.wait_log('"kind":"PluginInfo"')
                out = w.log() + _plugin_log(tmp)
                if not prefix:
                    assert "msPTI library not found (searched: MSMONITOR_MSPTI_LIB=%s)" % evil in out, out
                else:
                    assert evil not in out, out
            finally:
                w.stop()
    finally:
        d.stop()
    infos = [l for l in d.log().splitlines() if '"kind":"PluginInfo"' in l]
    assert len(infos) == 2, infos


def _plugin_log(tmp):
    out = ""
    logdir = os.path.join(tmp, "msmonitor_log")
    for f in sorted(os.listdir(logdir)) if os.path.isdir(logdir) else []:
        with open(os.path.join(logdir, f), "rb") as fh:
            out += fh.read().decode("utf-8", "replace")
    return out
