"""RPC resource caps that hold under attack (issue 13 item 4), with the real daemon and dyno:
100 slowloris connections (1 byte/s) plus 2,000 churning connections from other addresses do
not keep a local (dyno.sock) or a remote `dyno status` from being answered; accept pauses at
EMFILE instead of spinning; an RPC body cannot forge a log line; a flagfile must be a regular
file. Regression tests for the probe's reproducers (latency figures: bench/security)."""
import os
import socket
import struct
import subprocess
import tempfile
import threading
import time

from conftest import Daemon, Proc, binpath, free_port, run_dyno
from daemon_util import frame, rpc
from waits import wait_until

SLOW_PEER, CHURN_PEER = "127.0.0.2", "127.0.0.3"


class Slowloris(threading.Thread):
    """n connections from one address, each dribbling a framed request 1 byte a second and
    reconnecting as soon as the daemon closes it."""

    def __init__(self, port, n=100, src=SLOW_PEER):
        super().__init__(daemon=True)
        self.port, self.n, self.src = port, n, src
        self.stop = threading.Event()
        self.opened = 0
        self.payload = frame('{"fn":"getStatus"}')

    def _open(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((self.src, 0))
        s.setblocking(False)
        try:
            s.connect((("127.0.0.1"), self.port))
        except BlockingIOError:
            pass
        self.opened += 1
        return [s, 0]

    def run(self):
        conns = [self._open() for _ in range(self.n)]
        while not self.stop.wait(1.0):
            for i, c in enumerate(conns):
                try:
                    c[0].send(self.payload[c[1]:c[1] + 1])
                    c[1] = (c[1] + 1) % len(self.payload)
                except OSError:
                    c[0].close()
                    conns[i] = self._open()
        for c in conns:
            c[0].close()


class Churn(threading.Thread):
    """total connections from one address, each opened and closed at once (half of them after
    a partial length), as fast as the loop takes them."""

    def __init__(self, port, total=2000, src=CHURN_PEER):
        super().__init__(daemon=True)
        self.port, self.total, self.src = port, total, src
        self.done = 0

    def run(self):
        for i in range(self.total):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((self.src, 0))
                s.connect(("127.0.0.1", self.port))
                if i % 2:
                    s.send(b"\x10\x00")
            except OSError:
                pass
            finally:
                s.close()
            self.done += 1


def test_slowloris_and_churn_do_not_lock_out_legit_clients():
    d = Daemon()
    slow = Slowloris(d.port)
    churn = Churn(d.port)
    try:
        slow.start()
        d.wait_log("too many concurrent RPC connections from ::ffff:%s (limit 8)" % SLOW_PEER)
        churn.start()
        answered = {"local": 0, "remote": 0}
        while churn.is_alive() or answered["local"] < 10 or answered["remote"] < 10:
            for kind, host in (("local", "unix:"), ("remote", "127.0.0.1")):
                r = run_dyno(d, "status", hostname=host)
                assert r.returncode == 0, (kind, r.stdout, r.stderr)
                assert '"nputrace"' in r.stdout or "nputrace" in r.stdout, r.stdout
                answered[kind] += 1
        churn.join()
        print("answered", answered, "slowloris connections opened", slow.opened)
        assert churn.done == 2000 and slow.opened >= 100
        # the slow peer never held more than its 8 slots, and said so at most once a second
        log = d.log()
        assert log.count("too many concurrent RPC connections from") < 60
        # its dribbling connections end by the deadline or, at its cap, by eviction
        assert any(m in log for m in ("Timeout! Message received size", "Received partial message",
                                      "closed the oldest incomplete connection"))
    finally:
        slow.stop.set()
        slow.join(5)
        d.stop()


def _cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])     # utime + stime


