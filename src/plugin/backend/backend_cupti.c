/* backend_cupti: CUPTI's activity buffer protocol behind the backend interface (docs/design/session.md#cupti-backend).
 * Requests come from whichever thread records activity, completions from CUPTI's worker
 * thread or from FlushAll callers; each completion walks its buffer with GetNextRecord
 * (stride from CUPTI, never assumed), converts records into batches and hands them to the
 * sink, which is attached under a rwlock taken shared once per buffer. The mon kinds we
 * serve map onto CUPTI kinds (docs/design/session.md#cupti-backend); one CUPTI kind can feed several mon kinds. */
#include "plugin/backend/backend_cupti.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "plugin/backend/bufpool.h"
#include "plugin/backend/cupti_record.h"

#define BC_BATCH 256 /* records per sink call, as the msPTI backend */
#define KBIT(k) (1u << (k))
#define CBIT(k) (1ull << (k))

struct backend_cupti {
    struct backend base;
    struct cupti_lib lib;
    uint32_t version;             /* cuptiGetVersion() */
    uint32_t enabled;             /* mon kinds on */
    uint64_t cupti_on;            /* CUPTI kinds on (bit 1ull << CUPTI kind) */
    bool started;
};

/* Process-wide, because CUPTI's buffer callbacks are. */
static struct {
    pthread_rwlock_t lock;        /* completions (shared) vs. attach/detach (exclusive) */
    struct backend_cupti *active;
    backend_sink_fn sink;
    void *ctx;
    struct cupti_conv conv;       /* written under the lock held exclusively */
    struct bufpool *pool;         /* created once, never freed: late completions return to it */
    _Atomic(uint8_t *) extra;     /* the one buffer beyond the cap for old CUPTI (docs/design/session.md#cupti-backend) */
    atomic_bool capped;           /* old CUPTI hit the cap: collection stopped */
    atomic_uint version;          /* the started instance's cuptiGetVersion() */
    _Atomic(cupti_abi_enable_fn *) disable; /* its cuptiActivityDisable, for the request path */
    atomic_uint_fast64_t declined, unknown, read_errors, vendor_dropped;
    struct log_ratelimit next_rl;
} bc = { .lock = PTHREAD_RWLOCK_INITIALIZER };
static pthread_once_t bc_pool_once = PTHREAD_ONCE_INIT;

static const int bc_cupti_kinds[] = {
    CUPTI_ABI_KIND_MEMCPY, CUPTI_ABI_KIND_MEMSET, CUPTI_ABI_KIND_DRIVER, CUPTI_ABI_KIND_RUNTIME,
    CUPTI_ABI_KIND_CONCURRENT_KERNEL, CUPTI_ABI_KIND_MARKER, CUPTI_ABI_KIND_MEMORY2,
};
#define BC_NKINDS (sizeof(bc_cupti_kinds) / sizeof(bc_cupti_kinds[0]))

static void bc_pool_create(void)
{
    if (bufpool_create(bufpool_default_size(), &bc.pool) != 0)
        bc.pool = NULL;
}

uint64_t backend_cupti_sources(uint32_t k)
{
    uint64_t c = 0;

    if (k & (KBIT(MON_KIND_KERNEL) | KBIT(MON_KIND_COMMUNICATION) | KBIT(MON_KIND_HCCL)))
        c |= CBIT(CUPTI_ABI_KIND_CONCURRENT_KERNEL);
    if (k & (KBIT(MON_KIND_ACL_API) | KBIT(MON_KIND_API)))
        c |= CBIT(CUPTI_ABI_KIND_RUNTIME);
    if (k & (KBIT(MON_KIND_RUNTIME_API) | KBIT(MON_KIND_API)))
        c |= CBIT(CUPTI_ABI_KIND_DRIVER);
    if (k & KBIT(MON_KIND_MEMCPY))
        c |= CBIT(CUPTI_ABI_KIND_MEMCPY);
    if (k & KBIT(MON_KIND_MEMSET))
        c |= CBIT(CUPTI_ABI_KIND_MEMSET);
    if (k & KBIT(MON_KIND_MEMORY))
        c |= CBIT(CUPTI_ABI_KIND_MEMORY2);
    if (k & KBIT(MON_KIND_MARKER))
        c |= CBIT(CUPTI_ABI_KIND_MARKER);
    return c;
}

