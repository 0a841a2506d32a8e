/* backlog: a bounded FIFO of undelivered metric `data` payloads. Payloads
 * that could not reach the daemon (down, restarting) wait here and are delivered oldest-first
 * once it is back; beyond the caps the oldest are dropped and counted. */
#ifndef MSMON_PLUGIN_BACKLOG_H
#define MSMON_PLUGIN_BACKLOG_H

#include <stddef.h>
#include <stdint.h>

/* Defaults: 8 MiB of payload (~2000 full 4 KiB datagrams, far more typical ~300 B ones) and
 * 16384 datagrams, i.e. minutes of report intervals of a large job. */
#define BACKLOG_DEFAULT_BYTES (8u << 20)
#define BACKLOG_DEFAULT_ENTRIES 16384u
#define BACKLOG_MAX_BYTES (256u << 20) /* upper bound of an override */

struct backlog;

struct backlog_stats {
    size_t entries, bytes;  /* queued now */
    uint64_t dropped;       /* oldest dropped beyond a cap (or too large for it), total */
    uint64_t flushed;       /* delivered from the queue (not directly), total */
};

/* One delivery attempt; 0 or -errno. Called without the queue lock held. -EINPROGRESS means
 * "not now" (the caller's time is up): it stops the flush like a failure, the payload stays
 * queued, and the caller decides it is not one. */
typedef int (*backlog_send_fn)(void *ctx, const void *data, size_t len);

/* max_bytes 0 keeps nothing (every undeliverable payload is dropped and counted);
 * max_entries 0 = BACKLOG_DEFAULT_ENTRIES. Caller owns; free with backlog_destroy(). */
int backlog_create(size_t max_bytes, size_t max_entries, struct backlog **ret);
void backlog_destroy(struct backlog *b);

/* Append a copy, dropping the oldest while a cap would be exceeded (a payload larger than
 * the byte cap is itself dropped). 0, or -ENOMEM (not kept, counted as dropped). */
int backlog_push(struct backlog *b, const void *data, size_t len);

/* Deliver everything queued, oldest first, then `data` (NULL: flush only), stopping at the
 * first failure; whatever was not delivered stays queued in order. One thread flushes at a
 * time: when another one is, `data` is queued for it and 0 is returned (flush only:
 * -EBUSY). Returns 0 when data (and the queue) went out, else the first failure's -errno. */
int backlog_send(struct backlog *b, const void *data, size_t len, backlog_send_fn fn, void *ctx);

void backlog_get_stats(struct backlog *b, struct backlog_stats *ret);
/* Drops since the previous call (each drop is returned once: for session counters). */
uint64_t backlog_take_dropped(struct backlog *b);

#endif
