"""Prometheus series from untrusted names (docs/prometheus.md#bounds, docs/security.md "Remote
and local resource limits"): local processes send the real dynolog marker and op names of
their choosing over its data socket. The series each process, and all of them together, may
create are bounded; the rest is folded into `<other>` series whose values add up, the folded
samples are counted on the page and in the log, and /metrics pages are rendered off the loop,
so 200 scrapers and a scrape hammer leave RPC answered and the daemon's memory bounded. Pages
are read with prometheus_client's parser; no timing thresholds (figures: bench/prom)."""
import os
import re
import subprocess
import sys
import threading
import time

import json

from conftest import SANITIZED, Daemon, free_port, run_dyno
from daemon_util import rpc_json
from ipcclient import IpcClient
from prom_util import samples, scrape
from test_security_limits import _get, _read_all, _rss_kb
from waits import wait_until

DEADLINE_S = 120
OTHER = "<other>"
HERE = os.path.dirname(os.path.abspath(__file__))


def send_names(sockdir, activity, prefix, n_ops, name_len, ts, n_ranges=0):
    """One OpStats report of n_ops entries with distinct names (count 1, total = min = max =
    avg = i + 1), in datagrams of at most ~4 KB as the plugin sends them; then n_ranges marker
    ranges with distinct domains. Run in a process of its own: the daemon labels (and bounds)
    what it sends by the pid the kernel gives."""
    import json
    with IpcClient(sockdir) as c:
        ops, size = [], 0

        def flush():
            c.data({"activity": activity, "deviceId": 0, "duration": 1, "interval_ns": 1000000000,
                    "kind": "OpStats", "ops": ops, "timestamp": ts})
        for i in range(n_ops):
            name = (prefix + "%05d_" % i) + "x" * max(0, name_len - len(prefix) - 6)
            op = {"avg": i + 1, "count": 1, "max": i + 1, "min": i + 1, "name": name, "total": i + 1}
            if activity == "Marker":
                op["domain"] = "flood"
            n = len(json.dumps(op)) + 1
            if ops and size + n > 3800:
                flush()
                ops, size = [], 0
            ops.append(op)
            size += n
        if ops:
            flush()
        for j in range(n_ranges):
            c.data({"deviceId": 0, "domain": "dom%05d" % j, "duration": 100 + j, "kind": "Marker",
                    "name": "range", "timestamp": ts + j})


def run_sender(d, activity, prefix, n_ops, name_len=100, n_ranges=0, ts=None):
    """send_names in a child process, run to its end; returns its pid."""
    ts = ts or int(time.time() * 1e9)
    code = ("import sys; sys.path.insert(0, %r); import test_security_series as t; "
            "t.send_names(%r, %r, %r, %d, %d, %d, %d)" % (HERE, d.sockdir, activity, prefix, n_ops,
                                                           name_len, ts, n_ranges))
    p = subprocess.Popen([sys.executable, "-c", code], cwd=HERE, env=dict(d.env, PYTHONDONTWRITEBYTECODE="1"))
    assert p.wait(DEADLINE_S) == 0
    return p.pid


def _series_of(page, pid):
    """{(name, labels): value} of the samples labelled pid."""
    return {k: v for k, v in page.items() if dict(k[1]).get("pid") == str(pid)}


def _own(series):
    return {k: v for k, v in series.items() if OTHER not in dict(k[1]).values()}


def _other(series, family):
    vals = [v for (name, labels), v in series.items()
            if name == family and dict(labels).get("name", OTHER) == OTHER and OTHER in dict(labels).values()]
    assert len(vals) <= 1, vals
    return vals[0] if vals else None


def _folded(page, cap):
    for (name, labels), v in page.items():
        if name == "msmonitor_prometheus_folded_samples" and dict(labels).get("cap") == cap:
            return v
    return None


def _own_op_totals(series, family="npu_op_total_ns"):
    return {dict(labels)["name"]: v for (name, labels), v in _own(series).items() if name == family}


class Hoarders(threading.Thread):
    """n scrapers that send `GET /metrics` and never read (a small receive window keeps the page
    queued in the daemon); each is replaced after 1.6 s, past the daemon's stall cut."""

    def __init__(self, port, n):
        super().__init__(daemon=True)
        self.port, self.n = port, n
        self.stop = threading.Event()
        self.opened = 0

    def _open(self):
        self.opened += 1
        try:
            return _get(self.port, rcvbuf=4096)
        except OSError:
            return None

    def run(self):
        socks = [(self._open(), time.monotonic()) for _ in range(self.n)]
        while not self.stop.wait(0.1):
            now = time.monotonic()
            for i, (s, t) in enumerate(socks):
                if now - t >= 1.6:
                    if s is not None:
                        s.close()
                    socks[i] = (self._open(), now)
        for s, _ in socks:
            if s is not None:
                s.close()


