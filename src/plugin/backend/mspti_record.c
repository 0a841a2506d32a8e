/* mspti_record: packed msPTI records → struct mon_record. Packed fields are read with a
 * memcpy of each field at its offset, never through casted pointers (the records are packed
 * and unaligned in msPTI's buffers). */
#include "plugin/backend/mspti_record.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "msmon/mspti.h"

/* Each converter loads the fields it needs straight from the packed record, one memcpy of
 * the field's size at its offsetof() (the compiler emits one unaligned load each). Copying the
 * whole packed struct into a local first made the compiler store it in 16-byte pieces and read
 * the fields back across those pieces: store-forwarding stalls that cost more than the rest
 * of the ingestion path together. */
#define LD(dst, type, field)                                                                     \
    do {                                                                                         \
        _Static_assert(sizeof(dst) == sizeof(((const type *)0)->field), "field size: " #field);   \
        memcpy(&(dst), (const unsigned char *)raw + offsetof(type, field), sizeof(dst));         \
    } while (0)

static void conv_marker(const void *raw, struct mon_record *out)
{
    struct mon_marker *o = &out->u.marker;
    LD(o->flag, msptiActivityMarker, flag);
    LD(o->source_kind, msptiActivityMarker, sourceKind);
    LD(o->timestamp, msptiActivityMarker, timestamp);
    LD(o->id, msptiActivityMarker, id);
    LD(o->obj0, msptiActivityMarker, objectId.pt.processId);
    LD(o->obj1, msptiActivityMarker, objectId.pt.threadId);
    LD(o->name, msptiActivityMarker, name);
    LD(o->domain, msptiActivityMarker, domain);
}

static void conv_api(const void *raw, struct mon_record *out)
{
    struct mon_api *o = &out->u.api;
    LD(o->start, msptiActivityApi, start);
    LD(o->end, msptiActivityApi, end);
    LD(o->pid, msptiActivityApi, pt.processId);
    LD(o->tid, msptiActivityApi, pt.threadId);
    LD(o->correlation_id, msptiActivityApi, correlationId);
    LD(o->name, msptiActivityApi, name);
}

static void conv_kernel(const void *raw, struct mon_record *out)
{
    struct mon_kernel *o = &out->u.kernel;
    LD(o->start, msptiActivityKernel, start);
    LD(o->end, msptiActivityKernel, end);
    LD(o->device_id, msptiActivityKernel, ds.deviceId);
    LD(o->stream_id, msptiActivityKernel, ds.streamId);
    LD(o->correlation_id, msptiActivityKernel, correlationId);
    LD(o->type, msptiActivityKernel, type);
    LD(o->name, msptiActivityKernel, name);
}

static void conv_hccl(const void *raw, struct mon_record *out)
{
    struct mon_hccl *o = &out->u.hccl;
    LD(o->start, msptiActivityHccl, start);
    LD(o->end, msptiActivityHccl, end);
    LD(o->device_id, msptiActivityHccl, ds.deviceId);
    LD(o->stream_id, msptiActivityHccl, ds.streamId);
    LD(o->bandwidth, msptiActivityHccl, bandWidth);
    LD(o->name, msptiActivityHccl, name);
    LD(o->comm_name, msptiActivityHccl, commName);
}

static void conv_memory(const void *raw, struct mon_record *out)
{
    struct mon_memory *o = &out->u.memory;
    LD(o->op_type, msptiActivityMemory, memoryOperationType);
    LD(o->memory_kind, msptiActivityMemory, memoryKind);
    LD(o->correlation_id, msptiActivityMemory, correlationId);
    LD(o->start, msptiActivityMemory, start);
    LD(o->end, msptiActivityMemory, end);
    LD(o->address, msptiActivityMemory, address);
    LD(o->bytes, msptiActivityMemory, bytes);
    LD(o->pid, msptiActivityMemory, processId);
    LD(o->device_id, msptiActivityMemory, deviceId);
    LD(o->stream_id, msptiActivityMemory, streamId);
}

static void conv_memset(const void *raw, struct mon_record *out)
{
    struct mon_memset *o = &out->u.memset;
    LD(o->value, msptiActivityMemset, value);
    LD(o->is_async, msptiActivityMemset, isAsync);
    LD(o->bytes, msptiActivityMemset, bytes);
    LD(o->start, msptiActivityMemset, start);
    LD(o->end, msptiActivityMemset, end);
    LD(o->device_id, msptiActivityMemset, deviceId);
    LD(o->stream_id, msptiActivityMemset, streamId);
    LD(o->correlation_id, msptiActivityMemset, correlationId);
}

static void conv_memcpy(const void *raw, struct mon_record *out)
{
    struct mon_memcpy *o = &out->u.memcpy;
    LD(o->copy_kind, msptiActivityMemcpy, copyKind);
    LD(o->is_async, msptiActivityMemcpy, isAsync);
    LD(o->bytes, msptiActivityMemcpy, bytes);
    LD(o->start, msptiActivityMemcpy, start);
    LD(o->end, msptiActivityMemcpy, end);
    LD(o->device_id, msptiActivityMemcpy, deviceId);
    LD(o->stream_id, msptiActivityMemcpy, streamId);
    LD(o->correlation_id, msptiActivityMemcpy, correlationId);
}

static void conv_comm(const void *raw, struct mon_record *out)
{
    struct mon_comm *o = &out->u.comm;
    LD(o->data_type, msptiActivityCommunication, dataType);
    LD(o->count, msptiActivityCommunication, count);
    LD(o->device_id, msptiActivityCommunication, ds.deviceId);
    LD(o->stream_id, msptiActivityCommunication, ds.streamId);
    LD(o->start, msptiActivityCommunication, start);
    LD(o->end, msptiActivityCommunication, end);
    LD(o->alg_type, msptiActivityCommunication, algType);
    LD(o->name, msptiActivityCommunication, name);
    LD(o->comm_name, msptiActivityCommunication, commName);
    LD(o->correlation_id, msptiActivityCommunication, correlationId);
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

/* The normalised kinds keep msPTI's values (docs/design/session.md#kind-replacement), so the kind is copied as is. */
#define MON_SAME_KIND(m, k) ((int)(m) == (int)(k))
_Static_assert(MON_SAME_KIND(MON_KIND_MARKER, MSPTI_ACTIVITY_KIND_MARKER) &&
                   MON_SAME_KIND(MON_KIND_KERNEL, MSPTI_ACTIVITY_KIND_KERNEL) &&
                   MON_SAME_KIND(MON_KIND_API, MSPTI_ACTIVITY_KIND_API) &&
                   MON_SAME_KIND(MON_KIND_HCCL, MSPTI_ACTIVITY_KIND_HCCL) &&
                   MON_SAME_KIND(MON_KIND_MEMORY, MSPTI_ACTIVITY_KIND_MEMORY) &&
                   MON_SAME_KIND(MON_KIND_MEMSET, MSPTI_ACTIVITY_KIND_MEMSET) &&
                   MON_SAME_KIND(MON_KIND_MEMCPY, MSPTI_ACTIVITY_KIND_MEMCPY) &&
                   MON_SAME_KIND(MON_KIND_COMMUNICATION, MSPTI_ACTIVITY_KIND_COMMUNICATION) &&
                   MON_SAME_KIND(MON_KIND_ACL_API, MSPTI_ACTIVITY_KIND_ACL_API) &&
                   MON_SAME_KIND(MON_KIND_NODE_API, MSPTI_ACTIVITY_KIND_NODE_API) &&
                   MON_SAME_KIND(MON_KIND_RUNTIME_API, MSPTI_ACTIVITY_KIND_RUNTIME_API) &&
                   MON_KIND_LIMIT == MSPTI_ACTIVITY_KIND_COUNT,
               "mon_kind values are msPTI's");
