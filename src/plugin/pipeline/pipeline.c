/* pipeline: the per-session stage every output shares. The completion path filters and cuts
 * in place, feeds markers to the one pairing (markpair), notes devices and counts, then hands
 * each of the session's outputs one pl_batch per slice of records (or, with a trace window,
 * the window stage holds them until the session's end). Also the string pool the outputs
 * share. */
#include "plugin/pipeline/pipeline.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/jw.h"
#include "common/log.h"
#include "common/strutil.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/filter.h"
#include "plugin/pipeline/markpair.h"
#include "plugin/pipeline/window.h"

#define PL_WINDOW 256                      /* records per output call: bounds the range array */
#define PL_MAX_OUTPUTS OUTPUT_MAX          /* outputs one session fans out to: each row once */
#define PL_FAST_DEVICES 256
#define PL_SLOW_DEVICES 64
#define PL_MIN_AGE_NS (300ull * 1000000000ull) /* incomplete ids live at least this long */
#define PL_EXPIRE_EVERY_NS 1000000000ull
#define PL_CACHE_LINE 64 /* see struct pipeline */

struct pipeline {
    const struct output_ops *ops[PL_MAX_OUTPUTS];
    struct output *out[PL_MAX_OUTPUTS];
    size_t nout;
    struct window *win;           /* the trace window stage, NULL when none */
    struct filter_state *fs;
    uint64_t session_start_ns;
    uint64_t max_age_ns;
    struct markpair *mp;
    _Atomic uint64_t next_expire_ns;
    /* The counters start a cache line of their own: the outputs' writer threads update them
     * while the completion path reads the fields above on every batch, so those stay on lines
     * the writers never write, whatever the number of outputs. */
    _Alignas(PL_CACHE_LINE) struct pl_counters c;
    output_send_fn send;            /* PluginStats to the daemon (NULL: not sent) */
    void *send_ctx;
    _Atomic uint64_t fast_dev[PL_FAST_DEVICES / 64];
    pthread_mutex_t dev_mu;
    uint32_t slow_dev[PL_SLOW_DEVICES];
    size_t nslow;
};

/* The live session (for pipeline_last_stats) and the counters of the last one stopped. */
static pthread_mutex_t g_last_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pipeline *g_live;
static struct pipeline_stats g_last;

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Fan a batch out to every output, in registration order. */
static void pl_fanout(struct pipeline *pl, const struct pl_batch *b)
{
    for (size_t i = 0; i < pl->nout; i++)
        pl->ops[i]->consume(pl->out[i], b);
}

static void pl_fanout_cb(void *ctx, const struct pl_batch *b)
{
    pl_fanout(ctx, b);
}

/* What the pairing and cutoff kept: to the window stage while one is set, else the outputs. */
static void pl_emit(struct pipeline *pl, const struct pl_batch *b)
{
    if (pl->win)
        window_hold(pl->win, b);
    else
        pl_fanout(pl, b);
}

/* Drop output i (its create or start failed and others go on). */
static void pl_drop_output(struct pipeline *pl, size_t i)
{
    pl->ops[i]->destroy(pl->out[i]);
    memmove(&pl->ops[i], &pl->ops[i + 1], (pl->nout - i - 1) * sizeof(pl->ops[0]));
    memmove(&pl->out[i], &pl->out[i + 1], (pl->nout - i - 1) * sizeof(pl->out[0]));
    pl->nout--;
}

