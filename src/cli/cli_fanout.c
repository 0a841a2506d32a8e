/* cli_fanout: a pool of joinable workers over one index counter (cli_fanout.h), shared by the
 * commands that talk to every host (cli.c) and the merged views (cli_gather.c). */
#include "cli/cli_fanout.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/thr.h"

struct fanout_pool {
    void (*fn)(void *ctx, size_t i);
    void *ctx;
    size_t n;
    atomic_size_t next;
};

static void *fanout_worker(void *arg)
{
    struct fanout_pool *p = arg;

    for (;;) {
        size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n)
            return NULL;
        p->fn(p->ctx, i);
    }
}

int cli_fanout(size_t n, int parallel, void (*fn)(void *ctx, size_t i), void *ctx)
{
    struct fanout_pool p = { .fn = fn, .ctx = ctx, .n = n };
    size_t nth = parallel < 1 ? 1 : n < (size_t)parallel ? n : (size_t)parallel, started = 0;
    pthread_t *tids;
    int rc = 0;

    atomic_init(&p.next, 0);
    if (n == 0)
        return 0;
    tids = calloc(nth, sizeof(*tids));
    if (!tids)
        return -ENOMEM;
    for (; started < nth; started++) {
        rc = thr_start(&tids[started], "dyno-host", fanout_worker, &p, THR_JOINABLE | THR_SMALL_STACK);
        if (rc != 0)
            break;
    }
    /* with one thread running, every index is still served */
    if (started > 0)
        rc = 0;
    for (size_t i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    free(tids);
    return rc;
}
