/* proc_trace: the nputrace trace writer (proc_trace.h). Records are copied as they arrive
 * (their strings are the vendor library's, alive for the process) and the file is written
 * once at stop, because the header's base timestamp must precede the events and is only
 * known once the window's earliest record is in. */
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

struct proc {
    struct proc_config cfg;
    struct proc_trace_opts opts;
    char dir[OUTFILE_PATH_MAX];
    char backend[32];
    pthread_mutex_t lock;            /* storage; completion threads append concurrently */
    struct tr_rchunk *rhead, *rtail;
    struct tr_gchunk *ghead, *gtail;
    size_t nrecs, nranges, max_events;
    bool drop_logged;
    uint64_t after_window;           /* left out: started after the window closed */
    uint64_t win_start;              /* marker_steps: start of `step <start>` (0 not yet seen) */
    uint64_t before_window;          /* marker_steps: left out, started before win_start */
    bool seen_step;                  /* marker_steps: a `step <N>` range start was seen */
    struct proc *db;                 /* --export-type Db: the DB output beside us */
};

static _Atomic size_t g_max_events;
static _Atomic uint64_t g_window_end = UINT64_MAX; /* one trace session per process at a time */
static _Atomic uint64_t g_gz_bytes;
static pthread_mutex_t g_last_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_last_path[PROC_TRACE_NAME_MAX];
static _Atomic int32_t g_mk_step = -1, g_mk_start = -1, g_mk_stop = -1;
static _Atomic int g_mk_phase;

void proc_trace_marker_state(struct proc_trace_mstate *ret)
{
    ret->step = atomic_load(&g_mk_step);
    ret->start = atomic_load(&g_mk_start);
    ret->stop = atomic_load(&g_mk_stop);
    ret->phase = atomic_load(&g_mk_phase);
}

void proc_trace_close_window(uint64_t end_ns)
{
    atomic_store(&g_window_end, end_ns);
}

void proc_trace_test_set_limits(size_t max_events, uint64_t gz_bytes)
{
    atomic_store(&g_max_events, max_events);
    atomic_store(&g_gz_bytes, gz_bytes);
}

void proc_trace_last_path(char *buf, size_t cap)
{
    pthread_mutex_lock(&g_last_lock);
    snprintf(buf, cap, "%s", g_last_path);
    pthread_mutex_unlock(&g_last_lock);
}

int proc_trace_name(char *buf, size_t cap, const char *dir, int pid, int32_t rank, int32_t start, int32_t stop,
                    bool gz)
{
    int n = snprintf(buf, cap, "%s/msmonitor_trace_%d_rank%d_step%d-%d.json%s", dir, pid, (int)(rank < 0 ? 0 : rank),
                     (int)start, (int)stop, gz ? ".gz" : "");

    return n >= 0 && (size_t)n < cap ? 0 : -ENAMETOOLONG;
}

/* ---- create / consume ---- */

static int tr_create(const struct proc_config *cfg, struct proc **ret)
{
    struct proc *p;
    int rc;

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
    atomic_store(&g_window_end, UINT64_MAX);
    atomic_store(&g_mk_step, -1);
    atomic_store(&g_mk_start, p->opts.start_step);
    atomic_store(&g_mk_stop, p->opts.start_step < 0 ? -1 : p->opts.stop_step);
    atomic_store(&g_mk_phase, PROC_TRACE_MK_ARMED);
    if (p->opts.export_db) {
        struct proc_config dc = p->cfg;
        dc.mode = PROC_DB;
        dc.trace = NULL;
        rc = proc_db_ops.create(&dc, &p->db);
        if (rc != 0) {
            LOG_ERROR("nputrace: the DB output for --export-type Db could not be created: %s; trace only",
                      errno_name(-rc));
            p->db = NULL;
        }
    }
    *ret = p;
    return 0;
}

