"""ctypes bindings of the msPTI SIMULATOR's driver API (spec docs/design/mspti.md#driver-api) — the test double of
libmspti.so for machines without an Ascend NPU. `load()` finds the library; `Sim` wraps
the mssim_* functions and a few msPTI ones; `run_workload()` runs the built-in transformer
step (docs/design/mspti.md#workload) with an optional Python per-step callback."""
import ctypes
import os

LEVEL_ACL, LEVEL_RUNTIME, LEVEL_NODE, LEVEL_OTHER = 0, 1, 2, 3

KIND_MARKER, KIND_KERNEL, KIND_API, KIND_HCCL, KIND_MEMORY, KIND_MEMSET, KIND_MEMCPY = 1, 2, 3, 4, 5, 6, 7
KIND_EXTERNAL_CORRELATION, KIND_COMMUNICATION = 8, 9
KIND_ACL_API, KIND_NODE_API, KIND_RUNTIME_API = 10, 11, 12

MEMCPY_HTOH, MEMCPY_HTOD, MEMCPY_DTOH, MEMCPY_DTOD = 1, 2, 3, 4
FP32 = 4


class Stats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "records_appended", "records_dropped_nofit", "records_dropped_declined",
        "records_dropped_injected", "records_suppressed_domain", "buffers_requested",
        "buffers_declined", "buffers_completed", "null_completions")]

    def as_dict(self):
        return {name: getattr(self, name) for name, _ in self._fields_}


STEP_CB = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_void_p)


class WorkloadCfg(ctypes.Structure):
    _fields_ = [("device", ctypes.c_uint32), ("steps", ctypes.c_uint32),
                ("steps_per_s", ctypes.c_double), ("layers", ctypes.c_uint32),
                ("kernel_scale", ctypes.c_double), ("comm", ctypes.c_int),
                ("step_markers", ctypes.c_int), ("on_step_end", STEP_CB),
                ("arg", ctypes.c_void_p),
                # the slow rank (docs/cluster.md): kind 0 compute, 1 communication, 2 host
                ("rank", ctypes.c_int32), ("slow_rank", ctypes.c_int32),
                ("slow_factor", ctypes.c_double), ("slow_from_step", ctypes.c_uint32),
                ("slow_kind", ctypes.c_int32)]

SLOW_KINDS = {"compute": 0, "communication": 1, "host": 2}


_U64, _I32, _U32, _STR, _VP = ctypes.c_uint64, ctypes.c_int32, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_void_p
_SIGNATURES = {
    "mssim_is_simulator": (ctypes.c_int, []),
    "mssim_now_ns": (_U64, []),
    "mssim_set_device": (ctypes.c_int, [_U32]),
    "mssim_synchronize": (ctypes.c_int, [_I32]),
    "mssim_reset": (None, []),
    "mssim_get_stats": (None, [ctypes.POINTER(Stats)]),
    "mssim_api": (_U64, [_STR, ctypes.c_int, _U64]),
    "mssim_launch_kernel": (_U64, [_U32, _STR, _STR, _U64]),
    "mssim_collective": (_U64, [_U32, _STR, _STR, _STR, _I32, _U64, _U64, _U64]),
    "mssim_memcpy": (_U64, [_I32, _I32, _U64]),
    "mssim_memset": (_U64, [_I32, _U32, _U64]),
    "mssim_malloc": (_U64, [_U64, ctypes.POINTER(_U64)]),
    "mssim_free": (_U64, [_U64]),
    "mssim_emit_raw": (ctypes.c_int, [_VP, ctypes.c_size_t]),
    "mssim_bench_fill": (ctypes.c_int64, [_U32, _U64]),
    "mssim_mstx_mark": (_U64, [_STR, _I32]),
    "mssim_mstx_range_start": (_U64, [_STR, _I32]),
    "mssim_mstx_range_end": (None, [_U64]),
    "mssim_mstx_domain_create": (_VP, [_STR]),
    "mssim_mstx_domain_mark": (_U64, [_VP, _STR, _I32]),
    "mssim_mstx_domain_range_start": (_U64, [_VP, _STR, _I32]),
    "mssim_mstx_domain_range_end": (None, [_VP, _U64]),
    "mssim_workload_default": (ctypes.c_int, [ctypes.POINTER(WorkloadCfg)]),
    "mssim_workload_run": (ctypes.c_int, [ctypes.POINTER(WorkloadCfg)]),
    "mssim_workload_stop": (None, []),
    "mssim_workload_kernels_per_step": (_U32, [_U32]),
    "mssim_dump_flush": (None, []),
    "msptiActivityFlushAll": (ctypes.c_int, [_U32]),
}


def built_library(env_var, *rel):
    """The simulator library named by `env_var`, else <MSMON_BUILD_DIR or ./build>/<rel>."""
    env = os.environ.get(env_var)
    if env:
        return env
    build = os.environ.get("MSMON_BUILD_DIR") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build")
    return os.path.join(os.path.abspath(build), *rel)


def default_path():
    """MSMONITOR_MSPTI_LIB, else <MSMON_BUILD_DIR or ./build>/src/sim/libmspti.so."""
    return built_library("MSMONITOR_MSPTI_LIB", "src", "sim", "libmspti.so")


