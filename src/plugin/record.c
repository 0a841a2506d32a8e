/* record: converts packed msPTI activity records into the aligned struct mon_record that the
 * filter and the processors use, and names kinds, communication data types and memcpy kinds.
 * Packed fields are read through a memcpy into a local copy, never through casted pointers. */
#include <errno.h>
#include <string.h>

#include "msmon/mspti.h"
#include "plugin/record.h"

static const char *const kind_names[MON_KIND_LIMIT] = {
    [MON_KIND_MARKER] = "Marker",       [MON_KIND_KERNEL] = "Kernel",
    [MON_KIND_API] = "API",             [MON_KIND_HCCL] = "Hccl",
    [MON_KIND_MEMORY] = "Memory",       [MON_KIND_MEMSET] = "MemSet",
    [MON_KIND_MEMCPY] = "MemCpy",       [MON_KIND_COMMUNICATION] = "Communication",
    [MON_KIND_ACL_API] = "AclAPI",      [MON_KIND_NODE_API] = "NodeAPI",
    [MON_KIND_RUNTIME_API] = "RuntimeAPI",
};

const char *mon_kind_name(int kind)
{
    if (kind < 0 || kind >= MON_KIND_LIMIT)
        return NULL;
    return kind_names[kind];
}

int mon_kind_from_name(const char *name, size_t len)
{
    if (!name)
        return -1;
    for (int k = 0; k < MON_KIND_LIMIT; k++) {
        const char *n = kind_names[k];
        if (n && strlen(n) == len && memcmp(n, name, len) == 0)
            return k;
    }
    return -1;
}

const char *mon_comm_dtype_name(int32_t dt)
{
    static const char *const names[] = {
        "INT8", "INT16", "INT32", "FP16", "FP32", "INT64", "UINT64", "UINT8", "UINT16",
        "UINT32", "FP64", "BFP16", "INT128", NULL, "HIF8", "FP8E4M3", "FP8E5M2", "FP8E8M0",
    };
    if (dt >= 0 && (size_t)dt < sizeof(names) / sizeof(names[0]) && names[dt])
        return names[dt];
    return "INVALID_TYPE";
}

const char *mon_memcpy_kind_name(int32_t k)
{
    static const char *const names[] = { "UNKNOWN", "HTOH", "HTOD", "DTOH", "DTOD", "DEFAULT" };
    if (k >= 0 && (size_t)k < sizeof(names) / sizeof(names[0]))
        return names[k];
    return "UNKNOWN";
}

/* Each converter copies the packed record into a local of its type (the compiler emits
 * unaligned-safe loads for packed members of a local) and then fills the aligned struct. */
static void conv_marker(const void *raw, struct mon_record *out)
{
    msptiActivityMarker m;
    memcpy(&m, raw, sizeof(m));
    struct mon_marker *o = &out->u.marker;
    o->flag = m.flag;
    o->source_kind = m.sourceKind;
    o->timestamp = m.timestamp;
    o->id = m.id;
    o->obj0 = m.objectId.pt.processId;
    o->obj1 = m.objectId.pt.threadId;
    o->name = m.name;
    o->domain = m.domain;
}

static void conv_api(const void *raw, struct mon_record *out)
{
    msptiActivityApi a;
    memcpy(&a, raw, sizeof(a));
    struct mon_api *o = &out->u.api;
    o->start = a.start;
    o->end = a.end;
    o->pid = a.pt.processId;
    o->tid = a.pt.threadId;
    o->correlation_id = a.correlationId;
    o->name = a.name;
}

static void conv_kernel(const void *raw, struct mon_record *out)
{
    msptiActivityKernel k;
    memcpy(&k, raw, sizeof(k));
    struct mon_kernel *o = &out->u.kernel;
    o->start = k.start;
    o->end = k.end;
    o->device_id = k.ds.deviceId;
    o->stream_id = k.ds.streamId;
    o->correlation_id = k.correlationId;
    o->type = k.type;
    o->name = k.name;
}

static void conv_hccl(const void *raw, struct mon_record *out)
{
    msptiActivityHccl h;
    memcpy(&h, raw, sizeof(h));
    struct mon_hccl *o = &out->u.hccl;
    o->start = h.start;
    o->end = h.end;
    o->device_id = h.ds.deviceId;
    o->stream_id = h.ds.streamId;
    o->bandwidth = h.bandWidth;
    o->name = h.name;
    o->comm_name = h.commName;
}

static void conv_memory(const void *raw, struct mon_record *out)
{
    msptiActivityMemory m;
    memcpy(&m, raw, sizeof(m));
    struct mon_memory *o = &out->u.memory;
    o->op_type = m.memoryOperationType;
    o->memory_kind = m.memoryKind;
    o->correlation_id = m.correlationId;
    o->start = m.start;
    o->end = m.end;
    o->address = m.address;
    o->bytes = m.bytes;
    o->pid = m.processId;
    o->device_id = m.deviceId;
    o->stream_id = m.streamId;
}

static void conv_memset(const void *raw, struct mon_record *out)
{
    msptiActivityMemset m;
    memcpy(&m, raw, sizeof(m));
    struct mon_memset *o = &out->u.memset;
    o->value = m.value;
    o->is_async = m.isAsync;
    o->bytes = m.bytes;
    o->start = m.start;
    o->end = m.end;
    o->device_id = m.deviceId;
    o->stream_id = m.streamId;
    o->correlation_id = m.correlationId;
}

static void conv_memcpy(const void *raw, struct mon_record *out)
{
    msptiActivityMemcpy m;
    memcpy(&m, raw, sizeof(m));
    struct mon_memcpy *o = &out->u.memcpy;
    o->copy_kind = m.copyKind;
    o->is_async = m.isAsync;
    o->bytes = m.bytes;
    o->start = m.start;
    o->end = m.end;
    o->device_id = m.deviceId;
    o->stream_id = m.streamId;
    o->correlation_id = m.correlationId;
}

static void conv_comm(const void *raw, struct mon_record *out)
{
    msptiActivityCommunication c;
    memcpy(&c, raw, sizeof(c));
    struct mon_comm *o = &out->u.comm;
    o->data_type = c.dataType;
    o->count = c.count;
    o->device_id = c.ds.deviceId;
    o->stream_id = c.ds.streamId;
    o->start = c.start;
    o->end = c.end;
    o->alg_type = c.algType;
    o->name = c.name;
    o->comm_name = c.commName;
    o->correlation_id = c.correlationId;
}

int mon_record_from_mspti(const void *raw, struct mon_record *out)
{
    int32_t kind;
    memcpy(&kind, raw, sizeof(kind));
    out->kind = kind;
    switch (kind) {
    case MON_KIND_MARKER: conv_marker(raw, out); return 0;
    case MON_KIND_KERNEL: conv_kernel(raw, out); return 0;
    case MON_KIND_API:
    case MON_KIND_ACL_API:
    case MON_KIND_NODE_API:
    case MON_KIND_RUNTIME_API: conv_api(raw, out); return 0;
    case MON_KIND_HCCL: conv_hccl(raw, out); return 0;
    case MON_KIND_MEMORY: conv_memory(raw, out); return 0;
    case MON_KIND_MEMSET: conv_memset(raw, out); return 0;
    case MON_KIND_MEMCPY: conv_memcpy(raw, out); return 0;
    case MON_KIND_COMMUNICATION: conv_comm(raw, out); return 0;
    default: return -ENOENT;
    }
}
