/* filter: parser and matcher of the record filter (docs/design/session.md#filter). A parsed filter is an
 * immutable snapshot with per-kind name lists and a lock-free match cache keyed by the
 * (interned, stable) name pointer. Readers keep a counted reference to the snapshot in
 * thread-local storage and revalidate it with one atomic load of a generation number. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "contract/fgram.h"
#include "plugin/pipeline/filter.h"
#include "plugin/pipeline/idmap.h"

#define CACHE_SLOTS 4096 /* power of two */
#define CACHE_VALID (1ull << 61)
#define CACHE_HIT (1ull << 60)
#define CACHE_PTR_MASK ((1ull << 56) - 1)

struct kind_names {
    char **names;
    size_t n;
};

struct fsnap {
    atomic_long refs;
    bool active;                      /* map non-empty */
    bool kind_on[MON_KIND_LIMIT];
    struct kind_names k[MON_KIND_LIMIT];
    _Atomic uint64_t cache[CACHE_SLOTS]; /* ptr | kind << 56 | HIT | VALID */
};

struct filter_state {
    _Atomic uint64_t gen;   /* globally unique per (state, snapshot) */
    struct fsnap *cur;      /* guarded by mu */
    pthread_mutex_t mu;
    pthread_mutex_t comp_mu;
    struct idmap *comp;     /* ids of dropped markers; guarded by comp_mu */
    char text[FILTER_MAX_TEXT + 1]; /* as last set, for the outputs' session end; guarded by mu */
};

/* Generations are unique across all filter states, so a thread's cached reference can never
 * be mistaken for one of a newer state allocated at the same address. */
static _Atomic uint64_t global_gen = 1;

struct tls_ref {
    uint64_t gen;
    struct fsnap *snap;
};
static _Thread_local struct tls_ref tls;
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void snap_free(struct fsnap *s)
{
    for (int k = 0; k < MON_KIND_LIMIT; k++) {
        for (size_t i = 0; i < s->k[k].n; i++)
            free(s->k[k].names[i]);
        free(s->k[k].names);
    }
    free(s);
}

static void snap_unref(struct fsnap *s)
{
    if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        snap_free(s);
}

/* Thread exit: drop the reference the thread's cache held. */
static void tls_destructor(void *p)
{
    snap_unref(p);
    tls.snap = NULL;
    tls.gen = 0;
}

static void tls_key_init(void)
{
    (void)pthread_key_create(&tls_key, tls_destructor);
}

static int snap_add_name(struct fsnap *s, int kind, const char *name, size_t len)
{
    struct kind_names *kn = &s->k[kind];
    for (size_t i = 0; i < kn->n; i++)
        if (strlen(kn->names[i]) == len && memcmp(kn->names[i], name, len) == 0)
            return 0;
    char **nn = realloc(kn->names, (kn->n + 1) * sizeof(*nn));
    if (!nn)
        return -ENOMEM;
    kn->names = nn;
    char *copy = strndup(name, len);
    if (!copy)
        return -ENOMEM;
    kn->names[kn->n++] = copy;
    return 0;
}

/* One event of the contract's lenient parse: (kind, NULL) turns the kind on, then a name. */
static int snap_item(void *arg, int kind, const char *name, size_t len)
{
    struct fsnap *s = arg;

    if (kind <= 0 || kind >= MON_KIND_LIMIT)
        return -EINVAL; /* cannot happen: fgram only reports the 11 kinds */
    s->kind_on[kind] = true;
    return name ? snap_add_name(s, kind, name, len) : 0;
}

/* The grammar (and its warnings for skipped items) is the contract's, shared with the CLI;
 * only the snapshot building is ours. */
static int snap_parse(const char *text, size_t len, struct fsnap **ret)
{
    struct fsnap *s = calloc(1, sizeof(*s));
    size_t valid = 0;
    int rc;

    if (!s)
        return -ENOMEM;
    atomic_init(&s->refs, 1);
    rc = fgram_parse(text, len, FGRAM_LENIENT, snap_item, s, &valid, NULL, 0);
    if (rc < 0) {
        snap_free(s);
        return rc;
    }
    s->active = valid > 0;
    *ret = s;
    return 0;
}

int filter_state_create(struct filter_state **ret)
{
    if (!ret)
        return -EINVAL;
    struct filter_state *fs = calloc(1, sizeof(*fs));
    if (!fs)
        return -ENOMEM;
    int rc = snap_parse("", 0, &fs->cur);
    if (rc < 0) {
        free(fs);
        return rc;
    }
    pthread_mutex_init(&fs->mu, NULL);
    pthread_mutex_init(&fs->comp_mu, NULL);
    atomic_init(&fs->gen, atomic_fetch_add(&global_gen, 1));
    pthread_once(&tls_once, tls_key_init);
    *ret = fs;
    return 0;
}

void filter_state_destroy(struct filter_state *fs)
{
    if (!fs)
        return;
    snap_unref(fs->cur); /* threads still caching it drop their references later */
    idmap_destroy(fs->comp);
    pthread_mutex_destroy(&fs->mu);
    pthread_mutex_destroy(&fs->comp_mu);
    free(fs);
}

int filter_state_set(struct filter_state *fs, const char *text)
{
    if (!fs)
        return -EINVAL;
    size_t len = text ? strnlen(text, FILTER_MAX_TEXT + 1) : 0;
    if (len > FILTER_MAX_TEXT) {
        LOG_ERROR("filter: text of more than %d bytes rejected", FILTER_MAX_TEXT);
        return -EINVAL;
    }
    struct fsnap *s;
    int rc = snap_parse(text ? text : "", len, &s);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&fs->mu);
    struct fsnap *old = fs->cur;
    fs->cur = s;
    memcpy(fs->text, text ? text : "", len);
    fs->text[len] = '\0';
    atomic_store_explicit(&fs->gen, atomic_fetch_add(&global_gen, 1), memory_order_release);
    pthread_mutex_unlock(&fs->mu);
    snap_unref(old);
    return 0;
}

