/* gc: one periodic loop timer per daemon. The timer keeps a fixed cadence (libevent re-arms a
 * persistent timer from its planned expiry), and shutdown is just freeing the event. */
#include "daemon/ipc/gc.h"

#include <errno.h>
#include <stdlib.h>

#include "common/log.h"

struct gc {
    struct registry *reg;
    struct status_table *st;
    uint64_t age_ns;
    struct loop_event *timer;
    struct peer_cache *peers; /* may be NULL */
    void (*task)(void *arg);
    void *task_arg;
};

static void on_tick(struct loop_event *ev, void *arg)
{
    struct gc *g = arg;
    (void)ev;
    uint64_t now = clock_mono_ns();
    registry_gc(g->reg, now, g->age_ns);
    status_gc(g->st, now, g->age_ns);
    if (g->peers)
        peer_gc(g->peers);
    if (g->task)
        g->task(g->task_arg);
}

void gc_set_task(struct gc *g, void (*fn)(void *arg), void *arg)
{
    g->task = fn;
    g->task_arg = arg;
}

void gc_set_peers(struct gc *g, struct peer_cache *peers)
{
    g->peers = peers;
}

int gc_create(struct loop *l, struct registry *reg, struct status_table *st,
              uint64_t interval_ms, uint64_t age_ms, struct gc **ret)
{
    int rc;
    struct gc *g = calloc(1, sizeof(*g));
    *ret = NULL;
    if (!g)
        return -ENOMEM;
    g->reg = reg;
    g->st = st;
    g->age_ns = age_ms * 1000000ull;
    /* a zero period would spin the loop; the flag parser keeps it positive, keep it so here */
    rc = loop_timer_add(l, interval_ms ? interval_ms : 1, true, on_tick, g, &g->timer);
    if (rc) {
        free(g);
        return rc;
    }
    *ret = g;
    return 0;
}

void gc_destroy(struct gc *g)
{
    if (!g)
        return;
    loop_event_free(g->timer);
    free(g);
}