int pipeline_create_set(const struct output_config *cfg, struct filter_state *fs, const struct output_ops *const *ops,
                        size_t nops, struct pipeline **ret)
{
    struct output_config own;
    struct pipeline *pl;
    uint64_t twice;
    int rc;

    if (!cfg || !ops || !nops || nops > PL_MAX_OUTPUTS || !ret)
        return -EINVAL;
    for (size_t i = 0; i < nops; i++)
        if (!ops[i])
            return -EINVAL;
    pl = aligned_alloc(_Alignof(struct pipeline), sizeof(*pl)); /* sizeof is a multiple of the alignment */
    if (!pl)
        return -ENOMEM;
    memset(pl, 0, sizeof(*pl));
    pthread_mutex_init(&pl->dev_mu, NULL);
    pl->fs = fs;
    pl->session_start_ns = cfg->session_start_ns;
    pl->send = cfg->send;
    pl->send_ctx = cfg->send_ctx;
    twice = 2ull * cfg->report_interval_s * 1000000000ull;
    pl->max_age_ns = twice > PL_MIN_AGE_NS ? twice : PL_MIN_AGE_NS;
    rc = markpair_create(MARKPAIR_PENDING_CAP, &pl->mp);
    if (rc < 0)
        goto err_free;
    own = *cfg;
    own.pl = pl;
    for (size_t i = 0; i < nops; i++) {
        rc = ops[i]->create(&own, &pl->out[pl->nout]);
        if (rc < 0 && i == 0)
            goto err_mp; /* the session's own output: no session without it */
        if (rc < 0) {
            LOG_ERROR("MsptiMonitor: the %s output could not be created: %s; the session goes on without it",
                      ops[i]->name, errno_name(-rc));
            continue;
        }
        pl->ops[pl->nout++] = ops[i];
    }
    pthread_mutex_lock(&g_last_mu);
    g_live = pl;
    pthread_mutex_unlock(&g_last_mu);
    *ret = pl;
    return 0;

err_mp:
    markpair_destroy(pl->mp);
err_free:
    pthread_mutex_destroy(&pl->dev_mu);
    free(pl);
    return rc;
}

int pipeline_create(const struct output_config *cfg, struct filter_state *fs, const struct output_ops *ops,
                    struct pipeline **ret)
{
    return ops ? pipeline_create_set(cfg, fs, &ops, 1, ret) : -EINVAL;
}

struct output *pipeline_output(struct pipeline *pl)
{
    return pl->nout ? pl->out[0] : NULL;
}

int pipeline_start(struct pipeline *pl)
{
    for (size_t i = 0; i < pl->nout; i++) {
        int rc = pl->ops[i]->start(pl->out[i]);
        if (rc == 0)
            continue;
        LOG_ERROR("MsptiMonitor: the %s output did not start: %s%s", pl->ops[i]->name, errno_name(-rc),
                  i ? "; the session goes on without it" : "");
        if (i == 0)
            return rc;
        pl_drop_output(pl, i--);
    }
    return 0;
}

void pipeline_set_kinds(struct pipeline *pl, uint32_t enabled_mask)
{
    for (size_t i = 0; i < pl->nout; i++)
        pl->ops[i]->set_kinds(pl->out[i], enabled_mask);
}

int pipeline_set_window(struct pipeline *pl, const struct window_opts *o)
{
    if (pl->win)
        return -EALREADY;
    return window_create(o, &pl->c.dropped_queue, &pl->win);
}

int pipeline_window_close(struct pipeline *pl, uint64_t end_ns)
{
    if (!pl->win)
        return -ENOENT;
    window_close(pl->win, end_ns);
    return 0;
}

int pipeline_window(struct pipeline *pl, struct window_state *ret)
{
    if (!pl || !pl->win)
        return -ENOENT;
    window_get(pl->win, ret);
    return 0;
}

int pipeline_live_window(struct window_state *ret)
{
    int rc;

    pthread_mutex_lock(&g_last_mu);
    rc = pipeline_window(g_live, ret);
    pthread_mutex_unlock(&g_last_mu);
    return rc;
}

struct pl_counters *pipeline_counters(struct pipeline *pl)
{
    return pl ? &pl->c : NULL;
}

