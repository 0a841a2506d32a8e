/* sim_core: the consumer buffer path and its threads. One mutex guards the current buffer,
 * the queue of full buffers and the counters; the append path is a bounds check + memcpy
 * under it (no malloc, no syscall per record). Full buffers are completed on new short-lived
 * threads started by the ActivityManager thread, exactly like the real library (docs/design/mspti.md#runtime-semantics). */
#include "sim/sim_core.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/thr.h"
#include "sim/sim_dump.h"

struct full_buf {
    uint8_t *buf;
    size_t size, valid;
    struct full_buf *next;
};

struct msptiSubscriber_st {
    int magic;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cv_mgr;      /* manager wake: buffer full, period change, stop */
    pthread_cond_t cv_done;     /* a completion thread finished */
    struct sim_knobs k;
    /* subscription (guarded by lock; `subscribed` also read lock-free) */
    _Atomic bool subscribed;
    struct msptiSubscriber_st handle;
    msptiCallbackFunc cb;
    void *cb_user;
    _Atomic uint64_t cb_mask[3];        /* bit cbid per domain */
    _Atomic uint32_t enabled;           /* bit per kind */
    /* buffers */
    msptiBuffersCallbackRequestFunc req;
    msptiBuffersCallbackCompleteFunc done;
    bool mgr_started;
    uint32_t period_ms;
    uint64_t period_gen;                /* bumped when the wake period changes */
    uint8_t *cur;
    size_t cur_size, cur_limit, cur_rot, cur_valid;
    struct full_buf *q_head, *q_tail;
    uint64_t null_pending;
    unsigned outstanding;               /* completion threads running */
    uint64_t seen;                      /* records offered (drop injection) */
    uint64_t rng;
    bool warned_small;
    struct mssim_stats st;
    _Atomic uint64_t suppressed;
} g = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .cv_mgr = PTHREAD_COND_INITIALIZER,
    .cv_done = PTHREAD_COND_INITIALIZER,
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
_Atomic bool sim_core_g_ready; /* init_once has run (mssim_reset keeps it: knobs are reloaded in place) */

static void at_exit_report(void)
{
    pthread_mutex_lock(&g.lock);
    uint64_t nofit = g.st.records_dropped_nofit, declined = g.st.records_dropped_declined;
    pthread_mutex_unlock(&g.lock);
    if (nofit + declined > 0)
        sim_log(SIM_WARN, "%llu records were dropped (%llu did not fit, %llu while buffers were declined)",
                (unsigned long long)(nofit + declined), (unsigned long long)nofit, (unsigned long long)declined);
    sim_dump_flush();
}

static void init_once(void)
{
    sim_knobs_load(&g.k);
    g.rng = g.k.seed ? g.k.seed : 1;
    sim_dump_open(g.k.dump_path);
    atexit(at_exit_report);
    sim_log(SIM_INFO, "libmspti.so simulator loaded (profile max kind %d)", g.k.max_kind);
    atomic_store_explicit(&sim_core_g_ready, true, memory_order_release);
}

void sim_core_init(void) { pthread_once(&g_once, init_once); }
const struct sim_knobs *sim_knobs(void) { return &g.k; }

/* ---------------- subscription, kinds, callbacks ---------------- */

bool sim_subscribed(void) { return atomic_load_explicit(&g.subscribed, memory_order_relaxed); }

bool sim_kind_enabled(int kind)
{
    if (kind < 1 || kind > 31)
        return false;
    return (atomic_load_explicit(&g.enabled, memory_order_relaxed) >> kind) & 1u;
}

void sim_kind_set(int kind, bool on)
{
    if (on) {
        atomic_fetch_or(&g.enabled, 1u << kind);
        return;
    }
    /* Under the buffer lock: an append that already checked the kind finishes first. */
    pthread_mutex_lock(&g.lock);
    atomic_fetch_and(&g.enabled, ~(1u << kind));
    pthread_mutex_unlock(&g.lock);
}

