#!/usr/bin/env python3
"""bench_tls_flood: a mutual-TLS dynolog under a handshake flood of one recorded ClientHello
replayed over fresh connections (no attacker crypto; issue 23 item 8): 12 threads, 4 of them
from 127.0.0.2 and one each from 127.0.0.3-10. Prints the local socket's (dyno.sock) getStatus
p50/p99 and success rate, the connections/s the attackers managed and the daemon's CPU, next
to the same daemon without the flood (same run). Figures only, no thresholds.

  tests/e2e/run_netns.sh /usr/bin/python3 bench/tls/bench_tls_flood.py --build build
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "security"))
import benchlib  # noqa: E402


def case(Daemon, HelloFlood, hello, certs, name, flood, n):
    d = Daemon(extra=["--certs_dir", os.path.join(certs, "server")])
    floods = []
    try:
        if flood:
            floods = [HelloFlood(d.port, "127.0.0.2", hello) for _ in range(4)]
            floods += [HelloFlood(d.port, "127.0.0.%d" % (3 + i), hello) for i in range(8)]
            for f in floods:
                f.start()
            time.sleep(2.0)
        sent0, cpu0, t0 = sum(f.sent for f in floods), benchlib.cpu_s(d.p.pid), time.monotonic()
        lat, fails = benchlib.probe(n, unix=os.path.join(d.sockdir, "dyno.sock"))
        dt = time.monotonic() - t0
        cpu = (benchlib.cpu_s(d.p.pid) - cpu0) / dt * 100.0
        rate = (sum(f.sent for f in floods) - sent0) / dt
    finally:
        for f in floods:
            f.stop.set()
        for f in floods:
            f.join(10)
        d.stop()
    benchlib.report(name, lat, fails, "  (flood %.0f conn/s, daemon CPU %.0f %%)" % (rate, cpu))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("-n", type=int, default=500, help="local requests per case")
    a = ap.parse_args()
    benchlib.setup(a.build)
    from conftest import Daemon
    from test_security_limits import HelloFlood, _client_hello
    certs = tempfile.mkdtemp(prefix="mmtlsflood")
    subprocess.run([os.path.join(HERE, "make_certs.sh"), certs], check=True)
    hello = _client_hello()
    print("bench_tls_flood: getStatus over dyno.sock, %d requests 20 ms apart" % a.n)
    case(Daemon, HelloFlood, hello, certs, "baseline: TLS daemon, no flood", False, a.n)
    case(Daemon, HelloFlood, hello, certs, "flood: replayed ClientHello, 12 threads", True, a.n)


if __name__ == "__main__":
    main()
