/* proc_metric: the metric-mode processor (docs/design/outputs.md#metric-datagrams). Completion threads aggregate
 * into their own per-thread tables keyed by (kind, device, interned name pointer) under an
 * uncontended per-table lock; completed marker ranges come paired from the pipeline. Each
 * tick merges the tables by name text, sends the upstream per-device sum lines, the marker
 * ranges and the per-name OpStats datagrams (the session counters are the pipeline's). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/jw.h"
#include "common/log.h"
#include "common/strutil.h"
#include "common/utf8.h"
#include "contract/datamsg.h"
#include "plugin/penv.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/pipeline.h"
#include "plugin/outputs/stepsum.h"

#define DGRAM_MAX 4096
#define NAME_MAX_BYTES 512
#define NAMES_PER_GROUP 4096
#define TTAB_MAX_ENTRIES 65536   /* per thread per interval; beyond: folded into <other> */
#define MARKER_DONE_CAP 262144   /* completed ranges kept per interval */

static const char OTHER_NAME[] = "<other>";
static const char EMPTY_NAME[] = "";

struct agg {
    const char *name;   /* NULL = free slot */
    const char *domain; /* markers only */
    int64_t dev;        /* -1: API kinds, host marker ranges */
    int32_t kind;
    uint64_t count, total, min, max, bytes;
};

/* Aggregation table: held by one consume() call at a time, drained by the tick. */
struct ttab {
    pthread_mutex_t mu;
    struct agg *slots;
    size_t cap, n;
    struct ttab *next;
};

/* A completed marker range (docs/design/outputs.md#metric-datagrams), kept until the tick. */
struct mdone {
    bool has_dev;
    uint32_t dev;
    uint64_t hs, he, ds, de;
    const char *name, *domain;
};

struct output {
    output_send_fn send;
    void *send_ctx;
    bool aggregates;
    uint32_t mask_cur, mask_interval;
    uint64_t last_tick_ns;
    pthread_mutex_t tabs_mu;
    struct ttab *tabs;
    struct pipeline *pl;
    pthread_mutex_t mk_mu;
    struct mdone *done;
    size_t ndone, done_cap;
    uint64_t done_dropped;
    struct stepsum *ss; /* per-step summaries for the cluster view (NULL: out of memory) */
};


/* ---------- per-thread tables ---------- */

static inline size_t agg_hash(const char *name, int32_t kind, int64_t dev)
{
    uint64_t h = (uint64_t)(uintptr_t)name * 0x9E3779B97F4A7C15ull;
    h ^= ((uint64_t)kind << 40) ^ (uint64_t)dev * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h ^ (h >> 29));
}

static int ttab_grow(struct ttab *t)
{
    size_t ncap = t->cap ? t->cap * 2 : 256;
    struct agg *ns = calloc(ncap, sizeof(*ns));
    if (!ns)
        return -ENOMEM;
    for (size_t i = 0; i < t->cap; i++) {
        struct agg *a = &t->slots[i];
        if (!a->name)
            continue;
        size_t j = agg_hash(a->name, a->kind, a->dev) & (ncap - 1);
        while (ns[j].name)
            j = (j + 1) & (ncap - 1);
        ns[j] = *a;
    }
    free(t->slots);
    t->slots = ns;
    t->cap = ncap;
    return 0;
}

/* Out of line: inlined into the consume loop it spilled the loop's registers. */
__attribute__((noinline)) static void ttab_add(struct ttab *t, int32_t kind, int64_t dev, const char *name, const char *domain,
                     uint64_t dur, uint64_t bytes)
{
    if (!name)
        name = EMPTY_NAME;
    for (;;) {
        if (t->cap) {
            size_t mask = t->cap - 1;
            size_t i = agg_hash(name, kind, dev) & mask;
            for (;;) {
                struct agg *a = &t->slots[i];
                if (!a->name)
                    break;
                if (a->name == name && a->kind == kind && a->dev == dev && a->domain == domain) {
                    a->count++;
                    a->total += dur;
                    a->bytes += bytes;
                    if (dur < a->min)
                        a->min = dur;
                    if (dur > a->max)
                        a->max = dur;
                    return;
                }
                i = (i + 1) & mask;
            }
            if (t->n * 4 < t->cap * 3) {
                struct agg *a = &t->slots[i];
                *a = (struct agg){ name, domain, dev, kind, 1, dur, dur, dur, bytes };
                t->n++;
                return;
            }
        }
        if (t->n >= TTAB_MAX_ENTRIES && name != OTHER_NAME) {
            name = OTHER_NAME; /* bounded memory under a flood of distinct names */
            domain = NULL;
            continue;
        }
        if ((t->n >= TTAB_MAX_ENTRIES * 2) || ttab_grow(t) < 0)
            return; /* out of memory: the record is lost from the aggregates */
    }
}

