#!/usr/bin/env python3
"""Summarise the npu-monitor DB files of the demo (docs/design/outputs.md#db-schema): top kernels by total
device time, per-step host/device time from the `step <N>` markers as one line per rank (median/p99/max and the slowest
steps), communication totals.
Usage: demo_summary.py DIR [--top N]. A view over msmonitor.analysis (docs/design/analysis.md), the
reader of the HTML report: put <build>/python/pkg on PYTHONPATH."""
import argparse
import glob
import os
import sys

try:
    from msmonitor.analysis import Run, merge
except ImportError as err:   # the packages are laid out in the build tree (docs/python.md)
    print(f"demo_summary: cannot import msmonitor ({err}); put <build>/python/pkg on PYTHONPATH", file=sys.stderr)
    sys.exit(2)


def _pct(sorted_vals, q):
    """Nearest-rank percentile of an ascending list."""
    i = max(0, min(len(sorted_vals) - 1, -(-q * len(sorted_vals) // 100) - 1))
    return sorted_vals[i]


def summarise(root, paths, top):
    """A text view over msmonitor.analysis (the reader and step rule of the HTML report) of the
    run's DB files; DB files without their string table (a killed rank) are left out."""
    run = Run(root, sources=("db",), need_strings=True)
    run.scan()
    for note in run.notes:
        print(f"demo_summary: note: {note}", file=sys.stderr)
    ranks = list(run.ranks.values())
    kernels = merge(ranks, "kernels")           # name -> [count, total_ns, min, max]
    comm = {}                                   # op name -> [count, total_ns, elements]
    for (name, _group, _dtype), (n, total, elems, _bytes) in sorted(merge(ranks, "comm").items()):
        c = comm.setdefault(name, [0, 0, 0])
        c[0] += n
        c[1] += total
        c[2] += elems
    steps = {(rk.rank, n): v[:2] for rk in ranks for n, v in rk.steps.items()}   # -> [host_ns, device_ns]

    print(f"== msMonitor demo summary ({len(paths)} DB file(s)) ==")
    print(f"-- top {top} kernels by total device time --")
    print(f"{'kernel':<32}{'calls':>8}{'total ms':>12}{'avg us':>10}")
    for name, (n, total, _lo, _hi) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:top]:
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
    rc = summarise(args.dir, paths, max(args.top, 1))
    print(f"-- charts: python -m msmonitor report {args.dir} -o report.html (docs/report.md) --")
    if rc:
        print("demo_summary: the DB files hold no kernels, steps or communication", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
