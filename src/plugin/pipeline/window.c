/* window: the trace window stage (window.h). Batches are held as they arrive (a marker may
 * be delivered in a later buffer than the kernels of its step, so what belongs to the window
 * is only known later) and cut once, at the session's end, by the window's final bounds.
 * While a marker-bounded window is armed, what started before the latest step is let go at
 * each step start, so the hold stays about one step long until the window opens. */
#include "plugin/pipeline/window.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "contract/names.h"
#include "plugin/pipeline/batch.h"

struct window {
    pthread_mutex_t lock;
    struct window_opts o;
    _Atomic uint64_t *dropped;
    struct mon_record *recs;      /* held, arrival order */
    size_t nrecs, caprecs;
    struct pl_range *ranges;      /* held; `at` indexes recs, ascending */
    size_t nranges, capranges;
    bool drop_logged, seen_step;
    struct window_state st;
};

int window_create(const struct window_opts *o, _Atomic uint64_t *dropped, struct window **ret)
{
    struct window *w;

    if (!o || !ret || (!o->marker_steps && (o->start_step < 0 || o->stop_step < o->start_step)))
        return -EINVAL;
    w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    pthread_mutex_init(&w->lock, NULL);
    w->o = *o;
    if (!w->o.max_held)
        w->o.max_held = WINDOW_MAX_HELD;
    w->dropped = dropped;
    w->st = (struct window_state){ .step = -1, .start = o->start_step,
                                   .stop = o->marker_steps && o->start_step < 0 ? -1 : o->stop_step,
                                   .phase = o->marker_steps ? WINDOW_ARMED : WINDOW_OPEN,
                                   .marker_steps = o->marker_steps };
    *ret = w;
    return 0;
}