/* The hot path: one inlined probe of the record's home slot, which is where an entry lands
 * unless it collided when it was inserted; everything else (probing on, inserting, growing)
 * is the out-of-line ttab_add. */
static inline void ttab_add_fast(struct ttab *t, int32_t kind, int64_t dev, const char *name, uint64_t dur,
                                 uint64_t bytes)
{
    if (__builtin_expect(t->cap != 0 && name != NULL, 1)) {
        struct agg *a = &t->slots[agg_hash(name, kind, dev) & (t->cap - 1)];
        if (a->name == name && a->kind == kind && a->dev == dev && a->domain == NULL) {
            a->count++;
            a->total += dur;
            a->bytes += bytes;
            a->min = dur < a->min ? dur : a->min;
            a->max = dur > a->max ? dur : a->max;
            return;
        }
    }
    ttab_add(t, kind, dev, name, NULL, dur, bytes);
}

/* Returns a table locked for the caller. msPTI completes each buffer on a new short-lived
 * thread, so tables are pooled rather than owned per thread: the pool only grows to the peak
 * number of concurrent consume() calls, however long the session runs. Tables are only ever
 * prepended and are freed at destroy, so walking the list without tabs_mu is safe. */
static struct ttab *acquire_table(struct output *p)
{
    for (struct ttab *t = __atomic_load_n(&p->tabs, __ATOMIC_ACQUIRE); t; t = t->next)
        if (pthread_mutex_trylock(&t->mu) == 0)
            return t;
    struct ttab *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    pthread_mutex_init(&t->mu, NULL);
    /* tabs_mu before t->mu, the order metric_tick takes them in (t is not published yet, so
     * its lock cannot block; the one order keeps TSan's lock-order check quiet) */
    pthread_mutex_lock(&p->tabs_mu);
    pthread_mutex_lock(&t->mu);
    t->next = p->tabs;
    __atomic_store_n(&p->tabs, t, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&p->tabs_mu);
    return t;
}

/* ---------- markers ---------- */

/* mk_mu held. */
static void marker_complete(struct output *p, const struct pl_range *r)
{
    if (p->ndone == p->done_cap) {
        if (p->done_cap >= MARKER_DONE_CAP) {
            p->done_dropped++;
            return;
        }
        size_t nc = p->done_cap ? p->done_cap * 2 : 64;
        struct mdone *nd = realloc(p->done, nc * sizeof(*nd));
        if (!nd) {
            p->done_dropped++;
            return;
        }
        p->done = nd;
        p->done_cap = nc;
    }
    p->done[p->ndone++] = (struct mdone){ r->with_device, r->device_id, r->host_start, r->host_end,
                                          r->dev_start, r->dev_end, r->name, r->domain };
}

static void metric_ranges(struct output *p, const struct pl_range *rs, size_t n)
{
    bool locked = false;
    for (size_t i = 0; i < n; i++) {
        if (!pl_range_complete(&rs[i]))
            continue;
        if (!locked) {
            pthread_mutex_lock(&p->mk_mu);
            locked = true;
        }
        marker_complete(p, &rs[i]);
    }
    if (locked)
        pthread_mutex_unlock(&p->mk_mu);
}

/* ---------- consume ---------- */

static inline uint64_t dur_of(uint64_t s, uint64_t e)
{
    return e > s ? e - s : 0;
}

static const char *memory_op_name(int32_t op)
{
    return op == 0 ? "ALLOCATION" : op == 1 ? "RELEASE" : "UNKNOWN";
}

