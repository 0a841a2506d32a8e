/* markpair: one bounded id map (idmap) of per-id state under one mutex: markers are rare next
 * to kernels. An entry lives until every part it announced is done (a *_WITH_DEVICE host part
 * waits for its device part, a device part for its host START's name), then it is removed;
 * eviction keeps the map bounded. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "plugin/pipeline/idmap.h"
#include "plugin/pipeline/markpair.h"

/* DWAIT: the device part is in but waits for the host START's name (the device records carry
 * none); HCUT: the host START was before the session start, so it brings the name only. */
enum { HS = 1, HE = 2, DS = 4, DE = 8, HI = 16, HDONE = 32, DDONE = 64, DWAIT = 128, HCUT = 256 };

struct mp_entry {
    uint32_t have;
    bool with_device;
    uint64_t hs, he, ds, de, seen_ns;
    uint32_t pid, tid, end_pid, end_tid, dev, stream;
    const char *name, *domain;
};

struct markpair {
    pthread_mutex_t mu;
    struct idmap *ids;
};

int markpair_create(size_t cap, struct markpair **ret)
{
    struct markpair *mp;
    int rc;

    if (!ret)
        return -EINVAL;
    mp = calloc(1, sizeof(*mp));
    if (!mp)
        return -ENOMEM;
    rc = idmap_create(cap, sizeof(struct mp_entry), &mp->ids);
    if (rc < 0) {
        free(mp);
        return rc;
    }
    pthread_mutex_init(&mp->mu, NULL);
    *ret = mp;
    return 0;
}

void markpair_destroy(struct markpair *mp)
{
    if (!mp)
        return;
    pthread_mutex_destroy(&mp->mu);
    idmap_destroy(mp->ids);
    free(mp);
}

static const char *nz(const char *s)
{
    return s ? s : "";
}

/* The event of a part of e that just completed; the entry goes once nothing else belongs. */
static void complete(struct markpair *mp, uint64_t id, struct mp_entry *e, uint32_t part, struct pl_range *r)
{
    e->have |= part == PL_PART_HOST ? HDONE : DDONE;
    *r = (struct pl_range){
        .id = id, .done = part, .with_device = e->with_device,
        .host_start = e->hs, .host_end = e->he, .pid = e->pid, .tid = e->tid,
        .end_pid = e->end_pid, .end_tid = e->end_tid, .dev_start = e->ds, .dev_end = e->de,
        .device_id = e->dev, .stream_id = e->stream, .name = nz(e->name), .domain = nz(e->domain),
    };
    if (e->have & HDONE)
        r->parts |= PL_PART_HOST;
    if (e->have & DDONE)
        r->parts |= PL_PART_DEVICE;
    /* Done when the device part is in (or none belongs) and the host part is in (or was cut
     * by the session start); an id without its host START stays until aged out or evicted. */
    if ((e->have & (HDONE | HCUT)) && (!e->with_device || (e->have & DDONE)))
        idmap_del(mp->ids, id);
}

static struct mp_entry *entry(struct markpair *mp, uint64_t id, uint64_t now_ns)
{
    struct mp_entry *e = idmap_get(mp->ids, id);
    if (!e) {
        e = idmap_put(mp->ids, id, NULL);
        e->seen_ns = now_ns;
    }
    return e;
}

static int feed_host(struct markpair *mp, const struct mon_marker *m, uint64_t now, struct pl_range *r)
{
    struct mp_entry *e;
    int n = 0;

    if (m->flag & MON_MARKER_INSTANT) {
        *r = (struct pl_range){
            .id = m->id, .done = PL_PART_HOST, .parts = PL_PART_HOST, .instant = true,
            .with_device = (m->flag & 8) != 0, .host_start = m->timestamp, .host_end = m->timestamp,
            .pid = m->obj0, .tid = m->obj1, .end_pid = m->obj0, .end_tid = m->obj1,
            .name = nz(m->name), .domain = nz(m->domain),
        };
        if (m->flag & 8) { /* its device instant borrows the name */
            e = entry(mp, m->id, now);
            e->have |= HI;
            e->name = m->name;
            e->domain = m->domain;
        }
        return 1;
    }
    if (!(m->flag & (MON_MARKER_START | MON_MARKER_END)))
        return 0;
    e = entry(mp, m->id, now);
    if (m->flag & MON_MARKER_WITH_DEVICE)
        e->with_device = true;
    if (m->flag & MON_MARKER_START) {
        e->have |= HS;
        e->hs = m->timestamp;
        e->name = m->name;
        e->domain = m->domain;
        e->pid = m->obj0;
        e->tid = m->obj1;
    } else {
        e->have |= HE;
        e->he = m->timestamp;
        e->end_pid = m->obj0;
        e->end_tid = m->obj1;
    }
    if ((e->have & (HS | HE | HDONE)) == (HS | HE))
        complete(mp, m->id, e, PL_PART_HOST, &r[n++]);
    if ((m->flag & MON_MARKER_START) && (e = idmap_get(mp->ids, m->id)) && (e->have & DWAIT)) {
        e->have &= ~(uint32_t)DWAIT; /* the device part that waited for this name */
        complete(mp, m->id, e, PL_PART_DEVICE, &r[n++]);
    }
    return n;
}

