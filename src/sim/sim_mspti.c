/* sim_mspti: msPTI entry points that do not touch the buffer path: kind enabling with the
 * profile and LD_PRELOAD rules, GetNextRecord with its thread-local cursor quirk, per-thread
 * external-correlation stacks, marker domains, callback enabling and result strings. */
#include "sim/sim_mspti.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_core.h"
#include "sim/sim_dev.h"
#include "sim/sim_intern.h"

#define EXT_KINDS 5
#define EXT_DEPTH 256
#define DOMAIN_NAME_MAX 255

/* Kind check shared by Enable and Disable (docs/design/mspti.md#runtime-semantics): outside the profile -> 1; in 26.x,
 * Hccl/Memory/MemSet/MemCpy need libmspti.so in LD_PRELOAD -> 6. */
static msptiResult kind_check(msptiActivityKind kind)
{
    const struct sim_knobs *k = sim_knobs();
    if (!sim_kind_in_profile(k, (int)kind))
        return MSPTI_ERROR_INVALID_PARAMETER;
    if (kind >= MSPTI_ACTIVITY_KIND_HCCL && kind <= MSPTI_ACTIVITY_KIND_MEMCPY && k->profile >= SIM_P260 &&
        k->check_preload && !k->preload_ok)
        return MSPTI_ERROR_WITHOUT_LD_PRELOAD;
    return MSPTI_SUCCESS;
}

SIM_EXPORT msptiResult msptiActivityEnable(msptiActivityKind kind)
{
    sim_core_init();
    msptiResult rc = kind_check(kind);
    if (rc != MSPTI_SUCCESS)
        return rc;
    sim_kind_set((int)kind, true);
    return MSPTI_SUCCESS;
}

SIM_EXPORT msptiResult msptiActivityDisable(msptiActivityKind kind)
{
    sim_core_init();
    msptiResult rc = kind_check(kind);
    if (rc != MSPTI_SUCCESS)
        return rc;
    /* Device kinds drain their in-flight device records first (docs/design/mspti.md#runtime-semantics). */
    if (kind == MSPTI_ACTIVITY_KIND_MARKER || kind == MSPTI_ACTIVITY_KIND_KERNEL ||
        kind == MSPTI_ACTIVITY_KIND_HCCL || kind == MSPTI_ACTIVITY_KIND_COMMUNICATION ||
        kind == MSPTI_ACTIVITY_KIND_MEMCPY || kind == MSPTI_ACTIVITY_KIND_MEMSET)
        sim_dev_flush_kind((int32_t)kind);
    sim_kind_set((int)kind, false);
    return MSPTI_SUCCESS;
}

SIM_EXPORT bool msptiActivityIsEnabled(msptiActivityKind kind)
{
    sim_core_init();
    /* Only 26.1 answers meaningfully; older profiles have no such function. */
    if (sim_knobs()->profile < SIM_P261)
        return false;
    return sim_kind_in_profile(sim_knobs(), (int)kind) && sim_kind_enabled((int)kind);
}


/* initial-exec: a direct %fs-relative access instead of a __tls_get_addr call per record (the
 * library is dlopen'ed; 8 bytes fit glibc's static TLS surplus for such libraries). */
static __thread size_t t_cursor __attribute__((tls_model("initial-exec")));

static const size_t g_strides[] = {0, 56, 56, 48, 56, 64, 56, 56, 24, 72, 48, 48, 48};

/* Stride of kind in the loaded profile, 0 if unknown (sim_kind_stride without the calls). */
static inline size_t stride_in(const struct sim_knobs *k, int32_t kind)
{
    return sim_kind_in_profile(k, kind) ? g_strides[kind] : 0;
}

size_t sim_kind_stride(int32_t kind)
{
    return stride_in(sim_knobs(), kind);
}

/* The real quirk (MSSIM_GETNEXT=cursor): *record is ignored; a thread-local cursor is reset
 * only when the end is reported (docs/design/mspti.md#runtime-semantics). The simulator's default (MSSIM_GETNEXT unset). */
