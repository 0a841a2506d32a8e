"""Shared end-to-end fixtures: a real dynolog on an ephemeral port with its sockets in a
private directory, the real dyno, and helpers to wait for log lines. Every process a test
starts is killed when the test ends."""
import os
import signal
import socket
import subprocess
import tempfile

import pytest

from waits import wait_log, wait_until

BUILD = os.environ.get("MSMON_BUILD_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build")
BUILD = os.path.abspath(BUILD)
SOURCE = os.path.abspath(os.environ.get("MSMON_SOURCE_DIR") or
                         os.path.join(os.path.dirname(__file__), "..", ".."))


# In the ASan+UBSan tree (tests/e2e/CMakeLists.txt sets MSMON_SANITIZED) every process a test
# stops is checked for sanitizer reports, and the daemon runs with leak detection on (the
# Python interpreters hosting sanitized libraries cannot: their own allocations would report).
SANITIZED = os.environ.get("MSMON_SANITIZED") == "1"
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def binpath(name):
    """Path of a built artifact (searched in the build tree)."""
    for sub in ("src/daemon", "src/cli", "src/sim", "src/plugin", "bench", ""):
        p = os.path.join(BUILD, sub, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"{name} not built under {BUILD}")


def free_port():
    """An unused TCP port (the daemon rejects --port 0, so tests pick one)."""
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        s.bind(("::", 0))
        return s.getsockname()[1]


class Proc:
    """A child process whose combined output is captured to a file we can grep."""

    def __init__(self, argv, env=None, logname="proc", cwd=None, tmpdir=None):
        self.tmpdir = tmpdir or tempfile.mkdtemp(prefix="mm")
        self.logpath = os.path.join(self.tmpdir, logname + ".log")
        self.logf = open(self.logpath, "wb")
        self.p = subprocess.Popen(argv, env=env, stdout=self.logf, stderr=subprocess.STDOUT,
                                  cwd=cwd or self.tmpdir, start_new_session=True)

    def log(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_log(self, text, timeout=10.0, count=1):
        """Wait until `text` appears `count` times in the output; returns the output."""
        return wait_log(self.log, text, timeout, count=count, alive=self)

    def stop(self, sig=signal.SIGTERM, timeout=5.0):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()
        self.logf.close()
        if SANITIZED:
            out = self.log()
            for marker in SANITIZER_MARKERS:
                if marker in out:
                    raise AssertionError(f"sanitizer report ({marker}) in {self.logpath}:\n{out[-6000:]}")
        return self.p.returncode


def _dgram_live(path):
    """Whether a datagram socket is bound at path (connect() sends nothing)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


class Daemon(Proc):
    """dynolog with --enable_ipc_monitor, sockets in its own directory."""

    def __init__(self, extra=(), sockdir=None, port=None, ipc=True, env_extra=None):
        self.sockdir = sockdir or tempfile.mkdtemp(prefix="mmd", dir="/tmp")
        self.port = port or free_port()
        env = dict(os.environ)
        env["MSMONITOR_SOCKET_DIR"] = self.sockdir
        env["HOME"] = self.sockdir
        if env_extra:
            env.update(env_extra)
        self.env = env
        argv = [binpath("dynolog"), "--port", str(self.port)]
        if ipc:
            argv.append("--enable_ipc_monitor")
        argv += list(extra)
        denv = dict(env)
        if SANITIZED:
            denv["ASAN_OPTIONS"] = "detect_leaks=1"
        super().__init__(argv, env=denv, logname="dynolog", tmpdir=self.sockdir)
        self.wait_log("Listening to connections on port")
        if ipc:
            # bound, not just present: a stale file from an earlier daemon exists before this
            # one replaces it (the IPC endpoints come after the TCP listener)
            wait_until(lambda: _dgram_live(os.path.join(self.sockdir, "dynolog.sock")), 30,
                       "dynolog.sock to be served", diag=self.log, alive=self, interval=0.01)

    def sock(self, name):
        return os.path.join(self.sockdir, name)

    def client_env(self, **extra):
        """Environment for a monitored process / dyno talking to this daemon."""
        env = dict(self.env)
        env.update({k: str(v) for k, v in extra.items()})
        return env


def run_dyno(daemon, *args, timeout=30, hostname=None, env=None):
    """Run the real dyno against `daemon`; returns CompletedProcess (text)."""
    argv = [binpath("dyno")]
    if daemon is not None:
        argv += ["--hostname", hostname or "localhost", "--port", str(daemon.port)]
    argv += list(args)
    e = env or (daemon.client_env() if daemon else dict(os.environ))
    return subprocess.run(argv, env=e, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def daemon():
    d = Daemon(extra=["--use_JSON"])
    yield d
    d.stop()


@pytest.fixture
def make_daemon():
    made = []

    def _make(*args, **kw):
        d = Daemon(*args, **kw)
        made.append(d)
        return d

    yield _make
    for d in made:
        d.stop()
