/* proc_memory: standalone processor. Results live in module state (the Python accessors
 * have no session handle) guarded by one mutex. While a session collects, each kind is a
 * chunked array of compact records (12 B for Kernel/API, 48–56 B for markers and
 * Communication: strings as ids) in 2 MiB huge-page chunks that never move; the 120-byte
 * msmon_result array a reader asks for is materialised from them on the first read after
 * stop. Marker results are the pipeline's completed parts, in the order their records arrived. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/log.h"
#include "contract/kinds.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/pipeline.h"
#include "plugin/outputs/proc_memory.h"

#define NO_STR UINT32_MAX /* the pool was full / out of memory: the field reads NULL */

/* Compact stored records, one layout per kind family. Kernel and API records (nearly all of
 * them) are 12 B: what repeats (name, type, device, stream / name, pid, tid) is a 16-bit id
 * into a table of signatures, the start and the correlation id are deltas from the kind's
 * previous record (results are only ever decoded in order), the end is a 32-bit duration.
 * A record that does not fit (signature id >= 65535, a start more than ±2.1 s or a
 * correlation id more than ±32767 from the previous one, end < start or a duration >= 4.29 s)
 * is stored whole in a side list (40 B more; at worst 52 B per record). Each byte stored is a
 * byte the kernel zeroes on first touch, which is most of the cost of storing on this path. */
struct c_kernel {
    int32_t dstart;
    uint32_t dur;
    uint16_t sig;
    int16_t dcorr;
};
struct c_comm {
    uint64_t start, end, corr, count;
    uint32_t name, comm, alg, dev, stream;
    int32_t dtype;
};
struct c_marker {
    uint64_t start, end, id;
    uint32_t name, domain, a, b; /* host: pid, tid; device: device, stream */
    int32_t source_kind;
    uint32_t pad;
};
_Static_assert(sizeof(struct c_kernel) == 12 && sizeof(struct c_comm) == 56 && sizeof(struct c_marker) == 48,
               "compact result layouts");
#define DUR_LONG UINT32_MAX /* the whole record is in the kind's side list */
#define SIG_SHORT 0xFFFFu   /* signature ids below this fit a c_kernel */

/* A signature: Kernel (name, type, device, stream) or API (name, pid, tid, 0). */
struct sig {
    uint32_t v[4];
};

/* Chunks: 2 MiB, 2 MiB-aligned, madvise(MADV_HUGEPAGE): one page fault per 2 MiB instead
 * of 512, and a chunk never moves, so appending never copies what is stored. */
#define CHUNK_BYTES (2u << 20)

