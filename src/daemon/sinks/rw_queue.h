/* rw_queue: the remote-write buffer between the loop (which snapshots the promfam store into
 * batches) and the sender thread. Bounded by samples and by bytes; a push into a full queue
 * drops the oldest batches and counts their samples. Batches hold packed samples. */
#ifndef MSMON_DAEMON_RW_QUEUE_H
#define MSMON_DAEMON_RW_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/sinks/promfam.h"

/* One snapshot: every sample shares ts_ms. data packs, per sample: u8 nlabels, family \0,
 * (name \0 value \0) x nlabels, then the double value (8 bytes, host order). */
struct rw_batch {
    struct rw_batch *next;
    int64_t ts_ms;
    size_t nsamples;
    size_t len, cap;      /* bytes of data used / allocated */
    char *data;
};

/* Caller owns *ret; free with rw_batch_destroy(). */
int rw_batch_create(int64_t ts_ms, struct rw_batch **ret);
/* Append one sample (labels sorted by name, without __name__). -ENOMEM, -E2BIG (> 255 labels). */
int rw_batch_add(struct rw_batch *b, const struct promfam_sample *s);
/* Make room for n more bytes of data up front (a size hint; -ENOMEM is harmless). */
int rw_batch_reserve(struct rw_batch *b, size_t n);
/* Frees b and every batch chained after it. */
void rw_batch_destroy(struct rw_batch *b);

struct rw_sample_view {
    const char *family;
    const char *labels[2 * 256];  /* name, value, name, value ... */
    size_t nlabels;
    double value;
};
/* Iterate a batch: *off starts at 0; returns 1 with v filled, 0 at the end, -EINVAL if corrupt. */
int rw_batch_next(const struct rw_batch *b, size_t *off, struct rw_sample_view *v);

struct rw_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct rw_batch *head, *tail;
    size_t samples, bytes;          /* queued now */
    size_t max_samples, max_bytes;
    uint64_t pushed_samples;        /* every sample ever offered */
    uint64_t dropped_samples;       /* dropped because the queue was full */
    bool stop;
};

void rw_queue_init(struct rw_queue *q, size_t max_samples, size_t max_bytes);
/* Frees what is still queued. */
void rw_queue_fini(struct rw_queue *q);
/* Takes ownership of b. Drops the oldest batches until b fits; a batch larger than the bound
 * by itself is dropped whole. Returns the number of samples dropped by this push. */
uint64_t rw_queue_push(struct rw_queue *q, struct rw_batch *b);
/* Wait until something is queued or rw_queue_stop(); then detach the oldest batches, at least
 * one and no more than max_samples in total unless the first is larger. NULL once stopped and
 * (with drain false) at once, or (drain true) when empty. Caller owns the chain. */
struct rw_batch *rw_queue_take(struct rw_queue *q, size_t max_samples, bool drain);
void rw_queue_stop(struct rw_queue *q);
/* Wait up to ms for rw_queue_stop(); returns true when stopped. */
bool rw_queue_wait_stop(struct rw_queue *q, uint64_t ms);
void rw_queue_counts(struct rw_queue *q, size_t *ret_samples, size_t *ret_bytes, uint64_t *ret_pushed,
                     uint64_t *ret_dropped);

#endif
