"""`python -m mssim.train --ranks N --steps S [--rate R]`: a simulated multi-rank training
job (SIMULATOR, not an NPU). The launcher spawns N rank processes with RANK / LOCAL_RANK /
WORLD_SIZE set; each runs the simulator's built-in workload (docs/design/mspti.md#workload) with
msmonitor.dynamic_profile (init() before the loop, step() after every step), so the daemon,
the CLI and the plugin are exercised exactly as with a real framework in dyno mode."""
import argparse
import ctypes
import os
import signal
import subprocess
import sys

_STEP_CB = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_void_p)


class _WorkloadCfg(ctypes.Structure):
    _fields_ = [
        ("device", ctypes.c_uint32),
        ("steps", ctypes.c_uint32),
        ("steps_per_s", ctypes.c_double),
        ("layers", ctypes.c_uint32),
        ("kernel_scale", ctypes.c_double),
        ("comm", ctypes.c_int),
        ("step_markers", ctypes.c_int),
        ("on_step_end", _STEP_CB),
        ("arg", ctypes.c_void_p),
        ("rank", ctypes.c_int32),
        ("slow_rank", ctypes.c_int32),
        ("slow_factor", ctypes.c_double),
        ("slow_from_step", ctypes.c_uint32),
        ("slow_kind", ctypes.c_int32),
    ]


_SLOW_KINDS = {"compute": 0, "communication": 1, "host": 2}


def _log(msg):
    print(f"[mssim.train] {msg}", flush=True)


def _load_simulator():
    """The simulator libmspti.so the plugin will use (MSMONITOR_MSPTI_LIB), through the
    mssim package's loader when it has one."""
    try:
        from . import lib as mlib  # pylint: disable=import-outside-toplevel
        loaded = mlib.load() if hasattr(mlib, "load") else None
        cdll = getattr(loaded, "_lib", None) or getattr(loaded, "lib", None) or loaded
        if isinstance(cdll, ctypes.CDLL):
            return cdll
    except (ImportError, OSError, AttributeError):
        pass
    path = os.environ.get("MSMONITOR_MSPTI_LIB") or "libmspti.so"
    return ctypes.CDLL(path)


def run_rank(args):
    from msmonitor import dynamic_profile  # pylint: disable=import-outside-toplevel

    rank = int(os.environ.get("RANK", "0"))
    # This driver calls step() itself after every step: no optimizer hook to install (looking
    # for one imports torch, seconds per rank for nothing). MSMONITOR_STEP_HOOK still wins.
    os.environ.setdefault("MSMONITOR_STEP_HOOK", "none")
    sim = _load_simulator()
    if not hasattr(sim, "mssim_workload_run"):
        _log(f"rank {rank}: {sim._name} is not the msPTI simulator")
        return 2
    sim.mssim_workload_default.argtypes = [ctypes.POINTER(_WorkloadCfg)]
    sim.mssim_workload_run.argtypes = [ctypes.POINTER(_WorkloadCfg)]
    sim.mssim_workload_stop.argtypes = []
    active = dynamic_profile.init()
    cfg = _WorkloadCfg()
    if sim.mssim_workload_default(ctypes.byref(cfg)) < 0:
        _log(f"rank {rank}: invalid MSSIM_WL_* environment")
        return 2
    cfg.steps = args.steps
    if args.rate is not None:
        cfg.steps_per_s = args.rate
    cfg.rank = rank
    if args.slow_rank is not None:
        cfg.slow_rank = args.slow_rank
        cfg.slow_factor = args.slow_factor
        cfg.slow_from_step = args.slow_from_step
        cfg.slow_kind = _SLOW_KINDS[args.slow_kind]
    # In dyno mode dynamic_profile emits the `step <N>` ranges (the product path).
    cfg.step_markers = 0 if active else cfg.step_markers

    done = [0]

    def on_step_end(step, _arg):
        done[0] = step
        dynamic_profile.step()

    cb = _STEP_CB(on_step_end)
    cfg.on_step_end = cb
    # Python handlers run between steps (inside the callback); stopping the workload from
    # there ends the run cleanly so atexit clean-up happens.
    signal.signal(signal.SIGTERM, lambda *_: sim.mssim_workload_stop())
    signal.signal(signal.SIGINT, lambda *_: sim.mssim_workload_stop())
    _log(f"rank {rank} started: device {cfg.device}, {args.steps} steps at "
         f"{cfg.steps_per_s} steps/s, dyno mode {'on' if active else 'off'}")
    n = sim.mssim_workload_run(ctypes.byref(cfg))
    if n < 0:
        _log(f"rank {rank}: workload failed ({n})")
        return 1
    sim.mssim_synchronize(-1)
    dynamic_profile.finalize()
    _log(f"rank {rank} finished {n} steps")
    return 0


