"""Helpers for the dyno-mode (dynamic_profile shm handoff) end-to-end tests: the C training
rank dyn_rank, its environment, its plugin log (waits come from waits.py)."""
import glob
import os

from conftest import BUILD, binpath
from waits import wait_until  # noqa: F401 (re-exported: the dyno-mode tests import it from here)


def dyn_rank():
    path = os.path.join(BUILD, "tests", "unit", "plugin", "control", "dyn_rank")
    if not os.path.exists(path):
        raise FileNotFoundError(f"dyn_rank not built under {BUILD}")
    return path


def seg_name(key):
    """The segment name of a job whose MSMONITOR_JOB_KEY is `key`, computed here on its own to
    check the library's (dynamic.c dyn_job_key: FNV-1a 64 over "job", key, each part followed
    by 0x1f)."""
    h = 0xCBF29CE484222325
    for part in ("job", key):
        for b in part.encode():
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        h = ((h ^ 0x1F) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "DynamicProfileNpuShm-%016x" % h


def plugin_log(d):
    out = ""
    for f in sorted(glob.glob(os.path.join(str(d), "msmonitor_log", "*.log"))):
        with open(f, "rb") as fh:
            out += fh.read().decode("utf-8", "replace")
    return out


def rank_env(base, shm, logdir, rank, **extra):
    """Environment of one dyn_rank: dyno mode over the simulator, segment in `shm`, plugin log
    under `logdir`; `extra` overrides (e.g. the retry back-off). The ranks a test starts are
    one job started by one parent, as a launcher's would be: WORLD_SIZE says there are several
    (without it each would be a single-process job of its own, docs/python.md)."""
    env = dict(base)
    env.update({"MSMONITOR_USE_DAEMON": "1", "MSMONITOR_SHM_DIR": str(shm), "MSMONITOR_POLL_INTERVAL_S": "0.3",
                "MSMONITOR_MSPTI_LIB": binpath("libmspti.so"), "MSMONITOR_LOG_PATH": str(logdir),
                "RANK": str(rank), "WORLD_SIZE": "2", "MSSIM_WL_STEPS": "0", "MSSIM_WL_RATE": "20"})
    env.pop("MSMONITOR_NATIVE_POLL", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env