/* ---- completion path (CUPTI threads) ---- */

static void bc_request(uint8_t **buf, size_t *size, size_t *max_records)
{
    cupti_abi_enable_fn *disable;

    *max_records = 0;
    *buf = bufpool_get(bc.pool, size); /* logs the decline, rate-limited */
    if (*buf)
        return;
    atomic_fetch_add_explicit(&bc.declined, 1, memory_order_relaxed);
    disable = atomic_load(&bc.disable);
    if (!disable || atomic_load(&bc.version) >= CUPTI_ABI_VERSION_DECLINE_OK)
        return; /* CUPTI ≥ 12.9 accepts a NULL buffer and counts the records it drops */
    /* Older CUPTI must never see NULL: stop collecting and hand out one last buffer. */
    if (!atomic_exchange(&bc.capped, true)) {
        LOG_ERROR("CUPTI buffer cap reached; collection stopped");
        for (size_t i = 0; i < BC_NKINDS; i++)
            (void)disable(bc_cupti_kinds[i]);
    }
    if (!atomic_load(&bc.extra)) {
        uint8_t *x = aligned_alloc(8, bufpool_default_size());
        uint8_t *expect = NULL;
        if (x && atomic_compare_exchange_strong(&bc.extra, &expect, x)) {
            *buf = x;
            *size = bufpool_default_size();
        } else {
            free(x);
        }
    }
}

/* Walk one buffer (docs/design/session.md#cupti-backend), batch by batch. bc.lock held shared. */
static void bc_consume(const struct cupti_lib *lib, uint8_t *buf, size_t valid)
{
    struct mon_record batch[BC_BATCH + CUPTI_RECORD_MAX_OUT];
    void *rec = NULL;
    uint64_t unknown = 0;
    size_t n = 0;
    int r;

    while ((r = lib->get_next_record(buf, valid, &rec)) == CUPTI_ABI_SUCCESS) {
        int got = cupti_record_convert(rec, &bc.conv, &batch[n]);
        if (got < 0) {
            unknown++; /* a kind we do not convert: CUPTI knows its stride, skip it */
            continue;
        }
        n += (size_t)got;
        if (n >= BC_BATCH) {
            bc.sink(bc.ctx, batch, n);
            n = 0;
        }
    }
    /* MAX_LIMIT_REACHED is the normal end; INVALID_KIND an early one (an unused tail). */
    if (r != CUPTI_ABI_ERROR_MAX_LIMIT_REACHED && r != CUPTI_ABI_ERROR_INVALID_KIND) {
        atomic_fetch_add_explicit(&bc.read_errors, 1, memory_order_relaxed);
        LOG_RL(&bc.next_rl, 10000, LOG_LVL_ERROR, "CUPTI GetNextRecord failed: %s (%d)",
               cupti_lib_result_name(r), r);
    }
    if (n)
        bc.sink(bc.ctx, batch, n);
    if (unknown)
        atomic_fetch_add_explicit(&bc.unknown, unknown, memory_order_relaxed);
}

static void bc_complete(void *ctx, uint32_t stream_id, uint8_t *buf, size_t size, size_t valid)
{
    uint8_t *extra = buf;

    (void)ctx; /* buffers are global: ctx NULL, stream 0 */
    (void)stream_id;
    (void)size;
    if (!buf)
        return;
    pthread_rwlock_rdlock(&bc.lock);
    if (bc.sink && valid > 0)
        bc_consume(&bc.active->lib, buf, valid);
    pthread_rwlock_unlock(&bc.lock);
    if (atomic_compare_exchange_strong(&bc.extra, &extra, NULL))
        free(buf); /* the buffer beyond the cap is not the pool's */
    else
        bufpool_put(bc.pool, buf);
}

