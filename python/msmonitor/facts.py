"""The contract facts the analysis (msmonitor.analysis) reads data by: export file names, DB
tables, the step marker rule, dtype and memcpy-kind names, API types and trace categories.
Written once here so that the other modules never restate them; what the C contract tables hold
comes from the generated msmonitor._contract (docs/design/contract.md), the rest follows
docs/design/outputs.md#db-schema."""
import re

from . import _contract as C

# Export files: msmonitor_<pid>_<start time>_<rank>.db / .jsonl (docs/design/outputs.md), as the
# contract builds them (names_export_file).
EXPORT_FILE_RE = re.compile(C.EXPORT_FILE_PATTERN)
# nputrace's Chrome traces (ours and torch.profiler's next to them, docs/nputrace.md).
NPUTRACE_FILE_RE = re.compile(C.TRACE_FILE_PATTERN)
NPUTRACE_TORCH_NAME = C.TRACE_FILE_NAME.replace("{who}", C.TRACE_FILE_TORCH)
NPUTRACE_WINDOW_TAG = C.TRACE_WINDOW_TAG     # in the name of the window's trace files

# The nputrace window as IPCMonitor_C.dynamic.trace_info() reports it: option bits
# (include/msmon/msmonitor.h MSMON_TRACE_*, through the contract) and states (documented there).
TRACE_CPU, TRACE_NPU, TRACE_ANALYSE, TRACE_ASYNC = C.TRACE_CPU, C.TRACE_NPU, C.TRACE_ANALYSE, C.TRACE_ASYNC
TRACE_RECORD_SHAPES, TRACE_PROFILE_MEMORY = C.TRACE_RECORD_SHAPES, C.TRACE_PROFILE_MEMORY
TRACE_WITH_STACK, TRACE_WITH_FLOPS, TRACE_WITH_MODULES = C.TRACE_WITH_STACK, C.TRACE_WITH_FLOPS, C.TRACE_WITH_MODULES
TRACE_EXPORT_DB = C.TRACE_EXPORT_DB
TRACE_IDLE, TRACE_RUNNING, TRACE_READY = C.STATUS_IDLE, C.STATUS_RUNNING, C.STATUS_READY

# The step rule: a marker range named `step N` (the plugin's step(), the contract's rule) or
# `ProfilerStep#N` (torch.profiler, the same digits rule), N a non-negative int32.
TORCH_STEP_PREFIX = C.TORCH_STEP_PREFIX
STEP_PREFIXES = (C.STEP_PREFIX, TORCH_STEP_PREFIX)
STEP_MAX = C.STEP_MAX

# DB schema (docs/design/outputs.md#db-schema): table names.
T_STRINGS = C.DB_STRING_IDS
T_TASK = C.DB_TASK
T_COMPUTE = C.DB_COMPUTE_TASK_INFO
T_MSTX = C.DB_MSTX_EVENTS
T_COMM = C.DB_COMMUNICATION_OP
T_HCCL = C.DB_MSMONITOR_HCCL
T_MEMCPY = C.DB_MSMONITOR_MEMCPY
T_MEMSET = C.DB_MSMONITOR_MEMSET
T_MEMORY = C.DB_MSMONITOR_MEMORY
T_API = C.DB_CANN_API
T_SESSION = C.DB_SESSION_TIME_INFO
T_HOST = C.DB_HOST_INFO
T_META = C.DB_META_DATA
META_PARALLEL = C.META_PARALLEL
META_POD = C.META_POD            # where the rank ran (docs/deploy.md#attribution)
META_SCHEMA_PREFIX = C.DB_META_SCHEMA_PREFIX
# A device step marker is a TASK row whose taskType is the string MSTX_TASK_TYPE; it pairs with its
# host range (MSTX_EVENTS row, eventType MSTX_RANGE) by connectionId.
MSTX_TASK_TYPE = C.DB_MSTX_TASK_TYPE
MSTX_RANGE = C.DB_MSTX_RANGE

# ENUM_HCCL_DATA_TYPE: id -> (name, bytes per element).
DTYPE_SIZES = dict(C.DTYPE_SIZES)
DTYPES = {i: (name, DTYPE_SIZES[name]) for i, name in C.DTYPE_NAMES.items()}
DTYPE_INVALID = C.DTYPE_INVALID
DTYPE_BYTES_BY_NAME = {name: size for name, size in DTYPES.values()}
# ENUM_MSMONITOR_MEMCPY_KIND
MEMCPY_KINDS = dict(C.MEMCPY_KIND_NAMES)
# ENUM_API_TYPE: CANN_API.type -> the kinds it stands for
API_TYPES = {C.DB_API_TYPE_NODE: "API/NodeAPI", C.DB_API_TYPE_ACL: "AclAPI", C.DB_API_TYPE_RUNTIME: "RuntimeAPI"}

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
JSONL_META_KINDS = (C.META_PARALLEL, C.META_RANK_DEVICE_MAP, C.META_STATS, C.META_POD)

# Chrome trace categories of device and host work: ours (the contract's) and torch.profiler's
# (its own names, "Kernel", "Memcpy", ..., which the C code never writes).
TRACE_DEVICE_CATS = (C.TRACE_CAT_KERNEL, C.TRACE_CAT_MEMCPY, C.TRACE_CAT_MEMSET, C.TRACE_CAT_MEMORY,
                     "Kernel", "Memcpy", "Memset")
TRACE_COPY_CATS = (C.TRACE_CAT_MEMCPY, C.TRACE_CAT_MEMSET, "Memcpy", "Memset")
TRACE_KERNEL_CATS = (C.TRACE_CAT_KERNEL, "Kernel")
TRACE_HOST_OP_CATS = ("cpu_op", C.TRACE_CAT_RUNTIME, "operator", "cuda_driver", "python_function")
TRACE_MEMORY_CAT = C.TRACE_CAT_MEMORY
TRACE_DEVICE_ANNOTATION = C.TRACE_CAT_DEVICE_ANNOTATION
TRACE_ANNOTATION = C.TRACE_CAT_HOST_ANNOTATION   # within both annotation categories' names

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
