/* linering: Vyukov bounded MPSC queue. Each cell carries a sequence number: a producer owns
 * cell pos when seq == pos, publishes with seq = pos + 1; the consumer frees it with
 * seq = pos + capacity. The head/tail distance check keeps one cell free (capacity - 1). */
#include "plugin/linering.h"

#include <errno.h>
#include <stdlib.h>

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
    atomic_init(&r->dropped, 0);
    return 0;
}

void linering_fini(struct linering *r)
{
    char *line;
    size_t len;
    if (!r->cells)
        return;
    while (linering_pop(r, &line, &len) == 0)
        free(line);
    free(r->cells);
    r->cells = NULL;
}

int linering_push(struct linering *r, char *line, size_t len)
{
    size_t pos = atomic_load_explicit(&r->head, memory_order_relaxed);
    for (;;) {
        struct linering_cell *c = &r->cells[pos & r->mask];
        size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)seq - (intptr_t)pos;
        if (dif == 0) {
            size_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
            if (pos - tail >= r->mask)
                goto full;
            if (atomic_compare_exchange_weak_explicit(&r->head, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                c->line = line;
                c->len = len;
                atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
                return 0;
            }
        } else if (dif < 0) {
            goto full;
        } else {
            pos = atomic_load_explicit(&r->head, memory_order_relaxed);
        }
    }
full:
    atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
    return -ENOSPC;
}

int linering_pop(struct linering *r, char **ret_line, size_t *ret_len)
{
    size_t pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
    struct linering_cell *c = &r->cells[pos & r->mask];
    size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
    if (seq != pos + 1)
        return -EAGAIN;
    *ret_line = c->line;
    *ret_len = c->len;
    c->line = NULL;
    atomic_store_explicit(&c->seq, pos + r->mask + 1, memory_order_release);
    atomic_store_explicit(&r->tail, pos + 1, memory_order_release);
    return 0;
}

size_t linering_size(const struct linering *r)
{
    size_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    size_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    return h > t ? h - t : 0;
}

uint64_t linering_dropped(const struct linering *r)
{
    return atomic_load_explicit(&r->dropped, memory_order_relaxed);
}
