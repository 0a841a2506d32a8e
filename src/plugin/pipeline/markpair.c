/* markpair: pairing state machine of 05-outputs.md §4.4 over two bounded id maps (host
 * entries from INSTANT_WITH_DEVICE/START records, device START times). Markers are rare
 * next to kernels, so one mutex serialises feeding. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "plugin/pipeline/idmap.h"
#include "plugin/pipeline/markpair.h"

#define FAST_DEVICES 256
#define SLOW_DEVICES 64 /* distinct ids >= 256 remembered (more are not expected) */

struct host_entry {
    uint64_t time;
    const char *name, *domain;
};
struct dev_entry {
    uint64_t time;
};

struct markpair {
    pthread_mutex_t mu;
    mp_line_fn fn;
    void *ctx;
    struct idmap *host;  /* id -> host_entry */
    struct idmap *dev;   /* id -> dev_entry */
    _Atomic uint64_t fast[FAST_DEVICES / 64];
    uint32_t slow[SLOW_DEVICES]; /* guarded by mu */
    size_t nslow;
};

int markpair_create(mp_line_fn fn, void *ctx, struct markpair **ret)
{
    if (!ret)
        return -EINVAL;
    struct markpair *mp = calloc(1, sizeof(*mp));
    if (!mp)
        return -ENOMEM;
    int rc = idmap_create(MARKPAIR_PENDING_CAP, sizeof(struct host_entry), &mp->host);
    if (rc == 0)
        rc = idmap_create(MARKPAIR_PENDING_CAP, sizeof(struct dev_entry), &mp->dev);
    if (rc < 0) {
        markpair_destroy(mp);
        return rc;
    }
    pthread_mutex_init(&mp->mu, NULL);
    mp->fn = fn;
    mp->ctx = ctx;
    *ret = mp;
    return 0;
}

void markpair_destroy(struct markpair *mp)
{
    if (!mp)
        return;
    if (mp->host && mp->dev)
        pthread_mutex_destroy(&mp->mu);
    idmap_destroy(mp->host);
    idmap_destroy(mp->dev);
    free(mp);
}

static void emit(struct markpair *mp, struct mp_line *l)
{
    if (!l->name)
        l->name = "";
    if (!l->domain)
        l->domain = "";
    if (mp->fn)
        mp->fn(mp->ctx, l);
}

static void add_device_locked(struct markpair *mp, uint32_t d)
{
    if (d < FAST_DEVICES) {
        atomic_fetch_or_explicit(&mp->fast[d / 64], 1ull << (d % 64), memory_order_relaxed);
        return;
    }
    for (size_t i = 0; i < mp->nslow; i++)
        if (mp->slow[i] == d)
            return;
    if (mp->nslow < SLOW_DEVICES)
        mp->slow[mp->nslow++] = d;
}

static void feed_host(struct markpair *mp, const struct mon_marker *m)
{
    struct mp_line l = { .source_kind = 0, .id = m->id, .pid = m->obj0, .tid = m->obj1 };
    if (m->flag & MON_MARKER_INSTANT) {
        l.start = l.end = m->timestamp;
        l.name = m->name;
        l.domain = m->domain;
        emit(mp, &l);
        if (m->flag & 8) {
            struct host_entry *e = idmap_put(mp->host, m->id, NULL);
            *e = (struct host_entry){ m->timestamp, m->name, m->domain };
        }
    } else if (m->flag & MON_MARKER_START) {
        struct host_entry *e = idmap_put(mp->host, m->id, NULL);
        *e = (struct host_entry){ m->timestamp, m->name, m->domain };
    } else if (m->flag & MON_MARKER_END) {
        struct host_entry *e = idmap_get(mp->host, m->id);
        if (!e)
            return;
        l.start = e->time;
        l.end = m->timestamp;
        l.name = e->name;
        l.domain = e->domain;
        emit(mp, &l);
        if (m->flag == 4) /* plain END: no device part follows */
            idmap_del(mp->host, m->id);
    }
}

