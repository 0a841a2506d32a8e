/* names: the fixed names and numbers peers meet by (docs/design/contract.md#names): socket and
 * segment names, the DB's marker connectionId offset, the `step <N>` marker and the names of
 * enumerated record values. Written once here; Python gets them generated (_contract.py). */
#ifndef MSMON_CONTRACT_NAMES_H
#define MSMON_CONTRACT_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Deployment facts (docs/deploy.md): the daemon's default ports and the environment variables that
 * tie a job to it. The Kubernetes manifests in packaging/kubernetes/ are checked against these
 * through the generated _contract.py (tests/e2e/test_deploy_manifests.py). */
#define NAMES_RPC_PORT 1778
#define NAMES_PROMETHEUS_PORT 8080
#define NAMES_ENV_SOCKET_DIR "MSMONITOR_SOCKET_DIR"
#define NAMES_ENV_USE_DAEMON "MSMONITOR_USE_DAEMON"
#define NAMES_ENV_KINETO_SOCKET_DIR "KINETO_IPC_SOCKET_DIR"
#define NAMES_STR_(x) #x
#define NAMES_STR(x) NAMES_STR_(x) /* a number's text, for string defaults */

/* Sockets in the socket directory: <dir>/<base>.sock (NAMES_SOCK_FILE gives the file name). */
#define NAMES_SOCK_CTL "dynolog"       /* control datagrams */
#define NAMES_SOCK_DATA "dynolog_data" /* data datagrams */
#define NAMES_SOCK_RPC "dyno"          /* local RPC stream socket */
#define NAMES_SOCK_SUFFIX ".sock"
#define NAMES_SOCK_FILE(base) base NAMES_SOCK_SUFFIX
/* Beside the sockets: a symbolic link whose target is the daemon's network namespace as
 * /proc/self/ns/net reads ("net:[<inode>]"). A client whose own differs binds its socket in the
 * directory instead of the abstract namespace (docs/design/ipc.md#network-namespaces). */
#define NAMES_NETNS_LINK "dynolog.netns"
#define NAMES_SHM_PREFIX "DynamicProfileNpuShm"
#define NAMES_SHM_SIZE (1u << 20) /* dyno-mode segment: 4-byte time stamp + config text */
/* The steps side file next to a segment: "msmonitor_steps.<segment name>" (docs/nputrace.md). */
#define NAMES_SHM_STEPS_PREFIX "msmonitor_steps."
/* Every file dyno mode creates in the segment directory, as name prefixes: the segment
 * (DynamicProfileNpuShm-<job key>, and <segment>.<pid>.tmp while it is being created) and its
 * steps side file. `python -m msmonitor cleanup-shm` and `dyno doctor` find leftovers by this
 * list alone (docs/troubleshooting.md#leftover-segments); a new file dyno mode makes is added
 * here. X(id, prefix, what) */
#define NAMES_SHM_FILES(X)                                                                  \
    X(SEGMENT, NAMES_SHM_PREFIX, "segment")                                                 \
    X(STEPS, NAMES_SHM_STEPS_PREFIX NAMES_SHM_PREFIX, "steps side file")
/* The private directory of uid <u> under a shared segment directory: "msmonitor-<u>". */
#define NAMES_SHM_PRIVATE_PREFIX "msmonitor-"
/* DB connectionId of a marker = its msPTI id + this, so marker ids never meet API ids. */
#define NAMES_DB_MARKER_CONN_OFFSET 4000000000ULL

/* The session-end record of the DB (META_DATA rows) and JSONL (a line of this kind) outputs:
 * the filter text at stop and the session counters (docs/outputs.md#session-end). */
#define NAMES_META_FILTER "filter"
#define NAMES_META_STATS "session_stats"
/* The parallel group text given at stop (a META_DATA row, a JSONL line of this kind) and the JSONL
 * line of the rank's devices (the DB's RANK_DEVICE_MAP table). */
#define NAMES_META_PARALLEL "parallel_group_info"
#define NAMES_META_RANK_DEVICE_MAP "rank_device_map"
/* The pod the process reported (docs/deploy.md#attribution): a META_DATA row whose value is
 * {"container","name","namespace","node"} (the known keys), a JSONL line of this kind with them. */