static inline msptiResult next_cursor(const struct sim_knobs *k, uint8_t *buffer, size_t valid,
                                                         msptiActivity **record)
{
    size_t off = t_cursor, stride;
    int32_t kind;

    if (off >= valid || valid - off < sizeof(int32_t))
        goto end;
    memcpy(&kind, buffer + off, sizeof(kind));
    stride = stride_in(k, kind);
    if (!stride)
        return MSPTI_ERROR_INNER;
    if (stride > valid - off)
        goto end;
    *record = (msptiActivity *)(buffer + off);
    t_cursor = off + stride;
    return MSPTI_SUCCESS;
end:
    t_cursor = 0;
    return MSPTI_ERROR_MAX_LIMIT_REACHED;
}

/* Called once per record by every consumer, so the pointer form is the hot path of the whole
 * simulator: no pthread_once after the first call, no thread-local access, no calls. */
SIM_EXPORT msptiResult msptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes, msptiActivity **record)
{
    const struct sim_knobs *k;
    size_t off, stride;
    int32_t kind;

    if (__builtin_expect(!sim_core_ready(), 0))
        sim_core_init();
    k = sim_knobs();
    if (!buffer || !record)
        return MSPTI_ERROR_INVALID_PARAMETER;
    if (__builtin_expect(k->getnext_cursor, 0))
        return next_cursor(k, buffer, validBufferSizeBytes, record);
    if (!*record) {
        off = 0;
    } else {
        uint8_t *prev = (uint8_t *)*record;
        if (prev < buffer || prev >= buffer + validBufferSizeBytes)
            return MSPTI_ERROR_INVALID_PARAMETER;
        memcpy(&kind, prev, sizeof(kind));
        stride = stride_in(k, kind);
        if (!stride)
            return MSPTI_ERROR_INNER;
        off = (size_t)(prev - buffer) + stride;
    }
    if (off >= validBufferSizeBytes || validBufferSizeBytes - off < sizeof(int32_t))
        return MSPTI_ERROR_MAX_LIMIT_REACHED;
    memcpy(&kind, buffer + off, sizeof(kind));
    stride = stride_in(k, kind);
    if (!stride)
        return MSPTI_ERROR_INNER;
    if (stride > validBufferSizeBytes - off)
        return MSPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (msptiActivity *)(buffer + off);
    return MSPTI_SUCCESS;
}

/* ---- external correlation: per-thread stacks per kind ---- */

struct ext_stacks {
    uint32_t depth[EXT_KINDS];
    uint64_t ids[EXT_KINDS][EXT_DEPTH];
};
static pthread_key_t g_ext_key;
static pthread_once_t g_ext_once = PTHREAD_ONCE_INIT;
static __thread struct ext_stacks *t_ext;

static void ext_key_init(void) { pthread_key_create(&g_ext_key, free); }

static struct ext_stacks *ext_get(bool create)
{
    if (t_ext || !create)
        return t_ext;
    pthread_once(&g_ext_once, ext_key_init);
    t_ext = calloc(1, sizeof(*t_ext));
    if (t_ext)
        pthread_setspecific(g_ext_key, t_ext);
    return t_ext;
}

static bool ext_kind_ok(int kind)
{
    return kind > MSPTI_EXTERNAL_CORRELATION_KIND_INVALID && kind < MSPTI_EXTERNAL_CORRELATION_KIND_SIZE;
}

SIM_EXPORT msptiResult msptiActivityPushExternalCorrelationId(msptiExternalCorrelationKind kind, uint64_t id)
{
    sim_core_init();
    if (!ext_kind_ok((int)kind))
        return MSPTI_ERROR_INVALID_PARAMETER;
    struct ext_stacks *s = ext_get(true);
    if (!s)
        return MSPTI_ERROR_INNER;
    if (s->depth[kind] == EXT_DEPTH)
        return MSPTI_ERROR_MAX_LIMIT_REACHED;
    s->ids[kind][s->depth[kind]++] = id;
    return MSPTI_SUCCESS;
}