static int tr_start(struct proc *p)
{
    if (p->db && proc_db_ops.start(p->db) != 0) {
        LOG_ERROR("nputrace: the DB output did not start; trace only");
        proc_db_ops.destroy(p->db);
        p->db = NULL;
    }
    return 0;
}

/* Room for one more event (lock held); counts and logs (once) what does not fit. */
static bool tr_room(struct proc *p)
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

/* ---- marker-delimited windows: a program without a step call ---- */

static uint64_t tr_range_start(const struct pl_range *g)
{
    return g->done == PL_PART_DEVICE ? g->dev_start : g->host_start;
}

/* Keep only what is stored and starts in [t, hi): before t (an earlier step's records, so the
 * storage holds about one step while the window is armed) counts as before_window, from hi
 * on as after_window (records stored before the closing step's marker arrived: the vendor
 * may deliver markers in a later buffer than kernels). Compacts the chunk lists in place. */
static void tr_keep_between(struct proc *p, uint64_t t, uint64_t hi)
{
    struct tr_rchunk *rw = p->rhead, *rn;
    struct tr_gchunk *gw = p->ghead, *gn;
    size_t wi = 0, kept = 0;

    for (struct tr_rchunk *c = p->rhead; c; c = c->next)
        for (size_t i = 0; i < c->n; i++) {
            if (trace_fmt_start(&c->r[i]) < t || trace_fmt_start(&c->r[i]) >= hi) {
                if (trace_fmt_start(&c->r[i]) < t)
                    p->before_window++;
                else
                    p->after_window++;
                continue;
            }
            if (wi == TR_CHUNK) {
                rw->n = wi;
                rw = rw->next;
                wi = 0;
            }
            rw->r[wi++] = c->r[i]; /* the write position never passes the read position */
            kept++;
        }
    if (rw) {
        rw->n = wi;
        for (struct tr_rchunk *c = rw->next; c; c = rn) {
            rn = c->next;
            free(c);
        }
        rw->next = NULL;
        p->rtail = rw;
    }
    p->nrecs = kept;
    wi = kept = 0;
    for (struct tr_gchunk *c = p->ghead; c; c = c->next)
        for (size_t i = 0; i < c->n; i++) {
            if (tr_range_start(&c->g[i]) < t || tr_range_start(&c->g[i]) >= hi) {
                if (tr_range_start(&c->g[i]) < t)
                    p->before_window++;
                else
                    p->after_window++;
                continue;
            }
            if (wi == TR_CHUNK) {
                gw->n = wi;
                gw = gw->next;
                wi = 0;
            }
            gw->g[wi++] = c->g[i];
            kept++;
        }
    if (gw) {
        gw->n = wi;
        for (struct tr_gchunk *c = gw->next; c; c = gn) {
            gn = c->next;
            free(c);
        }
        gw->next = NULL;
        p->gtail = gw;
    }
    p->nranges = kept;
}

/* The batch's host `step <N>` range starts move the window: the start of `step <start>`
 * opens it, the start of `step <stop>` closes it (the same boundaries as a step() call
 * between the steps). Called with p->lock held, before the batch's records are stored. */
