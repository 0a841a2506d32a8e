/* asyncw: one mutex-guarded FIFO of caller items, a unit budget that counts items queued and
 * being written, and one writer thread that sleeps until a batch, a flush, a waiting pusher or
 * the interval wakes it (docs/design/outputs.md#async-writer). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "common/log.h"
#include "common/strutil.h"
#include "common/thr.h"
#include "plugin/outputs/asyncw.h"

struct asyncw {
    struct asyncw_cfg cfg;
    char name[16];
    pthread_mutex_t lock;
    pthread_cond_t work;       /* writer: batch, flush, stop or a waiting pusher */
    pthread_cond_t room;       /* pushers: units freed; flushers: flush done */
    struct asyncw_item *head, *tail;
    size_t queued;             /* units in the list */
    size_t held;               /* units in the list or being written (the capacity bound) */
    unsigned waiters;          /* pushers waiting for room */
    uint64_t flush_req, flush_done;
    _Atomic uint64_t dropped;  /* written under lock, read without */
    bool sleeping;             /* the writer waits on work */
    bool stop_req;
    bool running;
    pthread_t thread;
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void timespec_at(struct timespec *ts, uint64_t ns)
{
    ts->tv_sec = (time_t)(ns / 1000000000ull);
    ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* lock held: detach the whole list. */
static struct asyncw_item *take_all(struct asyncw *w)
{
    struct asyncw_item *list = w->head;
    w->head = w->tail = NULL;
    w->queued = 0;
    return list;
}

/* Write a detached list in order; each item's units are freed as soon as it is written, so
 * a waiting pusher gets room before the whole list is done. */
static void write_list(struct asyncw *w, struct asyncw_item *list)
{
    while (list) {
        struct asyncw_item *it = list;
        size_t units = it->weight;
        list = it->next;
        it->next = NULL;
        w->cfg.ops->write(w->cfg.ctx, it);
        pthread_mutex_lock(&w->lock);
        w->held -= units;
        if (w->waiters)
            pthread_cond_broadcast(&w->room);
        pthread_mutex_unlock(&w->lock);
    }
}

static void sync_out(struct asyncw *w)
{
    if (w->cfg.ops->sync)
        w->cfg.ops->sync(w->cfg.ctx);
}

static void *asyncw_main(void *arg)
{
    struct asyncw *w = arg;
    uint64_t next_sync = mono_ns() + w->cfg.interval_ns;

    pthread_mutex_lock(&w->lock);
    while (!w->stop_req) {
        uint64_t now = mono_ns();
        uint64_t target = w->flush_req;
        bool due = now >= next_sync || target != w->flush_done;
        if (!due && w->queued < w->cfg.batch && !(w->waiters && w->queued)) {
            struct timespec ts;
            timespec_at(&ts, next_sync);
            w->sleeping = true;
            pthread_cond_timedwait(&w->work, &w->lock, &ts);
            w->sleeping = false;
            continue;
        }
        struct asyncw_item *list = take_all(w);
        pthread_mutex_unlock(&w->lock);
        write_list(w, list);
        if (due || w->cfg.sync_each_batch) {
            sync_out(w);
            next_sync = mono_ns() + w->cfg.interval_ns;
        }
        pthread_mutex_lock(&w->lock);
        if (target != w->flush_done) {
            w->flush_done = target;
            pthread_cond_broadcast(&w->room);
        }
    }
    pthread_mutex_unlock(&w->lock);
    struct timespec cpu;
    if (w->cfg.cpu_ns && clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
        atomic_fetch_add_explicit(w->cfg.cpu_ns, (uint64_t)cpu.tv_sec * 1000000000ull + (uint64_t)cpu.tv_nsec,
                                  memory_order_relaxed);
    return NULL;
}

int asyncw_create(const struct asyncw_cfg *cfg, struct asyncw **ret)
{
    pthread_condattr_t ca;
    struct asyncw *w;

    if (!cfg || !ret || !cfg->ops || !cfg->ops->write || cfg->capacity == 0)
        return -EINVAL;
    w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->cfg = *cfg;
    if (w->cfg.batch == 0 || w->cfg.batch > w->cfg.capacity)
        w->cfg.batch = w->cfg.capacity; /* else a queue below the batch would wait for the interval */
    size_t i = 0;
    for (; cfg->name && cfg->name[i] && i < sizeof(w->name) - 1; i++)
        w->name[i] = cfg->name[i];
    w->name[i] = '\0';
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->work, &ca);
    pthread_cond_init(&w->room, &ca);
    pthread_condattr_destroy(&ca);
    *ret = w;
    return 0;
}

int asyncw_start(struct asyncw *w)
{
    int rc = 0;

    pthread_mutex_lock(&w->lock);
    if (!w->running && !w->stop_req) {
        rc = thr_start(&w->thread, w->name, asyncw_main, w, THR_JOINABLE);
        w->running = rc == 0;
    }
    pthread_mutex_unlock(&w->lock);
    if (rc != 0)
        LOG_ERROR("%s: cannot start the writer thread: %s", w->cfg.what ? w->cfg.what : w->name, errno_name(-rc));
    return rc;
}

int asyncw_push(struct asyncw *w, struct asyncw_item *it, size_t *ret_dropped)
{
    size_t want = it->weight, room, drop = 0;
    uint64_t deadline = 0;
    int rc = 0;

    if (ret_dropped)
        *ret_dropped = 0;
    if (want == 0)
        return -EINVAL;
    pthread_mutex_lock(&w->lock);
    /* Back-pressure: wait for the writer while it runs, unless the item can never fit whole
     * (it is cut to what is free now). */
    while (w->held + want > w->cfg.capacity && want <= w->cfg.capacity) {
        uint64_t now = mono_ns();
        if (!w->running || w->stop_req || w->cfg.backpressure_ns == 0)
            break;
        if (!deadline)
            deadline = now + w->cfg.backpressure_ns;
        else if (now >= deadline)
            break;
        struct timespec ts;
        timespec_at(&ts, deadline);
        w->waiters++;
        if (w->sleeping)
            pthread_cond_signal(&w->work);
        pthread_cond_timedwait(&w->room, &w->lock, &ts);
        w->waiters--;
    }
    room = w->cfg.capacity - w->held;
    if (want > room) {
        if (room == 0 || !w->cfg.ops->cut) {
            drop = want;
            rc = -ENOSPC;
            goto out;
        }
        w->cfg.ops->cut(w->cfg.ctx, it, room);
        drop = want - room;
        it->weight = want = room;
    }
    it->next = NULL;
    if (w->tail)
        w->tail->next = it;
    else
        w->head = it;
    w->tail = it;
    w->queued += want;
    w->held += want;
    if (w->sleeping && w->queued >= w->cfg.batch)
        pthread_cond_signal(&w->work);
out:
    atomic_fetch_add_explicit(&w->dropped, drop, memory_order_relaxed);
    pthread_mutex_unlock(&w->lock);
    if (ret_dropped)
        *ret_dropped = drop;
    return rc;
}

void asyncw_flush(struct asyncw *w)
{
    pthread_mutex_lock(&w->lock);
    if (w->running) {
        uint64_t want = ++w->flush_req;
        pthread_cond_signal(&w->work);
        while (w->flush_done < want && w->running)
            pthread_cond_wait(&w->room, &w->lock);
        pthread_mutex_unlock(&w->lock);
        return;
    }
    pthread_mutex_unlock(&w->lock);
    asyncw_drain(w);
}

void asyncw_stop(struct asyncw *w)
{
    pthread_mutex_lock(&w->lock);
    bool running = w->running;
    w->stop_req = true;
    pthread_cond_broadcast(&w->work);
    pthread_cond_broadcast(&w->room);
    pthread_mutex_unlock(&w->lock);
    if (!running)
        return;
    pthread_join(w->thread, NULL);
    pthread_mutex_lock(&w->lock);
    w->running = false;
    pthread_cond_broadcast(&w->room); /* a flusher waiting on a writer that is gone */
    pthread_mutex_unlock(&w->lock);
}

void asyncw_drain(struct asyncw *w)
{
    pthread_mutex_lock(&w->lock);
    struct asyncw_item *list = take_all(w);
    pthread_mutex_unlock(&w->lock);
    write_list(w, list);
    sync_out(w);
}

uint64_t asyncw_dropped(struct asyncw *w)
{
    return atomic_load_explicit(&w->dropped, memory_order_relaxed);
}

void asyncw_destroy(struct asyncw *w)
{
    if (!w)
        return;
    asyncw_stop(w);
    struct asyncw_item *list = take_all(w);
    while (list) {
        struct asyncw_item *nx = list->next;
        if (w->cfg.ops->discard)
            w->cfg.ops->discard(w->cfg.ctx, list);
        else
            free(list);
        list = nx;
    }
    pthread_cond_destroy(&w->work);
    pthread_cond_destroy(&w->room);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

int asyncw_spare_create(size_t cap, struct asyncw_spare **ret)
{
    struct asyncw_spare *s = calloc(1, sizeof(*s) + cap * sizeof(s->v[0]));

    if (!s)
        return -ENOMEM;
    pthread_mutex_init(&s->mu, NULL);
    s->cap = cap;
    *ret = s;
    return 0;
}

void *asyncw_spare_get(struct asyncw_spare *s)
{
    void *item = NULL;

    if (!s)
        return NULL;
    pthread_mutex_lock(&s->mu);
    if (s->n)
        item = s->v[--s->n];
    pthread_mutex_unlock(&s->mu);
    return item;
}

void asyncw_spare_put(struct asyncw_spare *s, void *item)
{
    if (!item)
        return;
    if (!s) {
        free(item);
        return;
    }
    pthread_mutex_lock(&s->mu);
    if (s->n < s->cap) {
        s->v[s->n++] = item;
        item = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    free(item);
}

void asyncw_spare_destroy(struct asyncw_spare *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