static void feed_device(struct markpair *mp, const struct mon_marker *m)
{
    add_device_locked(mp, m->obj0);
    struct mp_line l = { .source_kind = 1, .id = m->id, .device_id = m->obj0, .stream_id = m->obj1 };
    if (m->flag & MON_MARKER_INSTANT) {
        l.start = l.end = m->timestamp;
        struct host_entry *h = idmap_get(mp->host, m->id);
        l.name = h ? h->name : m->name;
        l.domain = h ? h->domain : m->domain;
        emit(mp, &l);
        if (h)
            idmap_del(mp->host, m->id);
    } else if (m->flag & MON_MARKER_START) {
        struct dev_entry *d = idmap_put(mp->dev, m->id, NULL);
        d->time = m->timestamp;
    } else if (m->flag & MON_MARKER_END) {
        struct dev_entry *d = idmap_get(mp->dev, m->id);
        if (!d)
            return;
        l.start = d->time;
        l.end = m->timestamp;
        struct host_entry *h = idmap_get(mp->host, m->id);
        l.name = h ? h->name : m->name;
        l.domain = h ? h->domain : m->domain;
        emit(mp, &l);
        idmap_del(mp->dev, m->id);
        idmap_del(mp->host, m->id);
    }
}

void markpair_feed(struct markpair *mp, const struct mon_marker *m)
{
    pthread_mutex_lock(&mp->mu);
    if (m->source_kind == 0)
        feed_host(mp, m);
    else
        feed_device(mp, m);
    pthread_mutex_unlock(&mp->mu);
}

void markpair_clear(struct markpair *mp)
{
    pthread_mutex_lock(&mp->mu);
    idmap_clear(mp->host);
    idmap_clear(mp->dev);
    for (size_t i = 0; i < FAST_DEVICES / 64; i++)
        atomic_store(&mp->fast[i], 0);
    mp->nslow = 0;
    pthread_mutex_unlock(&mp->mu);
}

size_t markpair_pending_host(struct markpair *mp)
{
    pthread_mutex_lock(&mp->mu);
    size_t n = idmap_count(mp->host);
    pthread_mutex_unlock(&mp->mu);
    return n;
}

size_t markpair_pending_device(struct markpair *mp)
{
    pthread_mutex_lock(&mp->mu);
    size_t n = idmap_count(mp->dev);
    pthread_mutex_unlock(&mp->mu);
    return n;
}

void markpair_add_device(struct markpair *mp, uint32_t d)
{
    if (d < FAST_DEVICES) {
        /* Test first: after the first record of a device this is a read-only shared line. */
        uint64_t bit = 1ull << (d % 64);
        if (!(atomic_load_explicit(&mp->fast[d / 64], memory_order_relaxed) & bit))
            atomic_fetch_or_explicit(&mp->fast[d / 64], bit, memory_order_relaxed);
        return;
    }
    pthread_mutex_lock(&mp->mu);
    add_device_locked(mp, d);
    pthread_mutex_unlock(&mp->mu);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

void markpair_devices(struct markpair *mp, uint32_t *out, size_t cap, size_t *ret_n)
{
    size_t n = 0;
    for (uint32_t d = 0; d < FAST_DEVICES; d++) {
        if (atomic_load(&mp->fast[d / 64]) & (1ull << (d % 64))) {
            if (n < cap)
                out[n] = d;
            n++;
        }
    }
    pthread_mutex_lock(&mp->mu);
    uint32_t slow[SLOW_DEVICES];
    size_t ns = mp->nslow;
    for (size_t i = 0; i < ns; i++)
        slow[i] = mp->slow[i];
    pthread_mutex_unlock(&mp->mu);
    qsort(slow, ns, sizeof(slow[0]), cmp_u32);
    for (size_t i = 0; i < ns; i++) {
        if (n < cap)
            out[n] = slow[i];
        n++;
    }
    *ret_n = n;
}