struct cvec {
    uint8_t **chunks;
    size_t nchunks, cap_chunks;
    size_t n;          /* records */
    size_t esz;        /* bytes per record */
    size_t per_chunk;
    uint8_t *cur, *cur_end; /* free space of the last chunk */
    struct long_rec { size_t i; uint64_t start, end, corr; uint32_t sig; } *longs; /* DUR_LONG records, ascending i */
    size_t nlongs, cap_longs;
    uint64_t prev_start, prev_corr; /* of the last Kernel/API record stored: the delta base */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int32_t g_kinds[MON_KIND_LIMIT];
static size_t g_nkinds;
static bool g_want[MON_KIND_LIMIT];
static struct cvec g_store[MON_KIND_LIMIT];
static struct msmon_result *g_mat[MON_KIND_LIMIT]; /* materialised on first read, per kind */
static bool g_mat_done[MON_KIND_LIMIT];
static struct pl_strpool *g_pool; /* created with the first session's strings */
static struct sig *g_sigs;        /* by id */
static size_t g_nsigs, g_cap_sigs;
static uint32_t *g_sig_slots;     /* open addressing, id + 1, 0 = empty */
static size_t g_nsig_slots;
/* True while a session collects: results are only handed out between stop and the next
 * session (docs/design/session.md#standalone-monitor: "call after stop()"). */
static bool g_collecting;

struct output {
    int unused;
};

static size_t kind_esz(int32_t k)
{
    return k == MON_KIND_COMMUNICATION ? sizeof(struct c_comm)
           : k == MON_KIND_MARKER      ? sizeof(struct c_marker)
                                       : sizeof(struct c_kernel); /* Kernel and the API kinds */
}

static uint8_t *chunk_alloc(void)
{
    size_t span = 2 * (size_t)CHUNK_BYTES;
    uint8_t *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uintptr_t a;

    if (p == MAP_FAILED)
        return NULL;
    a = ((uintptr_t)p + CHUNK_BYTES - 1) & ~(uintptr_t)(CHUNK_BYTES - 1);
    if (a > (uintptr_t)p)
        munmap(p, a - (uintptr_t)p);
    if ((uintptr_t)p + span > a + CHUNK_BYTES)
        munmap((uint8_t *)a + CHUNK_BYTES, (uintptr_t)p + span - (a + CHUNK_BYTES));
    (void)madvise((void *)a, CHUNK_BYTES, MADV_HUGEPAGE); /* advisory: 4 KiB pages still work */
    return (uint8_t *)a;
}

static void cvec_free(struct cvec *v)
{
    for (size_t i = 0; i < v->nchunks; i++)
        munmap(v->chunks[i], CHUNK_BYTES);
    free(v->chunks);
    free(v->longs);
    *v = (struct cvec){ 0 };
}

static void *cvec_push_slow(struct cvec *v, int32_t kind);

/* Room for one more record (g_mu held); NULL when out of memory. */
static inline void *cvec_push(struct cvec *v, int32_t kind)
{
    if (v->cur != v->cur_end) {
        void *r = v->cur;
        v->cur += v->esz;
        v->n++;
        return r;
    }
    return cvec_push_slow(v, kind);
}

/* cvec_push when the last chunk is full (or there is none). */
static void *cvec_push_slow(struct cvec *v, int32_t kind)
{
    uint8_t *c;
    if (!v->esz) {
        v->esz = kind_esz(kind);
        v->per_chunk = CHUNK_BYTES / v->esz;
    }
    if (v->nchunks == v->cap_chunks) {
        size_t nc = v->cap_chunks ? v->cap_chunks * 2 : 16;
        uint8_t **nv = realloc(v->chunks, nc * sizeof(*nv));
        if (!nv)
            return NULL;
        v->chunks = nv;
        v->cap_chunks = nc;
    }
    if (!(c = chunk_alloc()))
        return NULL;
    v->chunks[v->nchunks++] = c;
    v->cur = c;
    v->cur_end = c + v->per_chunk * v->esz;
    void *r = v->cur;
    v->cur += v->esz;
    v->n++;
    return r;
}

static const void *cvec_at(const struct cvec *v, size_t i)
{
    return v->chunks[i / v->per_chunk] + (i % v->per_chunk) * v->esz;
}

/* Backend strings live for the process at fixed addresses (record.h), so a direct-mapped
 * cache from the backend's pointer to our id skips hashing the text on almost every record. */
#define PTR_CACHE 1024
static struct { const char *src; uint32_t id; } g_ptr_cache[PTR_CACHE];

/* Interned id of s (g_mu held); NO_STR only when the pool is full or out of memory. */
static uint32_t str_id(const char *s)
{
    size_t slot = ((uintptr_t)s >> 3) * 0x9E3779B97F4A7C15ull >> 54; /* 10 bits */
    int64_t id;

    if (s && g_ptr_cache[slot].src == s)
        return g_ptr_cache[slot].id;
    if (!g_pool && pl_strpool_create(0, &g_pool) < 0)
        return NO_STR;
    id = pl_strpool_id(g_pool, s, NULL);
    if (id < 0 || id >= NO_STR)
        return NO_STR;
    if (s) {
        g_ptr_cache[slot].src = s;
        g_ptr_cache[slot].id = (uint32_t)id;
    }
    return (uint32_t)id;
}

static const char *str_text(uint32_t id)
{
    return id == NO_STR || !g_pool ? NULL : pl_strpool_text(g_pool, id, NULL);
}

static uint64_t sig_hash(const struct sig *g)
{
    uint64_t h = ((uint64_t)g->v[0] << 32 | g->v[1]) * 0x9E3779B97F4A7C15ull;
    return (h ^ ((uint64_t)g->v[2] << 32 | g->v[3])) * 0xC2B2AE3D27D4EB4Full;
}

static int sig_grow(void)
{
    size_t ns = g_nsig_slots ? g_nsig_slots * 2 : 1024;
    uint32_t *slots = calloc(ns, sizeof(*slots));

    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < g_nsigs; i++) {
        size_t j = sig_hash(&g_sigs[i]) & (ns - 1);
        while (slots[j])
            j = (j + 1) & (ns - 1);
        slots[j] = (uint32_t)(i + 1);
    }
    free(g_sig_slots);
    g_sig_slots = slots;
    g_nsig_slots = ns;
    return 0;
}