static void tr_marker_scan(struct proc *p, const struct pl_batch *b)
{
    for (size_t i = 0; i < b->nrecs; i++) {
        const struct mon_marker *m = &b->recs[i].u.marker;
        int64_t n;
        if (b->recs[i].kind != MON_KIND_MARKER || m->source_kind != 0 || !(m->flag & MON_MARKER_START) ||
            names_step_parse(m->name, &n) != 0)
            continue;
        if (n > atomic_load(&g_mk_step))
            atomic_store(&g_mk_step, n);
        if (atomic_load(&g_mk_phase) == PROC_TRACE_MK_REFUSED)
            return;
        if (!p->win_start) {
            bool first = !p->seen_step;
            p->seen_step = true;
            tr_keep_between(p, m->timestamp, UINT64_MAX);
            if (p->opts.start_step < 0) { /* -1: the first step that begins in the session */
                p->opts.start_step = n;
                p->opts.stop_step = n > INT32_MAX - p->opts.iterations ? INT32_MAX : n + p->opts.iterations;
                atomic_store(&g_mk_stop, p->opts.stop_step);
                atomic_store(&g_mk_start, n);
            }
            if (n > p->opts.start_step && first) {
                /* the first step we see is past the start: other steps than asked would break
                 * the alignment of the ranks' traces (the dyno-mode rule) */
                LOG_ERROR("nputrace config ignored: start step %d already passed (now at step %d)",
                          (int)p->opts.start_step, (int)n);
                atomic_store(&g_mk_phase, PROC_TRACE_MK_REFUSED);
                return;
            }
            if (n >= p->opts.start_step) {
                p->win_start = m->timestamp;
                atomic_store(&g_mk_phase, PROC_TRACE_MK_OPEN);
                LOG_INFO("nputrace: `step %d` began: window [%d, %d) open", (int)n, (int)p->opts.start_step,
                         (int)p->opts.stop_step);
            }
        }
        if (p->win_start && n >= p->opts.stop_step && atomic_load(&g_window_end) == UINT64_MAX) {
            proc_trace_close_window(m->timestamp);
            atomic_store(&g_mk_phase, PROC_TRACE_MK_CLOSED);
            LOG_INFO("nputrace: `step %d` began: window [%d, %d) closed", (int)n, (int)p->opts.start_step,
                     (int)p->opts.stop_step);
        }
    }
}

/* --export-type Db: the DB gets the same window cut as the trace, so a record of the step after
 * the window that arrives before the stop is not in it either. A range goes with the record
 * that completed it. The common batch lies wholly inside and is passed on as it is. */
static void tr_db_consume(struct proc *p, const struct pl_batch *b, uint64_t begin, uint64_t end)
{
    struct mon_record *recs = NULL;
    struct pl_range *rng = NULL;
    size_t i, j = 0, n = 0, m = 0;

    for (i = 0; i < b->nrecs; i++) {
        uint64_t t = trace_fmt_start(&b->recs[i]);
        if (t < begin || t >= end)
            break;
    }
    if (i == b->nrecs) {
        proc_db_ops.consume(p->db, b);
        return;
    }
    recs = malloc(b->nrecs * sizeof(*recs));
    rng = malloc((b->nranges ? b->nranges : 1) * sizeof(*rng));
    if (!recs || !rng) {
        /* uncut rather than lost: the extra rows are outside the window, never missing ones */
        proc_db_ops.consume(p->db, b);
        goto out;
    }
    for (i = 0; i < b->nrecs; i++) {
        uint64_t t = trace_fmt_start(&b->recs[i]);
        bool keep = t >= begin && t < end;
        for (; j < b->nranges && b->ranges[j].at == i; j++) {
            if (!keep)
                continue;
            rng[m] = b->ranges[j];
            rng[m++].at = n;
        }
        if (keep)
            recs[n++] = b->recs[i];
    }
    if (n) {
        struct pl_batch cut = { .recs = recs, .nrecs = n, .ranges = rng, .nranges = m };
        proc_db_ops.consume(p->db, &cut);
    }
out:
    free(recs);
    free(rng);
}