/* Per record: pick (name, bytes) by kind, the record's device and duration, then one inlined table probe. */
static void metric_consume(struct output *p, const struct pl_batch *b)
{
    const struct mon_record *recs = b->recs;
    size_t n = b->nrecs;
    if (b->nranges)
        metric_ranges(p, b->ranges, b->nranges);
    if (p->ss && (__atomic_load_n(&p->mask_cur, __ATOMIC_RELAXED) & (1u << MON_KIND_MARKER)))
        stepsum_feed(p->ss, b); /* step summaries come with the Marker kind */
    struct ttab *t = acquire_table(p);
    if (!t)
        return;
    for (size_t i = 0; i < n; i++) {
        const struct mon_record *r = &recs[i];
        const char *name;
        uint64_t bytes = 0;
        switch (r->kind) {
        case MON_KIND_KERNEL:
            name = r->u.kernel.name;
            break;
        case MON_KIND_API:
        case MON_KIND_ACL_API:
        case MON_KIND_NODE_API:
        case MON_KIND_RUNTIME_API:
            name = r->u.api.name;
            break;
        case MON_KIND_COMMUNICATION:
            name = r->u.comm.name;
            break;
        case MON_KIND_HCCL:
            name = r->u.hccl.name;
            break;
        case MON_KIND_MEMORY:
            name = memory_op_name(r->u.memory.op_type);
            bytes = r->u.memory.bytes;
            break;
        case MON_KIND_MEMSET:
            name = "MemSet";
            bytes = r->u.memset.bytes;
            break;
        case MON_KIND_MEMCPY:
            name = mon_memcpy_kind_name(r->u.memcpy.copy_kind);
            bytes = r->u.memcpy.bytes;
            break;
        default:
            continue;
        }
        struct mon_span sp = mon_record_span(r); /* the API kinds have no device: -1 */
        ttab_add_fast(t, r->kind, sp.device, name, dur_of(sp.start, sp.end), bytes);
    }
    pthread_mutex_unlock(&t->mu);
}

/* ---------- tick: merge by name text ---------- */

struct merged {
    struct agg *v;      /* entries */
    size_t n, cap;
    uint32_t *index;    /* entry + 1 */
    size_t icap;
};

static uint64_t str_hash(uint64_t h, const char *s)
{
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    return h * 0x100000001B3ull;
}

static uint64_t key_hash(const struct agg *a)
{
    uint64_t h = 0xCBF29CE484222325ull ^ ((uint64_t)a->kind << 33) ^ (uint64_t)a->dev;
    h = str_hash(h, a->name);
    return str_hash(h, a->domain);
}

static bool key_eq(const struct agg *a, const struct agg *b)
{
    return a->kind == b->kind && a->dev == b->dev && strcmp(a->name, b->name) == 0 &&
           (a->domain == b->domain || (a->domain && b->domain && strcmp(a->domain, b->domain) == 0));
}

static int merged_reindex(struct merged *m, size_t icap)
{
    uint32_t *ni = calloc(icap, sizeof(*ni));
    if (!ni)
        return -ENOMEM;
    for (size_t e = 0; e < m->n; e++) {
        size_t j = key_hash(&m->v[e]) & (icap - 1);
        while (ni[j])
            j = (j + 1) & (icap - 1);
        ni[j] = (uint32_t)(e + 1);
    }
    free(m->index);
    m->index = ni;
    m->icap = icap;
    return 0;
}

