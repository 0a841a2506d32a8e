/* cupti_record: CUPTI records → struct mon_record (docs/design/session.md#cupti-backend). CUPTI records are naturally
 * aligned, but each field is still loaded with a memcpy at its ABI offset so a hand-built or
 * oddly placed record can never fault. Strings handed downstream must live for the process
 * and keep one pointer per name (the filter caches by pointer): ours are interned here. */
#include "plugin/backend/cupti_record.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msmon/mspti.h"

#define LD(dst, type, field)                                                                     \
    do {                                                                                         \
        _Static_assert(sizeof(dst) == sizeof(((const type *)0)->field), "field size: " #field);   \
        memcpy(&(dst), (const unsigned char *)raw + offsetof(type, field), sizeof(dst));         \
    } while (0)

#define KBIT(k) (1u << (k))

/* ---- interning: a fixed table of strings that live for the process ---- */

#define INTERN_CAP 4096 /* distinct API names and collectives; beyond it names become "" */

static struct {
    pthread_mutex_t lock;
    char *slot[INTERN_CAP];
    size_t n;
} cr_intern = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const char *cr_intern_str(const char *s, size_t len)
{
    const char *found = "";
    uint64_t h = 1469598103934665603ull;

    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    pthread_mutex_lock(&cr_intern.lock);
    for (size_t i = h % INTERN_CAP, probes = 0; probes < INTERN_CAP; i = (i + 1) % INTERN_CAP, probes++) {
        char *e = cr_intern.slot[i];
        if (!e) {
            if (cr_intern.n + 1 >= INTERN_CAP)
                break; /* keep one slot free so lookups always terminate */
            e = malloc(len + 1);
            if (!e)
                break;
            memcpy(e, s, len);
            e[len] = '\0';
            cr_intern.slot[i] = e;
            cr_intern.n++;
            found = e;
            break;
        }
        if (strncmp(e, s, len) == 0 && e[len] == '\0') {
            found = e;
            break;
        }
    }
    pthread_mutex_unlock(&cr_intern.lock);
    return found;
}

/* ---- names ---- */

size_t cupti_record_strip_version(const char *name, size_t len)
{
    size_t d = len;

    while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9')
        d--;
    if (len - d >= 4 && d >= 2 && name[d - 1] == 'v' && name[d - 2] == '_')
        return d - 2;
    return len;
}

#define API_CACHE_CBIDS 4096 /* CUDA 13 has < 1000 runtime and driver cbids */
static _Atomic(const char *) cr_api_cache[2][API_CACHE_CBIDS];

const char *cupti_record_api_name(const struct cupti_conv *cv, int domain, uint32_t cbid)
{
    int d = domain == CUPTI_ABI_CB_DOMAIN_RUNTIME_API ? 1 : 0;
    const char *name = NULL, *cached = NULL;
    char buf[32];

    if (cbid < API_CACHE_CBIDS) {
        cached = atomic_load_explicit(&cr_api_cache[d][cbid], memory_order_acquire);
        if (cached)
            return cached;
    }
    if (!cv->callback_name || cv->callback_name(domain, cbid, &name) != CUPTI_ABI_SUCCESS || !name ||
        !name[0]) {
        int n = snprintf(buf, sizeof(buf), "cbid_%u", cbid);
        cached = cr_intern_str(buf, (size_t)n);
    } else {
        cached = cr_intern_str(name, cupti_record_strip_version(name, strlen(name)));
    }
    if (cbid < API_CACHE_CBIDS)
        atomic_store_explicit(&cr_api_cache[d][cbid], cached, memory_order_release);
    return cached; /* racing threads intern the same string: the same pointer either way */
}

struct cr_token {
    const char *tok;
    int32_t val;
};

static const struct cr_token cr_dtypes[] = {
    { "f32", MSPTI_ACTIVITY_COMMUNICATION_FP32 },     { "f16", MSPTI_ACTIVITY_COMMUNICATION_FP16 },
    { "bf16", MSPTI_ACTIVITY_COMMUNICATION_BFP16 },   { "f64", MSPTI_ACTIVITY_COMMUNICATION_FP64 },
    { "i8", MSPTI_ACTIVITY_COMMUNICATION_INT8 },      { "u8", MSPTI_ACTIVITY_COMMUNICATION_UINT8 },
    { "i32", MSPTI_ACTIVITY_COMMUNICATION_INT32 },    { "u32", MSPTI_ACTIVITY_COMMUNICATION_UINT32 },
    { "i64", MSPTI_ACTIVITY_COMMUNICATION_INT64 },    { "u64", MSPTI_ACTIVITY_COMMUNICATION_UINT64 },
};
static const char *const cr_algs[] = { "RING", "TREE", "NVLS", "PAT" };

static bool cr_tok_is(const char *t, size_t n, const char *s)
{
    return strlen(s) == n && memcmp(t, s, n) == 0;
}

int cupti_record_parse_nccl(const char *name, const char **ret_coll, int32_t *ret_dtype,
                            const char **ret_alg)
{
    static const char *const prefixes[] = { "ncclDevKernel_", "ncclKernel_" };
    const char *p = NULL, *end, *prev = NULL;
    size_t prev_n = 0;
    bool first = true;

    for (size_t i = 0; name && !p && i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            p = name + strlen(prefixes[i]);
    if (!p)
        return -ENOENT;
    end = p + strcspn(p, "(<");
    *ret_coll = "";
    *ret_dtype = MSPTI_ACTIVITY_COMMUNICATION_INVALID_TYPE;
    *ret_alg = "";
    while (p < end) {
        size_t n = strcspn(p, "_(<");
        if (n > (size_t)(end - p))
            n = (size_t)(end - p);
        if (first) {
            *ret_coll = cr_intern_str(p, n);
            first = false;
        } else {
            for (size_t i = 0; i < sizeof(cr_dtypes) / sizeof(cr_dtypes[0]); i++)
                if (cr_tok_is(p, n, cr_dtypes[i].tok))
                    *ret_dtype = cr_dtypes[i].val;
            for (size_t i = 0; i < sizeof(cr_algs) / sizeof(cr_algs[0]); i++)
                if (cr_tok_is(p, n, cr_algs[i]))
                    *ret_alg = cr_algs[i];
            if (prev && cr_tok_is(prev, prev_n, "COLLNET")) {
                if (cr_tok_is(p, n, "DIRECT"))
                    *ret_alg = "COLLNET_DIRECT";
                else if (cr_tok_is(p, n, "CHAIN"))
                    *ret_alg = "COLLNET_CHAIN";
            }
        }
        prev = p;
        prev_n = n;
        p += n;
        if (p < end && *p == '_')
            p++;
    }
    return 0;
}

/* Parsing a kernel name costs more than the rest of a conversion, so each completion thread
 * remembers its last results per name pointer: CUPTI shares one name string among all
 * records of a kernel and keeps it for the process (the filter caches by pointer too). */
#define NCCL_MEMO 64

struct cr_nccl_memo {
    const char *name;
    const char *coll, *alg;
    int32_t dtype;
    bool nccl;
};
static _Thread_local struct cr_nccl_memo cr_memo[NCCL_MEMO];

static bool cr_nccl(const char *name, const char **ret_coll, int32_t *ret_dtype, const char **ret_alg)
{
    struct cr_nccl_memo *m = &cr_memo[((uintptr_t)name >> 3) % NCCL_MEMO];

    if (!name)
        return false;
    if (m->name != name) {
        m->nccl = cupti_record_parse_nccl(name, &m->coll, &m->dtype, &m->alg) == 0;
        m->name = name;
    }
    *ret_coll = m->coll;
    *ret_dtype = m->dtype;
    *ret_alg = m->alg;
    return m->nccl;
}

/* ---- per-struct converters ---- */

static int conv_kernel(const void *raw, const struct cupti_conv *cv, struct mon_record *out)
{
    uint64_t start, end;
    uint32_t dev, stream, corr;
    const char *name, *coll, *alg;
    int32_t dtype;
    bool nccl;
    int n = 0;

    LD(start, struct cupti_abi_kernel, start);
    LD(end, struct cupti_abi_kernel, end);
    LD(dev, struct cupti_abi_kernel, deviceId);
    LD(stream, struct cupti_abi_kernel, streamId);
    LD(corr, struct cupti_abi_kernel, correlationId);
    LD(name, struct cupti_abi_kernel, name);
    nccl = cr_nccl(name, &coll, &dtype, &alg);
    if (cv->enabled & KBIT(MON_KIND_KERNEL)) {
        struct mon_kernel *o = &out[n].u.kernel;
        out[n++].kind = MON_KIND_KERNEL;
        o->start = start;
        o->end = end;
        o->device_id = dev;
        o->stream_id = stream;
        o->correlation_id = corr;
        o->type = "KERNEL_CUDA";
        o->name = name ? name : "";
    }
    if (nccl && (cv->enabled & KBIT(MON_KIND_COMMUNICATION))) {
        struct mon_comm *o = &out[n].u.comm;
        out[n++].kind = MON_KIND_COMMUNICATION;
        o->data_type = dtype;
        o->count = 0; /* NCCL kernels carry no message size (docs/design/session.md#cupti-backend) */
        o->device_id = dev;
        o->stream_id = stream;
        o->start = start;
        o->end = end;
        o->alg_type = alg;
        o->name = coll;
        o->comm_name = "";
        o->correlation_id = corr;
    }
    if (nccl && (cv->enabled & KBIT(MON_KIND_HCCL))) {
        struct mon_hccl *o = &out[n].u.hccl;
        out[n++].kind = MON_KIND_HCCL;
        o->start = start;
        o->end = end;
        o->device_id = dev;
        o->stream_id = stream;
        o->bandwidth = 0;
        o->name = coll;
        o->comm_name = "";
    }
    return n;
}

static int conv_api(const void *raw, const struct cupti_conv *cv, int cupti_kind, struct mon_record *out)
{
    struct mon_api *o = &out->u.api;
    int specific = cupti_kind == CUPTI_ABI_KIND_RUNTIME ? MON_KIND_ACL_API : MON_KIND_RUNTIME_API;
    int domain = cupti_kind == CUPTI_ABI_KIND_RUNTIME ? CUPTI_ABI_CB_DOMAIN_RUNTIME_API
                                                      : CUPTI_ABI_CB_DOMAIN_DRIVER_API;
    uint32_t cbid, pid, tid, corr;

    /* Runtime → AclAPI, driver → RuntimeAPI; either → API unless its own kind is on. */
    if (cv->enabled & KBIT(specific))
        out->kind = specific;
    else if (cv->enabled & KBIT(MON_KIND_API))
        out->kind = MON_KIND_API;
    else
        return 0;
    LD(cbid, struct cupti_abi_api, cbid);
    LD(o->start, struct cupti_abi_api, start);
    LD(o->end, struct cupti_abi_api, end);
    LD(pid, struct cupti_abi_api, processId);
    LD(tid, struct cupti_abi_api, threadId);
    LD(corr, struct cupti_abi_api, correlationId);
    o->pid = pid;
    o->tid = tid;
    o->correlation_id = corr;
    o->name = cupti_record_api_name(cv, domain, cbid);
    return 1;
}

static int32_t cr_copy_kind(uint8_t k)
{
    switch (k) {
    case CUPTI_ABI_MEMCPY_HTOD: return MSPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    case CUPTI_ABI_MEMCPY_DTOH: return MSPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    case CUPTI_ABI_MEMCPY_DTOD: return MSPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    case CUPTI_ABI_MEMCPY_HTOH: return MSPTI_ACTIVITY_MEMCPY_KIND_HTOH;
    default: return MSPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN; /* arrays, peer to peer */
    }
}

static int conv_memcpy(const void *raw, const struct cupti_conv *cv, struct mon_record *out)
{
    struct mon_memcpy *o = &out->u.memcpy;
    uint8_t kind, flags;
    uint32_t corr;

    if (!(cv->enabled & KBIT(MON_KIND_MEMCPY)))
        return 0;
    out->kind = MON_KIND_MEMCPY;
    LD(kind, struct cupti_abi_memcpy, copyKind);
    LD(flags, struct cupti_abi_memcpy, flags);
    LD(o->bytes, struct cupti_abi_memcpy, bytes);
    LD(o->start, struct cupti_abi_memcpy, start);
    LD(o->end, struct cupti_abi_memcpy, end);
    LD(o->device_id, struct cupti_abi_memcpy, deviceId);
    LD(o->stream_id, struct cupti_abi_memcpy, streamId);
    LD(corr, struct cupti_abi_memcpy, correlationId);
    o->copy_kind = cr_copy_kind(kind);
    o->is_async = flags & CUPTI_ABI_MEMCPY_ASYNC;
    o->correlation_id = corr;
    return 1;
}

static int conv_memset(const void *raw, const struct cupti_conv *cv, struct mon_record *out)
{
    struct mon_memset *o = &out->u.memset;
    uint16_t flags;
    uint32_t corr;

    if (!(cv->enabled & KBIT(MON_KIND_MEMSET)))
        return 0;
    out->kind = MON_KIND_MEMSET;
    LD(o->value, struct cupti_abi_memset, value);
    LD(o->bytes, struct cupti_abi_memset, bytes);
    LD(o->start, struct cupti_abi_memset, start);
    LD(o->end, struct cupti_abi_memset, end);
    LD(o->device_id, struct cupti_abi_memset, deviceId);
    LD(o->stream_id, struct cupti_abi_memset, streamId);
    LD(corr, struct cupti_abi_memset, correlationId);
    LD(flags, struct cupti_abi_memset, flags);
    o->is_async = flags & CUPTI_ABI_MEMSET_ASYNC;
    o->correlation_id = corr;
    return 1;
}

static int conv_memory(const void *raw, const struct cupti_conv *cv, struct mon_record *out)
{
    struct mon_memory *o = &out->u.memory;
    uint32_t op, kind, corr;

    if (!(cv->enabled & KBIT(MON_KIND_MEMORY)))
        return 0;
    LD(op, struct cupti_abi_memory, memoryOperationType);
    if (op == CUPTI_ABI_MEMOP_ALLOCATION)
        o->op_type = MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    else if (op == CUPTI_ABI_MEMOP_RELEASE)
        o->op_type = MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    else
        return 0; /* pool operations: msPTI has no equivalent */
    out->kind = MON_KIND_MEMORY;
    LD(kind, struct cupti_abi_memory, memoryKind);
    o->memory_kind = kind == CUPTI_ABI_MEMORY_KIND_DEVICE ? MSPTI_ACTIVITY_MEMORY_KIND_DEVICE
                                                          : MSPTI_ACTIVITY_MEMORY_KIND_UNKNOWN;
    LD(corr, struct cupti_abi_memory, correlationId);
    o->correlation_id = corr;
    LD(o->start, struct cupti_abi_memory, timestamp);
    o->end = o->start;
    LD(o->address, struct cupti_abi_memory, address);
    LD(o->bytes, struct cupti_abi_memory, bytes);
    LD(o->pid, struct cupti_abi_memory, processId);
    LD(o->device_id, struct cupti_abi_memory, deviceId);
    LD(o->stream_id, struct cupti_abi_memory, streamId);
    return 1;
}

static int conv_marker(const void *raw, const struct cupti_conv *cv, struct mon_record *out)
{
    struct mon_marker *o = &out->u.marker;
    uint32_t flags, id, okind, obj[3];
    const char *name, *domain;

    if (!(cv->enabled & KBIT(MON_KIND_MARKER)))
        return 0;
    LD(flags, struct cupti_abi_marker, flags);
    flags &= CUPTI_ABI_MARKER_INSTANT | CUPTI_ABI_MARKER_START | CUPTI_ABI_MARKER_END;
    if (flags != CUPTI_ABI_MARKER_INSTANT && flags != CUPTI_ABI_MARKER_START && flags != CUPTI_ABI_MARKER_END)
        return 0;
    out->kind = MON_KIND_MARKER;
    o->flag = (int32_t)flags; /* CUPTI's three bits are msPTI's host-marker flags */
    o->source_kind = MSPTI_ACTIVITY_SOURCE_KIND_HOST;
    LD(o->timestamp, struct cupti_abi_marker, timestamp);
    LD(id, struct cupti_abi_marker, id);
    o->id = id;
    LD(okind, struct cupti_abi_marker, objectKind);
    LD(obj, struct cupti_abi_marker, objectId);
    if (okind == CUPTI_ABI_OBJECT_PROCESS || okind == CUPTI_ABI_OBJECT_THREAD) {
        o->obj0 = obj[0];
        o->obj1 = obj[1];
    } else {
        o->obj0 = cv->pid;
        o->obj1 = 0;
    }
    LD(name, struct cupti_abi_marker, name);
    LD(domain, struct cupti_abi_marker, domain);
    if (flags == CUPTI_ABI_MARKER_END) {
        o->name = "";
        o->domain = "";
    } else {
        o->name = name ? name : "";
        o->domain = domain ? domain : "default";
    }
    return 1;
}

int cupti_record_convert(const void *raw, const struct cupti_conv *cv,
                         struct mon_record out[CUPTI_RECORD_MAX_OUT])
{
    uint32_t kind;

    memcpy(&kind, raw, sizeof(kind));
    switch (kind) {
    case CUPTI_ABI_KIND_CONCURRENT_KERNEL: return conv_kernel(raw, cv, out);
    case CUPTI_ABI_KIND_RUNTIME:
    case CUPTI_ABI_KIND_DRIVER: return conv_api(raw, cv, (int)kind, out);
    case CUPTI_ABI_KIND_MEMCPY: return conv_memcpy(raw, cv, out);
    case CUPTI_ABI_KIND_MEMSET: return conv_memset(raw, cv, out);
    case CUPTI_ABI_KIND_MEMORY2: return conv_memory(raw, cv, out);
    case CUPTI_ABI_KIND_MARKER: return conv_marker(raw, cv, out);
    default: return -ENOENT;
    }
}
