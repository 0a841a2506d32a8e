"""ctypes bindings of our simulated CUPTI (src/sim/cupti, include/msmon/mssim_cupti.h), so
`mssim` workloads can run "on CUDA": `load()` returns a `Cupti` whose methods append CUPTI
records (kernels with their cudaLaunchKernel API call, memcpys, memsets, allocations, NCCL
kernels, NVTX markers) into whatever consumer registered with the library."""
import ctypes

from .lib import built_library

DOMAIN_DRIVER, DOMAIN_RUNTIME = 1, 2
MEMCPY_HTOD, MEMCPY_DTOH, MEMCPY_DTOD, MEMCPY_HTOH = 1, 2, 8, 9
CBID_LAUNCH_KERNEL = 211


class Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "appended", "dropped_declined", "dropped_injected", "buffers_requested", "buffers_completed")]

    def as_dict(self):
        return {n: getattr(self, n) for n, _ in self._fields_}


_U64, _U32, _I, _STR = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int, ctypes.c_char_p
_SIGNATURES = {
    "mssimc_is_simulator": (_I, []),
    "mssimc_now_ns": (_U64, []),
    "mssimc_api": (_U32, [_I, _U32, _U64]),
    "mssimc_kernel": (_U32, [_U32, _U32, _STR, _U64]),
    "mssimc_memcpy": (_U32, [_U32, _U32, _I, _U64, _I]),
    "mssimc_memset": (_U32, [_U32, _U32, _U32, _U64, _I]),
    "mssimc_malloc": (_U32, [_U32, _U64, ctypes.POINTER(_U64)]),
    "mssimc_free": (_U32, [_U32, _U64, _U64]),
    "mssimc_nvtx_mark": (_U32, [_STR, _STR]),
    "mssimc_nvtx_range_start": (_U32, [_STR, _STR]),
    "mssimc_nvtx_range_end": (None, [_U32]),
    "mssimc_add_dropped": (None, [_U64]),
    "mssimc_set_version": (None, [_U32]),
    "mssimc_get_stats": (None, [ctypes.POINTER(Stats)]),
    "mssimc_bench_fill": (ctypes.c_int64, [_U64]),
    "cuptiActivityFlushAll": (_I, [_U32]),
}


def default_path():
    """MSMONITOR_CUPTI_LIB, else <MSMON_BUILD_DIR or ./build>/src/sim/cupti/libcupti.so."""
    return built_library("MSMONITOR_CUPTI_LIB", "src", "sim", "cupti", "libcupti.so")


class Cupti:
    def __init__(self, path=None):
        self.path = path or default_path()
        self.lib = ctypes.CDLL(self.path, mode=ctypes.RTLD_GLOBAL)
        for name, (res, args) in _SIGNATURES.items():
            f = getattr(self.lib, name)
            f.restype, f.argtypes = res, args
        self._names = {}  # the library borrows kernel names: keep the bytes alive
        if self.lib.mssimc_is_simulator() != 1:
            raise OSError(f"{self.path} is not the msmonitor CUPTI simulator")

    def _b(self, s):
        if s is None:
            return None
        return self._names.setdefault(s, s.encode())

    def now_ns(self):
        return self.lib.mssimc_now_ns()

    def kernel(self, name, duration_ns, device=0, stream=7):
        return self.lib.mssimc_kernel(device, stream, self._b(name), duration_ns)

    def nccl(self, coll="AllReduce", dtype="f32", alg="RING", duration_ns=50000, device=0, stream=9):
        return self.kernel(f"ncclDevKernel_{coll}_Sum_{dtype}_{alg}_LL(ncclDevKernelArgsStorage<4096ul>)",
                           duration_ns, device, stream)

    def api(self, cbid, duration_ns=1000, domain=DOMAIN_RUNTIME):
        return self.lib.mssimc_api(domain, cbid, duration_ns)

    def memcpy(self, nbytes, kind=MEMCPY_HTOD, device=0, stream=7, async_=True):
        return self.lib.mssimc_memcpy(device, stream, kind, nbytes, int(async_))

    def memset(self, nbytes, value=0, device=0, stream=7, async_=False):
        return self.lib.mssimc_memset(device, stream, value, nbytes, int(async_))

    def malloc(self, nbytes, device=0):
        addr = _U64()
        self.lib.mssimc_malloc(device, nbytes, ctypes.byref(addr))
        return addr.value

    def free(self, addr, nbytes, device=0):
        return self.lib.mssimc_free(device, addr, nbytes)

    def mark(self, name, domain=None):
        return self.lib.mssimc_nvtx_mark(self._b(name), self._b(domain))

    def range_start(self, name, domain=None):
        return self.lib.mssimc_nvtx_range_start(self._b(name), self._b(domain))

    def range_end(self, rid):
        self.lib.mssimc_nvtx_range_end(rid)

    def add_dropped(self, n):
        self.lib.mssimc_add_dropped(n)

    def stats(self):
        st = Stats()
        self.lib.mssimc_get_stats(ctypes.byref(st))
        return st.as_dict()

    def flush(self):
        return self.lib.cuptiActivityFlushAll(1)


def load(path=None):
    return Cupti(path)
