#!/usr/bin/env python3
"""bench_limits: legitimate getStatus requests (TCP from 127.0.0.1, in-process, one connection
each) answered and their p50/p99 while the daemon is under the two connection attacks of
issue 23 item 6, next to an unattacked baseline in the same run:
  A. one address (127.0.0.1, the legitimate client's own) holding 40 connections that send a
     length header and then dribble a byte a second, reconnecting when closed;
  B. 400 source addresses (127.0.1.x, 127.0.2.x) with one such connection each;
then the daemon's log bytes/s under a flood of 8 KB invalid bodies from 4 clients (item 7)
next to a quiet baseline (one client, 20 valid requests/s). Figures only, no thresholds.

  tests/e2e/run_netns.sh /usr/bin/python3 bench/security/bench_limits.py --build build
"""
import argparse
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def attack_case(Daemon, Dribblers, name, sources, n):
    d = Daemon()
    attack = None
    try:
        if sources:
            attack = Dribblers(d.port, sources)
            attack.start()
            # until every attacker is connected and the caps are in play
            deadline = time.monotonic() + 60
            while attack.opened < len(sources) and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(2.0)
        lat, fails = benchlib.probe(n, port=d.port)
        extra = ""
        if attack:
            extra = "  (attack: %d connections opened, %d closed by the daemon)" % (attack.opened, attack.closed)
    finally:
        if attack:
            attack.stop.set()
            attack.join(10)
        d.stop()
    benchlib.report(name, lat, fails, extra)


def log_case(Daemon, name, flooders, seconds):
    d = Daemon()
    stop = threading.Event()
    sent = [0] * max(flooders, 1)

    def flood(k):
        body = b"x" * 8000
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
                    s.sendall(struct.pack("<i", len(body)) + body)
                    s.recv(16)
            except OSError:
                pass
            sent[k] += 1

    def quiet():
        while not stop.is_set():
            benchlib.one_request(d.port)
            sent[0] += 1
            time.sleep(0.05)

    threads = [threading.Thread(target=flood, args=(k,), daemon=True) for k in range(flooders)] if flooders \
        else [threading.Thread(target=quiet, daemon=True)]
    try:
        size0 = os.path.getsize(d.logpath)
        t0 = time.monotonic()
        for t in threads:
            t.start()
        time.sleep(seconds)
        size1 = os.path.getsize(d.logpath)
        dt = time.monotonic() - t0
        stop.set()
        for t in threads:
            t.join(10)
    finally:
        d.stop()
    print("%-44s %8.0f requests/s  log %9.1f KB/s" % (name, sum(sent) / dt, (size1 - size0) / 1024.0 / dt))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(benchlib.HERE, "..", "..", "build"))
    ap.add_argument("-n", type=int, default=500, help="legitimate requests per case")
    ap.add_argument("--log-seconds", type=float, default=10.0)
    a = ap.parse_args()
    benchlib.setup(a.build)
    from conftest import Daemon
    from test_security_limits import Dribblers
    print("bench_limits: legitimate getStatus over TCP from 127.0.0.1, %d requests 20 ms apart" % a.n)
    attack_case(Daemon, Dribblers, "baseline: no attack", [], a.n)
    attack_case(Daemon, Dribblers, "A: 40 dribbling conns from 127.0.0.1", ["127.0.0.1"] * 40, a.n)
    attack_case(Daemon, Dribblers, "B: 400 addresses, 1 dribbling conn each",
                ["127.0.%d.%d" % (1 + i // 200, 2 + i % 200) for i in range(400)], a.n)
    print("bench_limits: daemon log growth over %.0f s" % a.log_seconds)
    log_case(Daemon, "baseline: quiet (20 valid requests/s)", 0, a.log_seconds)
    log_case(Daemon, "flood: 4 clients, 8 KB invalid bodies", 4, a.log_seconds)


if __name__ == "__main__":
    main()
