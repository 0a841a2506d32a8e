"""msmonitor.dynamic_profile: the framework side of dyno mode for any training loop
(04-plugin.md §15, 03-ipc.md §7). init() joins the per-node shared memory segment and, on the
one creator rank, starts the poller process; step() applies configs the poller wrote there,
drives the nputrace status, emits the `step <N>` mstx range and reports status."""
import atexit
import ctypes
import fcntl
import importlib.util
import json
import mmap
import os
import random
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref

from . import step_hook
from .dynamic_monitor_proxy import PyDynamicMonitorProxy
from .utils import get_rank_id

SHM_DIR = "/dev/shm"
SHM_PREFIX = "DynamicProfileNpuShm"
SHM_SIZE = 1 << 20
STALE_SECONDS = 60
ATTACH_TRIES = 10
STATUS_PERIOD_S = 1.0
POLLER_STOP_TIMEOUT_S = 15.0

# nputrace states as the daemon encodes them (03-ipc.md §2: -1 Uninitialized, 0 Idle,
# 1 Running, 2 Ready).
TRACE_IDLE, TRACE_RUNNING, TRACE_READY = 0, 1, 2


class StaleShmError(RuntimeError):
    """The segment predates this process by more than 60 s (03-ipc.md §7.2)."""


def _log(level, msg):
    print(f"[{level}] [msmonitor.dynamic_profile {os.getpid()}] {msg}", file=sys.stderr, flush=True)


def _shm_dir():
    """MSMONITOR_SHM_DIR (ours): where the segment lives; default /dev/shm. Lets parallel
    test jobs on one node stay apart."""
    return os.environ.get("MSMONITOR_SHM_DIR") or SHM_DIR


def _stale_seconds():
    """MSMONITOR_SHM_STALE_S (ours, tests): the stale-rule threshold; default 60."""
    raw = os.environ.get("MSMONITOR_SHM_STALE_S")
    if raw is None:
        return STALE_SECONDS
    try:
        value = int(raw)
        if value >= 0:
            return value
    except ValueError:
        pass
    _log("WARNING", f"MSMONITOR_SHM_STALE_S={raw!r} invalid (integer >= 0), using {STALE_SECONDS}")
    return STALE_SECONDS


def shm_name(now=None):
    """DynamicProfileNpuShm + UTC %Y%m%d%H."""
    return SHM_PREFIX + time.strftime("%Y%m%d%H", time.gmtime(now))


def stale_message(path):
    d = os.path.dirname(path) or "."
    return (f"There may exist shared memory before this task. If no job is using it, run "
            f"`rm -f {d}/{SHM_PREFIX}*` (see `ls -la {d}/{SHM_PREFIX}*`). "
            f"Please remove: {path}")


def use_daemon_enabled(environ=None):
    """MSMONITOR_USE_DAEMON (or the deprecated KINETO_USE_DAEMON) parsed as an integer;
    only 1 enables dyno mode."""
    env = os.environ if environ is None else environ
    name = "MSMONITOR_USE_DAEMON"
    raw = env.get(name)
    if raw is None:
        raw = env.get("KINETO_USE_DAEMON")
        if raw is None:
            return False
        name = "KINETO_USE_DAEMON"
        _log("WARNING", "KINETO_USE_DAEMON is deprecated, use MSMONITOR_USE_DAEMON")
    try:
        value = int(raw.strip())
    except ValueError:
        _log("WARNING", f"Environment variable {name}={raw!r} value not valid, will be set to 0 !")
        return False
    return value == 1


