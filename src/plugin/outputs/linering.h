/* linering: bounded lock-free multi-producer / single-consumer queue of line blocks (Vyukov's
 * bounded queue), feeding the JSONL writer thread from the msPTI completion threads. A block
 * carries many '\n'-terminated lines, so one queue operation moves a whole consume() batch;
 * the capacity still counts lines. Pushes never block: linering_push refuses and counts the
 * lines that do not fit (docs/design/outputs.md#jsonl); linering_push_all lets the caller wait first. */
#ifndef MSMON_PLUGIN_LINERING_H
#define MSMON_PLUGIN_LINERING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* A block of whole lines: text[0..len) holds nlines lines, each ending with '\n'. */
struct lineblock {
    size_t len;
    size_t cap;    /* bytes allocated for text */
    size_t nlines;
    char text[];
};

/* An empty block with room for cap bytes. Caller owns; free with free(). NULL on ENOMEM. */
struct lineblock *lineblock_create(size_t cap);

struct linering_cell {
    _Atomic size_t seq;
    struct lineblock *block;
};

struct linering {
    struct linering_cell *cells;
    size_t mask;                       /* capacity - 1; capacity is a power of two */
    _Alignas(64) _Atomic size_t head;  /* next push position (producers) */
    _Alignas(64) _Atomic size_t tail;  /* next pop position (the consumer) */
    _Alignas(64) _Atomic size_t lines; /* lines queued (reserved by producers first) */
    _Alignas(64) _Atomic uint64_t dropped;
};

/* capacity: power of two >= 2, counted in lines; the queue holds at most capacity - 1 lines
 * (upstream's ring buffer semantics). 0, -EINVAL or -ENOMEM. Free with linering_fini(). */
int linering_init(struct linering *r, size_t capacity);
/* Frees the storage and any blocks still queued. */
void linering_fini(struct linering *r);
/* Queue block b (nlines >= 1). When only k < nlines lines fit, b is cut after its first k
 * lines and the rest are counted as drops. Returns 0 when the queue took b (ownership passes
 * to the consumer), or -ENOSPC when not one line fitted (all counted as drops; the caller keeps
 * b and may reuse it), -EINVAL for an empty block. Safe from any number of threads. */
int linering_push(struct linering *r, struct lineblock *b);
/* All of b or nothing, and nothing counted: -EAGAIN when its lines do not fit now (the caller
 * may wait for the consumer and retry: back-pressure), -E2BIG when they never will. */
int linering_push_all(struct linering *r, struct lineblock *b);
/* Single consumer: 0 and the oldest block (caller owns; free()) or -EAGAIN when empty. */
int linering_pop(struct linering *r, struct lineblock **ret_block);
/* Approximate number of queued lines (exact when producers are quiet). */
size_t linering_size(const struct linering *r);
/* Lines refused because the queue was full. */
uint64_t linering_dropped(const struct linering *r);

#endif
