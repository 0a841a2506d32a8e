/* proc_trace: the nputrace trace writer (proc_trace.h). Records are copied as they arrive
 * (their strings are the vendor library's, alive for the process) and the file is written
 * once at stop, because the header's base timestamp must precede the events and is only
 * known once the window's earliest record is in. The window itself is the session's
 * (pipeline/window.h): what arrives here is already cut to it. */
#include "plugin/outputs/proc_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "common/jw.h"
#include "common/log.h"
#include "common/strutil.h"
#include "contract/names.h"
#include "plugin/outputs/outfile.h"
#include "plugin/outputs/trace_fmt.h"
#include "plugin/pipeline/pipeline.h"

#define TR_CHUNK 4096
#define TR_EVENT_MAX (1u << 20)        /* one serialised event (names are bounded by the vendor) */
#define TR_EST_BYTES 260u              /* mean event size, for the gzip decision */
#define TR_MAX_TRACKS 4096             /* metadata rows; more tracks get no names */
#define TR_MAX_DEVICES 256

struct tr_rchunk {
    struct tr_rchunk *next;
    size_t n;
    struct mon_record r[TR_CHUNK];
};
struct tr_gchunk {
    struct tr_gchunk *next;
    size_t n;
    struct pl_range g[TR_CHUNK];
};

struct output {
    struct output_config cfg;
    struct output_trace_opts opts;
    char dir[OUTFILE_PATH_MAX];
    char backend[32];
    pthread_mutex_t lock;            /* storage; completion threads append concurrently */
    struct tr_rchunk *rhead, *rtail;
    struct tr_gchunk *ghead, *gtail;
    size_t nrecs, nranges, max_events;
    bool drop_logged;
};

static _Atomic size_t g_max_events;
static _Atomic uint64_t g_gz_bytes;
void proc_trace_test_set_limits(size_t max_events, uint64_t gz_bytes)
{
    atomic_store(&g_max_events, max_events);
    atomic_store(&g_gz_bytes, gz_bytes);
}

int proc_trace_name(char *buf, size_t cap, const char *dir, int pid, int32_t rank, int32_t start, int32_t stop,
                    bool gz)
{
    return names_trace_file(buf, cap, dir, NAMES_TRACE_OURS, pid, rank, start, stop, gz);
}

/* ---- create / consume ---- */

static int tr_create(const struct output_config *cfg, struct output **ret)
{
    struct output *p;

    if (!cfg->log_dir || !cfg->trace)
        return -EINVAL;
    p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->cfg = *cfg;
    p->opts = *cfg->trace;
    if (str_copy(p->dir, sizeof(p->dir), cfg->log_dir, strlen(cfg->log_dir)) != 0) {
        free(p);
        return -ENAMETOOLONG;
    }
    (void)str_copy(p->backend, sizeof(p->backend), cfg->trace->backend ? cfg->trace->backend : "",
                   cfg->trace->backend ? strnlen(cfg->trace->backend, sizeof(p->backend) - 1) : 0);
    p->opts.backend = p->backend;
    p->cfg.log_dir = p->dir;
    p->cfg.trace = &p->opts;
    p->cfg.jsonl_rotate_lines = p->cfg.jsonl_rotate_files = NULL;
    p->max_events = atomic_load(&g_max_events) ? atomic_load(&g_max_events) : PROC_TRACE_MAX_EVENTS;
    pthread_mutex_init(&p->lock, NULL);
    *ret = p;
    return 0;
}

static int tr_start(struct output *p)
{
    (void)p;
    return 0;
}

/* Room for one more event (lock held); counts and logs (once) what does not fit. */
static bool tr_room(struct output *p)
{
    if (p->nrecs + p->nranges < p->max_events)
        return true;
    atomic_fetch_add_explicit(&pipeline_counters(p->cfg.pl)->dropped_queue, 1, memory_order_relaxed);
    if (!p->drop_logged) {
        p->drop_logged = true;
        LOG_WARN("nputrace: the window holds more than %zu events; later ones are dropped and counted",
                 p->max_events);
    }
    return false;
}

