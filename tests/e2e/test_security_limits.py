"""Remote and local resource limits (docs/security.md): the real dynolog
and dyno, attackers as Python sockets from 127.0.0.x source addresses in the test's private
network namespace. Each test holds an attack open and asserts that a legitimate client is
answered while it continues, or that a count-based bound holds; no timing thresholds
(latency figures: bench/security, bench/tls, bench/prom)."""
import json
import os
import re
import socket
import ssl
import threading
import time

from conftest import SANITIZED, Daemon, run_dyno
from daemon_util import frame, rpc_json
from ipcclient import IpcClient
from test_tls import dyno, mkdir, pk  # noqa: F401  (pk: the module's PKI fixture)
from waits import wait_until

DEADLINE_S = 120


class Dribblers(threading.Thread):
    """One dribbling connection per source address (or n from one address): each sends the
    4-byte length of a getStatus request, then one body byte a second, and reconnects as soon
    as the daemon closes it. Counts connections opened and closed by the daemon."""

    def __init__(self, port, sources):
        super().__init__(daemon=True)
        self.port, self.sources = port, sources
        self.stop = threading.Event()
        self.opened = self.closed = 0
        self.payload = frame('{"fn":"getStatus"}')

    def _open(self, src):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((src, 0))
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", self.port))
        self.opened += 1
        return [s, 0, src]

    def run(self):
        conns = [self._open(src) for src in self.sources]
        while not self.stop.wait(1.0):
            for i, c in enumerate(conns):
                try:
                    if c[0].recv(1, socket.MSG_DONTWAIT) == b"":
                        raise ConnectionResetError
                except BlockingIOError:
                    pass
                except OSError:
                    self.closed += 1
                    c[0].close()
                    conns[i] = self._open(c[2])
                    continue
                # never the whole request: the length, then a body byte at a time
                n = 4 if c[1] == 0 else 1
                if c[1] + n < len(self.payload):
                    try:
                        c[0].send(self.payload[c[1]:c[1] + n])
                        c[1] += n
                    except OSError:
                        pass
        for c in conns:
            c[0].close()


def _served_while(attack, d, hostname, n=20):
    """n real `dyno status` runs, each answered while the attack is still running."""
    for _ in range(n):
        r = run_dyno(d, "status", hostname=hostname)
        assert r.returncode == 0 and "nputrace" in r.stdout, (r.returncode, r.stdout, r.stderr)
        assert attack.is_alive()


def test_dribblers_from_the_admin_address_do_not_lock_it_out():
    # 30 dribbling connections from 127.0.0.1, the address the real dyno also comes from
    d = Daemon()
    attack = Dribblers(d.port, ["127.0.0.1"] * 30)
    try:
        attack.start()
        d.wait_log("too many concurrent RPC connections from ::ffff:127.0.0.1 (limit 8): closed the "
                   "oldest incomplete connection", timeout=DEADLINE_S)
        _served_while(attack, d, "127.0.0.1")
        _served_while(attack, d, "unix:", n=5)
        assert attack.opened >= 30
    finally:
        attack.stop.set()
        attack.join(10)
        d.stop()