/* Id of signature g (g_mu held); NO_STR when out of memory. */
static uint32_t sig_lookup(const struct sig *g)
{
    size_t j;

    if (!g_nsig_slots && sig_grow() < 0)
        return NO_STR;
    for (j = sig_hash(g) & (g_nsig_slots - 1); g_sig_slots[j]; j = (j + 1) & (g_nsig_slots - 1))
        if (memcmp(&g_sigs[g_sig_slots[j] - 1], g, sizeof(*g)) == 0)
            return g_sig_slots[j] - 1;
    if (g_nsigs >= NO_STR - 1)
        return NO_STR;
    if (g_nsigs == g_cap_sigs) {
        size_t nc = g_cap_sigs ? g_cap_sigs * 2 : 256;
        struct sig *nv = realloc(g_sigs, nc * sizeof(*nv));
        if (!nv)
            return NO_STR;
        g_sigs = nv;
        g_cap_sigs = nc;
    }
    g_sigs[g_nsigs] = *g;
    g_sig_slots[j] = (uint32_t)(g_nsigs + 1);
    g_nsigs++;
    if (g_nsigs * 2 > g_nsig_slots)
        (void)sig_grow(); /* still consistent if it fails (load < 1) */
    return (uint32_t)(g_nsigs - 1);
}

/* The signature of a Kernel/API record, through a direct-mapped cache keyed by the backend's
 * string pointers and the two numbers (they repeat for almost every record). */
#define SIG_CACHE 1024
static struct sig_slot { const char *p0, *p1; uint32_t n0, n1, id; } g_sig_cache[SIG_CACHE];

/* sig_id on a cache miss: intern the strings, look the signature up, fill the slot. */
static uint32_t sig_id_miss(struct sig_slot *c, const char *p0, const char *p1, uint32_t n0, uint32_t n1)
{
    struct sig g = { { str_id(p0), p1 ? str_id(p1) : NO_STR, n0, n1 } };
    uint32_t id = sig_lookup(&g);

    *c = (struct sig_slot){ p0, p1, n0, n1, id };
    return id;
}

/* Inlined: the hit (nearly every record) costs a hash and one cache line. */
static inline uint32_t sig_id(const char *p0, const char *p1, uint32_t n0, uint32_t n1)
{
    size_t slot = (((uintptr_t)p0 >> 3) ^ ((uintptr_t)p1 >> 2) ^ n0 * 0x85EBCA6Bu ^ n1 * 0x27D4EB2Fu) *
                      0x9E3779B97F4A7C15ull >> 54;
    struct sig_slot *c = &g_sig_cache[slot];

    if (c->p0 == p0 && c->p1 == p1 && c->n0 == n0 && c->n1 == n1 && c->id != NO_STR && (p0 || p1))
        return c->id;
    return sig_id_miss(c, p0, p1, n0, n1);
}

/* store_ranged for a record that does not fit 12 bytes: whole into the side list. */
static void store_long(struct cvec *v, struct c_kernel *r, uint64_t start, uint64_t end, uint64_t corr,
                       uint32_t sig, int64_t ds, int64_t dc)
{
    *r = (struct c_kernel){ 0, DUR_LONG, 0, 0 };
    if (v->nlongs == v->cap_longs) {
        size_t nc = v->cap_longs ? v->cap_longs * 2 : 64;
        struct long_rec *nv = realloc(v->longs, nc * sizeof(*nv));
        if (!nv) {
            /* out of memory: the record reads with the previous start, zero length and
             * signature 0, and the delta base stays what the decoder will have */
            r->dur = 0;
            v->prev_start -= (uint64_t)ds;
            v->prev_corr -= (uint64_t)dc;
            return;
        }
        v->longs = nv;
        v->cap_longs = nc;
    }
    v->longs[v->nlongs++] = (struct long_rec){ v->n - 1, start, end, corr, sig };
}

/* The 12-byte Kernel/API record just pushed to v (g_mu held); the whole record goes to the
 * side list when a field does not fit. Inlined: the fit is every record but a few. */
static inline void store_ranged(struct cvec *v, struct c_kernel *r, uint64_t start, uint64_t end, uint64_t corr,
                                uint32_t sig)
{
    int64_t ds = (int64_t)(start - v->prev_start), dc = (int64_t)(corr - v->prev_corr);

    v->prev_start = start;
    v->prev_corr = corr;
    if (sig < SIG_SHORT && ds >= INT32_MIN && ds <= INT32_MAX && dc >= INT16_MIN && dc <= INT16_MAX &&
        end >= start && end - start < DUR_LONG) {
        *r = (struct c_kernel){ (int32_t)ds, (uint32_t)(end - start), (uint16_t)sig, (int16_t)dc };
        return;
    }
    store_long(v, r, start, end, corr, sig, ds, dc);
}