/* Slow path: the filter changed (or another state is used on this thread). */
static struct fsnap *snap_refresh(struct filter_state *fs)
{
    pthread_mutex_lock(&fs->mu);
    struct fsnap *s = fs->cur;
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    uint64_t g = atomic_load_explicit(&fs->gen, memory_order_relaxed);
    pthread_mutex_unlock(&fs->mu);
    struct fsnap *old = tls.snap;
    tls.snap = s;
    tls.gen = g;
    (void)pthread_setspecific(tls_key, s);
    snap_unref(old);
    return s;
}

static inline struct fsnap *snap_get(struct filter_state *fs)
{
    if (__builtin_expect(atomic_load_explicit(&fs->gen, memory_order_acquire) == tls.gen, 1))
        return tls.snap;
    return snap_refresh(fs);
}

static bool names_match(const struct kind_names *kn, const char *name)
{
    for (size_t i = 0; i < kn->n; i++)
        if (strstr(name, kn->names[i]))
            return true;
    return false;
}

/* Rule 5 with the per-pointer cache. Racing writers store identical values, so a plain
 * relaxed atomic slot is enough. */
static bool name_keep(struct fsnap *s, int kind, const char *name)
{
    if (!name || !*name)
        return false;
    uintptr_t p = (uintptr_t)name;
    if ((p & ~CACHE_PTR_MASK) != 0)
        return names_match(&s->k[kind], name);
    uint64_t key = (uint64_t)p | ((uint64_t)kind << 56) | CACHE_VALID;
    size_t slot = (size_t)((((uint64_t)p >> 3) * 0x9E3779B97F4A7C15ull) >> 40 ^ (uint64_t)kind) & (CACHE_SLOTS - 1);
    uint64_t e = atomic_load_explicit(&s->cache[slot], memory_order_relaxed);
    if ((e & ~CACHE_HIT) == key)
        return (e & CACHE_HIT) != 0;
    bool hit = names_match(&s->k[kind], name);
    atomic_store_explicit(&s->cache[slot], key | (hit ? CACHE_HIT : 0), memory_order_relaxed);
    return hit;
}

static bool marker_keep(struct filter_state *fs, struct fsnap *s, const struct mon_marker *m)
{
    bool host = m->source_kind == 0;
    if (host && (m->flag & (MON_MARKER_INSTANT | MON_MARKER_START))) {
        if (name_keep(s, MON_KIND_MARKER, m->name))
            return true;
        /* A plain host instant has no companions to drop later. */
        if (m->flag != 1) {
            pthread_mutex_lock(&fs->comp_mu);
            if (!fs->comp)
                (void)idmap_create(FILTER_COMPANION_CAP, 0, &fs->comp);
            if (fs->comp)
                (void)idmap_put(fs->comp, m->id, NULL);
            pthread_mutex_unlock(&fs->comp_mu);
        }
        return false;
    }
    bool dropped = false;
    pthread_mutex_lock(&fs->comp_mu);
    if (fs->comp && idmap_get(fs->comp, m->id)) {
        dropped = true;
        /* Last record of the marker: device END / device instant, or the plain host END. */
        bool last = host ? m->flag == 4 : (m->flag & (32 | 8)) != 0;
        if (last)
            idmap_del(fs->comp, m->id);
    }
    pthread_mutex_unlock(&fs->comp_mu);
    return !dropped;
}

static bool snap_keep(struct filter_state *fs, struct fsnap *s, const struct mon_record *r)
{
    int k = r->kind;
    if (k == MON_KIND_MEMORY || k == MON_KIND_MEMSET || k == MON_KIND_MEMCPY)
        return true;
    if (k <= 0 || k >= MON_KIND_LIMIT || !s->kind_on[k])
        return false;
    switch (k) {
    case MON_KIND_KERNEL: return name_keep(s, k, r->u.kernel.name);
    case MON_KIND_API:
    case MON_KIND_ACL_API:
    case MON_KIND_NODE_API:
    case MON_KIND_RUNTIME_API: return name_keep(s, k, r->u.api.name);
    case MON_KIND_COMMUNICATION: return name_keep(s, k, r->u.comm.name);
    case MON_KIND_HCCL: return name_keep(s, k, r->u.hccl.name);
    case MON_KIND_MARKER: return marker_keep(fs, s, &r->u.marker);
    default: return false;
    }
}

bool filter_state_keep(struct filter_state *fs, const struct mon_record *r)
{
    struct fsnap *s = snap_get(fs);
    return !s->active || snap_keep(fs, s, r);
}

size_t filter_state_apply(struct filter_state *fs, struct mon_record *recs, size_t n)
{
    struct fsnap *s = snap_get(fs);
    if (!s->active)
        return n;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (!snap_keep(fs, s, &recs[i]))
            continue;
        if (kept != i)
            recs[kept] = recs[i];
        kept++;
    }
    return kept;
}

size_t filter_state_kind_names(struct filter_state *fs, int kind)
{
    if (kind <= 0 || kind >= MON_KIND_LIMIT)
        return 0;
    return snap_get(fs)->k[kind].n;
}

size_t filter_state_text(struct filter_state *fs, char *buf, size_t cap)
{
    if (!cap)
        return 0;
    pthread_mutex_lock(&fs->mu);
    size_t n = strnlen(fs->text, cap - 1);
    memcpy(buf, fs->text, n);
    pthread_mutex_unlock(&fs->mu);
    buf[n] = '\0';
    return n;
}

bool filter_state_active(struct filter_state *fs)
{
    return snap_get(fs)->active;
}
