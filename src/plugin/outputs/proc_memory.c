/* proc_memory: standalone processor. Results live in module state (the Python accessors
 * have no session handle) guarded by one mutex; strings are copied into a string pool
 * (pipeline.h) so results stay valid whatever the backend does with its own strings. Marker
 * results are the pipeline's completed parts, in the order their records arrived. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "plugin/outputs/proc.h"
#include "plugin/outputs/proc_memory.h"

struct rlist {
    struct msmon_result *v;
    size_t n, cap;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int32_t g_kinds[MON_KIND_LIMIT];
static size_t g_nkinds;
static bool g_want[MON_KIND_LIMIT];
static struct rlist g_res[MON_KIND_LIMIT];
static struct pl_strpool *g_pool; /* created with the first session's strings */
/* True while a session collects: consume() may realloc the arrays, so results are only handed
 * out between stop and the next session (04-plugin.md §13: "call after stop()"). */
static bool g_collecting;

struct proc {
    int unused;
};

static bool standalone_kind(int32_t k)
{
    return k == MON_KIND_API || k == MON_KIND_KERNEL || k == MON_KIND_MARKER || k == MON_KIND_COMMUNICATION ||
           k == MON_KIND_ACL_API || k == MON_KIND_NODE_API || k == MON_KIND_RUNTIME_API;
}

/* Backend strings live for the process at fixed addresses (record.h), so a direct-mapped
 * cache from the backend's pointer to our copy skips hashing the text on almost every record. */
#define PTR_CACHE 1024
static struct { const char *src, *copy; } g_ptr_cache[PTR_CACHE];

/* Interned copy of s (g_mu held); NULL only when out of memory. */
static const char *pool_str(const char *s)
{
    const char *t = NULL;
    size_t slot = ((uintptr_t)s >> 3) * 0x9E3779B97F4A7C15ull >> 54; /* 10 bits */
    if (s && g_ptr_cache[slot].src == s)
        return g_ptr_cache[slot].copy;
    if (!g_pool && pl_strpool_create(0, &g_pool) < 0)
        return NULL;
    if (pl_strpool_id(g_pool, s, &t) < 0)
        return NULL;
    if (s) {
        g_ptr_cache[slot].src = s;
        g_ptr_cache[slot].copy = t;
    }
    return t;
}

static void reset_locked(void)
{
    for (int k = 0; k < MON_KIND_LIMIT; k++) {
        free(g_res[k].v);
        g_res[k] = (struct rlist){ 0 };
    }
    pl_strpool_destroy(g_pool);
    g_pool = NULL;
    memset(g_ptr_cache, 0, sizeof(g_ptr_cache));
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

/* One marker result per completed part (g_mu held): host lines carry the END record's
 * process/thread, device lines the END record's device/stream (05-outputs.md §4.4). */
static void add_marker(const struct pl_range *m)
{
    struct msmon_result *r = push(MON_KIND_MARKER);
    if (!r)
        return;
    r->name = pool_str(m->name);
    r->domain = pool_str(m->domain);
    r->id = m->id;
    if (m->done == PL_PART_HOST) {
        r->source_kind = 0;
        r->start_ns = m->host_start;
        r->end_ns = m->host_end;
        r->pid = m->end_pid;
        r->tid = m->end_tid;
    } else {
        r->source_kind = 1;
        r->start_ns = m->dev_start;
        r->end_ns = m->dev_end;
        r->device_id = m->device_id;
        r->stream_id = m->stream_id;
    }
}

static void add_record(const struct mon_record *rec)
{
    int32_t k = rec->kind;
    struct msmon_result *r;
    if (k <= 0 || k >= MON_KIND_LIMIT || !g_want[k] || k == MON_KIND_MARKER)
        return;
    if (mon_kind_is_api(k)) {
        const struct mon_api *a = &rec->u.api;
        if (!(r = push(k)))
            return;
        r->name = pool_str(a->name);
        r->start_ns = a->start;
        r->end_ns = a->end;
        r->pid = a->pid;
        r->tid = a->tid;
        r->correlation_id = a->correlation_id;
    } else if (k == MON_KIND_KERNEL) {
        const struct mon_kernel *kr = &rec->u.kernel;
        if (!(r = push(k)))
            return;
        r->name = pool_str(kr->name);
        r->type = pool_str(kr->type);
        r->start_ns = kr->start;
        r->end_ns = kr->end;
        r->device_id = kr->device_id;
        r->stream_id = kr->stream_id;
        r->correlation_id = kr->correlation_id;
    } else if (k == MON_KIND_COMMUNICATION) {
        const struct mon_comm *c = &rec->u.comm;
        if (!(r = push(k)))
            return;
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
    }
}

static void mem_consume(struct proc *p, const struct pl_batch *b)
{
    size_t j = 0;
    (void)p;
    pthread_mutex_lock(&g_mu);
    bool markers = g_want[MON_KIND_MARKER];
    for (size_t i = 0; i < b->nrecs; i++) {
        add_record(&b->recs[i]);
        for (; j < b->nranges && b->ranges[j].at == i; j++)
            if (markers)
                add_marker(&b->ranges[j]);
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
    (void)p;
    pthread_mutex_lock(&g_mu);
    g_collecting = false;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

static void mem_destroy(struct proc *p)
{
    if (!p)
        return;
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
