"""The per-node poller process of msmonitor.dynamic_profile (03-ipc.md §7.3): registers with
the daemon, polls for configs every interval and publishes them in the shared memory
segment for the ranks. Started as a fresh interpreter by the creator rank; exits when that
rank does (SIGTERM or parent death)."""
import argparse
import ctypes
import fcntl
import mmap
import os
import signal
import sys
import threading

from .dynamic_monitor_proxy import PyDynamicMonitorProxy
from .dynamic_profile import SHM_SIZE, parse_config_text, write_config

PR_SET_PDEATHSIG = 1
DEFAULT_INTERVAL_S = 2.0


def _log(level, msg):
    print(f"[{level}] [msmonitor poller {os.getpid()}] {msg}", file=sys.stderr, flush=True)


def poll_interval():
    """MSMONITOR_POLL_INTERVAL_S (ours, for tests and impatient users): seconds in [0.1, 50];
    default 2."""
    raw = os.environ.get("MSMONITOR_POLL_INTERVAL_S")
    if raw is None:
        return DEFAULT_INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.1 <= value <= 50:
        _log("WARNING", f"MSMONITOR_POLL_INTERVAL_S={raw!r} invalid (0.1..50), using 2")
        return DEFAULT_INTERVAL_S
    return value


def main(argv=None):
    ap = argparse.ArgumentParser(prog="msmonitor-poller")
    ap.add_argument("--shm", required=True)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--parent", type=int, required=True)
    args = ap.parse_args(argv)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    # The death signal fires when the *thread* that started us exits, which need not be the
    # end of the rank (init() called from a short-lived thread): stop only if the rank is gone.
    def on_parent_death(*_):
        if os.getppid() != args.parent:
            stop.set()

    signal.signal(signal.SIGUSR1, on_parent_death)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGUSR1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != args.parent:   # the rank died before prctl took effect
        return 0

    try:
        fd = os.open(args.shm, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        _log("ERROR", f"cannot open {args.shm}: {err}")
        return 1
    fcntl.flock(fd, fcntl.LOCK_SH)
    mm = mmap.mmap(fd, SHM_SIZE)

    proxy = PyDynamicMonitorProxy()
    if not proxy.init_dyno(args.rank):
        _log("INFO", "Init dynolog failed !")
        return 0
    _log("INFO", "Init dynolog success !")
    interval = poll_interval()
    while not stop.wait(interval):
        if os.getppid() != args.parent:
            break
        cfg = parse_config_text(proxy.poll_dyno())
        if cfg:
            cfg["is_valid"] = True
            if write_config(mm, cfg):
                _log("INFO", f"config published ({len(cfg)} keys)")
    proxy.update_profiler_status({"profiler_status": "-1", "current_step": "-1",
                                  "start_step": "-1", "stop_step": "-1"})
    mm.close()
    os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
