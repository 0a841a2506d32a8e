"""Helpers for the Prometheus / remote-write end-to-end tests: the real Prometheus server
(/usr/bin/prometheus) on loopback with a temp storage dir, its HTTP query API, and the
daemon's /metrics endpoint."""
import collections
import json
import os
import urllib.parse
import urllib.request

import pytest

from conftest import Proc, free_port
from waits import wait_until

PROMETHEUS = "/usr/bin/prometheus"


def need_prometheus():
    if not os.access(PROMETHEUS, os.X_OK):
        pytest.skip("the prometheus package (/usr/bin/prometheus) is not installed")


class PromServer(Proc):
    """Prometheus with --web.enable-remote-write-receiver; scrapes `target` (host:port) every
    second when given. Restartable on the same port and storage (stop() then start())."""

    def __init__(self, tmpdir, target=None, port=None, web_config=None):
        need_prometheus()
        self.dir = tmpdir
        self.web_config = web_config
        self.scheme = "https" if web_config else "http"
        self.port = port or free_port()
        self.storage = os.path.join(tmpdir, "tsdb")
        self.cfg = os.path.join(tmpdir, "prometheus.yml")
        with open(self.cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n")
            if target:
                f.write("scrape_configs:\n  - job_name: dynolog\n    static_configs:\n"
                        f"      - targets: ['{target}']\n")
        self.runs = 0
        self.start()

    def start(self):
        self.runs += 1
        argv = [PROMETHEUS, f"--config.file={self.cfg}", f"--storage.tsdb.path={self.storage}",
                f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-remote-write-receiver",
                "--storage.tsdb.retention.time=1d"]
        if self.web_config:
            argv.append(f"--web.config.file={self.web_config}")
        super().__init__(argv, env=dict(os.environ), logname=f"prometheus{self.runs}", tmpdir=self.dir)
        import ssl
        ctx = ssl._create_unverified_context()

        def ready():
            try:
                with urllib.request.urlopen(f"{self.scheme}://127.0.0.1:{self.port}/-/ready", timeout=2,
                                            context=ctx) as r:
                    return r.status == 200
            except OSError:
                return False
        wait_until(ready, 60, "prometheus to become ready", diag=lambda: self.log()[-3000:], alive=self,
                   interval=0.1)

    @property
    def write_url(self):
        return f"{self.scheme}://127.0.0.1:{self.port}/api/v1/write"

    def query(self, q, at=None):
        args = {"query": q}
        if at is not None:
            args["time"] = f"{at:.3f}"
        import ssl
        url = f"{self.scheme}://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(args)
        with urllib.request.urlopen(url, timeout=10, context=ssl._create_unverified_context()) as r:
            doc = json.load(r)
        assert doc["status"] == "success", doc
        return doc["data"]["result"]

    def count_samples(self, selector):
        """Number of stored samples of every series matching selector (a range query at now)."""
        return sum(len(r["values"]) for r in self.query(selector + "[1d]"))

    def wait_query(self, q, pred=lambda res: bool(res), timeout=60.0):
        last = {}

        def ok():
            last["res"] = res = self.query(q)
            return (res,) if pred(res) else None   # a tuple: an empty result may satisfy pred
        return wait_until(ok, timeout, f"query {q!r}", interval=0.25,
                          diag=lambda: f"last result {last.get('res')}\n" + self.log()[-2000:])[0]

    def rule_evaluations(self):
        """The last evaluation time of every rule group (the /api/v1/rules API)."""
        import ssl
        url = f"{self.scheme}://127.0.0.1:{self.port}/api/v1/rules"
        with urllib.request.urlopen(url, timeout=10, context=ssl._create_unverified_context()) as r:
            doc = json.load(r)
        return {g["name"]: g.get("lastEvaluation") for g in doc["data"]["groups"]}

    def wait_rule_evaluations(self, n, timeout=60.0):
        """Every rule group has been evaluated `n` more times (seen as `n` changes of its last
        evaluation time): a state to wait for instead of a rule interval's worth of time."""
        seen = {name: [t] for name, t in self.rule_evaluations().items()}

        def ok():
            for name, t in self.rule_evaluations().items():
                if seen.setdefault(name, [t])[-1] != t:
                    seen[name].append(t)
            return all(len(v) > n for v in seen.values())
        wait_until(ok, timeout, f"{n} more rule evaluations", diag=lambda: repr(seen), interval=0.1)


def scrape(port, path="/metrics", method="GET", timeout=10):
    """(status, headers, body text) of one request to the daemon's Prometheus endpoint."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def samples(text):
    """{(name, frozenset(labels.items())): value} via prometheus_client's text parser."""
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def kernel_truth(recs):
    """Per kernel name: total duration and count of the simulator's ground truth."""
    tot = collections.Counter()
    cnt = collections.Counter()
    for r in recs:
        if r["kind"] == "Kernel":
            tot[r["name"]] += r["end"] - r["start"]
            cnt[r["name"]] += 1
    return tot, cnt


# --- an independent reader of remote-write bodies (snappy block format + protobuf wire) ---

def _varint(b, i):
    shift = v = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, i
        shift += 7


def snappy_decode(b):
    """Snappy block format: varint length, then literal / copy elements."""
    n, i = _varint(b, 0)
    out = bytearray()
    while i < len(b):
        tag = b[i]
        i += 1
        t = tag & 3
        if t == 0:
            ln = tag >> 2
            if ln < 60:
                ln += 1
            else:
                nb = ln - 59
                ln = int.from_bytes(b[i:i + nb], "little") + 1
                i += nb
            out += b[i:i + ln]
            i += ln
            continue
        if t == 1:
            ln = ((tag >> 2) & 7) + 4
            off = ((tag >> 5) << 8) | b[i]
            i += 1
        elif t == 2:
            ln = (tag >> 2) + 1
            off = int.from_bytes(b[i:i + 2], "little")
            i += 2
        else:
            ln = (tag >> 2) + 1
            off = int.from_bytes(b[i:i + 4], "little")
            i += 4
        assert 0 < off <= len(out)
        for _ in range(ln):
            out.append(out[-off])
    assert len(out) == n, (len(out), n)
    return bytes(out)


def _fields(b):
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            ln, i = _varint(b, i)
            v, i = b[i:i + ln], i + ln
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise AssertionError(f"wire type {wt}")
        yield f, v


def decode_write_request(body):
    """[(labels [(name, value)...], samples [(value, ts_ms)...])] of a remote-write body."""
    import struct
    series = []
    for f, v in _fields(snappy_decode(body)):
        if f != 1:
            continue
        labels, smp = [], []
        for f2, v2 in _fields(v):
            d = dict(_fields(v2))
            if f2 == 1:
                labels.append((d.get(1, b"").decode(), d.get(2, b"").decode()))
            elif f2 == 2:
                ts = d.get(2, 0)
                if ts >= 1 << 63:
                    ts -= 1 << 64
                smp.append((struct.unpack("<d", d.get(1, b"\0" * 8))[0], ts))
        series.append((labels, smp))
    return series


class FakeReceiver:
    """A misbehaving remote-write receiver on loopback. mode: 'status' (answer `status`),
    'hang' (read the request, never answer), 'close_mid_body' (close after a few body bytes).
    Keeps every request as (headers with lower-case names, body bytes)."""

    def __init__(self, mode="status", status=400, message="bad"):
        import socket
        import threading
        self.mode, self.status, self.message = mode, status, message
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.requests = []
        self.held = []
        self.stopping = threading.Event()
        self.th = threading.Thread(target=self._run, daemon=True)
        self.th.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/api/v1/write"

    def _run(self):
        import socket
        while not self.stopping.is_set():
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                self._serve(c)
            except OSError:
                c.close()

    def _serve(self, c):
        c.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = c.recv(65536)
            if not chunk:
                c.close()
                return
            data += chunk
        head, body = data.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        if self.mode == "close_mid_body":
            self.requests.append((headers, body[:8]))
            c.close()
            return
        while len(body) < n:
            chunk = c.recv(65536)
            if not chunk:
                break
            body += chunk
        self.requests.append((headers, body))
        if self.mode == "hang":
            self.held.append(c)
            return
        msg = self.message.encode()
        c.sendall(f"HTTP/1.1 {self.status} X\r\nContent-Length: {len(msg)}\r\nConnection: close\r\n\r\n".encode() + msg)
        c.close()

    def close(self):
        self.stopping.set()
        self.th.join(5)
        self.sock.close()
        for c in self.held:
            c.close()
