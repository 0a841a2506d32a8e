/* backend_mspti: msPTI's buffer protocol behind the backend interface. Requests come from the
 * threads that record activities, completions from msPTI's completion threads (several at
 * once); each completion walks its buffer to the end on its own thread (msPTI keeps a
 * per-thread cursor, docs/design/mspti.md#runtime-semantics), converts records into batches and hands them to
 * the sink. The sink is attached under a rwlock taken shared once per buffer, so stop() can
 * detach it while late completions are still possible. */
#include "plugin/backend/backend_mspti.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "plugin/backend/bufpool.h"
#include "plugin/backend/mspti_record.h"

#define BM_BATCH 256 /* records per sink call: the filter reads its snapshot once per batch */

struct backend_mspti {
    struct backend base;
    struct mspti_lib lib;
    msptiSubscriberHandle sub;
    uint32_t enabled;             /* kinds on (bit 1u << kind) */
    bool started;
};

/* Process-wide, because msPTI's callbacks are: they carry no user data. */
static struct {
    pthread_rwlock_t lock;        /* completions (shared) vs. attach/detach (exclusive) */
    struct backend_mspti *active; /* started instance, NULL when detached */
    backend_sink_fn sink;
    void *ctx;
    struct bufpool *pool;         /* created once, never freed: late completions return to it */
    atomic_uint_fast64_t declined, unknown, read_errors;
    struct log_ratelimit next_rl;
} bm = { .lock = PTHREAD_RWLOCK_INITIALIZER };
static pthread_once_t bm_pool_once = PTHREAD_ONCE_INIT;

static void bm_pool_create(void)
{
    if (bufpool_create(bufpool_default_size(), &bm.pool) != 0)
        bm.pool = NULL;
}

/* ---- completion path (msPTI threads) ---- */

static void bm_request(uint8_t **buf, size_t *size, size_t *max_records)
{
    *max_records = 0;
    *buf = bufpool_get(bm.pool, size); /* logs the decline, rate-limited (docs/design/mspti.md#runtime-semantics) */
    if (!*buf)
        atomic_fetch_add_explicit(&bm.declined, 1, memory_order_relaxed);
}

/* Walk one buffer (docs/design/mspti.md#runtime-semantics), batch by batch. bm.lock held shared. */
static void bm_consume(const struct mspti_lib *lib, uint8_t *buf, size_t valid)
{
    struct mon_record batch[BM_BATCH];
    __typeof__(msptiActivityGetNextRecord) *next = lib->get_next_record;
    msptiActivity *rec = NULL;
    uint64_t unknown = 0;
    msptiResult r;
    size_t n = 0;

    while ((r = next(buf, valid, &rec)) == MSPTI_SUCCESS) {
        if (mon_record_from_mspti(rec, &batch[n]) != 0) {
            unknown++; /* a kind we do not know: its stride is msPTI's business, skip it */
            continue;
        }
        if (++n == BM_BATCH) {
            bm.sink(bm.ctx, batch, n);
            n = 0;
        }
    }
    if (r != MSPTI_ERROR_MAX_LIMIT_REACHED) {
        atomic_fetch_add_explicit(&bm.read_errors, 1, memory_order_relaxed);
        LOG_RL(&bm.next_rl, 10000, LOG_LVL_ERROR, "MsptiMonitor GetNextRecord failed: %s (%d)",
               mspti_lib_result_name(r), (int)r);
        rec = NULL;
        (void)next(buf, 0, &rec); /* resets msPTI's thread-local cursor */
    }
    if (n)
        bm.sink(bm.ctx, batch, n);
    if (unknown)
        atomic_fetch_add_explicit(&bm.unknown, unknown, memory_order_relaxed);
}

static void bm_complete(uint8_t *buf, size_t size, size_t valid)
{
    (void)size;
    if (!buf)
        return; /* a declined request being completed */
    pthread_rwlock_rdlock(&bm.lock);
    if (bm.sink && valid > 0) {
        mon_cpu_buffer_begin(); /* the session's consumer CPU, timed once per buffer */
        bm_consume(&bm.active->lib, buf, valid);
        mon_cpu_buffer_end();
    }
    pthread_rwlock_unlock(&bm.lock);
    bufpool_put(bm.pool, buf); /* always, also for empty buffers (D4) */
}

/* ---- the interface ---- */

static struct backend_mspti *bm_of(struct backend *be)
{
    return (struct backend_mspti *)be; /* base is the first member */
}

static void bm_detach(void)
{
    pthread_rwlock_wrlock(&bm.lock);
    bm.active = NULL;
    bm.sink = NULL;
    bm.ctx = NULL;
    pthread_rwlock_unlock(&bm.lock);
}