static void tr_consume(struct output *p, const struct pl_batch *b)
{
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < b->nrecs; i++) {
        if (b->recs[i].kind == MON_KIND_MARKER)
            continue; /* written from the completed ranges below */
        if (!tr_room(p))
            continue;
        if (!p->rtail || p->rtail->n == TR_CHUNK) {
            struct tr_rchunk *c = malloc(sizeof(*c));
            if (!c) {
                atomic_fetch_add_explicit(&pipeline_counters(p->cfg.pl)->dropped_queue, 1, memory_order_relaxed);
                continue;
            }
            c->next = NULL;
            c->n = 0;
            if (p->rtail)
                p->rtail->next = c;
            else
                p->rhead = c;
            p->rtail = c;
        }
        p->rtail->r[p->rtail->n++] = b->recs[i];
        p->nrecs++;
    }
    for (size_t i = 0; i < b->nranges; i++) {
        if (!tr_room(p))
            continue;
        if (!p->gtail || p->gtail->n == TR_CHUNK) {
            struct tr_gchunk *c = malloc(sizeof(*c));
            if (!c) {
                atomic_fetch_add_explicit(&pipeline_counters(p->cfg.pl)->dropped_queue, 1, memory_order_relaxed);
                continue;
            }
            c->next = NULL;
            c->n = 0;
            if (p->gtail)
                p->gtail->next = c;
            else
                p->ghead = c;
            p->gtail = c;
        }
        p->gtail->g[p->gtail->n++] = b->ranges[i];
        p->nranges++;
    }
    pthread_mutex_unlock(&p->lock);
}

static int tr_tick(struct output *p)
{
    (void)p;
    return 0;
}

static void tr_set_kinds(struct output *p, uint32_t mask)
{
    (void)p;
    (void)mask;
}

/* ---- writing ---- */

/* Output stream: plain stdio or zlib, first error kept. */
struct tr_out {
    FILE *f;
    gzFile gz;
    int err;
    uint64_t bytes;
};

static void tr_write(struct tr_out *o, const char *s, size_t n)
{
    if (o->err || n == 0)
        return;
    if (o->gz) {
        if (gzwrite(o->gz, s, (unsigned)n) != (int)n)
            o->err = errno ? -errno : -EIO;
    } else if (fwrite(s, 1, n, o->f) != n) {
        o->err = errno ? -errno : -EIO;
    }
    o->bytes += n;
}

/* One event from the jw buffer, with the separating comma. */
static void tr_emit(struct tr_out *o, struct jw *w, bool *first)
{
    if (w->err) {
        jw_reset(w);
        return; /* an event beyond TR_EVENT_MAX: left out (counted by the caller's total) */
    }
    if (!*first)
        tr_write(o, ",\n", 2);
    else
        tr_write(o, "\n", 1);
    *first = false;
    tr_write(o, w->buf, w->len);
    jw_reset(w);
}

/* API launch sites by correlation id (open addressing; 0 is "empty"). */
struct tr_api {
    uint64_t corr, start;
    uint32_t pid, tid;
};
struct tr_map {
    struct tr_api *slot;
    size_t mask;
};

static int tr_map_init(struct tr_map *m, size_t n)
{
    size_t cap = 16;

    while (cap < 2 * n + 2)
        cap <<= 1;
    m->slot = calloc(cap, sizeof(*m->slot));
    m->mask = cap - 1;
    return m->slot ? 0 : -ENOMEM;
}

static size_t tr_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k;
}

static void tr_map_put(struct tr_map *m, const struct tr_api *a)
{
    size_t i = tr_hash(a->corr) & m->mask;

    while (m->slot[i].corr && m->slot[i].corr != a->corr)
        i = (i + 1) & m->mask;
    if (!m->slot[i].corr)
        m->slot[i] = *a; /* the first API of a correlation id is its launch */
}