static void reset_locked(void)
{
    for (int k = 0; k < MON_KIND_LIMIT; k++) {
        cvec_free(&g_store[k]);
        free(g_mat[k]);
        g_mat[k] = NULL;
        g_mat_done[k] = false;
    }
    pl_strpool_destroy(g_pool);
    g_pool = NULL;
    memset(g_ptr_cache, 0, sizeof(g_ptr_cache));
    free(g_sigs);
    free(g_sig_slots);
    g_sigs = NULL;
    g_sig_slots = NULL;
    g_nsigs = g_cap_sigs = g_nsig_slots = 0;
    memset(g_sig_cache, 0, sizeof(g_sig_cache));
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
        if (k < 0 || k >= MON_KIND_LIMIT || !kinds_standalone(k) || seen[k])
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

/* Decoding state of one kind's compact records, walked in order. */
struct walk {
    size_t li;             /* next side-list entry */
    uint64_t start, corr;  /* of the previous Kernel/API record */
};

/* One msmon_result from the compact record i of kind (g_mu held), i ascending from 0. */
static void materialise_one(int32_t kind, const struct cvec *v, size_t i, struct walk *w, struct msmon_result *r)
{
    const void *e = cvec_at(v, i);

    memset(r, 0, sizeof(*r));
    r->kind = kind;
    if (kind == MON_KIND_COMMUNICATION) {
        const struct c_comm *c = e;
        r->name = str_text(c->name);
        r->comm_name = str_text(c->comm);
        r->alg_type = str_text(c->alg);
        r->data_type = mon_comm_dtype_name(c->dtype);
        r->count = c->count;
        r->start_ns = c->start;
        r->end_ns = c->end;
        r->device_id = c->dev;
        r->stream_id = c->stream;
        r->correlation_id = c->corr;
    } else if (kind == MON_KIND_MARKER) {
        const struct c_marker *c = e;
        r->name = str_text(c->name);
        r->domain = str_text(c->domain);
        r->id = c->id;
        r->source_kind = c->source_kind;
        r->start_ns = c->start;
        r->end_ns = c->end;
        if (c->source_kind == 0) {
            r->pid = c->a;
            r->tid = c->b;
        } else {
            r->device_id = c->a;
            r->stream_id = c->b;
        }
    } else {
        const struct c_kernel *c = e;
        uint32_t sig = c->sig;
        if (c->dur == DUR_LONG && w->li < v->nlongs && v->longs[w->li].i == i) {
            const struct long_rec *l = &v->longs[w->li++];
            w->start = l->start;
            w->corr = l->corr;
            r->end_ns = l->end;
            sig = l->sig;
        } else {
            w->start += (uint64_t)(int64_t)c->dstart;
            w->corr += (uint64_t)(int64_t)c->dcorr;
            r->end_ns = w->start + c->dur;
        }
        r->start_ns = w->start;
        r->correlation_id = w->corr;
        const struct sig *g = sig < g_nsigs ? &g_sigs[sig] : NULL;
        if (!g)
            return;
        r->name = str_text(g->v[0]);
        if (kind == MON_KIND_KERNEL) {
            r->type = str_text(g->v[1]);
            r->device_id = g->v[2];
            r->stream_id = g->v[3];
        } else {
            r->pid = g->v[2];
            r->tid = g->v[3];
        }
    }
}

/* The msmon_result array of kind, built once after stop (g_mu held); 0 or -ENOMEM. The
 * compact store is freed once materialised: the array holds everything it did. */
static int materialise(int32_t kind)
{
    struct cvec *v = &g_store[kind];
    struct msmon_result *arr;

    if (g_mat_done[kind])
        return 0;
    if (v->n) {
        arr = malloc(v->n * sizeof(*arr));
        if (!arr)
            return -ENOMEM;
        struct walk w = { 0 };
        for (size_t i = 0; i < v->n; i++)
            materialise_one(kind, v, i, &w, &arr[i]);
        g_mat[kind] = arr;
    }
    g_mat_done[kind] = true;
    return 0;
}

int proc_memory_results(int32_t kind, const struct msmon_result **arr, size_t *ret_n)
{
    int rc = 0;

    if (!arr || !ret_n || kind < 0 || kind >= MON_KIND_LIMIT || !kinds_standalone(kind))
        return -EINVAL;
    pthread_mutex_lock(&g_mu);
    bool busy = g_collecting;
    if (!busy)
        rc = materialise(kind);
    *arr = busy || rc ? NULL : g_mat[kind];
    *ret_n = busy || rc ? 0 : g_store[kind].n;
    pthread_mutex_unlock(&g_mu);
    if (busy) {
        LOG_WARN("MsptiMonitor results are available after stop");
        return -EBUSY;
    }
    if (rc)
        LOG_ERROR("MsptiMonitor results: out of memory for %zu records", g_store[kind].n);
    return rc;
}

/* One marker result per completed part (g_mu held): host lines carry the END record's
 * process/thread, device lines the END record's device/stream (docs/design/outputs.md#line-shapes). */
static void add_marker(const struct pl_range *m)
{
    struct c_marker *r = cvec_push(&g_store[MON_KIND_MARKER], MON_KIND_MARKER);
    if (!r)
        return;
    r->name = str_id(m->name);
    r->domain = str_id(m->domain);
    r->id = m->id;
    r->pad = 0;
    if (m->done == PL_PART_HOST) {
        r->source_kind = 0;
        r->start = m->host_start;
        r->end = m->host_end;
        r->a = m->end_pid;
        r->b = m->end_tid;
    } else {
        r->source_kind = 1;
        r->start = m->dev_start;
        r->end = m->dev_end;
        r->a = m->device_id;
        r->b = m->stream_id;
    }
}

static void add_record(const struct mon_record *rec)
{
    int32_t k = rec->kind;
    if (k <= 0 || k >= MON_KIND_LIMIT || !g_want[k] || k == MON_KIND_MARKER)
        return;
    if (k == MON_KIND_KERNEL) {
        const struct mon_kernel *kr = &rec->u.kernel;
        uint32_t sig = sig_id(kr->name, kr->type ? kr->type : "", kr->device_id, kr->stream_id);
        struct c_kernel *r = cvec_push(&g_store[k], k);
        if (r)
            store_ranged(&g_store[k], r, kr->start, kr->end, kr->correlation_id, sig);
    } else if (mon_kind_is_api(k)) {
        const struct mon_api *a = &rec->u.api;
        uint32_t sig = sig_id(a->name, NULL, a->pid, a->tid);
        struct c_kernel *r = cvec_push(&g_store[k], k);
        if (r)
            store_ranged(&g_store[k], r, a->start, a->end, a->correlation_id, sig);
    } else if (k == MON_KIND_COMMUNICATION) {
        const struct mon_comm *c = &rec->u.comm;
        struct c_comm *r = cvec_push(&g_store[k], k);
        if (!r)
            return;
        *r = (struct c_comm){ c->start, c->end, c->correlation_id, c->count, str_id(c->name), str_id(c->comm_name),
                              str_id(c->alg_type), c->device_id, c->stream_id, c->data_type };
    }
}

static void mem_consume(struct output *p, const struct pl_batch *b)
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

static int mem_create(const struct output_config *cfg, struct output **ret)
{
    if (!cfg || !ret)
        return -EINVAL;
    struct output *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    pthread_mutex_lock(&g_mu);
    reset_locked(); /* results of the previous session end here */
    g_collecting = true;
    pthread_mutex_unlock(&g_mu);
    *ret = p;
    return 0;
}

static int mem_start(struct output *p)
{
    (void)p;
    return 0;
}

static int mem_tick(struct output *p)
{
    (void)p;
    return 0;
}

static void mem_set_kinds(struct output *p, uint32_t mask)
{
    (void)p;
    (void)mask;
}

static int mem_stop(struct output *p, const char *parallel_group_info)
{
    (void)parallel_group_info;
    (void)p;
    pthread_mutex_lock(&g_mu);
    g_collecting = false;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

static void mem_destroy(struct output *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&g_mu);
    g_collecting = false; /* a session torn down without stop */
    pthread_mutex_unlock(&g_mu);
    free(p);
}

const struct output_ops proc_memory_ops = {
    .name = "standalone",
    .create = mem_create,
    .start = mem_start,
    .consume = mem_consume,
    .tick = mem_tick,
    .set_kinds = mem_set_kinds,
    .stop = mem_stop,
    .destroy = mem_destroy,
};
