/* proc_memory: standalone processor. Results live in module state (the Python accessors
 * have no session handle) guarded by one mutex; strings are copied into a per-session pool
 * so results stay valid whatever the backend does with its own strings. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "plugin/pipeline/markpair.h"
#include "plugin/outputs/proc.h"
#include "plugin/outputs/proc_memory.h"

#define POOL_BUCKETS 4096

struct pstr {
    struct pstr *next;
    char s[];
};

struct rlist {
    struct msmon_result *v;
    size_t n, cap;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int32_t g_kinds[MON_KIND_LIMIT];
static size_t g_nkinds;
static bool g_want[MON_KIND_LIMIT];
static struct rlist g_res[MON_KIND_LIMIT];
static struct pstr *g_pool[POOL_BUCKETS];
/* True while a session collects: consume() may realloc the arrays, so results are only handed
 * out between stop and the next session (04-plugin.md §13: "call after stop()"). */
static bool g_collecting;

struct proc {
    uint64_t session_start;
    struct markpair *mp;
};

static bool standalone_kind(int32_t k)
{
    return k == MON_KIND_API || k == MON_KIND_KERNEL || k == MON_KIND_MARKER || k == MON_KIND_COMMUNICATION ||
           k == MON_KIND_ACL_API || k == MON_KIND_NODE_API || k == MON_KIND_RUNTIME_API;
}

/* Interned copy of s (g_mu held); NULL only when out of memory. */
static const char *pool_str(const char *s)
{
    if (!s)
        s = "";
    uint64_t h = 0xCBF29CE484222325ull;
    for (const char *c = s; *c; c++)
        h = (h ^ (unsigned char)*c) * 0x100000001B3ull;
    struct pstr **b = &g_pool[h & (POOL_BUCKETS - 1)];
    for (struct pstr *e = *b; e; e = e->next)
        if (strcmp(e->s, s) == 0)
            return e->s;
    size_t len = strlen(s);
    struct pstr *e = malloc(sizeof(*e) + len + 1);
    if (!e)
        return NULL;
    memcpy(e->s, s, len + 1);
    e->next = *b;
    *b = e;
    return e->s;
}

static void reset_locked(void)
{
    for (int k = 0; k < MON_KIND_LIMIT; k++) {
        free(g_res[k].v);
        g_res[k] = (struct rlist){ 0 };
    }
    for (size_t i = 0; i < POOL_BUCKETS; i++) {
        struct pstr *e = g_pool[i];
        while (e) {
            struct pstr *nx = e->next;
            free(e);
            e = nx;
        }
        g_pool[i] = NULL;
    }
}

void proc_memory_reset(void)
{
    pthread_mutex_lock(&g_mu);
    reset_locked();
    pthread_mutex_unlock(&g_mu);
}

int proc_memory_set_requested_kinds(const int32_t *kinds, size_t n)
{
    int32_t keep[MON_KIND_LIMIT];
    bool seen[MON_KIND_LIMIT] = { 0 };
    size_t nk = 0;
    for (size_t i = 0; kinds && i < n; i++) {
        int32_t k = kinds[i];
        if (k < 0 || k >= MON_KIND_LIMIT || !standalone_kind(k) || seen[k])
            continue;
        seen[k] = true;
        keep[nk++] = k;
    }
    if (nk == 0)
        return -EINVAL;
    pthread_mutex_lock(&g_mu);
    memcpy(g_kinds, keep, nk * sizeof(keep[0]));
    g_nkinds = nk;
    memcpy(g_want, seen, sizeof(seen));
    pthread_mutex_unlock(&g_mu);
    return 0;
}

int proc_memory_kinds(int32_t *out, size_t cap, size_t *ret_n)
{
    if (!ret_n || (cap && !out))
        return -EINVAL;
    pthread_mutex_lock(&g_mu);
    size_t n = g_nkinds;
    for (size_t i = 0; i < n && i < cap; i++)
        out[i] = g_kinds[i];
    pthread_mutex_unlock(&g_mu);
    *ret_n = n;
    return n > cap ? -ENOSPC : 0;
}

int proc_memory_results(int32_t kind, const struct msmon_result **arr, size_t *ret_n)
{
    if (!arr || !ret_n || kind < 0 || kind >= MON_KIND_LIMIT || !standalone_kind(kind))
        return -EINVAL;
    pthread_mutex_lock(&g_mu);
    bool busy = g_collecting;
    *arr = busy ? NULL : g_res[kind].v;
    *ret_n = busy ? 0 : g_res[kind].n;
    pthread_mutex_unlock(&g_mu);
    if (busy) {
        LOG_WARN("MsptiMonitor results are available after stop");
        return -EBUSY;
    }
    return 0;
}

