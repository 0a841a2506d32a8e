/* markpair: one bounded id map (idmap) of per-id state under one mutex: markers are rare next
 * to kernels. An entry lives until every part it announced is done (a *_WITH_DEVICE host part
 * waits for its device part), then it is removed; eviction keeps the map bounded. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "plugin/pipeline/idmap.h"
#include "plugin/pipeline/markpair.h"

enum { HS = 1, HE = 2, DS = 4, DE = 8, HI = 16, HDONE = 32, DDONE = 64 };

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
    /* Done when the device part is in (or none belongs) and the host part is in; a device
     * part without any host record (device-only id) stays until aged out or evicted. */
    if ((e->have & HDONE) && (!e->with_device || (e->have & DDONE)))
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
    if ((e->have & (HS | HE | HDONE)) == (HS | HE)) {
        complete(mp, m->id, e, PL_PART_HOST, r);
        return 1;
    }
    return 0;
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
    if (!(e->have & HS) && !e->name) {
        e->name = m->name; /* until the host START brings the real one */
        e->domain = m->domain;
    }
    if ((e->have & (DS | DE | DDONE)) == (DS | DE)) {
        complete(mp, m->id, e, PL_PART_DEVICE, r);
        return 1;
    }
    return 0;
}

int markpair_feed(struct markpair *mp, const struct mon_marker *m, uint64_t now_ns, struct pl_range *ret)
{
    int n;

    pthread_mutex_lock(&mp->mu);
    n = m->source_kind == 0 ? feed_host(mp, m, now_ns, ret) : feed_device(mp, m, now_ns, ret);
    pthread_mutex_unlock(&mp->mu);
    return n;
}

size_t markpair_expire(struct markpair *mp, uint64_t now_ns, uint64_t max_age_ns)
{
    struct mp_entry *e;
    uint64_t id;
    size_t n = 0;

    pthread_mutex_lock(&mp->mu);
    while ((e = idmap_oldest(mp->ids, &id)) && now_ns - e->seen_ns > max_age_ns) {
        idmap_del(mp->ids, id);
        n++;
    }
    pthread_mutex_unlock(&mp->mu);
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
