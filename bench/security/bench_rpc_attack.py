#!/usr/bin/env python3
"""bench_rpc_attack: `dyno status` latency (local dyno.sock and remote TCP) while the daemon
is under 100 slowloris connections (1 byte/s, reconnecting) plus continuous connection churn
from two other addresses, next to two baselines measured in the same run: the same daemon
idle, and the same attack against a daemon with the pre-issue-13 caps (16 clients, no
per-peer limit; since issue 23 these caps evict the oldest incomplete connection instead of
refusing the newcomer, so this case now shows what eviction alone buys). Prints p50/p99/max
and failures per case; no thresholds. Success rate under the one-address and 400-address
dribbling attacks: bench_limits.py.

Run inside the e2e network namespace (127.0.0.2/3 are the attackers):
  tests/e2e/run_netns.sh /usr/bin/python3 bench/security/bench_rpc_attack.py --build build
"""
import argparse
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.join(HERE, "..", "..", "tests", "e2e")


class ChurnForever(threading.Thread):
    """Open and close connections from one address until stopped (half with a partial
    length), counting them."""

    def __init__(self, port, src):
        super().__init__(daemon=True)
        self.port, self.src = port, src
        self.stop = threading.Event()
        self.done = 0

    def run(self):
        import socket
        while not self.stop.is_set():
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((self.src, 0))
                s.connect(("127.0.0.1", self.port))
                if self.done % 2:
                    s.send(b"\x10\x00")
            except OSError:
                time.sleep(0.001)
            finally:
                s.close()
            self.done += 1


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))] if xs else float("nan")


def measure(conftest, d, n):
    res = {}
    for kind, host in (("local", "unix:"), ("remote", "127.0.0.1")):
        lat, fails = [], 0
        for _ in range(n):
            t0 = time.monotonic()
            r = conftest.run_dyno(d, "status", hostname=host)
            dt = (time.monotonic() - t0) * 1000.0
            if r.returncode == 0 and "nputrace" in r.stdout:
                lat.append(dt)
            else:
                fails += 1
        res[kind] = (lat, fails)
    return res


def run_case(conftest, rpcmod, name, extra, attack, n):
    d = conftest.Daemon(extra=extra)
    slow = churn = None
    try:
        if attack:
            slow = rpcmod.Slowloris(d.port, n=100)
            slow.start()
            churn = [ChurnForever(d.port, rpcmod.CHURN_PEER), ChurnForever(d.port, "127.0.0.4")]
            for c in churn:
                c.start()
            time.sleep(1.5)     # let the slow connections take their slots
        t0 = time.monotonic()
        res = measure(conftest, d, n)
        wall = time.monotonic() - t0
        churned = sum(c.done for c in churn) if churn else 0
    finally:
        if churn:
            for c in churn:
                c.stop.set()
        if slow:
            slow.stop.set()
            slow.join(5)
        d.stop()
    for kind, (lat, fails) in res.items():
        print("%-34s %-6s n=%d p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms  failed %d%s" % (
            name, kind, len(lat) + fails, pct(lat, 50), pct(lat, 99), max(lat) if lat else float("nan"),
            fails, ("  (churn %d conn/s)" % (churned / wall)) if attack else ""))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("-n", type=int, default=200, help="dyno status runs per endpoint and case")
    a = ap.parse_args()
    os.environ["MSMON_BUILD_DIR"] = os.path.abspath(a.build)
    sys.path.insert(0, os.path.abspath(E2E))
    import conftest
    import test_security_rpc as rpcmod
    print("bench_rpc_attack: `dyno status` wall time (process start included), %d runs each" % a.n)
    run_case(conftest, rpcmod, "baseline: idle daemon", [], False, a.n)
    run_case(conftest, rpcmod, "attack: issue-13 defaults", [], True, a.n)
    run_case(conftest, rpcmod, "attack: pre-issue caps (16, no peer)",
             ["--rpc_max_clients", "16", "--rpc_max_clients_per_peer", "16"], True, a.n)


if __name__ == "__main__":
    main()