def _b(s):
    return s.encode() if isinstance(s, str) else s


class Sim:
    """The simulator library. Strings may be str or bytes."""

    def __init__(self, path=None):
        self.path = path or default_path()
        # RTLD_GLOBAL: the plugin later finds this copy with RTLD_NOLOAD.
        self.lib = ctypes.CDLL(self.path, mode=ctypes.RTLD_GLOBAL)
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(self.lib, name, None)
            if fn is None:
                continue
            fn.restype = res
            fn.argtypes = args
        if not self.lib.mssim_is_simulator():
            raise OSError(f"{self.path} is not the msPTI simulator")

    def now_ns(self):
        return self.lib.mssim_now_ns()

    def set_device(self, device):
        return self.lib.mssim_set_device(device)

    def synchronize(self, device=-1):
        return self.lib.mssim_synchronize(device)

    def reset(self):
        self.lib.mssim_reset()

    def stats(self):
        st = Stats()
        self.lib.mssim_get_stats(ctypes.byref(st))
        return st.as_dict()

    def api(self, name, level=LEVEL_ACL, duration_ns=3000):
        return self.lib.mssim_api(_b(name), level, duration_ns)

    def launch_kernel(self, name, type_="KERNEL_AIVEC", duration_ns=10000, stream=0):
        return self.lib.mssim_launch_kernel(stream, _b(name), _b(type_), duration_ns)

    def collective(self, name, comm_name="hccl_world_group", alg_type="RING", data_type=FP32,
                   count=1024, nbytes=4096, duration_ns=10000, stream=1):
        return self.lib.mssim_collective(stream, _b(name), _b(comm_name), _b(alg_type), data_type,
                                         count, nbytes, duration_ns)

    def memcpy(self, nbytes, copy_kind=MEMCPY_HTOD, stream=0):
        return self.lib.mssim_memcpy(stream, copy_kind, nbytes)

    def memset(self, nbytes, value=0, stream=0):
        return self.lib.mssim_memset(stream, value, nbytes)

    def malloc(self, nbytes):
        """Returns (correlation id, address)."""
        addr = ctypes.c_uint64(0)
        corr = self.lib.mssim_malloc(nbytes, ctypes.byref(addr))
        return corr, addr.value

    def free(self, address):
        return self.lib.mssim_free(address)

    def emit_raw(self, record):
        buf = ctypes.create_string_buffer(bytes(record), len(record))
        return self.lib.mssim_emit_raw(buf, len(record))

    def bench_fill(self, kind_mask, n):
        return self.lib.mssim_bench_fill(kind_mask, n)

    def mark(self, message, stream=-1):
        return self.lib.mssim_mstx_mark(_b(message), stream)

    def range_start(self, message, stream=-1):
        return self.lib.mssim_mstx_range_start(_b(message), stream)

    def range_end(self, range_id):
        self.lib.mssim_mstx_range_end(range_id)

    def domain_create(self, name):
        return self.lib.mssim_mstx_domain_create(_b(name))

    def domain_mark(self, domain, message, stream=-1):
        return self.lib.mssim_mstx_domain_mark(domain, _b(message), stream)

    def domain_range_start(self, domain, message, stream=-1):
        return self.lib.mssim_mstx_domain_range_start(domain, _b(message), stream)

    def domain_range_end(self, domain, range_id):
        self.lib.mssim_mstx_domain_range_end(domain, range_id)

    def flush_all(self):
        return self.lib.msptiActivityFlushAll(0)

    def dump_flush(self):
        self.lib.mssim_dump_flush()

    def kernels_per_step(self, layers=4):
        return self.lib.mssim_workload_kernels_per_step(layers)

    def workload_cfg(self, **overrides):
        """Defaults (then MSSIM_WL_* env), then keyword overrides of WorkloadCfg fields."""
        cfg = WorkloadCfg()
        if self.lib.mssim_workload_default(ctypes.byref(cfg)) != 0:
            raise OSError("mssim_workload_default failed")
        for key, value in overrides.items():
            if key in ("on_step_end", "arg"):
                raise ValueError("pass on_step_end to run_workload()")
            setattr(cfg, key, value)
        return cfg

    def run_workload(self, cfg=None, on_step_end=None, **overrides):
        """Run the built-in training step loop (blocking); on_step_end(step) is called after
        each step in the calling thread. Returns the number of steps done."""
        cfg = cfg or self.workload_cfg(**overrides)
        holder = []
        if on_step_end is not None:
            def trampoline(step, _arg):
                on_step_end(step)
            cb = STEP_CB(trampoline)
            holder.append(cb)            # keep the thunk alive while the C loop runs
            cfg.on_step_end = cb
        rc = self.lib.mssim_workload_run(ctypes.byref(cfg))
        if rc < 0:
            raise ValueError(f"invalid workload configuration (rc {rc})")
        return rc

    def stop_workload(self):
        self.lib.mssim_workload_stop()


_loaded = {}


def load(path=None):
    """The simulator library (cached per path); honours MSMONITOR_MSPTI_LIB."""
    path = os.path.abspath(path or default_path())
    if path not in _loaded:
        _loaded[path] = Sim(path)
    return _loaded[path]