def launch(args):
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    children = []
    for r in range(args.ranks):
        env = dict(os.environ)
        env.update({"RANK": str(args.rank_offset + r), "LOCAL_RANK": str(r),
                    "WORLD_SIZE": str(args.world_size or args.ranks)})
        if args.fabric_dir:
            # synchronised all-reduces across every rank of the job (docs/simulator.md)
            env["MSSIM_FABRIC_DIR"] = args.fabric_dir
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        argv = [sys.executable, "-m", "mssim.train", "--worker", "--steps", str(args.steps)]
        if args.rate is not None:
            argv += ["--rate", str(args.rate)]
        if args.slow_rank is not None:
            argv += ["--slow-rank", str(args.slow_rank), "--slow-factor", str(args.slow_factor),
                     "--slow-from-step", str(args.slow_from_step), "--slow-kind", args.slow_kind]
        children.append(subprocess.Popen(argv, env=env))

    def forward(signum, _frame):
        for c in children:
            if c.poll() is None:
                c.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    rc = 0
    for c in children:
        rc = max(rc, c.wait())
    _log(f"all {args.ranks} ranks exited (status {rc})")
    return rc


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m mssim.train",
                                 description="Simulated multi-rank training job (SIMULATOR: no NPU is used).")
    ap.add_argument("--ranks", type=int, default=1, help="rank processes to start (1..64)")
    ap.add_argument("--steps", type=int, default=20, help="steps per rank (0 = until stopped)")
    ap.add_argument("--rate", type=float, default=None, help="steps per second (0 = as fast as possible)")
    ap.add_argument("--rank-offset", type=int, default=0,
                    help="RANK of the first rank process (this node's share of a multi-node job)")
    ap.add_argument("--world-size", type=int, default=None, help="WORLD_SIZE (default: --ranks)")
    ap.add_argument("--slow-rank", type=int, default=None,
                    help="make this rank slow (docs/cluster.md); default: none")
    ap.add_argument("--slow-factor", type=float, default=1.0,
                    help="duration factor of the slow part, > 0 (default 1)")
    ap.add_argument("--slow-from-step", type=int, default=1, help="first slow step (default 1)")
    ap.add_argument("--slow-kind", choices=sorted(_SLOW_KINDS), default="compute",
                    help="compute: longer kernels; communication: longer all-reduce; "
                         "host: a host-side stall with an idle device")
    ap.add_argument("--fabric-dir", default=None,
                    help="shared directory of the job's rendezvous: the ranks' all-reduces wait for the slowest "
                         "rank (MSSIM_FABRIC_DIR, docs/simulator.md); default: unsynchronised")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if not 1 <= args.ranks <= 64:
        ap.error(f"--ranks {args.ranks}: must be 1..64")
    if not 0 <= args.steps <= 0xFFFFFFFF:
        ap.error(f"--steps {args.steps}: must be 0..4294967295")
    if args.rate is not None and not 0 <= args.rate <= 1e6:
        ap.error(f"--rate {args.rate}: must be 0..1000000")
    if args.fabric_dir is not None and not os.path.isdir(args.fabric_dir):
        ap.error(f"--fabric-dir {args.fabric_dir}: not a directory")
    if args.rank_offset < 0:
        ap.error(f"--rank-offset {args.rank_offset}: must be >= 0")
    if args.slow_rank is not None and args.slow_rank < 0:
        ap.error(f"--slow-rank {args.slow_rank}: must be >= 0")
    if not 0 < args.slow_factor <= 1e6:
        ap.error(f"--slow-factor {args.slow_factor}: must be > 0 and <= 1000000")
    if not 1 <= args.slow_from_step <= 0xFFFFFFFF:
        ap.error(f"--slow-from-step {args.slow_from_step}: must be 1..4294967295")
    return run_rank(args) if args.worker else launch(args)


if __name__ == "__main__":
    sys.exit(main())