def test_four_hundred_dribbling_addresses_do_not_lock_out_clients():
    sources = ["127.0.%d.%d" % (1 + i // 200, 2 + i % 200) for i in range(400)]
    d = Daemon()
    attack = Dribblers(d.port, sources)
    try:
        attack.start()
        d.wait_log("too many concurrent RPC clients: closed the oldest incomplete connection",
                   timeout=DEADLINE_S)
        _served_while(attack, d, "127.0.0.1")
    finally:
        attack.stop.set()
        attack.join(10)
        d.stop()
    assert re.search(r"rpc: \d+ connections served, [1-9]\d* evicted at a cap", d.log()), d.log()[-3000:]


def test_invalid_body_flood_log_is_bounded():
    """Four clients send 8 KB invalid bodies; the log keeps a burst, then a rate, of each line,
    each cut to RPC_LOG_BODY_MAX bytes of body, with the rest counted."""
    d = Daemon()
    body = b"x" * 8000
    sent = [0] * 4
    stop = threading.Event()

    def flood(k):
        while not stop.is_set():
            with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
                s.sendall(frame(body))
                s.recv(16)
            sent[k] += 1

    threads = [threading.Thread(target=flood, args=(k,), daemon=True) for k in range(4)]
    try:
        t0 = time.monotonic()
        for t in threads:
            t.start()
        # enough requests that an unlimited log would show every one of them
        deadline = time.monotonic() + DEADLINE_S
        while sum(sent) < 3000:
            assert time.monotonic() < deadline and all(t.is_alive() for t in threads)
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join(10)
        elapsed = time.monotonic() - t0
        # a legitimate request after the flood is still answered; then single invalid requests
        # until each limited line has reported what it folded (the count rides on the next
        # line that passes)
        assert "processes" in rpc_json(d.port, {"fn": "getStatus"})
        deadline = time.monotonic() + DEADLINE_S
        while not all(re.search(r"%s.*suppressed \d+ similar" % re.escape(w), d.log())
                      for w in ("RPC message received = ", "Received connection from",
                                "Error parsing message = ")):
            assert time.monotonic() < deadline
            with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
                s.sendall(frame(body))
                s.recv(16)
            sent[0] += 1
            time.sleep(0.2)
        elapsed = time.monotonic() - t0
    finally:
        stop.set()
        d.stop()
    log = d.log()
    total = sum(sent)
    for what, cap_per_s, burst in (("RPC message received = ", 20, 100),
                                   ("Received connection from", 20, 100),
                                   ("Error parsing message = ", 1, 1)):
        lines = [l for l in log.splitlines() if what in l]
        # the limiter's own bound for the time the flood took (a count, not a speed)
        assert len(lines) <= burst + cap_per_s * (elapsed + 2), (what, len(lines), total)
        assert len(lines) < total, (what, len(lines), total)
        suppressed = sum(int(m) for l in lines for m in re.findall(r"suppressed (\d+) similar", l))
        assert suppressed > 0, what
        assert all(len(l) < 256 * 4 + 300 for l in lines), max(len(l) for l in lines)
    assert "xxxx... (8000 bytes)" in log


def _client_hello():
    """A real ClientHello, recorded once and replayed by every attacker (no attacker crypto)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ctx.wrap_bio(inc, out, server_hostname="localhost")
    try:
        o.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = out.read()
    assert hello[:1] == b"\x16"
    return hello


class HelloFlood(threading.Thread):
    def __init__(self, port, src, hello):
        super().__init__(daemon=True)
        self.port, self.src, self.hello = port, src, hello
        self.stop = threading.Event()
        self.sent = 0

    def run(self):
        while not self.stop.is_set():
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(0.5)
            try:
                s.bind((self.src, 0))
                s.connect(("127.0.0.1", self.port))
                s.sendall(self.hello)
                s.recv(1)            # the server's answer: it has paid for the handshake
            except OSError:
                pass
            finally:
                s.close()
            self.sent += 1


def test_replayed_client_hello_flood_is_budgeted(pk):  # noqa: F811
    d = Daemon(extra=["--certs_dir", mkdir(pk, "server")])
    hello = _client_hello()
    floods = [HelloFlood(d.port, "127.0.0.2", hello) for _ in range(4)]
    floods += [HelloFlood(d.port, "127.0.0.%d" % (3 + i), hello) for i in range(8)]
    try:
        for f in floods:
            f.start()
        # one source over its budget is closed before any crypto; all of them together are paced
        d.wait_log("tls: handshake budget of ::ffff:127.0.0.2 exceeded", timeout=DEADLINE_S)
        d.wait_log("tls: more than 40 handshakes/s, delaying the one from", timeout=DEADLINE_S)
        before = sum(f.sent for f in floods)
        # the local socket keeps answering while the flood goes on
        for _ in range(20):
            r = run_dyno(d, "status", hostname="unix:")
            assert r.returncode == 0 and "nputrace" in r.stdout, (r.stdout, r.stderr)
            assert all(f.is_alive() for f in floods)
        assert sum(f.sent for f in floods) > before
    finally:
        for f in floods:
            f.stop.set()
        for f in floods:
            f.join(10)
        d.stop()
    assert re.search(r"[1-9]\d* refused over the TLS handshake budget", d.log()), d.log()[-3000:]


class Idlers(threading.Thread):
    """n TLS connections from one address that never send a ClientHello (half only connect,
    half send the first three bytes of a record header and stop); one the daemon has closed is
    opened again every 20 ms, so the address always holds n hanging handshakes and opens 50
    connections a second, five times what its handshake budget refills, evenly rather than in
    bursts."""

    def __init__(self, port, src, n):
        super().__init__(daemon=True)
        self.port, self.src, self.n = port, src, n
        self.stop = threading.Event()
        self.opened = self.closed = 0

    def _open(self, k):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((self.src, 0))
            s.connect(("127.0.0.1", self.port))
            if k % 2:
                s.sendall(b"\x16\x03\x01")
        except OSError:
            pass       # refused or reset at once: seen as closed at the next poll
        self.opened += 1
        return s

    def run(self):
        socks = [self._open(k) for k in range(self.n)]
        while not self.stop.wait(0.02):
            for k, s in enumerate(socks):
                try:
                    if s.recv(1, socket.MSG_DONTWAIT) != b"":
                        continue
                except BlockingIOError:
                    continue
                except OSError:
                    pass
                self.closed += 1
                s.close()
                socks[k] = self._open(k)
                break
        for s in socks:
            s.close()


def test_idle_handshakes_from_the_admin_address_do_not_lock_it_out(pk):  # noqa: F811
    """20 connections from 127.0.0.1 that never send a ClientHello, reopened as soon as they are
    closed, and a real mutual-TLS dyno from the same address: it is served, every time, while
    they hang. Only a ClientHello is charged to the address's handshake budget (they send none),
    and at the per-address cap the oldest idle connection is closed to serve the newcomer."""
    d = Daemon(extra=["--certs_dir", mkdir(pk, "server")])
    cdir = mkdir(pk, "client")
    attack = Idlers(d.port, "127.0.0.1", 20)
    try:
        attack.start()
        d.wait_log("too many concurrent RPC connections from ::ffff:127.0.0.1 (limit 8): closed the "
                   "oldest incomplete connection (", timeout=DEADLINE_S)
        # the attacker has seen connections cut and opened them again: 20 hang from its side
        wait_until(lambda: attack.closed >= 20, DEADLINE_S, "the idle connections to be recycled",
                   alive=d)
        opened = attack.opened
        for _ in range(10):
            r = dyno(certs=cdir, port=d.port, host="127.0.0.1")
            assert r.returncode == 0 and '"npumonitor"' in r.stdout, (r.stdout, r.stderr, d.log()[-2000:])
            assert attack.is_alive()
        # ... and the attack goes on (a state, not a race with the attacker's thread: each dyno
        # connection closed an idle one, which the attacker reopens when it next runs)
        wait_until(lambda: attack.opened > opened, DEADLINE_S, "the attacker to reopen a connection",
                   alive=d)
    finally:
        attack.stop.set()
        attack.join(10)
        d.stop()
    log = d.log()
    assert "handshake budget of ::ffff:127.0.0.1 exceeded" not in log, log[-3000:]
    assert re.search(r"rpc: \d+ connections served, [1-9]\d* evicted at a cap", log), log[-3000:]


def _rss_kb(pid, key="VmRSS"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError(key)


def _big_page(d, nops=2000, name_len=900):
    """OpStats with nops ops whose names are name_len bytes: a page of ~nops * 5 * name_len."""
    ts = int(time.time() * 1e9)      # one report: every datagram of it carries its timestamp
    with IpcClient(d.sockdir) as c:
        op = 0
        while op < nops:
            ops = []
            while op < nops and len(ops) < 3:
                ops.append({"avg": 1, "count": 3, "max": 2, "min": 1, "total": 3,
                            "name": ("op%05d_" % op) + "k" * (name_len - 8)})
                op += 1
            c.data({"activity": "Kernel", "deviceId": 0, "duration": 1, "interval_ns": 1000000000,
                    "kind": "OpStats", "ops": ops, "timestamp": ts})


def _get(port, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    return s


def _read_all(s):
    s.settimeout(30)
    chunks = []
    while True:
        b = s.recv(1 << 20)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


# _big_page's 10,000 series all come from this one process: above the default bound of 2,000
# series per process (test_security_series.py tests the bound)
BIG_PAGE_FLAGS = ["--prometheus_max_series_per_process", "20000"]


def test_non_reading_scrapers_share_one_page():
    from conftest import free_port
    port = free_port()
    d = Daemon(extra=["--use_prometheus", "--prometheus_port", str(port), *BIG_PAGE_FLAGS])
    d.wait_log("prometheus: serving /metrics")
    socks = []
    try:
        _big_page(d)
        deadline = time.monotonic() + DEADLINE_S
        while True:
            page = _read_all(_get(port))
            if page.count(b"\nnpu_op_total_ns{") >= 2000:
                break
            assert time.monotonic() < deadline, page[-500:]
            time.sleep(0.2)
        base = _rss_kb(d.p.pid)
        page_kb = len(page) // 1024
        # the bound: the shared pages (at most two) plus a documented constant of 32 MB for
        # connection state and allocator slack; under ASan its quarantine keeps freed renders
        # resident, so allow ten pages there (one copy per scraper would still be 100)
        bound = base + (10 if SANITIZED else 2) * page_kb + (64 if SANITIZED else 32) * 1024
        # 100 scrapers that send their request and never read (a small receive window, so the
        # page stays queued in the daemon)
        socks = [_get(port, rcvbuf=4096) for _ in range(100)]
        d.wait_log("prometheus: 64 scrapes in flight, answering 503", timeout=DEADLINE_S)
        # RPC is answered while they hold their pages; memory: the shared pages, not one per
        # scraper
        assert "processes" in rpc_json(d.port, {"fn": "getStatus"})
        assert _rss_kb(d.p.pid, "VmHWM") < bound, (base, page_kb)
        # stalled writers are cut; a reading scraper then gets the whole page again
        d.wait_log("prometheus: cut a stalled scrape", timeout=DEADLINE_S)
        assert _rss_kb(d.p.pid, "VmHWM") < bound, (base, page_kb)
        for s in socks:
            s.close()
        socks = []
        deadline = time.monotonic() + DEADLINE_S
        while True:
            page = _read_all(_get(port))
            # ... and the page counts what was turned away
            refused = {m[0]: int(m[1]) for m in re.findall(
                rb'msmonitor_prometheus_refused_scrapes\{host_name="[^"]*",reason="(\w+)"\} (\d+)', page)}
            if page.count(b"\nnpu_op_total_ns{") >= 2000 and refused.get(b"busy", 0) > 0 and \
                    refused.get(b"stalled", 0) > 0:
                break
            assert time.monotonic() < deadline, refused
            time.sleep(0.2)
    finally:
        for s in socks:
            s.close()
        d.stop()