bool sim_kind_produces(int kind)
{
    if (!sim_kind_enabled(kind))
        return false;
    if (kind >= MSPTI_ACTIVITY_KIND_HCCL && kind <= MSPTI_ACTIVITY_KIND_MEMCPY && g.k.profile < SIM_P260)
        return !g.k.check_preload || g.k.preload_ok;
    return true;
}

SIM_EXPORT msptiResult msptiSubscribe(msptiSubscriberHandle *subscriber, msptiCallbackFunc callback, void *userdata)
{
    msptiResult rc = MSPTI_SUCCESS;
    sim_core_init();
    if (!subscriber)
        return MSPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&g.lock);
    if (atomic_load(&g.subscribed)) {
        rc = MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
        goto out;
    }
    g.cb = callback;
    g.cb_user = userdata;
    for (int d = 0; d < 3; d++)
        atomic_store(&g.cb_mask[d], 0);
    atomic_store(&g.subscribed, true);
    *subscriber = &g.handle;
    sim_log(SIM_INFO, "subscribed");
out:
    pthread_mutex_unlock(&g.lock);
    return rc;
}

SIM_EXPORT msptiResult msptiUnsubscribe(msptiSubscriberHandle subscriber)
{
    msptiResult rc = MSPTI_SUCCESS;
    sim_core_init();
    pthread_mutex_lock(&g.lock);
    if (!atomic_load(&g.subscribed))
        goto out;
    if (subscriber != &g.handle) {
        rc = MSPTI_ERROR_INVALID_PARAMETER;
        goto out;
    }
    /* Stops recording; neither disables kinds nor flushes buffers (docs/design/mspti.md#runtime-semantics). */
    atomic_store(&g.subscribed, false);
    g.cb = NULL;
    g.cb_user = NULL;
    for (int d = 0; d < 3; d++)
        atomic_store(&g.cb_mask[d], 0);
out:
    pthread_mutex_unlock(&g.lock);
    return rc;
}

int sim_callback_enable(bool on, msptiSubscriberHandle h, int domain, int cbid)
{
    int rc = MSPTI_SUCCESS;
    pthread_mutex_lock(&g.lock);
    if (!atomic_load(&g.subscribed) || h != &g.handle || domain < MSPTI_CB_DOMAIN_RUNTIME ||
        domain > MSPTI_CB_DOMAIN_HCCL) {
        rc = MSPTI_ERROR_INVALID_PARAMETER;
        goto out;
    }
    int size = domain == MSPTI_CB_DOMAIN_RUNTIME ? MSPTI_CBID_RUNTIME_SIZE : MSPTI_CBID_HCCL_SIZE;
    if (cbid >= 0 && (cbid == 0 || cbid >= size)) {  /* cbid < 0: whole domain */
        rc = MSPTI_ERROR_INVALID_PARAMETER;
        goto out;
    }
    if (g.k.profile >= SIM_P260 && g.k.check_preload && !g.k.preload_ok) {
        rc = MSPTI_ERROR_WITHOUT_LD_PRELOAD;
        goto out;
    }
    uint64_t bits = cbid < 0 ? ((1ull << size) - 2) : (1ull << cbid);
    if (on)
        atomic_fetch_or(&g.cb_mask[domain], bits);
    else
        atomic_fetch_and(&g.cb_mask[domain], ~bits);
out:
    pthread_mutex_unlock(&g.lock);
    return rc;
}

void sim_callback(int domain, uint32_t cbid, int site, const char *function_name)
{
    if (cbid >= 64 || !((atomic_load_explicit(&g.cb_mask[domain], memory_order_relaxed) >> cbid) & 1u))
        return;
    pthread_mutex_lock(&g.lock);
    msptiCallbackFunc cb = g.cb;
    void *ud = g.cb_user;
    pthread_mutex_unlock(&g.lock);
    if (!cb)
        return;
    msptiCallbackData d;
    memset(&d, 0, sizeof(d));
    d.callbackSite = (msptiApiCallbackSite)site;
    d.functionName = function_name;
    cb(ud, (msptiCallbackDomain)domain, cbid, &d);
}

/* ---------------- completion threads and the ActivityManager ---------------- */