def _fresh_segment(path):
    """Create and initialise the segment under a private name, then link() it into place:
    link fails if another rank won, so exactly one creator exists and no rank ever sees a
    half-initialised file. Returns (fd, True) or None when someone else won."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        os.ftruncate(fd, SHM_SIZE)
        os.pwrite(fd, struct.pack("<I", 0) + b" " * (SHM_SIZE - 4), 0)
        try:
            os.link(tmp, path)
        except FileExistsError:
            os.close(fd)
            return None
        return fd
    except BaseException:
        os.close(fd)
        raise
    finally:
        os.unlink(tmp)


def _same_file(fd, path):
    """True if `path` still names the file open on `fd`."""
    try:
        a, b = os.fstat(fd), os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def attach_or_create(path):
    """Attach to `path`, else create it. Returns (fd, is_creator); raises StaleShmError or
    OSError. Every holder keeps a shared flock so cleanup can tell live segments."""
    for _ in range(ATTACH_TRIES):
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            fd = None
        if fd is not None:
            try:
                st = os.fstat(fd)
                proc_ctime = os.stat(f"/proc/{os.getpid()}").st_ctime
                if proc_ctime - st.st_ctime > _stale_seconds():
                    raise StaleShmError(stale_message(path))
                if st.st_size != SHM_SIZE:
                    raise OSError(f"{path}: size {st.st_size}, expected {SHM_SIZE}")
                fcntl.flock(fd, fcntl.LOCK_SH)
                # cleanup_stale_shm() unlinks while holding LOCK_EX; a rank that opened the
                # file just before must not keep a segment no one else can find.
                if not _same_file(fd, path):
                    os.close(fd)
                    continue
            except BaseException:
                os.close(fd)
                raise
            return fd, False
        fd = _fresh_segment(path)
        if fd is not None:
            return fd, True
        time.sleep(random.uniform(0, 0.02))
    raise OSError(f"could not attach to or create {path}")


def parse_config_text(text):
    """The poller's line parsing (03-ipc.md §7.3): split on newlines, keep a line only if it
    splits on '=' into exactly two parts, strip both."""
    cfg = {}
    for line in text.split("\n"):
        parts = line.split("=")
        if len(parts) != 2:
            continue
        cfg[parts[0].strip()] = parts[1].strip()
    return cfg


def write_config(mm, cfg, now=None):
    """Publish a config dict: JSON text padded with spaces, then the 4-byte timestamp (last,
    so a rank that sees the new time reads the whole text)."""
    text = json.dumps(cfg).encode("utf-8")
    if len(text) > SHM_SIZE - 4:
        _log("ERROR", f"config of {len(text)} bytes does not fit the shared memory, dropped")
        return False
    mm[4:4 + len(text)] = text
    mm[4 + len(text):SHM_SIZE] = b" " * (SHM_SIZE - 4 - len(text))
    mm[0:4] = struct.pack("<I", int(time.time() if now is None else now) & 0xFFFFFFFF)
    return True


def read_config(mm):
    """The JSON object of the segment, or None if it is empty or unparsable."""
    raw = bytes(mm[4:SHM_SIZE]).rstrip(b" \0")
    if not raw:
        return None
    try:
        cfg = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return cfg if isinstance(cfg, dict) else None


class _Mstx:
    """`step <N>` ranges: the simulator's mstx API when the msPTI library in use is the
    simulator, else CANN's mstxRangeStartA/mstxRangeEnd, else nothing."""

    def __init__(self):
        self._start = self._end = None
        lib = self._simulator()
        if lib is not None:
            lib.mssim_mstx_range_start.restype = ctypes.c_uint64
            lib.mssim_mstx_range_start.argtypes = [ctypes.c_char_p, ctypes.c_int32]
            lib.mssim_mstx_range_end.restype = None
            lib.mssim_mstx_range_end.argtypes = [ctypes.c_uint64]
            self._start = lambda msg: lib.mssim_mstx_range_start(msg, 0)
            self._end = lib.mssim_mstx_range_end
            return
        try:
            lib = ctypes.CDLL("libms_tools_ext.so")
            lib.mstxRangeStartA.restype = ctypes.c_uint64
            lib.mstxRangeStartA.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
            lib.mstxRangeEnd.restype = None
            lib.mstxRangeEnd.argtypes = [ctypes.c_uint64]
            self._start = lambda msg: lib.mstxRangeStartA(msg, None)
            self._end = lib.mstxRangeEnd
        except (OSError, AttributeError):
            pass

    @staticmethod
    def _simulator():
        candidates = []
        path = os.environ.get("MSMONITOR_MSPTI_LIB")
        if path:
            candidates.append((path, 0))
        candidates.append(("libmspti.so", getattr(os, "RTLD_NOLOAD", 4)))
        for name, mode in candidates:
            try:
                lib = ctypes.CDLL(name, mode=mode)
                if hasattr(lib, "mssim_is_simulator") and hasattr(lib, "mssim_mstx_range_start"):
                    return lib
            except OSError:
                continue
        return None

    def start(self, message):
        return self._start(message.encode()) if self._start else 0

    def end(self, range_id):
        if self._end and range_id:
            self._end(range_id)


