"""`python -m msmonitor cleanup-shm`: remove DynamicProfileNpuShm* segments left behind by
killed jobs (never one a live process uses)."""
import argparse
import sys

from .dynamic_profile import cleanup_stale_shm


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m msmonitor")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cleanup-shm", help="remove stale /dev/shm/DynamicProfileNpuShm* files")
    c.add_argument("--dir", default=None, help="directory to clean (default: MSMONITOR_SHM_DIR or /dev/shm)")
    args = ap.parse_args(argv)
    if args.cmd == "cleanup-shm":
        removed = cleanup_stale_shm(args.dir)
        if not removed:
            print("no stale shared memory found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
