"""`python -m msmonitor cleanup-shm`: remove the files dyno mode makes (DynamicProfileNpuShm*
segments and their msmonitor_steps.* side files, the contract's SHM_FILE_PREFIXES) left behind by
killed jobs (never one a live process uses). `python -m msmonitor report DIR [-o FILE]`: render
the DB/JSONL files of a run as one self-contained HTML page (docs/report.md). `python -m msmonitor
analyse PATH...`: summarise nputrace traces (docs/nputrace.md)."""
import argparse
import sys

from .dynamic_profile import cleanup_stale_shm


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m msmonitor")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cleanup-shm", help="remove stale dyno-mode files (DynamicProfileNpuShm*, msmonitor_steps.*) of killed jobs")
    c.add_argument("--dir", default=None, help="directory to clean (default: MSMONITOR_SHM_DIR or /dev/shm)")
    r = sub.add_parser("report", help="render a run's DB/JSONL files as one offline HTML page")
    r.add_argument("dir", help="the --log-file directory of the run (searched recursively)")
    r.add_argument("-o", "--output", default=None, help="HTML file to write (default: DIR/report.html)")
    r.add_argument("--rank", type=int, default=None, help="rank of the step timeline (default: 0 or the first)")
    r.add_argument("--step", type=int, default=None, help="step of the timeline (default: the median step)")
    a = sub.add_parser("analyse", help="summarise nputrace trace files (docs/nputrace.md)")
    a.add_argument("paths", nargs="+", help="trace files or directories")
    args = ap.parse_args(argv)
    if args.cmd == "analyse":
        from . import nputrace  # pylint: disable=import-outside-toplevel
        return nputrace.main(["analyse", *args.paths])
    if args.cmd == "report":
        from . import report  # pylint: disable=import-outside-toplevel
        return report.main(args)
    if args.cmd == "cleanup-shm":
        removed = cleanup_stale_shm(args.dir)
        if not removed:
            print("no stale shared memory found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