def test_accept_at_emfile_pauses_instead_of_spinning():
    sockdir = tempfile.mkdtemp(prefix="mmd", dir="/tmp")
    port = free_port()
    env = dict(os.environ, MSMONITOR_SOCKET_DIR=sockdir, HOME=sockdir)
    d = Proc(["prlimit", "--nofile=40:40", binpath("dynolog"), "--port", str(port),
              "--rpc_max_clients", "1000", "--rpc_max_clients_per_peer", "1000"],
             env=env, logname="dynolog", tmpdir=sockdir)
    held = []
    try:
        d.wait_log("Listening to connections on port")
        for _ in range(60):                  # more than the 40 descriptors the daemon has
            s = socket.create_connection(("127.0.0.1", port))
            s.send(b"\x10")                  # past the first-byte deadline: held for 3 s
            held.append(s)
        d.wait_log("accept failed: EMFILE; not accepting for 100 ms")
        hz = os.sysconf("SC_CLK_TCK")
        t0, c0 = time.monotonic(), _cpu_ticks(d.p.pid)
        time.sleep(1.5)
        cpu = (_cpu_ticks(d.p.pid) - c0) / hz / (time.monotonic() - t0)
        assert cpu < 0.5, "daemon at %.0f %% CPU while out of descriptors" % (cpu * 100)
        for s in held:
            s.close()
        held = []
        # recovered: served again once descriptors are back
        wait_until(lambda: rpc(port, '{"fn":"getVersion"}', timeout=5) == b'{"version":"0.3.2"}', 60,
                   "the daemon to serve again", diag=d.log, alive=d, interval=0.2)
    finally:
        for s in held:
            s.close()
        d.stop()


def test_log_injection_is_escaped_on_one_line():
    d = Daemon()
    try:
        forged = "\nE1201 00:00:00.000000 1 rpc_server.c:1] forged line"
        body = ('{"fn":"getVersion","x":"%s"}' % forged).encode() + b"\xff\xfe"
        rpc(d.port, body)
        d.wait_log("Error parsing message = ")
        line = [l for l in d.log().splitlines() if "RPC message received = " in l][-1]
        assert "\\nE1201 00:00:00.000000 1 rpc_server.c:1] forged line" in line
        assert line.endswith('"}\\xff\\xfe')
        assert not any(l.startswith("E1201 00:00:00.000000 1 rpc_server.c:1]") for l in d.log().splitlines())
        # a control character in an IPC type tag is shown escaped as well
        from ipcclient import IpcClient, build
        with IpcClient(d.sockdir) as c:
            c.send_raw(build("evil\nW0000 fake", b"x"))
        d.wait_log("TYPE UNKOWN: evil\\nW0000 fake")
    finally:
        d.stop()


def test_flagfile_must_be_a_small_regular_file():
    tmp = tempfile.mkdtemp(prefix="mmff")
    big = os.path.join(tmp, "big")
    with open(big, "w") as f:
        f.write("# x\n" * 300000)
    for path, msg in (("/dev/zero", "ERROR: flagfile '/dev/zero' is not a regular file"),
                      (tmp, "ERROR: flagfile '%s' is not a regular file" % tmp),
                      (big, "larger than the 1048576-byte cap")):
        p = subprocess.run([binpath("dynolog"), "--flagfile", path], capture_output=True, text=True,
                           timeout=20)
        assert p.returncode == 1 and msg in p.stderr, p.stderr


def test_out_of_range_numbers_get_a_plain_message():
    d = Daemon()
    try:
        rep = rpc(d.port, '{"fn":"setKinetOnDemandRequest","config":"A","pids":[0],"process_limit":1e40}')
        assert rep == (b'{"status":"failed: process_limit 1e+40 is out of range '
                       b'-9223372036854775808..9223372036854775807"}')
    finally:
        d.stop()
    p = subprocess.run([binpath("dynolog"), "--port", "70000"], capture_output=True, text=True, timeout=20)
    assert p.returncode == 1 and "ERROR: value '70000' for flag 'port' is out of range 0..65535" in p.stderr
