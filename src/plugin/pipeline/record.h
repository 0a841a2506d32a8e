/* record: the plugin's aligned, kind-tagged copy of one activity record. Backends (msPTI,
 * CUPTI) convert raw packed records into this; the filter and every processor consume it.
 * Strings are borrowed from the vendor library's caches, which live for the process. */
#ifndef MSMON_PLUGIN_RECORD_H
#define MSMON_PLUGIN_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "contract/kinds.h"

/* msPTI kind values, one per row of the contract's kind table (docs/design/contract.md#activity-kinds);
 * 8 (external correlation) is never enabled. */
enum mon_kind {
#define KIND(name, id, value, standalone) MON_KIND_##id = value,
#include "contract/kinds.def"
#undef KIND
};
#define MON_KIND_LIMIT KINDS_VALUE_LIMIT /* kind values are < this; use for per-kind arrays */

/* "Marker", "Kernel", ... for the 11 user-visible kinds; NULL otherwise. */
const char *mon_kind_name(int kind);
/* Exact, case-sensitive match of the 11 names; -1 if unknown. */
int mon_kind_from_name(const char *name, size_t len);
static inline int mon_kind_is_api(int k)
{
    return k == MON_KIND_API || k == MON_KIND_ACL_API || k == MON_KIND_NODE_API || k == MON_KIND_RUNTIME_API;
}

struct mon_marker {
    int32_t flag;          /* msptiActivityFlag bits */
    int32_t source_kind;   /* 0 host, 1 device */
    uint64_t timestamp;
    uint64_t id;
    uint32_t obj0, obj1;   /* host: processId, threadId; device: deviceId, streamId */
    const char *name, *domain;
};
struct mon_api {
    uint64_t start, end;
    uint32_t pid, tid;
    uint64_t correlation_id;
    const char *name;
};
struct mon_kernel {
    uint64_t start, end;
    uint32_t device_id, stream_id;
    uint64_t correlation_id;
    const char *type, *name;
};
struct mon_hccl {
    uint64_t start, end;
    uint32_t device_id, stream_id;
    double bandwidth;
    const char *name, *comm_name;
};
struct mon_memory {
    int32_t op_type, memory_kind;
    uint64_t correlation_id, start, end, address, bytes;
    uint32_t pid, device_id, stream_id;
};
struct mon_memset {
    uint32_t value;
    uint8_t is_async;
    uint64_t bytes, start, end;
    uint32_t device_id, stream_id;
    uint64_t correlation_id;
};
struct mon_memcpy {
    int32_t copy_kind;
    uint8_t is_async;
    uint64_t bytes, start, end;
    uint32_t device_id, stream_id;
    uint64_t correlation_id;
};
struct mon_comm {
    int32_t data_type;
    uint64_t count;
    uint32_t device_id, stream_id;
    uint64_t start, end;
    const char *alg_type, *name, *comm_name;
    uint64_t correlation_id;
};

struct mon_record {
    int32_t kind;  /* enum mon_kind */
    union {
        struct mon_marker marker;
        struct mon_api api;        /* kinds 3, 10, 11, 12 */
        struct mon_kernel kernel;
        struct mon_hccl hccl;
        struct mon_memory memory;
        struct mon_memset memset;
        struct mon_memcpy memcpy;
        struct mon_comm comm;
    } u;
};

/* When and where a record ran: `start`/`end` for ranged records; a marker's `timestamp` as its end
 * and 0 as its start (markers are placed by the ranges they complete); the device of the device
 * activity kinds, -1 for the API kinds and markers. One switch for every accessor below. */
struct mon_span {
    uint64_t start, end;
    int64_t device;
};
static inline struct mon_span mon_record_span(const struct mon_record *r)
{
#define MON_SPAN_(u) ((struct mon_span){(u).start, (u).end, (u).device_id})
    switch (r->kind) {
    case MON_KIND_MARKER: return (struct mon_span){0, r->u.marker.timestamp, -1};
    case MON_KIND_KERNEL: return MON_SPAN_(r->u.kernel);
    case MON_KIND_HCCL: return MON_SPAN_(r->u.hccl);
    case MON_KIND_MEMORY: return MON_SPAN_(r->u.memory);
    case MON_KIND_MEMSET: return MON_SPAN_(r->u.memset);
    case MON_KIND_MEMCPY: return MON_SPAN_(r->u.memcpy);
    case MON_KIND_COMMUNICATION: return MON_SPAN_(r->u.comm);
    default: return mon_kind_is_api(r->kind) ? (struct mon_span){r->u.api.start, r->u.api.end, -1}
                                             : (struct mon_span){0, 0, -1};
    }
#undef MON_SPAN_
}

/* End time used by the per-session filter (records ending before the session start are ignored). */
static inline uint64_t mon_record_end(const struct mon_record *r)
{
    return mon_record_span(r).end;
}

/* Start time a window cuts by (docs/design/session.md#the-window). */
static inline uint64_t mon_record_start(const struct mon_record *r)
{
    return mon_record_span(r).start;
}

/* Marker flag helpers */
#define MON_MARKER_INSTANT (1 | 8)    /* INSTANTANEOUS, INSTANTANEOUS_WITH_DEVICE */
#define MON_MARKER_START (2 | 16)     /* START, START_WITH_DEVICE */
#define MON_MARKER_END (4 | 32)       /* END, END_WITH_DEVICE */
#define MON_MARKER_WITH_DEVICE (8 | 16 | 32)

/* Communication data type name ("FP32", ..., "INVALID_TYPE"). */
const char *mon_comm_dtype_name(int32_t dt);
/* MemCpy kind name ("UNKNOWN", "HTOH", "HTOD", "DTOH", "DTOD", "DEFAULT"); "UNKNOWN" if out of range. */
const char *mon_memcpy_kind_name(int32_t k);

/* Consumer-CPU accounting per vendor buffer (implemented by the pipeline): a backend brackets
 * the walk of one buffer with these on its completion thread, and the pipeline that received
 * the buffer's batches is charged the bracket's thread CPU once, at the end (two clock reads
 * per buffer instead of two per batch; the walk and the conversion count too). Outside a
 * bracket every delivery is timed on its own. */
void mon_cpu_buffer_begin(void);
void mon_cpu_buffer_end(void);

#endif