/* ---- the interface ---- */

static struct backend_cupti *bc_of(struct backend *be)
{
    return (struct backend_cupti *)be;
}

static void bc_detach(void)
{
    pthread_rwlock_wrlock(&bc.lock);
    bc.active = NULL;
    bc.sink = NULL;
    bc.ctx = NULL;
    bc.conv.enabled = 0;
    atomic_store(&bc.disable, NULL);
    pthread_rwlock_unlock(&bc.lock);
}

/* Add what CUPTI dropped since the last call (it resets its count) to the session's. Never
 * called with bc.lock held: the call may complete buffers. */
static void bc_poll_dropped(struct backend_cupti *m)
{
    size_t n = 0;

    if (m->lib.get_num_dropped && m->lib.get_num_dropped(NULL, 0, &n) == CUPTI_ABI_SUCCESS && n > 0) {
        atomic_fetch_add_explicit(&bc.vendor_dropped, n, memory_order_relaxed);
        LOG_WARN("CUPTI dropped %zu records", n);
    }
}

static int bc_start(struct backend *be, backend_sink_fn sink, void *ctx)
{
    struct backend_cupti *m = bc_of(be);
    int r, rc = 0;

    pthread_once(&bc_pool_once, bc_pool_create);
    if (!bc.pool) {
        LOG_ERROR("CUPTI start failed: cannot create the buffer pool");
        rc = -ENOMEM;
        goto out;
    }
    if (m->started || bc.active) {
        rc = -EBUSY;
        goto out;
    }
    pthread_rwlock_wrlock(&bc.lock);
    bc.active = m;
    bc.sink = sink;
    bc.ctx = ctx;
    bc.conv.enabled = 0;
    bc.conv.callback_name = m->lib.get_callback_name;
    bc.conv.pid = (uint32_t)getpid();
    atomic_store(&bc.declined, 0);
    atomic_store(&bc.unknown, 0);
    atomic_store(&bc.read_errors, 0);
    atomic_store(&bc.vendor_dropped, 0);
    atomic_store(&bc.capped, false);
    atomic_store(&bc.version, m->version);
    atomic_store(&bc.disable, m->lib.disable);
    pthread_rwlock_unlock(&bc.lock);
    /* A second registration replaces another tool's process-wide (docs/design/session.md#cupti-backend): documented, not
     * detectable. */
    r = m->lib.register_callbacks(bc_request, bc_complete);
    if (r != CUPTI_ABI_SUCCESS) {
        LOG_ERROR("CUPTI start failed: cuptiActivityRegisterCallbacks returned %s (%d)",
                  cupti_lib_result_name(r), r);
        rc = -EIO;
        goto err_detach;
    }
    m->enabled = 0;
    m->cupti_on = 0;
    m->started = true;
    goto out;

err_detach:
    bc_detach();
out:
    return rc;
}

static int bc_set_kinds(struct backend *be, uint32_t want, uint32_t *ret_enabled)
{
    struct backend_cupti *m = bc_of(be);
    uint64_t need, on = m->cupti_on;
    uint32_t enabled = 0;

    if (!m->started)
        return -ENOENT;
    need = backend_cupti_sources(want);
    for (size_t i = 0; i < BC_NKINDS; i++) {
        int c = bc_cupti_kinds[i];
        if ((need & CBIT(c)) && !(on & CBIT(c))) {
            int r = m->lib.enable(c);
            if (r == CUPTI_ABI_SUCCESS)
                on |= CBIT(c);
            else
                LOG_ERROR("CUPTI cuptiActivityEnable(%d) failed: %s (%d)", c, cupti_lib_result_name(r), r);
        } else if (!(need & CBIT(c)) && (on & CBIT(c))) {
            int r = m->lib.disable(c);
            if (r != CUPTI_ABI_SUCCESS)
                LOG_WARN("CUPTI cuptiActivityDisable(%d) failed: %s (%d)", c, cupti_lib_result_name(r), r);
            on &= ~CBIT(c);
        }
    }
    /* A mon kind is on when one of its CUPTI sources is (API has two). */
    for (int k = 1; k < MON_KIND_LIMIT; k++) {
        if (!(want & KBIT(k)))
            continue;
        if (k == MON_KIND_NODE_API) {
            if (!(m->enabled & KBIT(k)))
                LOG_INFO("NodeAPI has no source on CUDA: enabled, it never produces records");
            enabled |= KBIT(k);
        } else if (backend_cupti_sources(KBIT(k)) & on) {
            enabled |= KBIT(k);
        }
    }
    pthread_rwlock_wrlock(&bc.lock);
    bc.conv.enabled = enabled;
    pthread_rwlock_unlock(&bc.lock);
    m->cupti_on = on;
    m->enabled = enabled;
    *ret_enabled = enabled;
    return 0;
}

