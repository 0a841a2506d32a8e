/* asyncw: the bounded async writer the file outputs share (docs/design/outputs.md#async-writer).
 * Completion threads push items (a JSONL line block, a DB chunk of records) into a bounded
 * queue; one writer thread writes them in push order through the output's callbacks. A full
 * queue makes the pusher wait for the writer (back-pressure, bounded), then the part that does
 * not fit is dropped and counted; flush returns once everything pushed before it is written. */
#ifndef MSMON_PLUGIN_ASYNCW_H
#define MSMON_PLUGIN_ASYNCW_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Embedded (anywhere) in the output's item; asyncw owns `next`. */
struct asyncw_item {
    struct asyncw_item *next;
    size_t weight; /* units it counts against the capacity (lines, records); >= 1 */
};

struct asyncw_ops {
    /* Write one item; takes ownership. Called on the writer thread, or on the thread of
     * asyncw_flush()/asyncw_drain() when no writer runs: never two at a time. */
    void (*write)(void *ctx, struct asyncw_item *it);
    /* Make what was written visible (commit, flush buffers): after the drains the interval,
     * a flush or a drain asked for, and after every drain with sync_each_batch. Optional. */
    void (*sync)(void *ctx);
    /* Keep only the first `keep` units of it (0 < keep < it->weight) so the part that fits is
     * queued. Optional: without it an item that does not fit whole is refused whole. */
    void (*cut)(void *ctx, struct asyncw_item *it, size_t keep);
    /* Free an item that is never written (asyncw_destroy with items queued). Optional:
     * without it free(it), for items that start their malloc'ed block. */
    void (*discard)(void *ctx, struct asyncw_item *it);
};

struct asyncw_cfg {
    const char *name;           /* the writer thread's name (15 bytes kept) */
    const char *what;           /* the output, as its log lines start ("db", "jsonl") */
    size_t capacity;            /* units queued or being written, at most; >= 1 */
    size_t batch;               /* queued units that wake the writer before the interval */
    uint64_t interval_ns;       /* the writer drains and syncs at least this often */
    uint64_t backpressure_ns;   /* longest a pusher waits for room (0: never waits) */
    bool sync_each_batch;       /* sync after every drain, not only on interval/flush/stop */
    _Atomic uint64_t *cpu_ns;   /* the writer thread adds its CPU time here when it ends; may be NULL */
    const struct asyncw_ops *ops;
    void *ctx;                  /* passed to every op; borrowed until asyncw_destroy() */
};

struct asyncw;

/* 0 and *ret (caller owns; free with asyncw_destroy()), -EINVAL or -ENOMEM. No thread yet. */
int asyncw_create(const struct asyncw_cfg *cfg, struct asyncw **ret);
/* Start the writer thread (all signals blocked). 0 when it runs or ran already; -errno
 * (logged as "<what>: cannot start the writer thread"). */
int asyncw_start(struct asyncw *w);
/* Queue it (takes ownership on 0). When it does not fit, wait for room up to the
 * back-pressure bound while a writer runs; then queue the part that fits (cut) and count the
 * rest as dropped. 0 when queued (whole or cut), -ENOSPC when nothing fitted (all counted;
 * the caller keeps it), -EINVAL for weight 0. *ret_dropped (may be NULL): units dropped by
 * this call. Safe from any number of threads. */
int asyncw_push(struct asyncw *w, struct asyncw_item *it, size_t *ret_dropped);
/* Return once everything pushed before the call is written and synced (on this thread when
 * no writer runs). */
void asyncw_flush(struct asyncw *w);
/* Stop and join the writer; what is still queued stays queued (see asyncw_drain). */
void asyncw_stop(struct asyncw *w);
/* With no writer running: write everything queued on this thread, then sync. */
void asyncw_drain(struct asyncw *w);
/* Units dropped since creation. */
uint64_t asyncw_dropped(struct asyncw *w);
/* Stops the writer, discards what is queued, frees w. NULL is a no-op. */
void asyncw_destroy(struct asyncw *w);

/* A bounded stack of written items kept for the pushers to reuse: a block malloc'ed on a
 * completion thread and freed on the writer lets the allocator trim and re-grow its heap, a
 * page fault per 4 KiB of item (docs/design/outputs.md#async-writer). */
struct asyncw_spare {
    pthread_mutex_t mu;
    size_t n, cap;
    void *v[];
};
/* 0 and *ret (caller owns; free with asyncw_spare_destroy()) holding up to cap items, or -ENOMEM. */
int asyncw_spare_create(size_t cap, struct asyncw_spare **ret);
/* A kept item (caller owns) or NULL when none is (or s is NULL). */
void *asyncw_spare_get(struct asyncw_spare *s);
/* Keep item for reuse; free()s it when the stack is full (or s is NULL). A NULL item is a no-op. */
void asyncw_spare_put(struct asyncw_spare *s, void *item);
/* Frees the kept items and s. NULL is a no-op. */
void asyncw_spare_destroy(struct asyncw_spare *s);

#endif
