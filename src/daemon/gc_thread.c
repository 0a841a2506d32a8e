/* gc_thread: a condition-variable timed wait (no polling) between GC passes, so shutdown
 * wakes it at once. */
#include "daemon/gc_thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "common/log.h"

struct gc_thread {
    struct registry *reg;
    struct status_table *st;
    uint64_t interval_ns, age_ns;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    bool started;
    pthread_t thread;
};

struct gc_thread *gc_thread_create(struct registry *reg, struct status_table *st,
                                   uint64_t interval_ms, uint64_t age_ms)
{
    struct gc_thread *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->reg = reg;
    g->st = st;
    g->interval_ns = interval_ms * 1000000ull;
    g->age_ns = age_ms * 1000000ull;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&g->mu, NULL);
    return g;
}

static void *gc_main(void *arg)
{
    struct gc_thread *g = arg;
    pthread_setname_np(pthread_self(), "kinetoConfigMgr");
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        uint64_t wake = clock_mono_ns() + g->interval_ns;
        struct timespec ts = { (time_t)(wake / 1000000000ull), (long)(wake % 1000000000ull) };
        while (!g->stop && pthread_cond_timedwait(&g->cv, &g->mu, &ts) != ETIMEDOUT)
            ;
        if (g->stop)
            break;
        pthread_mutex_unlock(&g->mu);
        uint64_t now = clock_mono_ns();
        registry_gc(g->reg, now, g->age_ns);
        status_gc(g->st, now, g->age_ns);
        pthread_mutex_lock(&g->mu);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int gc_thread_start(struct gc_thread *g)
{
    int rc = pthread_create(&g->thread, NULL, gc_main, g);
    if (rc)
        return -rc;
    g->started = true;
    return 0;
}

void gc_thread_destroy(struct gc_thread *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    if (g->started)
        pthread_join(g->thread, NULL);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}
