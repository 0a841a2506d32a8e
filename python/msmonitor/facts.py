"""The contract facts the analysis (msmonitor.analysis) reads data by: export file names, DB
tables, the step marker rule, dtype and memcpy-kind names, API types, trace categories and the
plugin's log lines. Written once here so that the other modules never restate them; the
values follow docs/design/contract.md and docs/design/outputs.md#db-schema."""
import re

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

# The step rule: a marker range named `step N` (the plugin's step()) or `ProfilerStep#N`
# (torch.profiler), N a non-negative int32 (docs/design/contract.md).
STEP_PREFIXES = ("step ", "ProfilerStep#")
STEP_RE = re.compile(r"^(?:step |ProfilerStep#)(\d+)$")
STEP_MAX = 2 ** 31 - 1

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

# ENUM_HCCL_DATA_TYPE: id -> (name, bytes per element).
DTYPES = {0: ("INT8", 1), 1: ("INT16", 2), 2: ("INT32", 4), 3: ("FP16", 2), 4: ("FP32", 4), 5: ("INT64", 8),
          6: ("UINT64", 8), 7: ("UINT8", 1), 8: ("UINT16", 2), 9: ("UINT32", 4), 10: ("FP64", 8),
          11: ("BFP16", 2), 12: ("INT128", 16), 14: ("HIF8", 1), 15: ("FP8E4M3", 1), 16: ("FP8E5M2", 1),
          17: ("FP8E8M0", 1)}
DTYPE_INVALID = "INVALID_TYPE"
DTYPE_BYTES_BY_NAME = {name: size for name, size in DTYPES.values()}
# ENUM_MSMONITOR_MEMCPY_KIND
MEMCPY_KINDS = {0: "UNKNOWN", 1: "HTOH", 2: "HTOD", 3: "DTOH", 4: "DTOD", 5: "DEFAULT"}
# ENUM_API_TYPE
API_TYPES = {10000: "API/NodeAPI", 20000: "AclAPI", 5000: "RuntimeAPI"}

# Record kinds as the JSONL lines name them.
K_KERNEL, K_COMM, K_HCCL, K_MEMCPY, K_MEMSET, K_MARKER = \
    "Kernel", "Communication", "Hccl", "MemCpy", "MemSet", "Marker"
API_KINDS = ("API", "AclAPI", "NodeAPI", "RuntimeAPI")
COMM_KINDS = (K_COMM, K_HCCL)
SOURCE_DEVICE = "Device"
JSONL_META_KINDS = ("parallel_group_info", "rank_device_map")

# Chrome trace categories of device work (ours and torch.profiler's).
TRACE_DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_memory", "Kernel", "Memcpy", "Memset")
TRACE_COPY_CATS = ("gpu_memcpy", "gpu_memset", "Memcpy", "Memset")
TRACE_KERNEL_CATS = ("kernel", "Kernel")
TRACE_HOST_OP_CATS = ("cpu_op", "cuda_runtime", "operator", "cuda_driver", "python_function")
TRACE_MEMORY_CAT = "gpu_memory"
TRACE_DEVICE_ANNOTATION = "gpu_user_annotation"

# Plugin log lines (docs/plugin.md): the filter and the stop-time session counters exist only
# there today; these are the one place the report reads log text.
LOG_TAG = "MsptiMonitor"
LOG_STATS_RE = re.compile(r"MsptiMonitor session stats: (.*)$")
LOG_FILTER_RE = re.compile(r"MsptiMonitor filter: '(.*)'$")
LOG_RANKID_RE = re.compile(r"rankid: (-?\d+)")
LOG_RING_RE = re.compile(r"RingBuffer full (\d+) times")
LOG_EXHAUSTED = "Buffer allocation exhausted"
LOG_PID_RE = re.compile(r"\.(\d+)\.log$")


def step_number(name):
    """N of a step marker name, or None (the one step rule for DB, JSONL and trace names)."""
    m = STEP_RE.match(str(name))
    if not m:
        return None
    n = int(m.group(1))
    return n if n <= STEP_MAX else None


def dtype_name(dtype_id):
    return DTYPES.get(dtype_id, (DTYPE_INVALID, 0))[0]


def dtype_bytes(dtype_id=None, name=None):
    if name is not None:
        return DTYPE_BYTES_BY_NAME.get(name, 0)
    return DTYPES.get(dtype_id, (DTYPE_INVALID, 0))[1]
