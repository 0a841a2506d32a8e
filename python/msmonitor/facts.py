"""The contract facts the analysis (msmonitor.analysis) reads data by: export file names, DB
tables, the step marker rule, dtype and memcpy-kind names, API types and trace categories.
Written once here so that the other modules never restate them; what the C contract tables hold
comes from the generated msmonitor._contract (docs/design/contract.md), the rest follows
docs/design/outputs.md#db-schema."""
import re

from . import _contract as C

# Export files: msmonitor_<pid>_<start time>_<rank>.db / .jsonl (docs/design/outputs.md).
EXPORT_FILE_RE = re.compile(r"^msmonitor_(\d+)_(\d+)_(-?\d+)\.(db|jsonl)$")
# nputrace's Chrome traces (ours and torch.profiler's next to them, docs/nputrace.md).
NPUTRACE_FILE_RE = re.compile(r"^msmonitor_(trace|torch)_\d+_rank\d+_step\d+-\d+\.json(\.gz)?$")
NPUTRACE_TORCH_NAME = "msmonitor_torch_{pid}_rank{rank}_step{start}-{stop}.json"
NPUTRACE_WINDOW_TAG = "_step{start}-{stop}."     # in the name of the window's trace files

# The nputrace window as IPCMonitor_C.dynamic.trace_info() reports it (include/msmon/msmonitor.h,
# MSMON_TRACE_*): option bits and states.
TRACE_CPU, TRACE_NPU, TRACE_ANALYSE, TRACE_ASYNC = 0x1, 0x2, 0x4, 0x8
TRACE_RECORD_SHAPES, TRACE_PROFILE_MEMORY, TRACE_WITH_STACK = 0x10, 0x20, 0x40
TRACE_WITH_FLOPS, TRACE_WITH_MODULES, TRACE_EXPORT_DB = 0x80, 0x100, 0x200
TRACE_IDLE, TRACE_RUNNING, TRACE_READY = 0, 1, 2

# The step rule: a marker range named `step N` (the plugin's step(), the contract's rule) or
# `ProfilerStep#N` (torch.profiler, the same digits rule), N a non-negative int32.
TORCH_STEP_PREFIX = "ProfilerStep#"
STEP_PREFIXES = (C.STEP_PREFIX, TORCH_STEP_PREFIX)
STEP_MAX = C.STEP_MAX

# DB schema (docs/design/outputs.md#db-schema): table names.
T_STRINGS = "STRING_IDS"
T_TASK = "TASK"
T_COMPUTE = "COMPUTE_TASK_INFO"
T_MSTX = "MSTX_EVENTS"
T_COMM = "COMMUNICATION_OP"
T_HCCL = "MSMONITOR_HCCL"
T_MEMCPY = "MSMONITOR_MEMCPY"
T_MEMSET = "MSMONITOR_MEMSET"
T_MEMORY = "MSMONITOR_MEMORY"
T_API = "CANN_API"
T_SESSION = "SESSION_TIME_INFO"
T_HOST = "HOST_INFO"
T_META = "META_DATA"
META_PARALLEL = "parallel_group_info"
META_SCHEMA_PREFIX = "SCHEMA_VERSION"
# A device step marker is a TASK row whose taskType is the string "MsTx"; it pairs with its
# host range (MSTX_EVENTS row, eventType 2 = range) by connectionId.
MSTX_TASK_TYPE = "MsTx"
MSTX_RANGE = 2

# ENUM_HCCL_DATA_TYPE: id -> (name, bytes per element); the names are the contract's.
DTYPE_SIZES = {"INT8": 1, "INT16": 2, "INT32": 4, "FP16": 2, "FP32": 4, "INT64": 8, "UINT64": 8, "UINT8": 1,
               "UINT16": 2, "UINT32": 4, "FP64": 8, "BFP16": 2, "INT128": 16, "HIF8": 1, "FP8E4M3": 1,
               "FP8E5M2": 1, "FP8E8M0": 1}
DTYPES = {i: (name, DTYPE_SIZES.get(name, 0)) for i, name in C.DTYPE_NAMES.items()}
DTYPE_INVALID = C.DTYPE_INVALID
DTYPE_BYTES_BY_NAME = {name: size for name, size in DTYPES.values()}
# ENUM_MSMONITOR_MEMCPY_KIND
MEMCPY_KINDS = dict(C.MEMCPY_KIND_NAMES)
# ENUM_API_TYPE
API_TYPES = {10000: "API/NodeAPI", 20000: "AclAPI", 5000: "RuntimeAPI"}

# Record kinds as the JSONL lines name them.
def _kind(name):
    """A kind name the readers match on, checked against the contract's kinds at import."""
    if name not in C.KIND_VALUES:
        raise ImportError(f"msmonitor._contract has no kind {name!r}: facts.py and the contract disagree")
    return name


K_KERNEL, K_COMM, K_HCCL, K_MEMCPY, K_MEMSET, K_MARKER = \
    (_kind(k) for k in ("Kernel", "Communication", "Hccl", "MemCpy", "MemSet", "Marker"))
API_KINDS = tuple(n for n, _ in C.KINDS if n.endswith("API"))
COMM_KINDS = (K_COMM, K_HCCL)
SOURCE_DEVICE = "Device"
JSONL_META_KINDS = ("parallel_group_info", "rank_device_map", C.META_STATS)

# Chrome trace categories of device work (ours and torch.profiler's).
TRACE_DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_memory", "Kernel", "Memcpy", "Memset")
TRACE_COPY_CATS = ("gpu_memcpy", "gpu_memset", "Memcpy", "Memset")
TRACE_KERNEL_CATS = ("kernel", "Kernel")
TRACE_HOST_OP_CATS = ("cpu_op", "cuda_runtime", "operator", "cuda_driver", "python_function")
TRACE_MEMORY_CAT = "gpu_memory"
TRACE_DEVICE_ANNOTATION = "gpu_user_annotation"

# The session end (docs/outputs.md#session-end): META_DATA rows of the DB, a JSONL line of this
# kind; the counters are a JSON object keyed by the PluginStats keys, shown by their labels.
META_FILTER = C.META_FILTER
META_STATS = C.META_STATS
STATS_LABELS = dict(C.STATS_COUNTERS)


def step_number(name):
    """N of a step marker name, or None (the one step rule for DB, JSONL and trace names)."""
    name = str(name)
    if name.startswith(TORCH_STEP_PREFIX):
        name = C.STEP_PREFIX + name[len(TORCH_STEP_PREFIX):]
    return C.step_of(name)


def dtype_name(dtype_id):
    return DTYPES.get(dtype_id, (DTYPE_INVALID, 0))[0]


def dtype_bytes(dtype_id=None, name=None):
    if name is not None:
        return DTYPE_BYTES_BY_NAME.get(name, 0)
    return DTYPES.get(dtype_id, (DTYPE_INVALID, 0))[1]