class _DynamicProfile:
    def __init__(self):
        self.lock = threading.Lock()
        self.enabled = False
        self.path = None
        self.fd = -1
        self.mm = None
        self.creator = False
        self.poller = None
        self.rank = 0
        self.last_ts = 0
        self.step_num = 1
        self.range_id = 0
        self.mstx = None
        self.trace_state = TRACE_IDLE
        self.trace_start = -1
        self.trace_stop = -1
        self.last_status = 0.0
        self.proxy = PyDynamicMonitorProxy()

    # -- set-up / tear-down --
    def init(self):
        if self.enabled:
            return True
        if not use_daemon_enabled():
            return False
        rank = get_rank_id()
        self.rank = rank if rank >= 0 else 0
        self.path = os.path.join(_shm_dir(), shm_name())
        try:
            self.fd, self.creator = attach_or_create(self.path)
            self.mm = mmap.mmap(self.fd, SHM_SIZE)
        except StaleShmError as err:
            _log("ERROR", str(err))
            return False
        except OSError as err:
            _log("ERROR", f"dynamic profiler disabled: {err}")
            return False
        self.last_ts = int(time.time())
        if self.creator:
            self._start_poller()
        self.mstx = _Mstx()
        self.range_id = self.mstx.start(f"step {self.step_num}")
        self.enabled = True
        atexit.register(self.finalize)
        _install_optimizer_hook()
        _log("INFO", f"rank {self.rank} attached to {self.path}"
             f"{' as creator' if self.creator else ''}")
        return True

    def _start_poller(self):
        pkg_parent = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
        code = ("import sys; sys.path.insert(0, sys.argv[1]); "
                "from msmonitor._poller import main; sys.exit(main(sys.argv[2:]))")
        argv = [sys.executable, "-c", code, pkg_parent, "--shm", self.path,
                "--rank", str(self.rank), "--parent", str(os.getpid())]
        try:
            self.poller = subprocess.Popen(argv, stdin=subprocess.DEVNULL, close_fds=True)
        except OSError as err:
            _log("ERROR", f"cannot start the poller process: {err}")

    def finalize(self):
        with self.lock:
            if not self.enabled:
                return
            self.enabled = False
            if self.mstx is not None:
                self.mstx.end(self.range_id)
                self.range_id = 0
            try:
                self.proxy.finalize_dyno()
            except Exception as err:  # noqa: BLE001
                _log("WARNING", f"finalize_dyno failed: {err}")
            if self.poller is not None:
                self._stop_poller()
            if self.mm is not None:
                self.mm.close()
                self.mm = None
            if self.creator:
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1

    def _stop_poller(self):
        p = self.poller
        self.poller = None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(POLLER_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    # -- per step --
    def step(self):
        if not self.enabled:
            return
        with self.lock:
            if not self.enabled:
                return
            self.mstx.end(self.range_id)
            self.step_num += 1
            self.range_id = self.mstx.start(f"step {self.step_num}")
            ts = struct.unpack("<I", self.mm[0:4])[0]
            if ts > self.last_ts:
                self.last_ts = ts
                self._apply(read_config(self.mm))
            self._advance_trace()
            if self.creator:
                now = time.monotonic()
                if now - self.last_status >= STATUS_PERIOD_S:
                    self.last_status = now
                    self._report()

    def _apply(self, cfg):
        if not cfg or not cfg.get("is_valid", False):
            return
        if "NPU_MONITOR_START" in cfg:
            # Every rank runs its own monitor and writes its own files.
            self.proxy.enable_dyno_npu_monitor({str(k): str(v) for k, v in cfg.items()})
            return
        self._trace_config(cfg)

    def _trace_config(self, cfg):
        if str(cfg.get("PROFILE_IS_RANK", "false")).lower() == "true":
            ranks = str(cfg.get("PROFILE_RANK_LIST", ""))
            wanted = {r.strip() for r in ranks.split(",") if r.strip()}
            if str(self.rank) not in wanted:
                return
        try:
            start = int(str(cfg.get("PROFILE_START_STEP", "-1")))
            iters = int(str(cfg.get("ACTIVITIES_ITERATIONS", "1")))
        except ValueError:
            _log("ERROR", f"nputrace config ignored: PROFILE_START_STEP="
                 f"{cfg.get('PROFILE_START_STEP')!r} ACTIVITIES_ITERATIONS="
                 f"{cfg.get('ACTIVITIES_ITERATIONS')!r}")
            return
        if start < 0 or start <= self.step_num:
            start = self.step_num + 1
        iters = max(iters, 1)
        self.trace_state, self.trace_start, self.trace_stop = TRACE_READY, start, start + iters
        self.last_status = 0.0   # report the new state at once
        _log("INFO", f"nputrace ready: steps [{start}, {start + iters})")

    def _advance_trace(self):
        if self.trace_state == TRACE_READY and self.step_num >= self.trace_start:
            self.trace_state = TRACE_RUNNING
            self.last_status = 0.0
        if self.trace_state == TRACE_RUNNING and self.step_num >= self.trace_stop:
            self.trace_state = TRACE_IDLE
            self.last_status = 0.0

    def _report(self):
        busy = self.trace_state != TRACE_IDLE
        self.proxy.update_profiler_status({
            "profiler_status": str(self.trace_state),
            "current_step": str(self.step_num),
            "start_step": str(self.trace_start if busy else -1),
            "stop_step": str(self.trace_stop if busy else -1),
        })


_STATE = _DynamicProfile()
_HOOKED = []


def _install_optimizer_hook():
    """Call step() after each optimizer step, on every PyTorch we support (step_hook.py)."""
    step_hook.install(step)


def init():
    """Join dyno mode if MSMONITOR_USE_DAEMON=1; returns True when active."""
    try:
        return _STATE.init()
    except Exception as err:  # noqa: BLE001
        _log("ERROR", f"dynamic profiler disabled: {err}")
        return False


def step():
    """Call once per iteration (after the optimizer step)."""
    try:
        _STATE.step()
    except Exception as err:  # noqa: BLE001
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
    """Remove DynamicProfileNpuShm* files that no live process uses; prints and returns
    the removed paths."""
    shm_dir = shm_dir or _shm_dir()
    removed = []
    try:
        names = sorted(os.listdir(shm_dir))
    except OSError as err:
        print(f"[ERROR] cannot list {shm_dir}: {err}")
        return removed
    for name in names:
        if not name.startswith(SHM_PREFIX):
            continue
        path = os.path.join(shm_dir, name)
        try:
            if not os.path.isfile(path) or os.path.islink(path):
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
