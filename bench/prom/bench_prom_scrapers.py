#!/usr/bin/env python3
"""bench_prom_scrapers: a dynolog with --use_prometheus under hostile scrapers. Figures only, no
thresholds; each attack next to a baseline measured in the same run.

1. A ~10 MB /metrics page (2,000 ops x 5 npu_op_* families with 900-byte names, the per-process
   bound lifted), then 0 / 100 / 200 scrapers that send `GET /metrics` and never read (each
   replaced by a new one after 1.6 s): the daemon's peak RSS and the p50/p99 of getStatus over
   TCP meanwhile; the 0-scraper case is the baseline.
2. Series from untrusted names (docs/prometheus.md#bounds): one local process sends 30,000
   distinct marker names (--name-len bytes each) and 3,000 marker domains, then 200 scrapers
   that never read and a scrape hammer (--hammers threads reading pages back to back): the
   local RPC's (dyno.sock getStatus) p50/p99, the page size, one scrape's time, the hammer's
   scrapes/s and the peak RSS; baseline: the same daemon with no names and no scrapers. With a
   build that has the bounds, once more with them lifted (--prometheus_max_series* 200000), so
   the page is as large as before and only the render thread is left between it and RPC.

  tests/e2e/run_netns.sh /usr/bin/python3 bench/prom/bench_prom_scrapers.py --build build
"""
import argparse
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "security"))
import benchlib  # noqa: E402

# _big_page's 10,000 series come from one process: above the default per-process bound
BIG_PAGE_FLAGS = ["--prometheus_max_series_per_process", "20000"]


def case(Daemon, free_port, big_page, get, read_all, n_scrapers, n, flags, Hoarders):
    port = free_port()
    d = Daemon(extra=["--use_prometheus", "--prometheus_port", str(port), *flags])
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
            h = Hoarders(port, n_scrapers)
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


def _known_flags(Daemon_bin):
    """The daemon's flags (a build before the series bounds lacks them)."""
    import subprocess
    out = subprocess.run([Daemon_bin, "--help"], capture_output=True, text=True).stdout
    return out


def flood_case(name, port, d, attack, n, name_len, hammers, run_sender, Hoarders, Hammer, read_all, get):
    hoard, hams = None, []
    try:
        d.wait_log("prometheus: serving /metrics")
        page, scrape_s = b"", 0.0
        if attack:
            run_sender(d, "Marker", "m", 30000, name_len=name_len, n_ranges=3000)
            # the page holds what the store will hold (the daemon has taken every datagram)
            deadline = time.monotonic() + 300
            last = -1
            while time.monotonic() < deadline:
                t0 = time.monotonic()
                page = read_all(get(port))
                scrape_s = time.monotonic() - t0
                if len(page) == last:
                    break
                last = len(page)
                time.sleep(1.5)
        base = benchlib.rss_kb(d.p.pid)
        if attack:
            hoard = Hoarders(port, 200)
            hoard.start()
            hams = [Hammer(port) for _ in range(hammers)]
            for h in hams:
                h.start()
            time.sleep(2.0)
        peak = [base]
        stop = threading.Event()

        def sample():
            while not stop.wait(0.05):
                peak[0] = max(peak[0], benchlib.rss_kb(d.p.pid))
        t = threading.Thread(target=sample, daemon=True)
        t.start()
        done0 = sum(h.pages + h.busy for h in hams)
        t0 = time.monotonic()
        lat, fails = benchlib.probe(n, unix=d.sock("dyno.sock"))
        dt = time.monotonic() - t0
        rate = (sum(h.pages + h.busy for h in hams) - done0) / dt
        stop.set()
        t.join()
    finally:
        if hoard:
            hoard.stop.set()
        for h in hams:
            h.stop.set()
        for x in [hoard] + hams:
            if x:
                x.join(60)
        d.stop()
    extra = "  RSS %.0f MB, peak %.0f MB" % (base / 1024.0, peak[0] / 1024.0)
    if attack:
        extra += "; page %.1f MB, one scrape %.2f s, hammer %.0f scrapes/s (%d pages, %d busy)" % (
            len(page) / 1e6, scrape_s, rate, sum(h.pages for h in hams), sum(h.busy for h in hams))
    benchlib.report(name, lat, fails, extra)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("-n", type=int, default=300, help="getStatus requests per case")
    ap.add_argument("--name-len", type=int, default=400, help="bytes per flooded marker name")
    ap.add_argument("--hammers", type=int, default=4, help="threads scraping back to back")
    ap.add_argument("--only", choices=("hoarders", "names"), help="run one part")
    a = ap.parse_args()
    benchlib.setup(a.build)
    from conftest import Daemon, binpath, free_port
    from test_security_limits import _big_page, _get, _read_all
    from test_security_series import Hammer, Hoarders, run_sender
    helptext = _known_flags(binpath("dynolog"))
    bounded = "--prometheus_max_series_per_process" in helptext
    big = BIG_PAGE_FLAGS if bounded else []
    if a.only != "names":
        print("bench_prom_scrapers: getStatus over TCP, %d requests 20 ms apart, per case" % a.n)
        for k in (0, 100, 200):
            case(Daemon, free_port, _big_page, _get, _read_all, k, a.n, big, Hoarders)
    if a.only != "hoarders":
        print("bench_prom_scrapers: 30,000 marker names (%d bytes) from one process, 200 scrapers that "
              "never read, %d hammer threads; getStatus over dyno.sock, %d requests 20 ms apart"
              % (a.name_len, a.hammers, a.n))
        cases = [("baseline: no names, no scrapers", [], False),
                 ("names + 200 scrapers + hammer", [], True)]
        if bounded:
            cases.append(("... bounds lifted (render thread only)",
                          ["--prometheus_max_series_per_process", "200000", "--prometheus_max_series", "200000"],
                          True))
        for name, flags, attack in cases:
            port = free_port()
            d = Daemon(extra=["--use_prometheus", "--prometheus_port", str(port), *flags])
            flood_case(name, port, d, attack, a.n, a.name_len, a.hammers, run_sender, Hoarders, Hammer,
                       _read_all, _get)


if __name__ == "__main__":
    main()
