#!/usr/bin/env python3
"""Summarise the npu-monitor DB files of the demo (docs/design/outputs.md#db-schema): top kernels by total
device time, per-step host/device time from the `step <N>` markers as one line per rank (median/p99/max and the slowest
steps), communication totals.
Usage: demo_summary.py DIR [--top N]. Reads every msmonitor_*.db under DIR with sqlite3."""
import argparse
import glob
import os
import re
import sqlite3
import sys

MARKER_CONN_BASE = 4000000000


def _strings(db):
    return dict(db.execute("SELECT id, value FROM STRING_IDS"))


def _has(db, table):
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone()


def _pct(sorted_vals, q):
    """Nearest-rank percentile of an ascending list."""
    i = max(0, min(len(sorted_vals) - 1, -(-q * len(sorted_vals) // 100) - 1))
    return sorted_vals[i]


def _rank_of(path):
    m = re.search(r"_(-?\d+)\.db$", path)
    return int(m.group(1)) if m else -1


def summarise(paths, top):
    kernels = {}        # name -> [count, total_ns]
    steps = {}          # (rank, step) -> [host_ns, device_ns]
    comm = {}           # name -> [count, total_ns, elements]
    for path in paths:
        rank = _rank_of(path)
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            if not _has(db, "STRING_IDS"):
                continue   # session still running: the pool is written at stop
            s = _strings(db)
            if _has(db, "TASK") and _has(db, "COMPUTE_TASK_INFO"):
                for name, n, total in db.execute(
                        "SELECT c.name, COUNT(*), SUM(t.endNs - t.startNs) FROM TASK t "
                        "JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId GROUP BY c.name"):
                    k = kernels.setdefault(s.get(name, str(name)), [0, 0])
                    k[0] += n
                    k[1] += total or 0
            device = {}
            if _has(db, "TASK"):
                mstx = [i for i, v in s.items() if v == "MsTx"]
                if mstx:
                    for conn, st, en in db.execute(
                            "SELECT connectionId, startNs, endNs FROM TASK WHERE taskType = ?", (mstx[0],)):
                        device[conn] = en - st
            if _has(db, "MSTX_EVENTS"):
                for msg, st, en, conn in db.execute(
                        "SELECT message, startNs, endNs, connectionId FROM MSTX_EVENTS WHERE eventType = 2"):
                    text = s.get(msg, "")
                    m = re.fullmatch(r"step (\d+)", text)
                    if m:
                        steps[(rank, int(m.group(1)))] = [en - st, device.get(conn)]
            if _has(db, "COMMUNICATION_OP"):
                for op, n, total, count in db.execute(
                        "SELECT opType, COUNT(*), SUM(endNs - startNs), SUM(count) FROM COMMUNICATION_OP "
                        "GROUP BY opType"):
                    c = comm.setdefault(s.get(op, str(op)), [0, 0, 0])
                    c[0] += n
                    c[1] += total or 0
                    c[2] += int(count or 0)
        finally:
            db.close()

    print(f"== msMonitor demo summary ({len(paths)} DB file(s)) ==")
    print(f"-- top {top} kernels by total device time --")
    print(f"{'kernel':<32}{'calls':>8}{'total ms':>12}{'avg us':>10}")
    for name, (n, total) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"{name:<32}{n:>8}{total / 1e6:>12.3f}{total / n / 1e3:>10.1f}")
    print("-- step time per rank (step <N> markers; host range, device span where recorded) --")
    print(f"{'rank':>4}{'steps':>7}{'median ms':>11}{'p99 ms':>9}{'max ms':>9}{'device med ms':>15}"
          f"  slowest steps (ms)")
    for rank in sorted({r for r, _ in steps}):
        mine = sorted((st, hd) for (r, st), hd in steps.items() if r == rank)
        host = sorted(h for _, (h, _) in mine)
        dev = sorted(d for _, (_, d) in mine if d is not None)
        slow = sorted(mine, key=lambda x: -x[1][0])[:3]
        dev_s = f"{_pct(dev, 50) / 1e6:>15.3f}" if dev else f"{'-':>15}"
        print(f"{rank:>4}{len(host):>7}{_pct(host, 50) / 1e6:>11.3f}{_pct(host, 99) / 1e6:>9.3f}"
              f"{host[-1] / 1e6:>9.3f}{dev_s}  "
              + ", ".join(f"{st}: {h / 1e6:.3f}" for st, (h, _) in slow))
    print("-- communication --")
    print(f"{'op':<24}{'calls':>8}{'total ms':>12}{'elements':>14}")
    for name, (n, total, count) in sorted(comm.items()):
        print(f"{name:<24}{n:>8}{total / 1e6:>12.3f}{count:>14}")
    return 0 if kernels or steps or comm else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args(argv)
    paths = sorted(glob.glob(os.path.join(args.dir, "**", "msmonitor_*.db"), recursive=True))
    if not paths:
        print(f"demo_summary: no msmonitor_*.db under {args.dir}", file=sys.stderr)
        return 1
    rc = summarise(paths, max(args.top, 1))
    print(f"-- charts: python -m msmonitor report {args.dir} -o report.html (docs/report.md) --")
    if rc:
        print("demo_summary: the DB files hold no kernels, steps or communication", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
