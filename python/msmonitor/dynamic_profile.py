"""msmonitor.dynamic_profile: the framework side of dyno mode for any training loop
(docs/design/ipc.md#shared-memory-handoff, docs/design/ipc.md#shared-memory-handoff). The handoff itself is implemented once, in libmsmonitor
(msmon_dynamic_*, reached through IPCMonitor_C.dynamic): init() joins the per-node shared
memory segment (creating it, or taking over a killed job's leftover) and, on the one creator
rank, starts the poller thread; the segment is per job and lives in a directory only the
job's uid can write (job_key(), docs/python.md "Where the segment lives"); step() applies configs the poller wrote there, drives the
nputrace status, emits the `step <N>` mstx range and hands status to the poller."""
import atexit
import fcntl
import os
import struct
import sys
import threading
import time

from . import nputrace, step_hook
from ._contract import SHM_FILE_PREFIXES, SHM_PREFIX, SHM_PRIVATE_PREFIX, SHM_SIZE
from ._ipcmonitor_C import IPCMonitor_C
from .dynamic_monitor_proxy import PyDynamicMonitorProxy
from .utils import get_parallel_group_info, get_rank_id

SHM_DIR = "/dev/shm"
STALE_SECONDS = 60

_ESTALE = 116


class StaleShmError(RuntimeError):
    """The segment of a live creator predates this process by more than 60 s (docs/design/ipc.md#segment)."""


def _log(level, msg):
    print(f"[{level}] [msmonitor.dynamic_profile {os.getpid()}] {msg}", file=sys.stderr, flush=True)


def _shm_dir():
    """MSMONITOR_SHM_DIR (ours): where the segment lives; default /dev/shm. Lets parallel
    test jobs on one node stay apart."""
    return os.environ.get("MSMONITOR_SHM_DIR") or SHM_DIR


def _dynamic():
    """IPCMonitor_C.dynamic, or None without the extension (dyno mode then stays off)."""
    return getattr(IPCMonitor_C, "dynamic", None) if IPCMonitor_C is not None else None


def job_key(environ=None, ppid=None, pid=None):
    """The job key libmsmonitor derives (msmon_dynamic_job_key, one rule for C and Python):
    MSMONITOR_JOB_KEY, else the launcher's job (torchrun, MPI, Slurm), else the parent pid for a
    multi-rank job without one, else this process: 16 hex digits."""
    return job_key_source(environ, ppid, pid)[0]


def job_key_source(environ=None, ppid=None, pid=None):
    """(key, the rule that gave it)."""
    dyn = _dynamic()
    if dyn is None or not hasattr(dyn, "job_key"):
        raise OSError("the IPCMonitor_C extension is not available")
    env = dict(os.environ if environ is None else environ)
    return dyn.job_key(env, os.getppid() if ppid is None else ppid, os.getpid() if pid is None else pid)


def shm_name(key=None):
    """DynamicProfileNpuShm-<job key>."""
    return f"{SHM_PREFIX}-{key or job_key()}"


def use_daemon_enabled(environ=None):
    """MSMONITOR_USE_DAEMON (or the deprecated KINETO_USE_DAEMON) parsed as an integer;
    only 1 enables dyno mode (libmsmonitor's rule, msmon_dynamic_use_daemon)."""
    env = os.environ if environ is None else environ
    dyn = _dynamic()
    if dyn is None or not hasattr(dyn, "use_daemon"):
        return False
    enabled, warning = dyn.use_daemon(env.get("MSMONITOR_USE_DAEMON"), env.get("KINETO_USE_DAEMON"))
    if warning:
        _log("WARNING", warning)
    return enabled


def _same_file(fd, path):
    """True if `path` still names the file open on `fd`."""
    try:
        a, b = os.fstat(fd), os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def attach_or_create(path):
    """Attach to `path`, create it, or take over a leftover whose creator is gone (the C
    implementation, msmon_dynamic_attach). Returns (fd, is_creator); raises StaleShmError
    or OSError. The fd holds a shared flock (cleanup-shm tells live segments by it) and, for
    the creator, the creator lock."""
    dyn = _dynamic()
    if dyn is None:
        raise OSError("the IPCMonitor_C extension is not available")
    rc, fd, creator, err = dyn.attach(path)
    if rc == -_ESTALE:
        raise StaleShmError(err)
    if rc != 0:
        raise OSError(-rc, err or os.strerror(-rc))
    return fd, creator


def write_config(mm, cfg, now=None, aligned=-1):
    """Publish a config dict as the poller does (tools and tests): the aligned start step, the
    KEY=value text padded with spaces, then the 4-byte timestamp (last, so a rank that sees
    the new time reads the whole text). docs/design/ipc.md#segment."""
    text = "\n".join(f"{k}={v}" for k, v in cfg.items()).encode("utf-8")
    if len(text) > SHM_SIZE - 8:
        _log("ERROR", f"config of {len(text)} bytes does not fit the shared memory, dropped")
        return False
    mm[4:8] = struct.pack("<i", aligned)
    mm[8:8 + len(text)] = text
    mm[8 + len(text):SHM_SIZE] = b" " * (SHM_SIZE - 8 - len(text))
    mm[0:4] = struct.pack("<I", int(time.time() if now is None else now) & 0xFFFFFFFF)
    return True


def _before_stop():
    """Runs inside step() before an NPU_MONITOR_STOP config: the session end writes the
    cluster layout next to the data (docs/design/outputs.md)."""
    PyDynamicMonitorProxy().set_cluster_config_data({"parallel_group_info": get_parallel_group_info()})


