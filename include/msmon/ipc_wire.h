/* ipc_wire: byte layout of every datagram between dynolog and monitored processes
 * (spec docs/design/ipc.md#datagrams). Shared verbatim by the daemon, the plugin and the tests; offsets are
 * the contract with torch_npu's mindstudio_monitor and with Kineto. Native byte order, LP64. */
#ifndef MSMON_IPC_WIRE_H
#define MSMON_IPC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define IPC_TYPE_LEN 32
#define IPC_MAX_PAYLOAD 4096                 /* daemon-side receive cap for payloads */
#define IPC_HDR_SIZE 40
#define IPC_MAX_DATAGRAM (IPC_HDR_SIZE + IPC_MAX_PAYLOAD) /* 4136 */
#define IPC_CLIENT_MAX_PAYLOAD 65536         /* plugin-side receive cap (configs < 2 KiB) */
#define IPC_REQ_MAX_PIDS 16                  /* daemon uses at most 16 pids of a req */
#define IPC_PLUGIN_MAX_PIDS 6                /* plugin sends itself + up to 5 ancestors */

#define IPC_TYPE_CTXT "ctxt"
#define IPC_TYPE_REQ "req"
#define IPC_TYPE_TRACE_STATUS "npuTraceStatus"
#define IPC_TYPE_MONITOR_STATUS "npuMonitorStatus"
#define IPC_TYPE_DATA "data"

/* req.type bits */
#define IPC_REQ_EVENTS 1
#define IPC_REQ_ACTIVITIES 2

/* status values */
#define IPC_STATUS_UNINITIALIZED (-1)
#define IPC_STATUS_IDLE 0
#define IPC_STATUS_RUNNING 1
#define IPC_STATUS_READY 2

struct ipc_metadata {
    uint64_t size;            /* @0 payload length */
    char type[IPC_TYPE_LEN];  /* @8 NUL-terminated tag, rest zero */
};

struct ipc_ctxt {
    int32_t npu;     /* @0 */
    int32_t pid;     /* @4 */
    int64_t job_id;  /* @8 */
};

struct ipc_req {
    int32_t type;    /* @0 bitmask */
    int32_t n;       /* @4 pids that follow */
    int64_t job_id;  /* @8 */
    int32_t pids[];  /* @16 leaf first, then ancestors */
};

struct ipc_status {
    int32_t status;        /* @0 */
    int32_t current_step;  /* @4 */
    int32_t start_step;    /* @8 */
    int32_t stop_step;     /* @12 */
    int32_t pid;           /* @16 */
    int32_t _pad;          /* @20 */
    int64_t job_id;        /* @24 */
};

_Static_assert(sizeof(struct ipc_metadata) == IPC_HDR_SIZE, "ipc_metadata size");
_Static_assert(offsetof(struct ipc_metadata, size) == 0, "ipc_metadata.size");
_Static_assert(offsetof(struct ipc_metadata, type) == 8, "ipc_metadata.type");
_Static_assert(sizeof(struct ipc_ctxt) == 16, "ipc_ctxt size");
_Static_assert(offsetof(struct ipc_ctxt, npu) == 0, "ipc_ctxt.npu");
_Static_assert(offsetof(struct ipc_ctxt, pid) == 4, "ipc_ctxt.pid");
_Static_assert(offsetof(struct ipc_ctxt, job_id) == 8, "ipc_ctxt.job_id");
_Static_assert(sizeof(struct ipc_req) == 16, "ipc_req size");
_Static_assert(offsetof(struct ipc_req, type) == 0, "ipc_req.type");
_Static_assert(offsetof(struct ipc_req, n) == 4, "ipc_req.n");
_Static_assert(offsetof(struct ipc_req, job_id) == 8, "ipc_req.job_id");
_Static_assert(offsetof(struct ipc_req, pids) == 16, "ipc_req.pids");
_Static_assert(sizeof(struct ipc_status) == 32, "ipc_status size");
_Static_assert(offsetof(struct ipc_status, status) == 0, "ipc_status.status");
_Static_assert(offsetof(struct ipc_status, current_step) == 4, "ipc_status.current_step");
_Static_assert(offsetof(struct ipc_status, start_step) == 8, "ipc_status.start_step");
_Static_assert(offsetof(struct ipc_status, stop_step) == 12, "ipc_status.stop_step");
_Static_assert(offsetof(struct ipc_status, pid) == 16, "ipc_status.pid");
_Static_assert(offsetof(struct ipc_status, job_id) == 24, "ipc_status.job_id");

#endif
