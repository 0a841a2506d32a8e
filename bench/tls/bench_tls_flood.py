#!/usr/bin/env python3
"""bench_tls_flood: a mutual-TLS dynolog under a handshake flood of one recorded ClientHello
replayed over fresh connections (no attacker crypto): 12 threads, 4 of them
from 127.0.0.2 and one each from 127.0.0.3-10. Prints the local socket's (dyno.sock) getStatus
p50/p99 and success rate, the connections/s the attackers managed and the daemon's CPU, next
to the same daemon without the flood (same run). Then the same source: 20 connections from
127.0.0.1 that never send a ClientHello, reopened whenever the daemon closes them, and a
legitimate mutual-TLS client from 127.0.0.1 (handshake + getStatus, one connection per request
as dyno does): its success rate and latency p50/p99/max next to the same client without them.
Figures only, no thresholds.

  tests/e2e/run_netns.sh /usr/bin/python3 bench/tls/bench_tls_flood.py --build build
"""
import argparse
import os
import socket
import ssl
import struct
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


def tls_request(port, ctx):
    """Latency in ms of one mutual-TLS getStatus from 127.0.0.1 answered in full, or None."""
    t0 = time.monotonic()
    try:
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        raw.settimeout(5.0)
        raw.bind(("127.0.0.1", 0))
        raw.connect(("127.0.0.1", port))
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(struct.pack("<i", len(benchlib.REQ)) + benchlib.REQ)
            out = b""
            while True:
                c = s.recv(65536)
                if not c:
                    break
                out += c
        if len(out) < 4 or b"processes" not in out:
            return None
    except (OSError, ssl.SSLError):
        return None
    return (time.monotonic() - t0) * 1000.0


def same_source_case(Daemon, Idlers, certs, name, attack, n):
    d = Daemon(extra=["--certs_dir", os.path.join(certs, "server")])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(os.path.join(certs, "client", "ca.crt"))
    ctx.load_cert_chain(os.path.join(certs, "client", "client.crt"), os.path.join(certs, "client", "client.key"))
    idlers = None
    try:
        if attack:
            idlers = Idlers(d.port, "127.0.0.1", 20)
            idlers.start()
            time.sleep(2.0)
        opened0, t0 = idlers.opened if idlers else 0, time.monotonic()
        lat, fails = [], 0
        for _ in range(n):
            ms = tls_request(d.port, ctx)
            if ms is None:
                fails += 1
            else:
                lat.append(ms)
            time.sleep(0.1)     # under the address's 10 handshakes/s, as a dyno loop would be
        rate = ((idlers.opened - opened0) / (time.monotonic() - t0)) if idlers else 0.0
    finally:
        if idlers:
            idlers.stop.set()
            idlers.join(10)
        d.stop()
    benchlib.report(name, lat, fails, "  (idle connections opened %.0f/s)" % rate if attack else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("-n", type=int, default=500, help="local requests per case")
    ap.add_argument("--same-source-n", type=int, default=100, help="TLS requests per same-source case")
    a = ap.parse_args()
    benchlib.setup(a.build)
    from conftest import Daemon
    from test_security_limits import HelloFlood, Idlers, _client_hello
    certs = tempfile.mkdtemp(prefix="mmtlsflood")
    subprocess.run([os.path.join(HERE, "make_certs.sh"), certs], check=True)
    hello = _client_hello()
    print("bench_tls_flood: getStatus over dyno.sock, %d requests 20 ms apart" % a.n)
    case(Daemon, HelloFlood, hello, certs, "baseline: TLS daemon, no flood", False, a.n)
    case(Daemon, HelloFlood, hello, certs, "flood: replayed ClientHello, 12 threads", True, a.n)
    print("bench_tls_flood: same source, mutual-TLS getStatus from 127.0.0.1, %d requests 100 ms apart"
          % a.same_source_n)
    same_source_case(Daemon, Idlers, certs, "baseline: no idle connections", False, a.same_source_n)
    same_source_case(Daemon, Idlers, certs, "20 idle handshakes from 127.0.0.1", True, a.same_source_n)


if __name__ == "__main__":
    main()