class _DynamicProfile:
    """This process's view of dyno mode; the state itself lives in libmsmonitor."""

    def __init__(self):
        self.lock = threading.Lock()
        self.enabled = False
        self.path = None
        self.creator = False
        self.rank = 0
        self.window = None        # nputrace.Window: torch.profiler and analysis of the window
        self.tick = None          # IPCMonitor_C.dynamic.tick: step() whole, the hooks' callback

    # -- set-up / tear-down --
    def init(self):
        if self.enabled:
            return True
        if not use_daemon_enabled():
            return False
        dyn = _dynamic()
        if dyn is None:
            _log("ERROR", "dynamic profiler disabled: the IPCMonitor_C extension is not available")
            return False
        rank = get_rank_id()
        self.rank = rank if rank >= 0 else 0
        rc = dyn.init(self.rank, True)
        if rc != 0:
            # The reason (stale segment with its `rm -f` hint, I/O error) is already on stderr.
            return False
        info = dyn.info()
        self.path, self.creator = info["path"], info["creator"]
        dyn.set_stop_hook(_before_stop)
        if hasattr(dyn, "trace_info"):
            self.window = nputrace.Window(dyn)
        dyn.set_step_window(self.window, _step_failed)
        self.tick = dyn.tick
        self.enabled = True
        atexit.register(self.finalize)
        _install_optimizer_hook()
        return True

    def finalize(self):
        with self.lock:
            if not self.enabled:
                return
            self.enabled = False
            dyn = _dynamic()
            if self.window is not None:
                self.window.finish()
            dyn.set_step_window(None, _step_failed)
            dyn.finalize()
            dyn.set_stop_hook(None)

    def step(self):
        step()

    def info(self):
        """libmsmonitor's view: enabled, creator, polling, registered, reachable, ..."""
        dyn = _dynamic()
        return dyn.info() if dyn is not None else {"enabled": False}


_STATE = _DynamicProfile()
_HOOKED = []


def _install_optimizer_hook():
    """The step source (step_hook.step_source()): step() after each optimizer step, on every
    PyTorch we support, or after each outermost module forward (inference, vLLM >= 0.11)."""
    source = step_hook.step_source()
    # the hooks call step()'s C whole directly: no Python frame per step
    if source == "forward":
        step_hook.install_forward(None, _STATE.tick)
    elif source == "optimizer":
        step_hook.install(_STATE.tick)


def init():
    """Join dyno mode if MSMONITOR_USE_DAEMON=1; returns True when active."""
    try:
        return _STATE.init()
    except Exception as err:  # noqa: BLE001
        _log("ERROR", f"dynamic profiler disabled: {err}")
        return False


def step():
    """Call once per iteration (after the optimizer step). One C call (IPCMonitor_C.dynamic.tick:
    libmsmonitor's step, then the nputrace window only when it moved or its analysis waits);
    a failure is logged once and disables dyno mode (docs/benchmarks.md#the-always-on-cost-of-a-step)."""
    state = _STATE
    if state.enabled:
        state.tick()


def _step_failed(err):
    """tick()'s on_error: after it, the steps do nothing."""
    _log("ERROR", f"dynamic_profile.step failed, disabling: {err}")
    _STATE.enabled = False


def finalize():
    """Stop monitoring, the poller and remove the segment (also run at exit)."""
    _STATE.finalize()


def _used_by_other_process(path, me):
    """True if a process other than `me` has `path` open or mapped (other frameworks'
    processes hold no flock)."""
    real = os.path.realpath(path)
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == me:
            continue
        try:
            with open(f"/proc/{pid}/maps", "r", encoding="utf-8", errors="replace") as f:
                if any(line.rstrip("\n").endswith(real) for line in f):
                    return True
            for fdname in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fdname}") == real:
                    return True
        except OSError:
            continue
    return False


def _remove_if_dead(path):
    """Unlink `path` unless a live process uses it. The exclusive flock is held across the
    check and the unlink: our ranks and pollers hold a shared one for their whole life, and a
    rank attaching meanwhile blocks on it and then sees the file gone (attach_or_create)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        if not _same_file(fd, path) or _used_by_other_process(path, str(os.getpid())):
            return False
        os.unlink(path)
        return True
    finally:
        os.close(fd)


def cleanup_stale_shm(shm_dir=None):
    """Remove the files dyno mode creates (the contract's SHM_FILE_PREFIXES: the
    DynamicProfileNpuShm* segments and their msmonitor_steps.* side files) that no live process
    uses, in shm_dir and in this uid's private msmonitor-<uid> directory under it; prints and
    returns the removed paths."""
    shm_dir = shm_dir or _shm_dir()
    removed = []
    dirs = [shm_dir]
    private = os.path.join(shm_dir, f"{SHM_PRIVATE_PREFIX}{os.geteuid()}")
    try:
        st = os.lstat(private)
        if st.st_uid == os.geteuid() and (st.st_mode & 0o170000) == 0o040000:
            dirs.append(private)
    except OSError:
        pass
    for d in dirs:
        removed += _cleanup_dir(d)
    return removed


def _cleanup_dir(shm_dir):
    removed = []
    try:
        names = sorted(os.listdir(shm_dir))
    except OSError as err:
        print(f"[ERROR] cannot list {shm_dir}: {err}")
        return removed
    for name in names:
        if not name.startswith(SHM_FILE_PREFIXES):
            continue
        path = os.path.join(shm_dir, name)
        try:
            if (os.lstat(path).st_mode & 0o170000) != 0o100000:
                continue
        except OSError:
            continue
        try:
            if not _remove_if_dead(path):
                continue
        except OSError as err:
            print(f"[ERROR] cannot remove {path}: {err}")
            continue
        print(f"removed {path}")
        removed.append(path)
    return removed