class Hammer(threading.Thread):
    """Scrapes /metrics as fast as it can, reading each page whole (a 503 is retried at once)."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.pages = self.busy = 0

    def run(self):
        while not self.stop.is_set():
            try:
                s = _get(self.port)
                try:
                    page = _read_all(s)
                finally:
                    s.close()
            except OSError:
                continue
            if page.startswith(b"HTTP/1.1 200"):
                self.pages += 1
            elif page.startswith(b"HTTP/1.1 503"):
                self.busy += 1


def test_marker_name_flood_is_bounded_per_process():
    """30,000 distinct marker names from one local process: it holds at most
    --prometheus_max_series_per_process (2,000) series of its own, the rest adds up in its
    `<other>` series, every folded sample is counted on the page and the process is named in
    the log; another process keeps all of its series. Then 200 scrapers that never read and a
    scrape hammer: RPC is answered and the daemon's memory stays within its page bound."""
    port = free_port()
    d = Daemon(extra=["--use_prometheus", "--prometheus_port", str(port)])
    hoard = hammer = None
    try:
        d.wait_log("prometheus: serving /metrics")
        legit = run_sender(d, "Kernel", "k", 50)
        n, ranges = 30000, 3000
        attacker = run_sender(d, "Marker", "m", n, name_len=120, n_ranges=ranges)
        state = {}

        def settled():
            page = samples(scrape(port)[2])
            mine = _series_of(page, attacker)
            own_ops = _own_op_totals(mine)
            own_ranges = [k for k in _own(mine) if k[0] == "npu_marker_duration_ns"]
            # every op is 5 samples (total, count, min, max, avg), every range one
            want = 5 * (n - len(own_ops)) + (ranges - len(own_ranges))
            state.update(page=page, mine=mine, own_ops=own_ops, want=want)
            return _folded(page, "process") == want and _other(mine, "npu_op_count") == n - len(own_ops)
        wait_until(settled, DEADLINE_S, "every flooded name to be kept or folded",
                   diag=lambda: repr((state.get("want"), _folded(state.get("page", {}), "process"))), alive=d)
        page, mine, own_ops = state["page"], state["mine"], state["own_ops"]
        # the bound: 2,000 series of its own (400 ops of 5 families), not 150,000
        assert len(_own(mine)) <= 2000 and len(own_ops) == 400, (len(_own(mine)), len(own_ops))
        # ... and what did not fit adds up in <other>: totals were 1..n
        folded_totals = sorted(set(range(1, n + 1)) - set(int(v) for v in own_ops.values()))
        assert len(folded_totals) == n - 400
        assert _other(mine, "npu_op_total_ns") == sum(folded_totals)
        assert _other(mine, "npu_op_min_ns") == folded_totals[0]
        assert _other(mine, "npu_op_max_ns") == folded_totals[-1]
        assert abs(_other(mine, "npu_op_avg_ns") - sum(folded_totals) / len(folded_totals)) < 1e-6
        assert _other(mine, "npu_marker_duration_ns") is not None
        # <other> keeps who sent it and nothing that the sender named
        for (name, labels), _ in mine.items():
            lab = dict(labels)
            if OTHER in lab.values():
                assert all(lab[k] == OTHER for k in lab if k not in ("host_name", "pid")), lab
        assert _folded(page, "daemon") == 0
        # the other process is untouched: 50 ops x 5 families, nothing folded
        theirs = _series_of(page, legit)
        assert len(theirs) == 250 and not set(theirs) - set(_own(theirs)), len(theirs)
        d.wait_log("prometheus: process %d reached 2000 series (--prometheus_max_series_per_process); "
                   "its new series are folded into its <other> series" % attacker)
        # the overflow is shown where an operator looks first: dyno status, text and JSON
        r = run_dyno(d, "status", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        [host] = json.loads(r.stdout.strip().splitlines()[-1])["hosts"]
        prom = host["prometheus"]
        assert (prom["folded_process"], prom["folded_daemon"], prom["processes_folded"]) == \
            (state["want"], 0, 1), prom
        line = ("! prometheus: %d samples folded into <other> series: %d at --prometheus_max_series_per_process "
                "(1 processes at it), 0 at --prometheus_max_series (docs/prometheus.md#bounds)"
                % (state["want"], state["want"]))
        r = run_dyno(d, "status")     # one host: upstream's JSON line on stdout, ours on stderr
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(r.stdout.strip().splitlines()[-1])["prometheus"]["folded_process"] == state["want"]
        assert line in r.stderr.splitlines(), r.stderr
        r = run_dyno(d, "status", hostname="localhost,127.0.0.1")    # two hosts: the table form
        assert r.returncode == 0, r.stdout + r.stderr
        for h in ("localhost", "127.0.0.1"):
            assert re.search("^" + re.escape(h) + " +" + re.escape(line) + "$", r.stdout, re.M), r.stdout

        # pages are rendered on a thread of their own, not on the loop that answers RPC
        comms = set()
        for t in os.listdir("/proc/%d/task" % d.p.pid):
            with open("/proc/%d/task/%s/comm" % (d.p.pid, t)) as f:
                comms.add(f.read().strip())
        assert "dynologPromPage" in comms, comms

        # 200 scrapers that never read, and a hammer reading pages back to back
        text = _read_all(_get(port))
        base, page_kb = _rss_kb(d.p.pid), len(text) // 1024
        assert page_kb < 2048, page_kb          # ~2,300 series of ~250 bytes, not 22 MB
        # at most two pages alive plus the one being rendered, and 32 MB of connection state
        # and allocator slack (ASan's quarantine keeps freed renders: ten pages there)
        bound = base + (10 if SANITIZED else 3) * page_kb + (64 if SANITIZED else 32) * 1024
        hoard, hammer = Hoarders(port, 200), Hammer(port)
        hoard.start()
        hammer.start()
        wait_until(lambda: hammer.pages >= 20, DEADLINE_S, "the hammer to read 20 pages", alive=d)
        for _ in range(20):
            assert "processes" in rpc_json(None, {"fn": "getStatus"}, unix=d.sock("dyno.sock"))
            assert "processes" in rpc_json(d.port, {"fn": "getStatus"})
            assert hoard.is_alive() and hammer.is_alive()
        assert _rss_kb(d.p.pid, "VmHWM") < bound, (base, page_kb, _rss_kb(d.p.pid, "VmHWM"))
        # two more generations of scrapers, and more pages rendered meanwhile
        opened, pages = hoard.opened, hammer.pages
        wait_until(lambda: hoard.opened >= opened + 400 and hammer.pages >= pages + 20, DEADLINE_S,
                   "400 more scrapers and 20 more pages", alive=d)
        assert "processes" in rpc_json(None, {"fn": "getStatus"}, unix=d.sock("dyno.sock"))
        assert _rss_kb(d.p.pid, "VmHWM") < bound, (base, page_kb, _rss_kb(d.p.pid, "VmHWM"))
    finally:
        for t in (hoard, hammer):
            if t:
                t.stop.set()
        for t in (hoard, hammer):
            if t:
                t.join(30)
        d.stop()
    assert re.search(r"prometheus: folded [1-9]\d* samples into <other> series at "
                     r"--prometheus_max_series_per_process \(processes at it: 1\) and 0 at", d.log())


def test_many_processes_share_the_daemon_bound():
    """Four processes of 200 op names each, one after the other, under --prometheus_max_series
    1000 and 400 per process: the processes' series never pass 1,000; what comes after goes to
    one pid="<other>" series per family (op families: the sums of the latest report folded
    there), counted apart (cap="daemon") and logged once with the bound."""
    port = free_port()
    d = Daemon(extra=["--use_prometheus", "--prometheus_port", str(port), "--prometheus_max_series", "1000",
                      "--prometheus_max_series_per_process", "400"])
    try:
        d.wait_log("prometheus: serving /metrics")
        pids = [run_sender(d, "Kernel", "p%d_" % k, 200) for k in range(4)]
        state = {}

        def settled():
            page = samples(scrape(port)[2])
            own = sum(len(_own_op_totals(_series_of(page, p))) for p in pids)
            per_proc_other = sum(_other(_series_of(page, p), "npu_op_count") or 0 for p in pids)
            dmn = _other(_series_of(page, OTHER), "npu_op_count") or 0
            state.update(page=page, own=own, per_proc_other=per_proc_other, dmn=dmn)
            # every op is kept, in its process's <other>, or folded at the daemon bound
            return _folded(page, "daemon") == 5 * (4 * 200 - own - per_proc_other) and dmn > 0
        wait_until(settled, DEADLINE_S, "every name to be kept or folded", diag=lambda: repr(
            {k: v for k, v in state.items() if k != "page"}), alive=d)
        page = state["page"]
        held = sum(len(_series_of(page, p)) for p in pids)
        assert held <= 1000, held
        assert state["per_proc_other"] > 0, state
        # the last process came when the bound was full: its whole report is in pid="<other>"
        assert state["dmn"] == 200 and not _series_of(page, pids[-1]), state
        assert _folded(page, "process") == 5 * state["per_proc_other"]
        # the daemon's <other> names no process
        for (name, labels), _ in _series_of(page, OTHER).items():
            assert set(v for k, v in dict(labels).items() if k != "host_name") == {OTHER}, labels
        d.wait_log("prometheus: the monitored processes hold 1000 series (--prometheus_max_series); new "
                   "series of any process are folded into pid=\"<other>\" series")
        assert d.log().count("(--prometheus_max_series);") == 1
    finally:
        d.stop()
