#!/usr/bin/env python3
"""bench_prom_scrapers: a dynolog with --use_prometheus holding a ~10 MB /metrics page (2,000
ops x 5 npu_op_* families with 900-byte names), then 0 / 100 / 200 scrapers that send
`GET /metrics` and never read (each replaced by a new one after 1.6 s; issue 23 item 9).
Prints the daemon's peak RSS while they run and the p50/p99 of getStatus over TCP meanwhile;
the 0-scraper case is the baseline of the same run. Figures only, no thresholds.

  tests/e2e/run_netns.sh /usr/bin/python3 bench/prom/bench_prom_scrapers.py --build build
"""
import argparse
import os
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "security"))
import benchlib  # noqa: E402


class Hoarders(threading.Thread):
    def __init__(self, port, n, get):
        super().__init__(daemon=True)
        self.port, self.n, self.get = port, n, get
        self.stop = threading.Event()
        self.opened = 0

    def _open(self):
        self.opened += 1
        try:
            s = self.get(self.port, rcvbuf=4096)
            s.setblocking(False)
            return s
        except OSError:
            return None

    def run(self):
        # each connection is replaced after 1.6 s (past the daemon's stall cut), unread
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


def case(Daemon, free_port, big_page, get, read_all, n_scrapers, n):
    port = free_port()
    d = Daemon(extra=["--use_prometheus", "--prometheus_port", str(port), *BIG_PAGE_FLAGS])
    h = None
    try:
        d.wait_log("prometheus: serving /metrics")
        big_page(d)
        deadline = time.monotonic() + 120
        while True:
            page = read_all(get(port))
            if page.count(b"\nnpu_op_total_ns{") >= 2000 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        base = benchlib.rss_kb(d.p.pid)
        if n_scrapers:
            h = Hoarders(port, n_scrapers, get)
            h.start()
            time.sleep(2.0)
        peak = [base]
        stop = threading.Event()

        def sample():
            while not stop.wait(0.05):
                peak[0] = max(peak[0], benchlib.rss_kb(d.p.pid))
        t = threading.Thread(target=sample, daemon=True)
        t.start()
        lat, fails = benchlib.probe(n, port=d.port)
        stop.set()
        t.join()
    finally:
        if h:
            h.stop.set()
            h.join(10)
        d.stop()
    benchlib.report("%3d non-reading scrapers" % n_scrapers, lat, fails,
                    "  page %.1f MB, RSS %.0f MB before, peak %.0f MB%s" % (
                        len(page) / 1e6, base / 1024.0, peak[0] / 1024.0,
                        (" (%d scrape connections)" % h.opened) if h else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("-n", type=int, default=300, help="getStatus requests per case")
    a = ap.parse_args()
    benchlib.setup(a.build)
    from conftest import Daemon, free_port
    from test_security_limits import _big_page, _get, _read_all
    print("bench_prom_scrapers: getStatus over TCP, %d requests 20 ms apart, per case" % a.n)
    for k in (0, 100, 200):
        case(Daemon, free_port, _big_page, _get, _read_all, k, a.n)


if __name__ == "__main__":
    main()
