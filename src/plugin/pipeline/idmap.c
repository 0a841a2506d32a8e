/* idmap: values live in a ring in insertion order (so FIFO eviction and "oldest first"
 * scans are O(1)); an open-addressing index (linear probing, backward-shift deletion) maps
 * ids to ring slots. Removed entries leave dead ring slots that the head skips. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/pipeline/idmap.h"

struct slot_hdr {
    uint64_t id;
    uint32_t live;
    uint32_t pad;
};

struct idmap {
    size_t cap;        /* ring slots = most live ids */
    size_t val_size;
    size_t stride;     /* header + value, 8-byte aligned */
    unsigned char *ring;
    size_t head;       /* oldest occupied slot */
    size_t used;       /* occupied slots (live or dead) from head */
    size_t live;
    uint32_t *index;   /* ring slot + 1; 0 = empty */
    size_t index_mask;
};

static inline struct slot_hdr *slot_at(const struct idmap *m, size_t i)
{
    return (struct slot_hdr *)(m->ring + i * m->stride);
}

static inline size_t hash_id(uint64_t id, size_t mask)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 17) & mask;
}

int idmap_create(size_t cap, size_t val_size, struct idmap **ret)
{
    if (cap == 0 || cap > (1u << 30) || !ret)
        return -EINVAL;
    struct idmap *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->cap = cap;
    m->val_size = val_size;
    m->stride = (sizeof(struct slot_hdr) + val_size + 7) & ~(size_t)7;
    size_t isz = 1;
    while (isz < cap * 2)
        isz <<= 1;
    m->index_mask = isz - 1;
    /* calloc: untouched pages of these large tables are never made resident. */
    m->ring = calloc(cap, m->stride);
    m->index = calloc(isz, sizeof(*m->index));
    if (!m->ring || !m->index) {
        idmap_destroy(m);
        return -ENOMEM;
    }
    *ret = m;
    return 0;
}

void idmap_destroy(struct idmap *m)
{
    if (!m)
        return;
    free(m->ring);
    free(m->index);
    free(m);
}

void idmap_clear(struct idmap *m)
{
    if (m->live || m->used) {
        memset(m->index, 0, (m->index_mask + 1) * sizeof(*m->index));
        for (size_t i = 0; i < m->used; i++)
            slot_at(m, (m->head + i) % m->cap)->live = 0;
    }
    m->head = 0;
    m->used = 0;
    m->live = 0;
}

size_t idmap_count(const struct idmap *m)
{
    return m->live;
}

/* Index position holding id, or the empty position where it would go. */
static size_t find_pos(const struct idmap *m, uint64_t id, bool *found)
{
    size_t p = hash_id(id, m->index_mask);
    for (;;) {
        uint32_t v = m->index[p];
        if (v == 0) {
            *found = false;
            return p;
        }
        if (slot_at(m, v - 1)->id == id) {
            *found = true;
            return p;
        }
        p = (p + 1) & m->index_mask;
    }
}

static void index_remove_at(struct idmap *m, size_t p)
{
    /* Backward-shift deletion keeps probe chains intact without tombstones. */
    size_t mask = m->index_mask;
    size_t hole = p;
    size_t q = (p + 1) & mask;
    while (m->index[q]) {
        size_t home = hash_id(slot_at(m, m->index[q] - 1)->id, mask);
        /* Move q into the hole if its home is not cyclically in (hole, q]. */
        bool in_range = hole <= q ? (home > hole && home <= q) : (home > hole || home <= q);
        if (!in_range) {
            m->index[hole] = m->index[q];
            hole = q;
        }
        q = (q + 1) & mask;
    }
    m->index[hole] = 0;
}

static void skip_dead_head(struct idmap *m)
{
    while (m->used && !slot_at(m, m->head)->live) {
        m->head = (m->head + 1) % m->cap;
        m->used--;
    }
}

void *idmap_get(struct idmap *m, uint64_t id)
{
    bool found;
    size_t p = find_pos(m, id, &found);
    if (!found)
        return NULL;
    return slot_at(m, m->index[p] - 1) + 1;
}

bool idmap_del(struct idmap *m, uint64_t id)
{
    bool found;
    size_t p = find_pos(m, id, &found);
    if (!found)
        return false;
    slot_at(m, m->index[p] - 1)->live = 0;
    index_remove_at(m, p);
    m->live--;
    skip_dead_head(m);
    return true;
}

void *idmap_put(struct idmap *m, uint64_t id, bool *ret_evicted)
{
    bool evicted = false;
    idmap_del(m, id);
    if (m->used == m->cap) {
        /* Ring full: the head is live (dead heads are always skipped), evict it. */
        struct slot_hdr *h = slot_at(m, m->head);
        evicted = true;
        idmap_del(m, h->id);
        /* Dead slots in the middle may still fill the ring; drop the oldest until a slot frees. */
        while (m->used == m->cap) {
            h = slot_at(m, m->head);
            idmap_del(m, h->id);
        }
    }
    size_t i = (m->head + m->used) % m->cap;
    struct slot_hdr *s = slot_at(m, i);
    s->id = id;
    s->live = 1;
    memset(s + 1, 0, m->val_size);
    m->used++;
    m->live++;
    bool found;
    size_t p = find_pos(m, id, &found);
    m->index[p] = (uint32_t)(i + 1);
    if (ret_evicted)
        *ret_evicted = evicted;
    return s + 1;
}

void *idmap_oldest(struct idmap *m, uint64_t *ret_id)
{
    skip_dead_head(m);
    if (!m->used)
        return NULL;
    struct slot_hdr *h = slot_at(m, m->head);
    if (ret_id)
        *ret_id = h->id;
    return h + 1;
}