#define NAMES_META_POD "pod"

/* The step marker: mstx range message "step <N>", N decimal digits (no sign) worth at most
 * NAMES_STEP_MAX. */
#define NAMES_STEP_PREFIX "step "
#define NAMES_STEP_MAX INT32_MAX
/* torch.profiler's step range "ProfilerStep#<N>": the analysis reads it by the same digits rule. */
#define NAMES_TORCH_STEP_PREFIX "ProfilerStep#"

/* Chrome trace categories of the nputrace output (docs/nputrace.md), the names the analysis reads
 * a trace by; NAMES_TRACE_CATS lists them for the generated _contract.py (TRACE_CAT_<id>). */
#define NAMES_CAT_KERNEL "kernel" /* kernels, HCCL and communication ops */
#define NAMES_CAT_MEMCPY "gpu_memcpy"
#define NAMES_CAT_MEMSET "gpu_memset"
#define NAMES_CAT_MEMORY "gpu_memory"
#define NAMES_CAT_RUNTIME "cuda_runtime" /* host API calls */
#define NAMES_CAT_DEVICE_ANNOTATION "gpu_user_annotation"
#define NAMES_CAT_HOST_ANNOTATION "user_annotation"
#define NAMES_CAT_FLOW "ac2g" /* host call -> device work arrows */
#define NAMES_TRACE_CATS(X)                                                                                   \
    X(KERNEL) X(MEMCPY) X(MEMSET) X(MEMORY) X(RUNTIME) X(DEVICE_ANNOTATION) X(HOST_ANNOTATION) X(FLOW)

/* The files the outputs write, built only by names_export_file / names_trace_file and read by
 * the analysis through the patterns generated from the same pieces (docs/design/contract.md#names):
 * the DB and JSONL exports "<dir>/msmonitor_<pid>_<YYYYmmddHHMMSS><mmm>_<rank>.<ext>", and
 * nputrace's traces "<dir>/msmonitor_<who>_<pid>_rank<r>_step<start>-<stop>.json[.gz]", who
 * being ours (trace) or torch.profiler's, which the Python side writes beside it (torch). */
#define NAMES_FILE_PREFIX "msmonitor_"
#define NAMES_EXT_DB "db"
#define NAMES_EXT_JSONL "jsonl"
#define NAMES_TRACE_OURS "trace"
#define NAMES_TRACE_TORCH "torch"
#define NAMES_TRACE_RANK "_rank"
#define NAMES_TRACE_STEPS "_step" /* "_step<start>-<stop>." tells a window's files */
#define NAMES_TRACE_SUFFIX ".json"
#define NAMES_GZ_SUFFIX ".gz"

/* An export file's path; stamp: the local time as YYYYmmddHHMMSS, ms: its milliseconds (0-999).
 * 0 or -ENAMETOOLONG. */
int names_export_file(char *buf, size_t cap, const char *dir, int pid, const char *stamp, unsigned ms, int32_t rank,
                      const char *ext);
/* A trace file's path; a rank < 0 (unknown) is written 0. 0 or -ENAMETOOLONG. */
int names_trace_file(char *buf, size_t cap, const char *dir, const char *who, int pid, int32_t rank, int32_t start,
                     int32_t stop, bool gz);

/* N of a step marker name: 0 and *ret_n, or -EINVAL (NULL, another name, N out of range). */
int names_step_parse(const char *name, int64_t *ret_n);
/* "step <n>" into buf; 0, -EINVAL for n out of range, -ENOSPC if cap is too small. */
int names_step_format(char *buf, size_t cap, int64_t n);

/* The name of an IPC status value (IPC_STATUS_*, msmon/ipc_wire.h): "Uninitialized", "Idle",
 * "Running", "Ready", else "unknown". The one spelling of the states dyno, acks and logs show. */
const char *names_ipc_status(int32_t s);
/* Communication data type name ("FP32", ...); "INVALID_TYPE" for other values. */
const char *names_dtype(int32_t dt);
/* MemCpy kind name ("HTOD", ...); "UNKNOWN" for other values. */
const char *names_memcpy_kind(int32_t k);

#endif