static const struct tr_api *tr_map_get(const struct tr_map *m, uint64_t corr)
{
    size_t i = tr_hash(corr) & m->mask;

    while (m->slot[i].corr) {
        if (m->slot[i].corr == corr)
            return &m->slot[i];
        i = (i + 1) & m->mask;
    }
    return NULL;
}

/* Tracks seen, for the M rows: (pid, tid, device). */
struct tr_track {
    uint32_t pid, tid;
    bool device;
};
struct tr_tracks {
    struct tr_track t[TR_MAX_TRACKS];
    size_t n;
};

static void tr_track_add(struct tr_tracks *ts, uint32_t pid, uint32_t tid, bool device)
{
    for (size_t i = ts->n; i-- > 0;)
        if (ts->t[i].pid == pid && ts->t[i].tid == tid && ts->t[i].device == device)
            return;
    if (ts->n < TR_MAX_TRACKS)
        ts->t[ts->n++] = (struct tr_track){ pid, tid, device };
}

static void tr_meta(struct tr_out *o, struct jw *w, bool *first, const struct tr_tracks *ts)
{
    char text[64];

    for (size_t i = 0; i < ts->n; i++) {
        const struct tr_track *t = &ts->t[i];
        bool pid_seen = false;
        for (size_t j = 0; j < i && !pid_seen; j++)
            pid_seen = ts->t[j].pid == t->pid && ts->t[j].device == t->device;
        if (!pid_seen) {
            if (t->device)
                snprintf(text, sizeof(text), "Device %u", (unsigned)t->pid);
            else
                snprintf(text, sizeof(text), "Host process %u", (unsigned)t->pid);
            trace_fmt_meta(w, "process_name", t->pid, 0, text, 0);
            tr_emit(o, w, first);
            /* Host first, then devices in id order. */
            trace_fmt_meta(w, "process_sort_index", t->pid, 0, NULL, t->device ? 1000 + (int64_t)t->pid : 0);
            tr_emit(o, w, first);
        }
        snprintf(text, sizeof(text), t->device ? "stream %u" : "thread %u", (unsigned)t->tid);
        trace_fmt_meta(w, "thread_name", t->pid, t->tid, text, 0);
        tr_emit(o, w, first);
        trace_fmt_meta(w, "thread_sort_index", t->pid, t->tid, NULL, (int64_t)t->tid);
        tr_emit(o, w, first);
    }
}

static uint64_t tr_base(struct output *p)
{
    uint64_t base = UINT64_MAX;

    for (struct tr_rchunk *c = p->rhead; c; c = c->next)
        for (size_t i = 0; i < c->n; i++) {
            uint64_t s = trace_fmt_start(&c->r[i]);
            if (s && s < base)
                base = s;
        }
    for (struct tr_gchunk *c = p->ghead; c; c = c->next)
        for (size_t i = 0; i < c->n; i++) {
            const struct pl_range *g = &c->g[i];
            uint64_t s = g->done == PL_PART_DEVICE ? g->dev_start : g->host_start;
            if (!s)
                s = g->done == PL_PART_DEVICE ? g->dev_end : g->host_end;
            if (s && s < base)
                base = s;
        }
    if (base == UINT64_MAX)
        base = p->cfg.session_start_ns;
    return base - base % 1000u; /* whole microseconds: ts then needs no rounding */
}

