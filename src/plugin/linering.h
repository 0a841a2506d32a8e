/* linering: bounded lock-free multi-producer / single-consumer queue of heap-allocated lines
 * (Vyukov's bounded queue), feeding the JSONL writer thread from the msPTI completion threads.
 * Pushes never block: a full queue refuses the line and counts the drop (05-outputs.md §4.3). */
#ifndef MSMON_PLUGIN_LINERING_H
#define MSMON_PLUGIN_LINERING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct linering_cell {
    _Atomic size_t seq;
    char *line;
    size_t len;
};

struct linering {
    struct linering_cell *cells;
    size_t mask;                       /* capacity - 1; capacity is a power of two */
    _Alignas(64) _Atomic size_t head;  /* next push position (producers) */
    _Alignas(64) _Atomic size_t tail;  /* next pop position (the consumer) */
    _Alignas(64) _Atomic uint64_t dropped;
};

/* capacity: power of two >= 2; the queue holds at most capacity - 1 lines (upstream's ring
 * buffer semantics). 0, -EINVAL or -ENOMEM. Free with linering_fini(). */
int linering_init(struct linering *r, size_t capacity);
/* Frees the storage and any lines still queued. */
void linering_fini(struct linering *r);
/* Takes ownership of line (malloc'd) on success (0). Full → -ENOSPC, the caller keeps the
 * line, and the drop counter is incremented. Safe from any number of threads. */
int linering_push(struct linering *r, char *line, size_t len);
/* Single consumer: 0 and the line (caller owns; free()) or -EAGAIN when empty. */
int linering_pop(struct linering *r, char **ret_line, size_t *ret_len);
/* Approximate number of queued lines (exact when producers are quiet). */
size_t linering_size(const struct linering *r);
uint64_t linering_dropped(const struct linering *r);

#endif