/* Appends a zeroed result of kind (g_mu held); NULL when out of memory. */
static struct msmon_result *push(int32_t kind)
{
    struct rlist *l = &g_res[kind];
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 256;
        struct msmon_result *nv = realloc(l->v, nc * sizeof(*nv));
        if (!nv)
            return NULL;
        l->v = nv;
        l->cap = nc;
    }
    struct msmon_result *r = &l->v[l->n++];
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    return r;
}

/* Marker lines arrive from markpair_feed, called with g_mu held. */
static void on_marker_line(void *ctx, const struct mp_line *l)
{
    struct proc *p = ctx;
    if (l->end < p->session_start)
        return;
    struct msmon_result *r = push(MON_KIND_MARKER);
    if (!r)
        return;
    r->name = pool_str(l->name);
    r->domain = pool_str(l->domain);
    r->source_kind = l->source_kind;
    r->id = l->id;
    r->start_ns = l->start;
    r->end_ns = l->end;
    r->pid = l->pid;
    r->tid = l->tid;
    r->device_id = l->device_id;
    r->stream_id = l->stream_id;
}

static void mem_consume(struct proc *p, const struct mon_record *recs, size_t n)
{
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < n; i++) {
        const struct mon_record *rec = &recs[i];
        int32_t k = rec->kind;
        if (k <= 0 || k >= MON_KIND_LIMIT || !g_want[k])
            continue;
        struct msmon_result *r;
        if (mon_kind_is_api(k)) {
            const struct mon_api *a = &rec->u.api;
            if (a->end < p->session_start || !(r = push(k)))
                continue;
            r->name = pool_str(a->name);
            r->start_ns = a->start;
            r->end_ns = a->end;
            r->pid = a->pid;
            r->tid = a->tid;
            r->correlation_id = a->correlation_id;
        } else if (k == MON_KIND_KERNEL) {
            const struct mon_kernel *kr = &rec->u.kernel;
            if (kr->end < p->session_start || !(r = push(k)))
                continue;
            r->name = pool_str(kr->name);
            r->type = pool_str(kr->type);
            r->start_ns = kr->start;
            r->end_ns = kr->end;
            r->device_id = kr->device_id;
            r->stream_id = kr->stream_id;
            r->correlation_id = kr->correlation_id;
        } else if (k == MON_KIND_COMMUNICATION) {
            const struct mon_comm *c = &rec->u.comm;
            if (c->end < p->session_start || !(r = push(k)))
                continue;
            r->name = pool_str(c->name);
            r->comm_name = pool_str(c->comm_name);
            r->alg_type = pool_str(c->alg_type);
            r->data_type = mon_comm_dtype_name(c->data_type);
            r->count = c->count;
            r->start_ns = c->start;
            r->end_ns = c->end;
            r->device_id = c->device_id;
            r->stream_id = c->stream_id;
            r->correlation_id = c->correlation_id;
        } else if (k == MON_KIND_MARKER) {
            markpair_feed(p->mp, &rec->u.marker);
        }
    }
    pthread_mutex_unlock(&g_mu);
}

static int mem_create(const struct proc_config *cfg, struct proc **ret)
{
    if (!cfg || !ret)
        return -EINVAL;
    struct proc *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    int rc = markpair_create(on_marker_line, p, &p->mp);
    if (rc < 0) {
        free(p);
        return rc;
    }
    p->session_start = cfg->session_start_ns;
    pthread_mutex_lock(&g_mu);
    reset_locked(); /* results of the previous session end here */
    g_collecting = true;
    pthread_mutex_unlock(&g_mu);
    *ret = p;
    return 0;
}

static int mem_start(struct proc *p)
{
    (void)p;
    return 0;
}

static int mem_tick(struct proc *p)
{
    (void)p;
    return 0;
}

static void mem_set_kinds(struct proc *p, uint32_t mask)
{
    (void)p;
    (void)mask;
}

static int mem_stop(struct proc *p, const char *parallel_group_info)
{
    (void)parallel_group_info;
    markpair_clear(p->mp);
    pthread_mutex_lock(&g_mu);
    g_collecting = false;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

static void mem_destroy(struct proc *p)
{
    if (!p)
        return;
    markpair_destroy(p->mp);
    pthread_mutex_lock(&g_mu);
    g_collecting = false; /* a session torn down without stop */
    pthread_mutex_unlock(&g_mu);
    free(p);
}

const struct proc_ops proc_memory_ops = {
    .name = "standalone",
    .create = mem_create,
    .start = mem_start,
    .consume = mem_consume,
    .tick = mem_tick,
    .set_kinds = mem_set_kinds,
    .stop = mem_stop,
    .destroy = mem_destroy,
};
