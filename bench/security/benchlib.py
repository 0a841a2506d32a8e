"""Shared pieces of the resource-limit benchmarks (bench/security, bench/tls, bench/prom): the
e2e helpers on sys.path, a legitimate client that measures success rate and latency of
getStatus (TCP or dyno.sock, in-process, one connection per request as dyno does), and the
daemon's CPU and log growth. Figures only; no thresholds."""
import os
import socket
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.abspath(os.path.join(HERE, "..", "..", "tests", "e2e"))


def setup(build):
    os.environ["MSMON_BUILD_DIR"] = os.path.abspath(build)
    os.environ.setdefault("MSMON_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..", "..")))
    if E2E not in sys.path:
        sys.path.insert(0, E2E)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))] if xs else float("nan")


REQ = b'{"fn":"getStatus"}'


def one_request(port=None, unix=None, timeout=5.0):
    """Latency in ms of one getStatus answered in full, or None."""
    t0 = time.monotonic()
    try:
        if unix:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(timeout)
            s.connect(unix)
        else:
            s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        with s:
            s.sendall(struct.pack("<i", len(REQ)) + REQ)
            out = b""
            while True:
                c = s.recv(65536)
                if not c:
                    break
                out += c
        if len(out) < 4 or struct.unpack("<i", out[:4])[0] != len(out) - 4 or b"processes" not in out:
            return None
    except OSError:
        return None
    return (time.monotonic() - t0) * 1000.0


def probe(n, port=None, unix=None, gap_s=0.02):
    """n legitimate requests, gap_s apart: (latencies of the answered, failures)."""
    lat, fails = [], 0
    for _ in range(n):
        ms = one_request(port, unix)
        if ms is None:
            fails += 1
        else:
            lat.append(ms)
        time.sleep(gap_s)
    return lat, fails


def report(name, lat, fails, extra=""):
    n = len(lat) + fails
    print("%-44s n=%4d answered %6.2f %%  p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms%s" % (
        name, n, 100.0 * len(lat) / n if n else float("nan"), pct(lat, 50), pct(lat, 99),
        max(lat) if lat else float("nan"), extra))
    sys.stdout.flush()


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kb(pid, key="VmRSS"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1