static void complete_one(msptiBuffersCallbackCompleteFunc done, struct full_buf *fb)
{
    done(fb->buf, fb->size, fb->valid);
    pthread_mutex_lock(&g.lock);
    if (fb->buf)
        g.st.buffers_completed++;
    else
        g.st.null_completions++;
    pthread_mutex_unlock(&g.lock);
    free(fb);
}

struct completion_job {
    msptiBuffersCallbackCompleteFunc done;
    struct full_buf *fb;
};

static void *completion_main(void *arg)
{
    struct completion_job *job = arg;
    complete_one(job->done, job->fb);
    free(job);
    pthread_mutex_lock(&g.lock);
    g.outstanding--;
    pthread_cond_broadcast(&g.cv_done);
    pthread_mutex_unlock(&g.lock);
    return NULL;
}

/* Take the queued full buffers and, if any, one coalesced NULL completion. Lock held. */
static struct full_buf *take_queue_locked(void)
{
    struct full_buf *list = g.q_head;
    g.q_head = g.q_tail = NULL;
    if (g.null_pending > 0) {
        g.null_pending = 0;
        struct full_buf *nb = calloc(1, sizeof(*nb));
        if (nb) {
            nb->next = list;
            list = nb;
        }
    }
    return list;
}

static void *manager_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "ActivityManager");
    pthread_mutex_lock(&g.lock);
    for (;;) {
        uint64_t ms = g.period_ms ? g.period_ms : g.k.wake_ms;
        uint64_t gen = g.period_gen;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (ms % 1000) * 1000000ull;
        ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        while (!g.q_head && gen == g.period_gen) {
            if (pthread_cond_timedwait(&g.cv_mgr, &g.lock, &ts) == ETIMEDOUT)
                break;
        }
        /* A new FlushPeriod (or a reset's wake period) applies now, not after the old one. */
        if (!g.q_head && gen != g.period_gen)
            continue;
        msptiBuffersCallbackCompleteFunc done = g.done;
        if (!done)
            continue;
        struct full_buf *list = take_queue_locked();
        /* Count the whole batch as outstanding before the first thread starts: FlushAll waits
         * for outstanding == 0, which must not happen while buffers are still in our hands. */
        for (struct full_buf *fb = list; fb; fb = fb->next)
            g.outstanding++;
        while (list) {
            struct full_buf *fb = list;
            list = list->next;
            struct completion_job *job = malloc(sizeof(*job));
            pthread_t t;
            if (job) {
                job->done = done;
                job->fb = fb;
                pthread_mutex_unlock(&g.lock);
                int rc = thr_start(&t, "mssim-complete", completion_main, job, THR_DETACHED);
                pthread_mutex_lock(&g.lock);
                if (rc == 0)
                    continue;
                free(job);
            }
            /* No thread: complete on the manager thread rather than lose the buffer. */
            pthread_mutex_unlock(&g.lock);
            complete_one(done, fb);
            pthread_mutex_lock(&g.lock);
            g.outstanding--;
            pthread_cond_broadcast(&g.cv_done);
        }
    }
    return NULL;
}

SIM_EXPORT msptiResult msptiActivityRegisterCallbacks(msptiBuffersCallbackRequestFunc funcBufferRequested,
                                                      msptiBuffersCallbackCompleteFunc funcBufferCompleted)
{
    msptiResult rc = MSPTI_SUCCESS;
    sim_core_init();
    if (!funcBufferRequested || !funcBufferCompleted)
        return MSPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&g.lock);
    g.req = funcBufferRequested;
    g.done = funcBufferCompleted;
    if (!g.mgr_started) {
        pthread_t t;
        if (thr_start(&t, "mssim-manager", manager_main, NULL, THR_DETACHED) != 0) {
            rc = MSPTI_ERROR_INNER;
            goto out;
        }
        g.mgr_started = true;
    }
out:
    pthread_mutex_unlock(&g.lock);
    return rc;
}