static int bm_start(struct backend *be, backend_sink_fn sink, void *ctx)
{
    struct backend_mspti *m = bm_of(be);
    msptiResult r;
    int rc = 0;

    pthread_once(&bm_pool_once, bm_pool_create);
    if (!bm.pool) {
        LOG_ERROR("MsptiMonitor start failed: cannot create the buffer pool");
        rc = -ENOMEM;
        goto out;
    }
    if (m->started || bm.active) {
        rc = -EBUSY; /* one msPTI subscriber per process */
        goto out;
    }
    r = m->lib.subscribe(&m->sub, NULL, NULL);
    if (r != MSPTI_SUCCESS) {
        LOG_ERROR("MsptiMonitor start failed: msptiSubscribe returned %s", mspti_lib_result_name(r));
        rc = -EBUSY;
        goto out;
    }
    pthread_rwlock_wrlock(&bm.lock);
    bm.active = m;
    bm.sink = sink;
    bm.ctx = ctx;
    atomic_store(&bm.declined, 0);
    atomic_store(&bm.unknown, 0);
    atomic_store(&bm.read_errors, 0);
    pthread_rwlock_unlock(&bm.lock);
    r = m->lib.register_callbacks(bm_request, bm_complete);
    if (r != MSPTI_SUCCESS) {
        LOG_ERROR("MsptiMonitor start failed: msptiActivityRegisterCallbacks returned %s",
                  mspti_lib_result_name(r));
        rc = -EIO;
        goto err_detach;
    }
    m->enabled = 0;
    m->started = true;
    goto out;

err_detach:
    bm_detach();
    (void)m->lib.unsubscribe(m->sub);
    m->sub = NULL;
out:
    return rc;
}

static int bm_set_kinds(struct backend *be, uint32_t want, uint32_t *ret_enabled)
{
    struct backend_mspti *m = bm_of(be);
    uint32_t enabled = m->enabled;

    if (!m->started)
        return -ENOENT;
    for (int k = 1; k < MON_KIND_LIMIT; k++) {
        uint32_t bit = 1u << k;
        msptiResult r;
        if (k == MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)
            continue;
        if ((want & bit) && !(enabled & bit)) {
            r = m->lib.enable((msptiActivityKind)k);
            if (r == MSPTI_SUCCESS)
                enabled |= bit;
            else
                LOG_ERROR("MsptiMonitor enableActivity failed, kind: %s (%s)%s", mon_kind_name(k),
                          mspti_lib_result_name(r),
                          r == MSPTI_ERROR_WITHOUT_LD_PRELOAD
                              ? "; this kind needs libmspti.so in LD_PRELOAD (CANN < 9.0.0, see FAQ)"
                              : "");
        } else if (!(want & bit) && (enabled & bit)) {
            r = m->lib.disable((msptiActivityKind)k);
            if (r != MSPTI_SUCCESS)
                LOG_WARN("MsptiMonitor disableActivity failed, kind: %s (%s)", mon_kind_name(k),
                         mspti_lib_result_name(r));
            enabled &= ~bit; /* no longer wanted either way */
        }
    }
    m->enabled = enabled;
    *ret_enabled = enabled;
    return 0;
}

static int bm_flush(struct backend *be)
{
    struct backend_mspti *m = bm_of(be);
    msptiResult r;

    if (!m->started)
        return -ENOENT;
    r = m->lib.flush_all(1);
    return r == MSPTI_SUCCESS ? 0 : -EIO;
}

static void bm_stop(struct backend *be)
{
    struct backend_mspti *m = bm_of(be);

    if (!m->started)
        return;
    /* docs/design/session.md#session-life-cycle: no new records, then everything produced so far reaches the sink, then detach. */
    for (int k = 1; k < MON_KIND_LIMIT; k++)
        if (m->enabled & (1u << k))
            (void)m->lib.disable((msptiActivityKind)k);
    (void)m->lib.flush_all(1);
    (void)m->lib.unsubscribe(m->sub);
    bm_detach();
    m->sub = NULL;
    m->enabled = 0;
    m->started = false;
}

static void bm_drops(const struct backend *be, struct backend_drops *ret)
{
    (void)be; /* one instance at a time: the counters are the callbacks' */
    memset(ret, 0, sizeof(*ret));
    ret->buffers_declined = atomic_load_explicit(&bm.declined, memory_order_relaxed);
    ret->unknown_kind = atomic_load_explicit(&bm.unknown, memory_order_relaxed);
    ret->read_errors = atomic_load_explicit(&bm.read_errors, memory_order_relaxed);
}

static void bm_destroy(struct backend *be)
{
    if (!be)
        return;
    bm_stop(be);
    free(bm_of(be));
}

static const struct backend_ops backend_mspti_ops = {
    .name = "mspti", .start = bm_start, .set_kinds = bm_set_kinds, .flush = bm_flush,
    .stop = bm_stop, .drops = bm_drops, .destroy = bm_destroy,
};

int backend_mspti_create_from(const struct mspti_lib *lib, struct backend **ret)
{
    struct backend_mspti *m = calloc(1, sizeof(*m));

    if (!m)
        return -ENOMEM;
    m->base.ops = &backend_mspti_ops;
    m->lib = *lib;
    m->base.library = m->lib.path;
    if (m->lib.disable_marker_domain)
        (void)m->lib.disable_marker_domain("communication"); /* hide HCCL's internal markers (docs/design/mspti.md#library-facts) */
    *ret = &m->base;
    return 0;
}

int backend_mspti_create(struct backend **ret)
{
    struct mspti_lib *lib = malloc(sizeof(*lib)); /* ~4 KiB of path: not on the caller's stack */
    int rc;

    if (!lib)
        return -ENOMEM;
    rc = mspti_lib_load(lib);
    if (rc == 0)
        rc = backend_mspti_create_from(lib, ret);
    free(lib);
    return rc;
}

static int mspti_impl_create(struct backend **ret, bool quiet)
{
    (void)quiet; /* msPTI is the default: not finding it is always worth its line */
    return backend_mspti_create(ret);
}

const struct backend_impl backend_mspti_impl = { "mspti", mspti_impl_create };