/* Every event of the window into o. Returns the number of events written. */
static uint64_t tr_body(struct output *p, struct tr_out *o, struct jw *w, uint64_t base, struct tr_tracks *ts)
{
    struct tr_map map = { 0 };
    uint64_t events = 0;
    bool first = true;
    size_t napi = 0;
    uint32_t dp, dt;

    for (struct tr_rchunk *c = p->rhead; c; c = c->next)
        for (size_t i = 0; i < c->n; i++)
            napi += mon_kind_is_api(c->r[i].kind);
    if (tr_map_init(&map, napi) != 0)
        LOG_WARN("nputrace: out of memory for the launch map; the trace has no ac2g flows");
    for (struct tr_rchunk *c = p->rhead; c && map.slot; c = c->next)
        for (size_t i = 0; i < c->n; i++) {
            const struct mon_record *r = &c->r[i];
            if (mon_kind_is_api(r->kind) && r->u.api.correlation_id) {
                struct tr_api a = { r->u.api.correlation_id, r->u.api.start, r->u.api.pid, r->u.api.tid };
                tr_map_put(&map, &a);
            }
        }
    for (struct tr_rchunk *c = p->rhead; c; c = c->next)
        for (size_t i = 0; i < c->n; i++) {
            const struct mon_record *r = &c->r[i];
            bool dev = trace_fmt_track(r, &dp, &dt);
            uint64_t corr;
            const struct tr_api *a;
            if (trace_fmt_record(w, r, base) != 0)
                continue;
            tr_emit(o, w, &first);
            events++;
            tr_track_add(ts, dp, dt, dev);
            corr = dev ? trace_fmt_correlation(r) : 0;
            if (corr && map.slot && (a = tr_map_get(&map, corr))) {
                trace_fmt_flow(w, true, corr, a->pid, a->tid, a->start, base);
                tr_emit(o, w, &first);
                trace_fmt_flow(w, false, corr, dp, dt, trace_fmt_start(r), base);
                tr_emit(o, w, &first);
            }
        }
    for (struct tr_gchunk *c = p->ghead; c; c = c->next)
        for (size_t i = 0; i < c->n; i++) {
            const struct pl_range *g = &c->g[i];
            bool dev = g->done == PL_PART_DEVICE;
            if (trace_fmt_range(w, g, base) != 0)
                continue;
            tr_emit(o, w, &first);
            events++;
            tr_track_add(ts, dev ? g->device_id : g->pid, dev ? g->stream_id : g->tid, dev);
        }
    tr_meta(o, w, &first, ts);
    free(map.slot);
    return events;
}