void window_destroy(struct window *w)
{
    if (!w)
        return;
    free(w->recs);
    free(w->ranges);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

static uint64_t win_range_start(const struct pl_range *g)
{
    return g->done == PL_PART_DEVICE ? g->dev_start : g->host_start;
}

static void win_count(struct window *w, uint64_t t, uint64_t lo)
{
    if (t < lo)
        w->st.before++;
    else
        w->st.after++;
}

/* Keep what starts in [lo, hi): ranges by their own start, other records by theirs, a marker
 * record while a range it completed is kept (or, completing none, by its time). What is let
 * go is counted before/after; marker records are companions and not counted. Compacts in
 * place (lock held). */
static void win_keep_between(struct window *w, uint64_t lo, uint64_t hi)
{
    size_t j = 0, nr = 0, nn = 0;

    for (size_t i = 0; i < w->nrecs; i++) {
        const struct mon_record *r = &w->recs[i];
        size_t first = nr;
        bool keep, any = false;
        for (; j < w->nranges && w->ranges[j].at == i; j++) {
            uint64_t t = win_range_start(&w->ranges[j]);
            any = true;
            if (t < lo || t >= hi) {
                win_count(w, t, lo);
                continue;
            }
            w->ranges[nr] = w->ranges[j];
            w->ranges[nr++].at = nn;
        }
        if (r->kind == MON_KIND_MARKER) {
            keep = any ? nr > first : r->u.marker.timestamp >= lo && r->u.marker.timestamp < hi;
        } else {
            uint64_t t = mon_record_start(r);
            keep = t >= lo && t < hi;
            if (!keep)
                win_count(w, t, lo);
        }
        if (keep)
            w->recs[nn++] = *r;
    }
    w->nrecs = nn;
    w->nranges = nr;
}

/* The batch's host `step <N>` range starts move a marker-bounded window: the start of `step
 * <start>` opens it, the start of `step <stop>` closes it (the same boundaries as a step()
 * call between the steps). Lock held, before the batch is held. */
static void win_scan(struct window *w, const struct pl_batch *b)
{
    struct window_state *s = &w->st;

    for (size_t i = 0; i < b->nrecs; i++) {
        const struct mon_marker *m = &b->recs[i].u.marker;
        int64_t n; /* the contract's marker rule: n in [0, INT32_MAX] */
        if (b->recs[i].kind != MON_KIND_MARKER || m->source_kind != 0 || !(m->flag & MON_MARKER_START) ||
            names_step_parse(m->name, &n) != 0)
            continue;
        if (n > s->step)
            s->step = n;
        if (s->phase == WINDOW_REFUSED)
            return;
        if (!s->begin_ns) {
            bool first = !w->seen_step;
            w->seen_step = true;
            win_keep_between(w, m->timestamp, UINT64_MAX);
            if (s->start < 0) { /* -1: the first step that begins in the session */
                s->start = n;
                s->stop = n > INT32_MAX - w->o.iterations ? INT32_MAX : n + w->o.iterations;
            }
            if (n > s->start && first) {
                /* the first step we see is past the start: other steps than asked would break
                 * the alignment of the ranks' traces (the dyno-mode rule) */
                LOG_ERROR("nputrace config ignored: start step %d already passed (now at step %d)", (int)s->start,
                          (int)n);
                s->phase = WINDOW_REFUSED;
                return;
            }
        }
        int was = s->phase;
        if (window_advance(s, n)) {
            if (was == WINDOW_ARMED) {
                s->begin_ns = m->timestamp;
                LOG_INFO("nputrace: `step %d` began: window [%d, %d) open", (int)n, (int)s->start, (int)s->stop);
            }
            if (s->phase == WINDOW_CLOSED) {
                s->end_ns = m->timestamp;
                LOG_INFO("nputrace: `step %d` began: window [%d, %d) closed", (int)n, (int)s->start, (int)s->stop);
            }
        }
    }
}

bool window_advance(struct window_state *s, int32_t n)
{
    int was = s->phase;

    if (s->phase == WINDOW_ARMED && n >= s->start)
        s->phase = WINDOW_OPEN;
    if (s->phase == WINDOW_OPEN && n >= s->stop)
        s->phase = WINDOW_CLOSED;
    return s->phase != was;
}

static int win_reserve(void **arr, size_t *cap, size_t need, size_t size)
{
    size_t nc = *cap ? *cap : 1024;
    void *p;

    if (need <= *cap)
        return 0;
    while (nc < need)
        nc *= 2;
    p = realloc(*arr, nc * size);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = nc;
    return 0;
}

void window_hold(struct window *w, const struct pl_batch *b)
{
    size_t base;

    pthread_mutex_lock(&w->lock);
    if (w->o.marker_steps)
        win_scan(w, b);
    if (w->st.phase == WINDOW_REFUSED)
        goto out; /* nothing of this session is written; it is stopped at the next tick */
    if (w->nrecs + w->nranges + b->nrecs + b->nranges > w->o.max_held ||
        win_reserve((void **)&w->recs, &w->caprecs, w->nrecs + b->nrecs, sizeof(*w->recs)) != 0 ||
        win_reserve((void **)&w->ranges, &w->capranges, w->nranges + b->nranges, sizeof(*w->ranges)) != 0) {
        atomic_fetch_add_explicit(w->dropped, b->nrecs + b->nranges, memory_order_relaxed);
        if (!w->drop_logged) {
            w->drop_logged = true;
            LOG_WARN("nputrace: the window holds more than %zu events; later ones are dropped and counted",
                     w->o.max_held);
        }
        goto out;
    }
    base = w->nrecs;
    memcpy(w->recs + base, b->recs, b->nrecs * sizeof(*w->recs));
    w->nrecs += b->nrecs;
    for (size_t i = 0; i < b->nranges; i++) {
        w->ranges[w->nranges] = b->ranges[i];
        w->ranges[w->nranges++].at = base + b->ranges[i].at;
    }
out:
    pthread_mutex_unlock(&w->lock);
}

void window_close(struct window *w, uint64_t end_ns)
{
    pthread_mutex_lock(&w->lock);
    if (!w->st.end_ns && end_ns) {
        w->st.end_ns = end_ns;
        w->st.phase = WINDOW_CLOSED;
    }
    pthread_mutex_unlock(&w->lock);
}

void window_get(struct window *w, struct window_state *ret)
{
    pthread_mutex_lock(&w->lock);
    *ret = w->st;
    pthread_mutex_unlock(&w->lock);
}

bool window_settled(const struct window_state *s)
{
    return s->phase != WINDOW_REFUSED && (!s->marker_steps || s->begin_ns);
}

void window_release(struct window *w, size_t per, void (*fn)(void *ctx, const struct pl_batch *b), void *ctx)
{
    struct window_state *s = &w->st;
    size_t j = 0;

    pthread_mutex_lock(&w->lock);
    if (!window_settled(s)) {
        if (s->phase != WINDOW_REFUSED) /* a refusal was logged when the first step was seen */
            LOG_WARN("nputrace: steps [%d, %d) not traced: no `step <N>` marker range of the window started "
                     "before the session ended", (int)s->start, (int)s->stop);
        w->nrecs = w->nranges = 0;
    } else {
        win_keep_between(w, s->begin_ns, s->end_ns ? s->end_ns : UINT64_MAX);
        if (s->marker_steps)
            LOG_INFO("nputrace: marker-delimited window [%d, %d): %" PRIu64 " records before the start of `step "
                     "%d` left out", (int)s->start, (int)s->stop, s->before, (int)s->start);
    }
    pthread_mutex_unlock(&w->lock);
    for (size_t off = 0; off < w->nrecs && per; off += per) {
        size_t n = w->nrecs - off < per ? w->nrecs - off : per, k = j;
        while (j < w->nranges && w->ranges[j].at < off + n)
            w->ranges[j++].at -= off;
        struct pl_batch b = { w->recs + off, n, w->ranges + k, j - k };
        fn(ctx, &b);
    }
    free(w->recs);
    free(w->ranges);
    w->recs = NULL;
    w->ranges = NULL;
    w->nrecs = w->nranges = w->caprecs = w->capranges = 0;
}