SIM_EXPORT msptiResult msptiActivityFlushPeriod(uint32_t time)
{
    sim_core_init();
    pthread_mutex_lock(&g.lock);
    g.period_ms = time;
    g.period_gen++;
    pthread_cond_broadcast(&g.cv_mgr);
    pthread_mutex_unlock(&g.lock);
    return MSPTI_SUCCESS;
}

/* Synchronous: queued full buffers in the caller's thread, then join outstanding completion
 * threads, then the current partial buffer whatever its validSize (docs/design/mspti.md#runtime-semantics). */
static void flush_all(void)
{
    pthread_mutex_lock(&g.lock);
    msptiBuffersCallbackCompleteFunc done = g.done;
    if (!done) {
        pthread_mutex_unlock(&g.lock);
        return;
    }
    struct full_buf *list = take_queue_locked();
    pthread_mutex_unlock(&g.lock);
    while (list) {
        struct full_buf *fb = list;
        list = list->next;
        complete_one(done, fb);
    }
    pthread_mutex_lock(&g.lock);
    while (g.outstanding > 0)
        pthread_cond_wait(&g.cv_done, &g.lock);
    struct full_buf *cur = NULL;
    if (g.cur) {
        cur = malloc(sizeof(*cur));
        if (cur) {
            cur->buf = g.cur;
            cur->size = g.cur_size;
            cur->valid = g.cur_valid;
            cur->next = NULL;
            g.cur = NULL;
        }
    }
    pthread_mutex_unlock(&g.lock);
    if (cur)
        complete_one(done, cur);
}

SIM_EXPORT msptiResult msptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    sim_core_init();
    flush_all();
    sim_dump_flush();
    return MSPTI_SUCCESS;
}

/* ---------------- append path ---------------- */

static void queue_current_locked(void)
{
    struct full_buf *fb = malloc(sizeof(*fb));
    if (!fb) {
        /* Cannot queue: keep appending into it (no-fit drops) rather than leak the buffer. */
        return;
    }
    fb->buf = g.cur;
    fb->size = g.cur_size;
    fb->valid = g.cur_valid;
    fb->next = NULL;
    if (g.q_tail)
        g.q_tail->next = fb;
    else
        g.q_head = fb;
    g.q_tail = fb;
    g.cur = NULL;
    pthread_cond_signal(&g.cv_mgr);
}

/* Request a buffer; false when declined (or nobody registered). Lock held. */
static bool request_locked(void)
{
    uint8_t *buf = NULL;
    size_t size = 0, maxn = 0;
    if (!g.req)
        return false;
    g.req(&buf, &size, &maxn);
    g.st.buffers_requested++;
    if (!buf || size == 0) {
        g.st.buffers_declined++;
        if (g.k.null_completions)
            g.null_pending++;
        return false;
    }
    if (size < 2u * 1024 * 1024 && !g.warned_small) {
        g.warned_small = true;
        sim_log(SIM_WARN, "buffer of %zu bytes is smaller than 2 MiB; 8 MiB is customary", size);
    }
    g.cur = buf;
    g.cur_size = size;
    g.cur_limit = g.k.buffer_limit && g.k.buffer_limit < size ? (size_t)g.k.buffer_limit : size;
    g.cur_rot = (g.cur_limit / 5) * 4 + ((g.cur_limit % 5) * 4 + 4) / 5;   /* ceil(0.8 x limit) */
    g.cur_valid = 0;
    return true;
}

static bool inject_drop_locked(void)
{
    g.seen++;
    if (g.k.drop_every && g.seen % g.k.drop_every == 0)
        return true;
    if (g.k.drop_rate > 0) {
        g.rng ^= g.rng << 13;
        g.rng ^= g.rng >> 7;
        g.rng ^= g.rng << 17;
        if ((double)(g.rng >> 11) * (1.0 / 9007199254740992.0) < g.k.drop_rate)
            return true;
    }
    return false;
}