SIM_EXPORT msptiResult msptiActivityPopExternalCorrelationId(msptiExternalCorrelationKind kind, uint64_t *lastId)
{
    sim_core_init();
    if (!ext_kind_ok((int)kind))
        return MSPTI_ERROR_INVALID_PARAMETER;
    struct ext_stacks *s = ext_get(false);
    if (!s || s->depth[kind] == 0)
        return MSPTI_ERROR_QUEUE_EMPTY;
    uint64_t id = s->ids[kind][--s->depth[kind]];
    if (lastId)
        *lastId = id;
    return MSPTI_SUCCESS;
}

void sim_ext_emit(uint64_t correlation_id)
{
    struct ext_stacks *s = t_ext;
    if (!s || !sim_kind_enabled(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION))
        return;
    for (int k = 1; k < EXT_KINDS; k++) {
        if (s->depth[k] == 0)
            continue;
        msptiActivityExternalCorrelation r = {.kind = MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                              .externalKind = k,
                                              .externalId = s->ids[k][s->depth[k] - 1],
                                              .correlationId = correlation_id};
        sim_append(&r, sizeof(r));
    }
}

void sim_ext_reset_thread(void)
{
    if (t_ext)
        memset(t_ext->depth, 0, sizeof(t_ext->depth));
}

/* ---- marker domains ---- */

static msptiResult domain_set(const char *name, bool disabled)
{
    sim_core_init();
    if (!name || strnlen(name, DOMAIN_NAME_MAX) >= DOMAIN_NAME_MAX)
        return MSPTI_ERROR_INVALID_PARAMETER;
    struct sim_domain *dom = sim_domain_get(name);
    if (!dom)
        return MSPTI_ERROR_INNER;
    atomic_store(&dom->disabled, disabled);
    return MSPTI_SUCCESS;
}

SIM_EXPORT msptiResult msptiActivityEnableMarkerDomain(const char *name) { return domain_set(name, false); }
SIM_EXPORT msptiResult msptiActivityDisableMarkerDomain(const char *name) { return domain_set(name, true); }

/* ---- callbacks ---- */

SIM_EXPORT msptiResult msptiEnableCallback(uint32_t enable, msptiSubscriberHandle subscriber,
                                           msptiCallbackDomain domain, msptiCallbackId cbid)
{
    sim_core_init();
    if (cbid > 63)
        return MSPTI_ERROR_INVALID_PARAMETER;
    return (msptiResult)sim_callback_enable(enable != 0, subscriber, (int)domain, (int)cbid);
}

SIM_EXPORT msptiResult msptiEnableDomain(uint32_t enable, msptiSubscriberHandle subscriber, msptiCallbackDomain domain)
{
    sim_core_init();
    return (msptiResult)sim_callback_enable(enable != 0, subscriber, (int)domain, -1);
}

SIM_EXPORT msptiResult msptiGetResultString(msptiResult result, const char **str)
{
    static const char *const texts[] = {
        "Success.", "One or more of the parameters is invalid.", "Multiple subscribers are not supported.",
        "The maximum limit is reached.", "The device is offline.", "The queue is empty.",
        "The operation requires LD_PRELOAD injection.", "MSPTI is not initialized.", "The kind is invalid.",
        "The parameter size is not sufficient.",
    };
    sim_core_init();
    /* Only the newest library (profile 26.1) has this function; one binary cannot hide a
     * symbol per profile, so older profiles answer INNER and leave *str alone, and consumers
     * take their own-table path (libmspti_minimal.so models the symbol's real absence). */
    if (sim_knobs()->profile < SIM_P261)
        return MSPTI_ERROR_INNER;
    if (!str)
        return MSPTI_ERROR_INVALID_PARAMETER;
    if (result == MSPTI_ERROR_INNER) {
        *str = "An unknown internal error has occurred.";
        return MSPTI_SUCCESS;
    }
    if ((int)result < 0 || (int)result > 9)
        return MSPTI_ERROR_INVALID_PARAMETER;
    *str = texts[result];
    return MSPTI_SUCCESS;
}