static int merged_add(struct merged *m, const struct agg *a)
{
    if ((m->n + 1) * 2 > m->icap && merged_reindex(m, m->icap ? m->icap * 2 : 1024) < 0)
        return -ENOMEM;
    size_t j = key_hash(a) & (m->icap - 1);
    while (m->index[j]) {
        struct agg *b = &m->v[m->index[j] - 1];
        if (key_eq(a, b)) {
            b->count += a->count;
            b->total += a->total;
            b->bytes += a->bytes;
            if (a->min < b->min)
                b->min = a->min;
            if (a->max > b->max)
                b->max = a->max;
            return 0;
        }
        j = (j + 1) & (m->icap - 1);
    }
    if (m->n == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 256;
        struct agg *nv = realloc(m->v, nc * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        m->v = nv;
        m->cap = nc;
    }
    m->v[m->n] = *a;
    m->index[j] = (uint32_t)(++m->n);
    return 0;
}

static int cmp_entry(const void *x, const void *y)
{
    const struct agg *a = x, *b = y;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    if (a->dev != b->dev)
        return a->dev < b->dev ? -1 : 1;
    if (a->total != b->total)
        return a->total > b->total ? -1 : 1;
    int c = strcmp(a->name, b->name);
    if (c)
        return c;
    return strcmp(a->domain ? a->domain : "", b->domain ? b->domain : "");
}

/* ---------- tick: output ---------- */

/* Names are capped without cutting a character (the one UTF-8 rule, common/utf8.h). */
static size_t name_cut(const char *s)
{
    return utf8_cut(s, strlen(s), NAME_MAX_BYTES);
}

static int send_json(struct output *p, const struct jw *w, int *first_err)
{
    if (w->err) {
        LOG_WARN("metric: datagram dropped (%s)", errno_name(-w->err));
        return w->err;
    }
    if (!p->send)
        return 0;
    int rc = p->send(p->send_ctx, w->buf, w->len);
    if (rc < 0 && *first_err == 0)
        *first_err = rc;
    return rc;
}

static bool is_mem_kind(int32_t k)
{
    return k == MON_KIND_MEMORY || k == MON_KIND_MEMSET || k == MON_KIND_MEMCPY;
}

static size_t dec_digits(uint64_t v)
{
    size_t d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* Serialise one op entry into buf; returns its length or 0 if it cannot fit a datagram. */
static size_t op_entry_json(const struct agg *a, char *buf, size_t cap)
{
    struct jw w;
    jw_init(&w, buf, cap);
    jw_obj_begin(&w);
    jw_key(&w, "avg");
    jw_uint(&w, a->count ? a->total / a->count : 0);
    if (is_mem_kind(a->kind)) {
        jw_key(&w, "bytes");
        jw_uint(&w, a->bytes);
    }
    jw_key(&w, "count");
    jw_uint(&w, a->count);
    if (a->kind == MON_KIND_MARKER) {
        const char *d = a->domain ? a->domain : "";
        jw_key(&w, "domain");
        jw_strn(&w, d, name_cut(d));
    }
    jw_key(&w, "max");
    jw_uint(&w, a->max);
    jw_key(&w, "min");
    jw_uint(&w, a->min);
    jw_key(&w, "name");
    jw_strn(&w, a->name, name_cut(a->name));
    jw_key(&w, "total");
    jw_uint(&w, a->total);
    jw_obj_end(&w);
    return w.err ? 0 : w.len;
}

struct opstats_ctx {
    const char *kind_name;
    int64_t dev;
    uint64_t interval_ns, now;
    char *entries;     /* concatenated entry JSON */
    size_t *off, *len; /* per entry */
};

struct opstats_range {
    const struct opstats_ctx *c;
    size_t from, to;
};

static void opstats_ops(struct jw *w, const void *ctx)
{
    const struct opstats_range *r = ctx;

    jw_arr_begin(w);
    for (size_t i = r->from; r->c && i < r->to; i++)
        if (r->c->len[i])
            jw_raw(w, r->c->entries + r->c->off[i], r->c->len[i]);
    jw_arr_end(w);
}

/* An OpStats datagram with the entries of r (none when r->c is NULL). */
static void opstats_msg(struct jw *w, const struct opstats_ctx *c, uint64_t sum, const struct opstats_range *r)
{
    const struct datamsg m = { .kind = DATAMSG_OP_STATS, .device_id = c->dev, .duration = sum, .timestamp = c->now };
    const struct datamsg_field extra[] = {
        { .key = "activity", .type = DATAMSG_STR, .s = c->kind_name, .slen = SIZE_MAX },
        { .key = "interval_ns", .type = DATAMSG_UINT, .u = c->interval_ns },
        { .key = "ops", .type = DATAMSG_FN, .fn = opstats_ops, .ctx = r },
    };

    (void)datamsg_write(w, &m, extra, sizeof(extra) / sizeof(extra[0]));
}

static int opstats_send_batch(struct output *p, struct opstats_ctx *c, const struct agg *g, size_t from,
                              size_t to, uint64_t sum, int *first_err)
{
    char buf[DGRAM_MAX + 1];
    struct jw w;
    const struct opstats_range r = { c, from, to };

    jw_init(&w, buf, sizeof(buf));
    opstats_msg(&w, c, sum, &r);
    (void)g;
    if (!w.err && w.len > DGRAM_MAX)
        w.err = -ENOSPC;
    return send_json(p, &w, first_err);
}

/* One (kind, device) group, sorted by total desc then name. */
static int send_opstats(struct output *p, struct agg *g, size_t n, uint64_t interval_ns, uint64_t now,
                        int *first_err)
{
    struct opstats_ctx c = { mon_kind_name(g[0].kind), g[0].dev, interval_ns, now, NULL, NULL, NULL };
    /* Fixed part: everything but the duration digits and the entries (a duration of 0 is
     * one digit). */
    char tmp[256];
    struct jw w;
    const struct opstats_range none = { NULL, 0, 0 };
    jw_init(&w, tmp, sizeof(tmp));
    opstats_msg(&w, &c, 0, &none);
    size_t fixed = w.len - 1;
    int rc = -ENOMEM;
    c.entries = malloc(n * 1024 + DGRAM_MAX);
    c.off = calloc(n, sizeof(size_t));
    c.len = calloc(n, sizeof(size_t));
    if (!c.entries || !c.off || !c.len)
        goto out_free;
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        /* Grow the arena when long escaped names need more than the 1 KiB average. */
        char ebuf[DGRAM_MAX];
        size_t l = op_entry_json(&g[i], ebuf, sizeof(ebuf));
        if (l == 0 || fixed + dec_digits(g[i].total) + l > DGRAM_MAX) {
            LOG_WARN("metric: OpStats entry for '%.64s' does not fit a datagram; dropped", g[i].name);
            continue;
        }
        if (pos + l > n * 1024 + DGRAM_MAX) {
            char *ne = realloc(c.entries, (pos + l) * 2);
            if (!ne)
                goto out_free;
            c.entries = ne;
        }
        memcpy(c.entries + pos, ebuf, l);
        c.off[i] = pos;
        c.len[i] = l;
        pos += l;
    }
    rc = 0;
    size_t from = 0, elen = 0, cnt = 0;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (!c.len[i])
            continue;
        size_t need = fixed + dec_digits(sum + g[i].total) + elen + (cnt ? 1 : 0) + c.len[i];
        if (cnt && need > DGRAM_MAX) {
            (void)opstats_send_batch(p, &c, g, from, i, sum, first_err);
            from = i;
            elen = 0;
            cnt = 0;
            sum = 0;
        }
        elen += (cnt ? 1 : 0) + c.len[i];
        sum += g[i].total;
        cnt++;
    }
    if (cnt)
        (void)opstats_send_batch(p, &c, g, from, n, sum, first_err);
out_free:
    free(c.entries);
    free(c.off);
    free(c.len);
    return rc;
}

