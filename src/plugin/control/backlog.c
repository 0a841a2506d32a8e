/* backlog: the undelivered-data FIFO (backlog.h). Two locks: `q` guards the list for a few
 * pointer moves and is never held across a send; `flush` makes one thread at a time the
 * sender, which is what keeps delivery in order. Nobody waits on `flush` (trylock). */
#include "plugin/control/backlog.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct backlog_entry {
    struct backlog_entry *next;
    size_t len;
    unsigned char data[];
};

struct backlog {
    pthread_mutex_t q;        /* everything below */
    pthread_mutex_t flush;    /* held by the one thread sending from the queue */
    struct backlog_entry *head, *tail;
    size_t entries, bytes;
    size_t max_entries, max_bytes;
    uint64_t dropped, dropped_untaken, flushed;
};

int backlog_create(size_t max_bytes, size_t max_entries, struct backlog **ret)
{
    struct backlog *b;

    if (!ret)
        return -EINVAL;
    b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    pthread_mutex_init(&b->q, NULL);
    pthread_mutex_init(&b->flush, NULL);
    b->max_bytes = max_bytes;
    b->max_entries = max_entries ? max_entries : BACKLOG_DEFAULT_ENTRIES;
    *ret = b;
    return 0;
}

void backlog_destroy(struct backlog *b)
{
    struct backlog_entry *e, *next;

    if (!b)
        return;
    for (e = b->head; e; e = next) {
        next = e->next;
        free(e);
    }
    pthread_mutex_destroy(&b->flush);
    pthread_mutex_destroy(&b->q);
    free(b);
}

static void backlog_count_drops_locked(struct backlog *b, uint64_t n)
{
    b->dropped += n;
    b->dropped_untaken += n;
}

/* Drop from the head (the oldest) while over a cap. q held. */
static void backlog_trim_locked(struct backlog *b)
{
    while (b->head && (b->entries > b->max_entries || b->bytes > b->max_bytes)) {
        struct backlog_entry *e = b->head;
        b->head = e->next;
        if (!b->head)
            b->tail = NULL;
        b->entries--;
        b->bytes -= e->len;
        free(e);
        backlog_count_drops_locked(b, 1);
    }
}

int backlog_push(struct backlog *b, const void *data, size_t len)
{
    struct backlog_entry *e = NULL;
    int rc = 0;

    if (len <= b->max_bytes) {
        e = malloc(sizeof(*e) + len);
        if (!e)
            rc = -ENOMEM;
    }
    pthread_mutex_lock(&b->q);
    if (!e) {
        backlog_count_drops_locked(b, 1); /* too large for the cap, or no memory */
        goto out;
    }
    e->next = NULL;
    e->len = len;
    memcpy(e->data, data, len);
    if (b->tail)
        b->tail->next = e;
    else
        b->head = e;
    b->tail = e;
    b->entries++;
    b->bytes += len;
    backlog_trim_locked(b); /* never the new one: it fits the byte cap and entries >= 1 */
out:
    pthread_mutex_unlock(&b->q);
    return rc;
}

/* Send the queue oldest first until it is empty (0) or a send fails (its -errno; the entry
 * goes back to the head). flush held. */
static int backlog_drain(struct backlog *b, backlog_send_fn fn, void *ctx)
{
    for (;;) {
        struct backlog_entry *e;
        int rc;

        pthread_mutex_lock(&b->q);
        e = b->head;
        if (e) {
            b->head = e->next;
            if (!b->head)
                b->tail = NULL;
            b->entries--;
            b->bytes -= e->len;
        }
        pthread_mutex_unlock(&b->q);
        if (!e)
            return 0;
        rc = fn(ctx, e->data, e->len);
        pthread_mutex_lock(&b->q);
        if (rc == 0) {
            b->flushed++;
            free(e);
        } else {
            e->next = b->head;
            b->head = e;
            if (!b->tail)
                b->tail = e;
            b->entries++;
            b->bytes += e->len;
            backlog_trim_locked(b); /* pushes meanwhile may have filled it: e is the oldest */
        }
        pthread_mutex_unlock(&b->q);
        if (rc != 0)
            return rc;
    }
}

static bool backlog_empty(struct backlog *b)
{
    bool empty;

    pthread_mutex_lock(&b->q);
    empty = b->head == NULL;
    pthread_mutex_unlock(&b->q);
    return empty;
}

int backlog_send(struct backlog *b, const void *data, size_t len, backlog_send_fn fn, void *ctx)
{
    int rc;

    if (pthread_mutex_trylock(&b->flush) != 0) {
        if (!data)
            return -EBUSY;
        /* The flushing thread picks it up: it re-checks the queue after letting go. */
        (void)backlog_push(b, data, len);
        return 0;
    }
    rc = backlog_drain(b, fn, ctx);
    if (data) {
        if (rc == 0)
            rc = fn(ctx, data, len);
        if (rc != 0)
            (void)backlog_push(b, data, len);
    }
    pthread_mutex_unlock(&b->flush);
    /* A payload queued by a thread that found `flush` held was pushed before that thread's
     * trylock failed, so before our unlock: this check sees it. */
    if (rc == 0) {
        while (!backlog_empty(b) && pthread_mutex_trylock(&b->flush) == 0) {
            int rc2 = backlog_drain(b, fn, ctx);
            pthread_mutex_unlock(&b->flush);
            if (rc2 != 0)
                break;
        }
    }
    return rc;
}

void backlog_get_stats(struct backlog *b, struct backlog_stats *ret)
{
    pthread_mutex_lock(&b->q);
    ret->entries = b->entries;
    ret->bytes = b->bytes;
    ret->dropped = b->dropped;
    ret->flushed = b->flushed;
    pthread_mutex_unlock(&b->q);
}

uint64_t backlog_take_dropped(struct backlog *b)
{
    uint64_t n;

    pthread_mutex_lock(&b->q);
    n = b->dropped_untaken;
    b->dropped_untaken = 0;
    pthread_mutex_unlock(&b->q);
    return n;
}
