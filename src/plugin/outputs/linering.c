/* linering: Vyukov bounded MPSC queue of line blocks. Each cell carries a sequence number: a
 * producer owns cell pos when seq == pos, publishes with seq = pos + 1; the consumer frees it
 * with seq = pos + capacity. Capacity is accounted in lines: a producer first reserves its
 * lines in `lines` (at most capacity - 1), so queued blocks (>= 1 line each) never outnumber
 * the cells and the cell claim cannot fail for lack of room. */
#include "plugin/outputs/linering.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct lineblock *lineblock_create(size_t cap)
{
    struct lineblock *b = malloc(sizeof(*b) + cap);
    if (b) {
        b->len = 0;
        b->cap = cap;
        b->nlines = 0;
    }
    return b;
}

int linering_init(struct linering *r, size_t capacity)
{
    if (capacity < 2 || (capacity & (capacity - 1)) != 0)
        return -EINVAL;
    r->cells = calloc(capacity, sizeof(*r->cells));
    if (!r->cells)
        return -ENOMEM;
    for (size_t i = 0; i < capacity; i++)
        atomic_init(&r->cells[i].seq, i);
    r->mask = capacity - 1;
    atomic_init(&r->head, 0);
    atomic_init(&r->tail, 0);
    atomic_init(&r->lines, 0);
    atomic_init(&r->dropped, 0);
    return 0;
}

void linering_fini(struct linering *r)
{
    struct lineblock *b;
    if (!r->cells)
        return;
    while (linering_pop(r, &b) == 0)
        free(b);
    free(r->cells);
    r->cells = NULL;
}

/* Reserve up to want lines (all or nothing when `all`); returns how many were granted (0 when
 * full). */
static size_t reserve_lines(struct linering *r, size_t want, bool all)
{
    size_t cur = atomic_load_explicit(&r->lines, memory_order_relaxed);
    for (;;) {
        size_t room = cur < r->mask ? r->mask - cur : 0;
        size_t take = want < room ? want : room;
        if (take == 0 || (all && take < want))
            return 0;
        if (atomic_compare_exchange_weak_explicit(&r->lines, &cur, cur + take, memory_order_acquire,
                                                  memory_order_relaxed))
            return take;
    }
}

/* Cut b after its first k lines (0 < k < nlines). */
static void cut_block(struct lineblock *b, size_t k)
{
    const char *s = b->text, *end = b->text + b->len;
    for (size_t i = 0; i < k; i++)
        s = (const char *)memchr(s, '\n', (size_t)(end - s)) + 1;
    b->len = (size_t)(s - b->text);
    b->nlines = k;
}

static int push(struct linering *r, struct lineblock *b, bool all)
{
    if (!b || b->nlines == 0)
        return -EINVAL;
    size_t k = reserve_lines(r, b->nlines, all);
    if (k == 0 && all)
        return -EAGAIN;
    if (k == 0) {
        atomic_fetch_add_explicit(&r->dropped, b->nlines, memory_order_relaxed);
        return -ENOSPC;
    }
    if (k < b->nlines) {
        atomic_fetch_add_explicit(&r->dropped, b->nlines - k, memory_order_relaxed);
        cut_block(b, k);
    }
    size_t pos = atomic_load_explicit(&r->head, memory_order_relaxed);
    for (;;) {
        struct linering_cell *c = &r->cells[pos & r->mask];
        size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)seq - (intptr_t)pos;
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&r->head, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                c->block = b;
                atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
                return 0;
            }
        } else if (dif < 0) {
            /* Cannot happen while lines bound the cells; refuse rather than spin. */
            atomic_fetch_sub_explicit(&r->lines, k, memory_order_relaxed);
            atomic_fetch_add_explicit(&r->dropped, k, memory_order_relaxed);
            return -ENOSPC;
        } else {
            pos = atomic_load_explicit(&r->head, memory_order_relaxed);
        }
    }
}

int linering_push(struct linering *r, struct lineblock *b)
{
    return push(r, b, false);
}

int linering_push_all(struct linering *r, struct lineblock *b)
{
    /* The capacity itself is too small for b: only the cutting push can take it. */
    if (b && b->nlines > r->mask)
        return -E2BIG;
    return push(r, b, true);
}

int linering_pop(struct linering *r, struct lineblock **ret_block)
{
    size_t pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
    struct linering_cell *c = &r->cells[pos & r->mask];
    size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
    if (seq != pos + 1)
        return -EAGAIN;
    struct lineblock *b = c->block;
    c->block = NULL;
    atomic_store_explicit(&c->seq, pos + r->mask + 1, memory_order_release);
    atomic_store_explicit(&r->tail, pos + 1, memory_order_release);
    atomic_fetch_sub_explicit(&r->lines, b->nlines, memory_order_release);
    *ret_block = b;
    return 0;
}

size_t linering_size(const struct linering *r)
{
    return atomic_load_explicit(&r->lines, memory_order_acquire);
}

uint64_t linering_dropped(const struct linering *r)
{
    return atomic_load_explicit(&r->dropped, memory_order_relaxed);
}