static void tr_consume(struct proc *p, const struct pl_batch *b)
{
    uint64_t end, begin = 0;

    pthread_mutex_lock(&p->lock);
    if (p->opts.marker_steps) {
        tr_marker_scan(p, b);
        if (atomic_load(&g_mk_phase) == PROC_TRACE_MK_REFUSED) {
            pthread_mutex_unlock(&p->lock);
            return; /* nothing of this session is written; it is stopped at the next tick */
        }
        /* armed: keep from the latest step start on (purged at the next); open: from win_start */
        begin = p->win_start;
    }
    end = atomic_load(&g_window_end);
    for (size_t i = 0; i < b->nrecs; i++) {
        if (b->recs[i].kind == MON_KIND_MARKER)
            continue; /* written from the completed ranges below */
        if (trace_fmt_start(&b->recs[i]) < begin) {
            p->before_window++;
            continue;
        }
        if (trace_fmt_start(&b->recs[i]) >= end) {
            p->after_window++;
            continue;
        }
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
        const struct pl_range *g = &b->ranges[i];
        if (tr_range_start(g) < begin) {
            p->before_window++;
            continue;
        }
        if (tr_range_start(g) >= end) {
            p->after_window++;
            continue;
        }
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
    if (p->db)
        tr_db_consume(p, b, begin, end);
}

static int tr_tick(struct proc *p)
{
    return p->db ? proc_db_ops.tick(p->db) : 0;
}

static void tr_set_kinds(struct proc *p, uint32_t mask)
{
    if (p->db)
        proc_db_ops.set_kinds(p->db, mask);
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

static uint64_t tr_base(struct proc *p)
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
static uint64_t tr_body(struct proc *p, struct tr_out *o, struct jw *w, uint64_t base, struct tr_tracks *ts)
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

static int tr_write_file(struct proc *p)
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

    rc = proc_trace_name(path, sizeof(path), p->dir, (int)getpid(), p->cfg.rank, p->opts.start_step,
                         p->opts.stop_step, gz);
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
                                   .pid = (uint32_t)getpid(), .base_ns = base, .start_step = p->opts.start_step,
                                   .stop_step = p->opts.stop_step, .devices = devs,
                                   .window_end_ns = atomic_load(&g_window_end) == UINT64_MAX ? 0
                                                                                             : atomic_load(&g_window_end),
                                   .after_window = p->after_window,
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
    pthread_mutex_lock(&g_last_lock);
    (void)str_copy(g_last_path, sizeof(g_last_path), path, strlen(path));
    pthread_mutex_unlock(&g_last_lock);
    LOG_INFO("nputrace: trace of steps [%d, %d) written to %s (%" PRIu64 " events, %" PRIu64 " bytes%s)",
             (int)p->opts.start_step, (int)p->opts.stop_step, path, events, o.bytes, gz ? " before gzip" : "");
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

static int tr_stop(struct proc *p, const char *parallel_group_info)
{
    int rc = 0, rdb = 0;
    bool write = true;

    pthread_mutex_lock(&p->lock);
    if (p->opts.marker_steps && atomic_load(&g_mk_phase) == PROC_TRACE_MK_REFUSED) {
        write = false; /* refused when the first step was seen (logged): no file */
    } else if (p->opts.marker_steps && !p->win_start) {
        LOG_WARN("nputrace: steps [%d, %d) not traced: no `step <N>` marker range of the window started before "
                 "the session ended", (int)p->opts.start_step, (int)p->opts.stop_step);
        write = false;
    } else if (p->opts.marker_steps) {
        tr_keep_between(p, p->win_start, atomic_load(&g_window_end));
        LOG_INFO("nputrace: marker-delimited window [%d, %d): %" PRIu64 " records before the start of `step %d` "
                 "left out", (int)p->opts.start_step, (int)p->opts.stop_step, p->before_window,
                 (int)p->opts.start_step);
    }
    if (write)
        rc = tr_write_file(p);
    else
        tr_keep_between(p, UINT64_MAX, UINT64_MAX);
    pthread_mutex_unlock(&p->lock);
    if (p->db)
        rdb = proc_db_ops.stop(p->db, parallel_group_info);
    return rc != 0 ? rc : rdb;
}

static void tr_destroy(struct proc *p)
{
    if (!p)
        return;
    if (p->db)
        proc_db_ops.destroy(p->db);
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

const struct proc_ops proc_trace_ops = {
    .name = "trace",
    .create = tr_create,
    .start = tr_start,
    .consume = tr_consume,
    .tick = tr_tick,
    .set_kinds = tr_set_kinds,
    .stop = tr_stop,
    .destroy = tr_destroy,
};