static int bc_flush(struct backend *be)
{
    struct backend_cupti *m = bc_of(be);
    int r;

    if (!m->started)
        return -ENOENT;
    /* Report tick: FlushAll(0) completes the buffers that hold records; the forced flag is
     * for stop, where half-filled buffers must come back too. */
    r = m->lib.flush_all(0);
    bc_poll_dropped(m);
    return r == CUPTI_ABI_SUCCESS ? 0 : -EIO;
}

static void bc_stop(struct backend *be)
{
    struct backend_cupti *m = bc_of(be);

    if (!m->started)
        return;
    for (size_t i = 0; i < BC_NKINDS; i++)
        if (m->cupti_on & CBIT(bc_cupti_kinds[i]))
            (void)m->lib.disable(bc_cupti_kinds[i]);
    (void)m->lib.flush_all(CUPTI_ABI_FLUSH_FORCED);
    bc_poll_dropped(m);
    bc_detach();
    m->enabled = 0;
    m->cupti_on = 0;
    m->started = false;
}

static void bc_drops(const struct backend *be, struct backend_drops *ret)
{
    (void)be;
    memset(ret, 0, sizeof(*ret));
    ret->buffers_declined = atomic_load_explicit(&bc.declined, memory_order_relaxed);
    ret->unknown_kind = atomic_load_explicit(&bc.unknown, memory_order_relaxed);
    ret->read_errors = atomic_load_explicit(&bc.read_errors, memory_order_relaxed);
    ret->vendor_dropped = atomic_load_explicit(&bc.vendor_dropped, memory_order_relaxed);
}

static void bc_destroy(struct backend *be)
{
    if (!be)
        return;
    bc_stop(be);
    free(bc_of(be));
}

static const struct backend_ops backend_cupti_ops = {
    .name = "cupti", .start = bc_start, .set_kinds = bc_set_kinds, .flush = bc_flush,
    .stop = bc_stop, .drops = bc_drops, .destroy = bc_destroy,
};

int backend_cupti_create_from(const struct cupti_lib *lib, struct backend **ret)
{
    struct backend_cupti *m = calloc(1, sizeof(*m));
    int rc = 0;

    if (!m) {
        rc = -ENOMEM;
        goto out;
    }
    m->base.ops = &backend_cupti_ops;
    m->base.library = m->lib.path;
    m->lib = *lib;
    if (m->lib.get_version(&m->version) != CUPTI_ABI_SUCCESS)
        m->version = 0; /* unknown: treat as old, never decline a request */
    *ret = &m->base;
out:
    return rc;
}

int backend_cupti_create_quiet(struct backend **ret, bool quiet)
{
    struct cupti_lib *lib = malloc(sizeof(*lib));
    int rc;

    if (!lib)
        return -ENOMEM;
    rc = cupti_lib_load(lib, quiet);
    if (rc == 0)
        rc = backend_cupti_create_from(lib, ret);
    free(lib);
    return rc;
}

int backend_cupti_create(struct backend **ret)
{
    return backend_cupti_create_quiet(ret, false);
}

const struct backend_impl backend_cupti_impl = { "cupti", backend_cupti_create_quiet };