static void send_sum_line(struct output *p, int32_t kind, int64_t dev, uint64_t sum, uint64_t now, int *first_err)
{
    char buf[256];
    struct jw w;
    const struct datamsg m = { .kind = mon_kind_name(kind), .device_id = dev, .duration = sum, .timestamp = now };
    jw_init(&w, buf, sizeof(buf));
    (void)datamsg_write(&w, &m, NULL, 0);
    send_json(p, &w, first_err);
}

static void send_marker_line(struct output *p, bool host, const struct mdone *d, int *first_err)
{
    char buf[DGRAM_MAX + 1];
    struct jw w;
    jw_init(&w, buf, sizeof(buf));
    const char *dom = d->domain && *d->domain ? d->domain : "default";
    /* a host marker's device is upstream's 4294967295, not -1 */
    const struct datamsg m = { .kind = mon_kind_name(MON_KIND_MARKER), .device_id = host ? 4294967295LL : (int64_t)d->dev,
                               .duration = host ? dur_of(d->hs, d->he) : dur_of(d->ds, d->de),
                               .timestamp = host ? d->hs : d->ds, .name = d->name, .name_len = name_cut(d->name) };
    const struct datamsg_field extra[] = { { .key = "domain", .type = DATAMSG_STR, .s = dom, .slen = name_cut(dom) } };
    (void)datamsg_write(&w, &m, extra, 1);
    send_json(p, &w, first_err);
}