static int feed_device(struct markpair *mp, const struct mon_marker *m, uint64_t now, struct pl_range *r)
{
    struct mp_entry *e;

    if (m->flag & MON_MARKER_INSTANT) {
        e = idmap_get(mp->ids, m->id);
        *r = (struct pl_range){
            .id = m->id, .done = PL_PART_DEVICE, .parts = PL_PART_DEVICE, .instant = true, .with_device = true,
            .dev_start = m->timestamp, .dev_end = m->timestamp, .device_id = m->obj0, .stream_id = m->obj1,
            .name = nz(e && (e->have & HI) ? e->name : m->name),
            .domain = nz(e && (e->have & HI) ? e->domain : m->domain),
        };
        if (e && (e->have & HI))
            idmap_del(mp->ids, m->id);
        return 1;
    }
    if (!(m->flag & (MON_MARKER_START | MON_MARKER_END)))
        return 0;
    e = entry(mp, m->id, now);
    e->with_device = true;
    if (m->flag & MON_MARKER_START) {
        e->have |= DS;
        e->ds = m->timestamp;
    } else {
        e->have |= DE;
        e->de = m->timestamp;
        e->dev = m->obj0;
        e->stream = m->obj1;
    }
    if (!(e->have & (HS | HCUT | HI)) && !e->name) {
        e->name = m->name; /* used only if the host START never comes */
        e->domain = m->domain;
    }
    if ((e->have & (DS | DE | DDONE | DWAIT)) == (DS | DE)) {
        if (!(e->have & (HS | HCUT))) {
            e->have |= DWAIT; /* named by the host START when it comes (any arrival order) */
            return 0;
        }
        complete(mp, m->id, e, PL_PART_DEVICE, r);
        return 1;
    }
    return 0;
}

int markpair_feed(struct markpair *mp, const struct mon_marker *m, uint64_t now_ns, struct pl_range ret[2])
{
    int n;

    pthread_mutex_lock(&mp->mu);
    n = m->source_kind == 0 ? feed_host(mp, m, now_ns, ret) : feed_device(mp, m, now_ns, ret);
    pthread_mutex_unlock(&mp->mu);
    return n;
}

int markpair_feed_cut(struct markpair *mp, const struct mon_marker *m, uint64_t now_ns, struct pl_range *ret)
{
    struct mp_entry *e;
    int n = 0;

    if (m->source_kind != 0 || !(m->flag & MON_MARKER_START))
        return 0;
    pthread_mutex_lock(&mp->mu);
    e = entry(mp, m->id, now_ns);
    if (!(e->have & HS)) {
        e->have |= HCUT;
        e->with_device = e->with_device || (m->flag & MON_MARKER_WITH_DEVICE);
        e->name = m->name;
        e->domain = m->domain;
    }
    if (e->have & DWAIT) {
        e->have &= ~(uint32_t)DWAIT;
        complete(mp, m->id, e, PL_PART_DEVICE, ret);
        n = 1;
    } else if (!e->with_device) {
        idmap_del(mp->ids, m->id); /* nothing will ever need its name */
    }
    pthread_mutex_unlock(&mp->mu);
    return n;
}

size_t markpair_expire(struct markpair *mp, uint64_t now_ns, uint64_t max_age_ns, struct pl_range *out, size_t cap,
                       size_t *ret_nout)
{
    struct mp_entry *e;
    uint64_t id;
    size_t n = 0, nout = 0;

    pthread_mutex_lock(&mp->mu);
    while ((e = idmap_oldest(mp->ids, &id)) && now_ns - e->seen_ns > max_age_ns) {
        if (e->have & DWAIT) {
            if (nout == cap)
                break; /* the caller comes back for the rest */
            /* its host START never came: the device records' own name, as before (docs/design/outputs.md#line-shapes) */
            e->have &= ~(uint32_t)DWAIT;
            complete(mp, id, e, PL_PART_DEVICE, &out[nout++]);
        }
        idmap_del(mp->ids, id);
        n++;
    }
    pthread_mutex_unlock(&mp->mu);
    if (ret_nout)
        *ret_nout = nout;
    return n;
}

size_t markpair_pending(struct markpair *mp)
{
    size_t n;

    pthread_mutex_lock(&mp->mu);
    n = idmap_count(mp->ids);
    pthread_mutex_unlock(&mp->mu);
    return n;
}