static void add_device(struct pipeline *pl, uint32_t d)
{
    if (d < PL_FAST_DEVICES) {
        /* Test first: after the first record of a device this is a read-only shared line. */
        uint64_t bit = 1ull << (d % 64);
        if (!(atomic_load_explicit(&pl->fast_dev[d / 64], memory_order_relaxed) & bit))
            atomic_fetch_or_explicit(&pl->fast_dev[d / 64], bit, memory_order_relaxed);
        return;
    }
    pthread_mutex_lock(&pl->dev_mu);
    size_t i;
    for (i = 0; i < pl->nslow && pl->slow_dev[i] != d; i++)
        ;
    if (i == pl->nslow && pl->nslow < PL_SLOW_DEVICES)
        pl->slow_dev[pl->nslow++] = d;
    pthread_mutex_unlock(&pl->dev_mu);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

void pipeline_devices(struct pipeline *pl, uint32_t *out, size_t cap, size_t *ret_n)
{
    uint32_t slow[PL_SLOW_DEVICES];
    size_t n = 0, ns;

    for (uint32_t d = 0; d < PL_FAST_DEVICES; d++) {
        if (atomic_load(&pl->fast_dev[d / 64]) & (1ull << (d % 64))) {
            if (n < cap)
                out[n] = d;
            n++;
        }
    }
    pthread_mutex_lock(&pl->dev_mu);
    ns = pl->nslow;
    memcpy(slow, pl->slow_dev, ns * sizeof(slow[0]));
    pthread_mutex_unlock(&pl->dev_mu);
    qsort(slow, ns, sizeof(slow[0]), cmp_u32);
    for (size_t i = 0; i < ns; i++) {
        if (n < cap)
            out[n] = slow[i];
        n++;
    }
    *ret_n = n;
}

#define PL_EXPIRE_BATCH 32

/* Device parts whose host START never came, handed to the output as a batch of their END
 * records (synthesised: the records themselves went by in earlier batches). */
static void deliver_waited(struct pipeline *pl, struct pl_range *ranges, size_t n)
{
    struct mon_record recs[PL_EXPIRE_BATCH];

    for (size_t i = 0; i < n; i++) {
        const struct pl_range *r = &ranges[i];
        recs[i] = (struct mon_record){ .kind = MON_KIND_MARKER };
        recs[i].u.marker = (struct mon_marker){ .flag = 32, .source_kind = 1, .timestamp = r->dev_end, .id = r->id,
                                                .obj0 = r->device_id, .obj1 = r->stream_id, .name = "", .domain = "" };
        ranges[i].at = i;
        add_device(pl, r->device_id);
    }
    if (n) {
        struct pl_batch b = { recs, n, ranges, n };
        pl_emit(pl, &b);
    }
}

/* Expire ids older than max_age_ns, delivering the device parts that waited in vain. */
static void expire_now(struct pipeline *pl, uint64_t now, uint64_t max_age_ns)
{
    struct pl_range out[PL_EXPIRE_BATCH];
    size_t nout;

    do {
        (void)markpair_expire(pl->mp, now, max_age_ns, out, PL_EXPIRE_BATCH, &nout);
        deliver_waited(pl, out, nout);
    } while (nout == PL_EXPIRE_BATCH);
}

/* Incomplete marker ids are aged out at most once a second, by whichever thread sees it due. */
static void maybe_expire(struct pipeline *pl, uint64_t now)
{
    uint64_t due = atomic_load_explicit(&pl->next_expire_ns, memory_order_relaxed);

    if (now < due || !atomic_compare_exchange_strong(&pl->next_expire_ns, &due, now + PL_EXPIRE_EVERY_NS))
        return;
    expire_now(pl, now, pl->max_age_ns);
}

/* Bookkeeping of a marker part that record `at` completed. */
static void note_range(struct pipeline *pl, struct pl_range *r, size_t at)
{
    r->at = at;
    if (r->done == PL_PART_DEVICE)
        add_device(pl, r->device_id);
}

#define PL_RANGES (PL_WINDOW + 2) /* a host START can complete two parts (markpair.h) */

/* One window (n <= PL_WINDOW): cutoff, pairing and devices in place, then the output.
 * Returns how many of recs[0..n) it took (all, unless the range array filled up first: the
 * rest is still in place for the next window). */
static size_t deliver_window(struct pipeline *pl, struct mon_record *recs, size_t n)
{
    struct pl_range ranges[PL_RANGES];
    size_t kept = 0, nr = 0, i;
    uint64_t now = 0;
    uint64_t last_dev = UINT64_MAX; /* the Kernel device noted last in this window */

    for (i = 0; i < n && nr + 2 <= PL_RANGES; i++) {
        struct mon_record *r = &recs[i];
        int got;
        if (mon_record_end(r) < pl->session_start_ns) {
            /* A cut host START still names its device part; in the rare case it completes
             * one that waited, the record is kept so the part has a record to belong to. */
            if (r->kind != MON_KIND_MARKER || r->u.marker.source_kind != 0 || !(r->u.marker.flag & MON_MARKER_START))
                continue;
            if (!now) {
                now = clock_mono_ns();
                maybe_expire(pl, now);
            }
            if (markpair_feed_cut(pl->mp, &r->u.marker, now, &ranges[nr]) == 0)
                continue;
            if (kept != i)
                recs[kept] = *r;
            note_range(pl, &ranges[nr++], kept);
            kept++;
            continue;
        }
        if (kept != i)
            recs[kept] = *r;
        r = &recs[kept];
        switch (r->kind) {
        case MON_KIND_KERNEL:
            if (r->u.kernel.device_id != last_dev) { /* a run of one device's kernels: noted once */
                last_dev = r->u.kernel.device_id;
                add_device(pl, last_dev);
            }
            break;
        case MON_KIND_COMMUNICATION:
            add_device(pl, r->u.comm.device_id);
            break;
        case MON_KIND_MARKER:
            if (!now) {
                now = clock_mono_ns();
                maybe_expire(pl, now);
            }
            got = markpair_feed(pl->mp, &r->u.marker, now, &ranges[nr]);
            for (int k = 0; k < got; k++)
                note_range(pl, &ranges[nr++], kept);
            break;
        default:
            break;
        }
        kept++;
    }
    atomic_fetch_add_explicit(&pl->c.before_start, i - kept, memory_order_relaxed);
    atomic_fetch_add_explicit(&pl->c.kept, kept, memory_order_relaxed);
    if (kept) {
        struct pl_batch b = { recs, kept, ranges, nr };
        pl_emit(pl, &b);
    }
    return i;
}

/* The open buffer bracket of this completion thread (mon_cpu_buffer_begin): deliveries inside
 * it are charged together at its end, to the pipeline that received them. The sink is fixed
 * while a buffer is walked (the backend holds its lock shared), so one pipeline per bracket. */
static _Thread_local bool tl_in_buffer;
static _Thread_local struct pipeline *tl_pl;
static _Thread_local uint64_t tl_cpu0;

void mon_cpu_buffer_begin(void)
{
    tl_in_buffer = true;
    tl_pl = NULL;
    tl_cpu0 = thread_cpu_ns();
}

void mon_cpu_buffer_end(void)
{
    if (tl_pl)
        atomic_fetch_add_explicit(&tl_pl->c.cpu_ns, thread_cpu_ns() - tl_cpu0, memory_order_relaxed);
    tl_in_buffer = false;
    tl_pl = NULL;
}

void pipeline_deliver(struct pipeline *pl, struct mon_record *recs, size_t n)
{
    bool bracket = tl_in_buffer;
    uint64_t cpu0 = bracket ? 0 : thread_cpu_ns();
    size_t k = n;

    if (bracket)
        tl_pl = pl;

    atomic_fetch_add_explicit(&pl->c.consumed, n, memory_order_relaxed);
    if (pl->fs)
        k = filter_state_apply(pl->fs, recs, n);
    atomic_fetch_add_explicit(&pl->c.filtered, n - k, memory_order_relaxed);
    for (size_t off = 0; off < k;)
        off += deliver_window(pl, recs + off, k - off < PL_WINDOW ? k - off : PL_WINDOW);
    if (!bracket)
        atomic_fetch_add_explicit(&pl->c.cpu_ns, thread_cpu_ns() - cpu0, memory_order_relaxed);
}

void pipeline_set_declined(struct pipeline *pl, uint64_t n)
{
    atomic_store_explicit(&pl->c.dropped_declined, n, memory_order_relaxed);
}

void pipeline_add_offline_drops(uint64_t n)
{
    pthread_mutex_lock(&g_last_mu);
    if (g_live && n)
        atomic_fetch_add_explicit(&g_live->c.dropped_offline, n, memory_order_relaxed);
    pthread_mutex_unlock(&g_last_mu);
}

void pipeline_stats(struct pipeline *pl, struct pipeline_stats *ret)
{
    const struct pl_counters *c = &pl->c;

#define PL_LOAD(key, label, pos, what) ret->key = atomic_load(&c->key);
    STATS_COUNTERS(PL_LOAD)
#undef PL_LOAD
}

void pipeline_last_stats(struct pipeline_stats *ret)
{
    pthread_mutex_lock(&g_last_mu);
    if (g_live)
        pipeline_stats(g_live, ret);
    else
        *ret = g_last;
    pthread_mutex_unlock(&g_last_mu);
}

size_t pipeline_stats_format(const struct pipeline_stats *s, char *buf, size_t cap)
{
    struct stat_item {
        const char *label;
        uint64_t v;
    } line[STATS_COUNT];
    size_t len = 0;

#define PL_LINE(key, label, pos, what) line[pos] = (struct stat_item){ label, s->key };
    STATS_COUNTERS(PL_LINE)
#undef PL_LINE
    if (cap)
        buf[0] = '\0';
    for (size_t i = 0; i < STATS_COUNT && len < cap; i++) {
        int n = snprintf(buf + len, cap - len, "%s%s=%llu", i ? " " : "", line[i].label,
                         (unsigned long long)line[i].v);
        len += n > 0 ? (size_t)n : 0;
    }
    return len < cap ? len : (cap ? cap - 1 : 0);
}

/* The "stats" object: one key per counter, in the contract's (sorted) key order. */
void pipeline_stats_obj(struct jw *w, const struct pipeline_stats *s)
{
    jw_obj_begin(w);
#define PL_KEY(key, label, pos, what)                                                                     \
    jw_key(w, #key);                                                                                       \
    jw_uint(w, s->key);
    STATS_COUNTERS(PL_KEY)
#undef PL_KEY
    jw_obj_end(w);
}

static void stats_obj(struct jw *w, const void *ctx)
{
    pipeline_stats_obj(w, ctx);
}

size_t pipeline_filter_text(struct pipeline *pl, char *buf, size_t cap)
{
    if (pl && pl->fs)
        return filter_state_text(pl->fs, buf, cap);
    if (cap)
        buf[0] = '\0';
    return 0;
}

size_t pipeline_stats_json(const struct pipeline_stats *s, int32_t pid, uint64_t now_ns, char *buf, size_t cap)
{
    char text[512];
    struct jw w;
    const struct datamsg m = { .kind = PIPELINE_STATS_KIND, .device_id = -1, .duration = s->cpu_ns,
                               .timestamp = now_ns, .name = text, .name_len = SIZE_MAX };
    const struct datamsg_field extra[] = {
        { .key = "pid", .type = DATAMSG_INT, .i = pid },
        { .key = "stats", .type = DATAMSG_FN, .fn = stats_obj, .ctx = s },
    };

    pipeline_stats_format(s, text, sizeof(text));
    jw_init(&w, buf, cap);
    return datamsg_write(&w, &m, extra, 2) == 0 ? w.len : 0;
}

/* The session's counters to the daemon, so `dyno status` and its loggers show them. */
static void pipeline_report(struct pipeline *pl)
{
    struct pipeline_stats s;
    struct timespec ts;
    char buf[1024];
    size_t n;

    if (!pl->send)
        return;
    pipeline_stats(pl, &s);
    clock_gettime(CLOCK_REALTIME, &ts);
    n = pipeline_stats_json(&s, (int32_t)getpid(), (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec,
                            buf, sizeof(buf));
    if (n && pl->send(pl->send_ctx, buf, n) < 0)
        LOG_DEBUG("MsptiMonitor: session stats not delivered to the daemon");
}

int pipeline_tick(struct pipeline *pl)
{
    int rc = 0;

    for (size_t i = 0; i < pl->nout; i++) {
        int r = pl->ops[i]->tick(pl->out[i]);
        rc = rc ? rc : r;
    }

    pipeline_report(pl);
    return rc;
}

int pipeline_stop(struct pipeline *pl, const char *parallel_group_info)
{
    struct pipeline_stats s;
    char line[512];
    int rc;

    expire_now(pl, UINT64_MAX, 0); /* device parts still waiting for a host START */
    if (pl->win) /* every output gets the same cut of the window, before its end of session */
        window_release(pl->win, PL_WINDOW, pl_fanout_cb, pl);
    rc = 0;
    for (size_t i = 0; i < pl->nout; i++) {
        int r = pl->ops[i]->stop(pl->out[i], parallel_group_info);
        rc = rc ? rc : r;
    }
    pipeline_report(pl);
    pipeline_stats(pl, &s);
    pipeline_stats_format(&s, line, sizeof(line));
    if (s.dropped_queue || s.dropped_declined || s.dropped_write || s.dropped_offline)
        LOG_WARN("MsptiMonitor session stats: %s", line);
    else
        LOG_INFO("MsptiMonitor session stats: %s", line);
    pthread_mutex_lock(&g_last_mu);
    g_last = s;
    pthread_mutex_unlock(&g_last_mu);
    return rc;
}

void pipeline_destroy(struct pipeline *pl)
{
    if (!pl)
        return;
    for (size_t i = 0; i < pl->nout; i++)
        pl->ops[i]->destroy(pl->out[i]);
    pthread_mutex_lock(&g_last_mu);
    if (g_live == pl) {
        pipeline_stats(pl, &g_last);
        g_live = NULL;
    }
    pthread_mutex_unlock(&g_last_mu);
    markpair_destroy(pl->mp);
    window_destroy(pl->win);
    pthread_mutex_destroy(&pl->dev_mu);
    free(pl);
}

/* ---- string pool: FNV-1a + open addressing over an id-ordered entry array ---- */

struct sp_ent {
    char *s;
    size_t len;
    uint64_t hash;
    uint64_t counter;
};

struct pl_strpool {
    struct sp_ent *ents; /* by id */
    size_t n, cap, max;
    uint32_t *slots;     /* id + 1, 0 = empty */
    size_t nslots;
};

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

int pl_strpool_create(size_t max_strings, struct pl_strpool **ret)
{
    struct pl_strpool *sp = calloc(1, sizeof(*sp));

    if (!sp)
        return -ENOMEM;
    sp->max = max_strings ? max_strings : SIZE_MAX;
    *ret = sp;
    return 0;
}

void pl_strpool_destroy(struct pl_strpool *sp)
{
    if (!sp)
        return;
    for (size_t i = 0; i < sp->n; i++)
        free(sp->ents[i].s);
    free(sp->ents);
    free(sp->slots);
    free(sp);
}

static int sp_grow(struct pl_strpool *sp)
{
    size_t ns = sp->nslots ? sp->nslots * 2 : 1024;
    uint32_t *slots = calloc(ns, sizeof(*slots));

    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < sp->n; i++) {
        size_t j = sp->ents[i].hash & (ns - 1);
        while (slots[j])
            j = (j + 1) & (ns - 1);
        slots[j] = (uint32_t)(i + 1);
    }
    free(sp->slots);
    sp->slots = slots;
    sp->nslots = ns;
    return 0;
}

int64_t pl_strpool_id(struct pl_strpool *sp, const char *s, const char **ret_text)
{
    size_t n, j;
    uint64_t h;
    char *copy;

    if (!s)
        s = "";
    n = strlen(s);
    h = fnv(s, n);
    if (sp->nslots == 0 && sp_grow(sp) < 0)
        return -1;
    for (j = h & (sp->nslots - 1); sp->slots[j]; j = (j + 1) & (sp->nslots - 1)) {
        struct sp_ent *e = &sp->ents[sp->slots[j] - 1];
        if (e->hash == h && e->len == n && memcmp(e->s, s, n) == 0) {
            if (ret_text)
                *ret_text = e->s;
            return (int64_t)(sp->slots[j] - 1);
        }
    }
    if (sp->n >= sp->max || sp->n >= UINT32_MAX - 1)
        return -1;
    if (sp->n == sp->cap) {
        size_t nc = sp->cap ? sp->cap * 2 : 256;
        struct sp_ent *ne = realloc(sp->ents, nc * sizeof(*ne));
        if (!ne)
            return -1;
        sp->ents = ne;
        sp->cap = nc;
    }
    copy = malloc(n + 1);
    if (!copy)
        return -1;
    memcpy(copy, s, n + 1);
    sp->ents[sp->n] = (struct sp_ent){ copy, n, h, 0 };
    sp->slots[j] = (uint32_t)(sp->n + 1);
    sp->n++;
    if (sp->n * 2 > sp->nslots)
        (void)sp_grow(sp); /* still consistent (load < 1) if it fails; retried next insert */
    if (ret_text)
        *ret_text = copy;
    return (int64_t)(sp->n - 1);
}

size_t pl_strpool_count(const struct pl_strpool *sp)
{
    return sp->n;
}

const char *pl_strpool_text(const struct pl_strpool *sp, size_t id, size_t *ret_len)
{
    if (ret_len)
        *ret_len = sp->ents[id].len;
    return sp->ents[id].s;
}

uint64_t *pl_strpool_counter(struct pl_strpool *sp, size_t id)
{
    return &sp->ents[id].counter;
}