static void add_marker_aggs(struct merged *m, const struct mdone *d, size_t n, int *rc)
{
    for (size_t i = 0; i < n && *rc == 0; i++) {
        const char *dom = d[i].domain && *d[i].domain ? d[i].domain : "default";
        uint64_t hd = dur_of(d[i].hs, d[i].he);
        struct agg a = { d[i].name, dom, -1, MON_KIND_MARKER, 1, hd, hd, hd, 0 };
        *rc = merged_add(m, &a);
        if (d[i].has_dev && *rc == 0) {
            uint64_t dd = dur_of(d[i].ds, d[i].de);
            struct agg b = { d[i].name, dom, d[i].dev, MON_KIND_MARKER, 1, dd, dd, dd, 0 };
            *rc = merged_add(m, &b);
        }
    }
}

/* Keep the 4096 largest names of a group; fold the rest into "<other>". Returns new size. */
static size_t fold_group(struct agg *g, size_t n)
{
    if (n <= NAMES_PER_GROUP)
        return n;
    struct agg o = g[NAMES_PER_GROUP];
    o.name = OTHER_NAME;
    o.domain = g[0].kind == MON_KIND_MARKER ? "" : NULL;
    for (size_t i = NAMES_PER_GROUP + 1; i < n; i++) {
        o.count += g[i].count;
        o.total += g[i].total;
        o.bytes += g[i].bytes;
        if (g[i].min < o.min)
            o.min = g[i].min;
        if (g[i].max > o.max)
            o.max = g[i].max;
    }
    g[NAMES_PER_GROUP] = o;
    qsort(g, NAMES_PER_GROUP + 1, sizeof(*g), cmp_entry);
    return NAMES_PER_GROUP + 1;
}

static int metric_tick(struct output *p)
{
    uint64_t now = clock_real_ns();
    uint64_t mono = clock_mono_ns();
    uint64_t interval_ns = mono - p->last_tick_ns;
    p->last_tick_ns = mono;
    uint32_t mask = p->mask_interval;
    p->mask_interval = p->mask_cur;
    int first_err = 0;
    int rc = 0;
    struct merged m = { 0 };

    /* 1. Drain the per-thread tables, merging entries by name text. */
    pthread_mutex_lock(&p->tabs_mu);
    for (struct ttab *t = p->tabs; t; t = t->next) {
        pthread_mutex_lock(&t->mu);
        for (size_t i = 0; i < t->cap; i++) {
            struct agg *a = &t->slots[i];
            if (!a->name)
                continue;
            if (rc == 0 && (mask & (1u << a->kind)))
                rc = merged_add(&m, a);
            a->name = NULL;
        }
        t->n = 0;
        pthread_mutex_unlock(&t->mu);
    }
    pthread_mutex_unlock(&p->tabs_mu);

    /* 2. Take the completed marker ranges (incomplete ones age out in the pipeline). */
    pthread_mutex_lock(&p->mk_mu);
    struct mdone *done = p->done;
    size_t ndone = p->ndone;
    uint64_t dropped = p->done_dropped;
    p->done = NULL;
    p->ndone = p->done_cap = 0;
    p->done_dropped = 0;
    pthread_mutex_unlock(&p->mk_mu);
    if (dropped)
        LOG_WARN("metric: %llu completed marker ranges dropped (more than %d in one interval)",
                 (unsigned long long)dropped, MARKER_DONE_CAP);
    bool markers_on = (mask & (1u << MON_KIND_MARKER)) != 0;
    if (markers_on)
        add_marker_aggs(&m, done, ndone, &rc);
    if (rc < 0)
        LOG_ERROR("metric: aggregation failed (%s); part of this interval is lost", errno_name(-rc));

    if (m.n)
        qsort(m.v, m.n, sizeof(*m.v), cmp_entry);

    /* 3. Upstream per-device sum lines. */
    for (size_t i = 0; i < m.n;) {
        size_t j = i;
        uint64_t sum = 0;
        while (j < m.n && m.v[j].kind == m.v[i].kind && m.v[j].dev == m.v[i].dev)
            sum += m.v[j++].total;
        if (m.v[i].kind != MON_KIND_MARKER)
            send_sum_line(p, m.v[i].kind, m.v[i].dev, sum, now, &first_err);
        i = j;
    }
    /* 4. Marker ranges: host (and device) datagram per completed range. */
    if (markers_on) {
        for (size_t i = 0; i < ndone; i++) {
            send_marker_line(p, true, &done[i], &first_err);
            if (done[i].has_dev)
                send_marker_line(p, false, &done[i], &first_err);
        }
    }
    /* 5. Per-name aggregates (D12). */
    if (p->aggregates) {
        for (size_t i = 0; i < m.n;) {
            size_t j = i;
            while (j < m.n && m.v[j].kind == m.v[i].kind && m.v[j].dev == m.v[i].dev)
                j++;
            size_t gn = fold_group(&m.v[i], j - i);
            if (send_opstats(p, &m.v[i], gn, interval_ns, now, &first_err) < 0)
                LOG_ERROR("metric: OpStats of %s skipped (out of memory)", mon_kind_name(m.v[i].kind));
            i = j;
        }
    }
    /* 6. Step summaries (docs/cluster.md). */
    if (p->ss && markers_on) {
        int src = stepsum_tick(p->ss, p->send, p->send_ctx, now, interval_ns);
        if (src < 0 && first_err == 0)
            first_err = src;
    }
    free(done);
    free(m.v);
    free(m.index);
    return first_err;
}