static int tr_write_file(struct output *p, const struct window_state *win)
{
    char path[PROC_TRACE_NAME_MAX], tmp[PROC_TRACE_NAME_MAX + 8];
    uint32_t devs[TR_MAX_DEVICES];
    size_t ndev = 0;
    struct tr_tracks *ts = NULL;
    struct tr_out o = { 0 };
    struct jw w;
    uint64_t base, events = 0, gz_at = atomic_load(&g_gz_bytes) ? atomic_load(&g_gz_bytes) : PROC_TRACE_GZ_BYTES;
    bool gz = (uint64_t)(p->nrecs + p->nranges) * TR_EST_BYTES > gz_at;
    struct trace_fmt_header h;
    int fd, rc;

    rc = proc_trace_name(path, sizeof(path), p->dir, (int)getpid(), p->cfg.rank, win->start, win->stop, gz);
    if (rc != 0 || snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
        LOG_ERROR("nputrace: trace file name under '%s' too long; trace not written", p->dir);
        return -ENAMETOOLONG;
    }
    ts = calloc(1, sizeof(*ts));
    if (!ts)
        return -ENOMEM;
    (void)unlink(tmp); /* ours from an earlier failed attempt of this pid */
    fd = outfile_create(tmp, 0);
    if (fd < 0) {
        rc = fd;
        goto err_unlink;
    }
    if (gz)
        o.gz = gzdopen(fd, "wb6");
    else
        o.f = fdopen(fd, "w");
    if (!o.f && !o.gz) {
        rc = -errno;
        close(fd);
        goto err_unlink;
    }
    if (o.f)
        setvbuf(o.f, NULL, _IOFBF, 1 << 20);
    base = tr_base(p);
    pipeline_devices(p->cfg.pl, devs, TR_MAX_DEVICES, &ndev);
    h = (struct trace_fmt_header){ .rank = p->cfg.rank, .world_size = p->opts.world_size, .backend = p->backend,
                                   .pid = (uint32_t)getpid(), .base_ns = base, .start_step = win->start,
                                   .stop_step = win->stop, .devices = devs, .window_end_ns = win->end_ns,
                                   .after_window = win->after,
                                   .ndevices = ndev < TR_MAX_DEVICES ? ndev : TR_MAX_DEVICES };
    jw_init_dyn(&w, TR_EVENT_MAX);
    trace_fmt_header(&w, &h);
    tr_write(&o, w.buf, w.len);
    jw_reset(&w);
    events = tr_body(p, &o, &w, base, ts);
    tr_write(&o, "\n", 1);
    tr_write(&o, trace_fmt_footer(), strlen(trace_fmt_footer()));
    tr_write(&o, "\n", 1);
    jw_fini(&w);
    /* Close (and for stdio sync) before the rename: a reader only ever sees whole files. */
    if (o.f) {
        if (!o.err && (fflush(o.f) != 0 || fsync(fileno(o.f)) != 0))
            o.err = -errno;
        if (fclose(o.f) != 0 && !o.err)
            o.err = -errno;
    } else {
        int zr = gzclose(o.gz);
        if (zr != Z_OK && !o.err)
            o.err = zr == Z_ERRNO && errno ? -errno : -EIO;
    }
    rc = o.err;
    if (rc != 0)
        goto err_unlink;
    if (rename(tmp, path) != 0) {
        rc = -errno;
        goto err_unlink;
    }
    atomic_fetch_add_explicit(&pipeline_counters(p->cfg.pl)->written, events, memory_order_relaxed);
    atomic_fetch_add_explicit(&pipeline_counters(p->cfg.pl)->bytes_written, o.bytes, memory_order_relaxed);
    if (p->cfg.artifact)
        p->cfg.artifact(p->cfg.artifact_ctx, path);
    LOG_INFO("nputrace: trace of steps [%d, %d) written to %s (%" PRIu64 " events, %" PRIu64 " bytes%s)",
             (int)win->start, (int)win->stop, path, events, o.bytes, gz ? " before gzip" : "");
    free(ts);
    return 0;

err_unlink:
    (void)unlink(tmp); /* nothing half-written stays behind */
    atomic_fetch_add_explicit(&pipeline_counters(p->cfg.pl)->dropped_write, (uint64_t)(p->nrecs + p->nranges),
                              memory_order_relaxed);
    LOG_ERROR("nputrace: writing '%s' failed: %s; trace not written", path, strerror(-rc));
    free(ts);
    return rc;
}

static int tr_stop(struct output *p, const char *parallel_group_info)
{
    struct window_state win = { .step = -1, .start = -1, .stop = -1 };
    int rc = 0;

    (void)parallel_group_info;
    /* No window (a bench, a test): everything received is the trace. */
    if (pipeline_window(p->cfg.pl, &win) == 0 && !window_settled(&win))
        return 0; /* refused or never opened (the window logged why): no file */
    pthread_mutex_lock(&p->lock);
    rc = tr_write_file(p, &win);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

static void tr_destroy(struct output *p)
{
    if (!p)
        return;
    while (p->rhead) {
        struct tr_rchunk *n = p->rhead->next;
        free(p->rhead);
        p->rhead = n;
    }
    while (p->ghead) {
        struct tr_gchunk *n = p->ghead->next;
        free(p->ghead);
        p->ghead = n;
    }
    pthread_mutex_destroy(&p->lock);
    free(p);
}

const struct output_ops proc_trace_ops = {
    .name = "trace",
    .create = tr_create,
    .start = tr_start,
    .consume = tr_consume,
    .tick = tr_tick,
    .set_kinds = tr_set_kinds,
    .stop = tr_stop,
    .destroy = tr_destroy,
    .prepare_dir = outfile_prepare_dir,
};