static inline void append_locked(const void *rec, size_t size)
{
    if ((g.k.drop_every || g.k.drop_rate > 0) && inject_drop_locked()) {
        g.st.records_dropped_injected++;
        return;
    }
    if (g.cur && g.cur_valid >= g.cur_rot)
        queue_current_locked();
    if (!g.cur && !request_locked()) {
        g.st.records_dropped_declined++;
        return;
    }
    if (size > g.cur_limit - g.cur_valid) {
        g.st.records_dropped_nofit++;
        return;
    }
    memcpy(g.cur + g.cur_valid, rec, size);
    g.cur_valid += size;
    g.st.records_appended++;
    if (sim_dump_enabled())
        sim_dump_record(rec, size);
}

void sim_append(const void *rec, size_t size)
{
    int32_t kind;
    if (!sim_subscribed())
        return;
    memcpy(&kind, rec, sizeof(kind));
    pthread_mutex_lock(&g.lock);
    if (sim_kind_enabled(kind))
        append_locked(rec, size);
    pthread_mutex_unlock(&g.lock);
}

void sim_append_raw(const void *rec, size_t size)
{
    if (!sim_subscribed())
        return;
    pthread_mutex_lock(&g.lock);
    append_locked(rec, size);
    pthread_mutex_unlock(&g.lock);
}

uint64_t sim_append_bulk(const void *const *tmpls, const size_t *sizes, size_t ntmpl, uint64_t n)
{
    uint64_t done = 0, appended0;
    size_t t = 0;
    pthread_mutex_lock(&g.lock);
    appended0 = g.st.records_appended;
    while (done < n && sim_subscribed()) {
        /* Hold the lock for a bounded batch so other producers and the manager get in. */
        uint64_t batch_end = done + 16384 < n ? done + 16384 : n;
        bool slow = g.k.drop_every || g.k.drop_rate > 0 || sim_dump_enabled();
        while (done < batch_end) {
            if (slow || !g.cur || g.cur_valid >= g.cur_rot || sizes[t] > g.cur_limit - g.cur_valid) {
                append_locked(tmpls[t], sizes[t]);
                done++;
                t = t + 1 == ntmpl ? 0 : t + 1;
                continue;
            }
            uint8_t *dst = g.cur + g.cur_valid;
            size_t valid = g.cur_valid, rot = g.cur_rot, limit = g.cur_limit;
            uint64_t k = 0;
            while (done + k < batch_end && valid < rot && sizes[t] <= limit - valid) {
                memcpy(dst, tmpls[t], sizes[t]);
                dst += sizes[t];
                valid += sizes[t];
                k++;
                t = t + 1 == ntmpl ? 0 : t + 1;
            }
            g.cur_valid = valid;
            g.st.records_appended += k;
            done += k;
        }
        pthread_mutex_unlock(&g.lock);
        pthread_mutex_lock(&g.lock);
    }
    uint64_t appended = g.st.records_appended - appended0;
    pthread_mutex_unlock(&g.lock);
    return appended;
}

/* ---------------- stats and reset ---------------- */

void sim_stats_add_suppressed(void) { atomic_fetch_add(&g.suppressed, 1); }

void sim_core_get_stats(struct mssim_stats *out)
{
    pthread_mutex_lock(&g.lock);
    *out = g.st;
    pthread_mutex_unlock(&g.lock);
    out->records_suppressed_domain = atomic_load(&g.suppressed);
}

void sim_core_reset(void)
{
    flush_all();
    sim_dump_flush();
    pthread_mutex_lock(&g.lock);
    atomic_store(&g.subscribed, false);
    g.cb = NULL;
    g.cb_user = NULL;
    for (int d = 0; d < 3; d++)
        atomic_store(&g.cb_mask[d], 0);
    atomic_store(&g.enabled, 0);
    g.req = NULL;
    g.done = NULL;
    g.period_ms = 0;
    g.null_pending = 0;
    g.seen = 0;
    g.warned_small = false;
    memset(&g.st, 0, sizeof(g.st));
    atomic_store(&g.suppressed, 0);
    sim_knobs_load(&g.k);
    g.rng = g.k.seed ? g.k.seed : 1;
    sim_dump_open(g.k.dump_path);
    g.period_gen++;
    pthread_cond_broadcast(&g.cv_mgr);
    pthread_mutex_unlock(&g.lock);
}