/* ---------- lifecycle ---------- */

static int metric_create(const struct output_config *cfg, struct output **ret)
{
    if (!cfg || !ret)
        return -EINVAL;
    struct output *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->pl = cfg->pl;
    p->send = cfg->send;
    p->send_ctx = cfg->send_ctx;
    const char *agg = penv_get(PENV_METRIC_AGGREGATES);
    p->aggregates = true;
    if (agg && *agg) {
        if (strcmp(agg, "0") == 0)
            p->aggregates = false;
        else if (strcmp(agg, "1") != 0)
            LOG_WARN("Invalid value for MSMONITOR_METRIC_AGGREGATES = '%s' (expected 0 or 1); using 1", agg);
    }
    p->last_tick_ns = clock_mono_ns();
    if (stepsum_create(cfg->rank, (int32_t)getpid(), &p->ss) < 0)
        p->ss = NULL;
    pthread_mutex_init(&p->tabs_mu, NULL);
    pthread_mutex_init(&p->mk_mu, NULL);
    *ret = p;
    return 0;
}

static int metric_start(struct output *p)
{
    p->last_tick_ns = clock_mono_ns();
    return 0;
}

static void metric_set_kinds(struct output *p, uint32_t mask)
{
    __atomic_store_n(&p->mask_cur, mask, __ATOMIC_RELAXED); /* read by consume() for the step summaries */
    p->mask_interval |= mask;
}

static int metric_stop(struct output *p, const char *parallel_group_info)
{
    (void)parallel_group_info;
    return metric_tick(p); /* the final partial interval (D6) */
}

static void metric_destroy(struct output *p)
{
    if (!p)
        return;
    struct ttab *t = p->tabs;
    while (t) {
        struct ttab *nx = t->next;
        pthread_mutex_destroy(&t->mu);
        free(t->slots);
        free(t);
        t = nx;
    }
    free(p->done);
    stepsum_destroy(p->ss);
    pthread_mutex_destroy(&p->tabs_mu);
    pthread_mutex_destroy(&p->mk_mu);
    free(p);
}

const struct output_ops proc_metric_ops = {
    .name = "metric",
    .create = metric_create,
    .start = metric_start,
    .consume = metric_consume,
    .tick = metric_tick,
    .set_kinds = metric_set_kinds,
    .stop = metric_stop,
    .destroy = metric_destroy,
};
