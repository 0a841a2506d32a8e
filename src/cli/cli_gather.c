/* cli_gather: parallel fan-out of one body with the replies kept (see cli_gather.h). The
 * per-host work is rpc_call + a strict parse; failures are per host and never stop others. */
#include "cli/cli_gather.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/hosts.h"
#include "cli/rpc_client.h"

#define GATHER_STACK (256u << 10)

struct gather {
    const struct cli_targets *t;
    const char *body;
    size_t len;
    struct cli_reply *r;
    atomic_size_t next;
};

static void one(struct gather *g, size_t i)
{
    struct cli_reply *r = &g->r[i];
    char *reply = NULL;
    size_t len = 0;
    enum rpc_fail fail;
    const char *end = NULL;

    r->host = g->t->hosts->v[i];
    if (rpc_call_tls(g->t->tls, r->host, g->t->port, NULL, g->t->timeout_s, g->body, g->len, &reply,
                     &len, &fail, r->err, sizeof(r->err)) < 0) {
        r->failed = true;
        return;
    }
    r->json = memchr(reply, '\0', len) ? NULL : cJSON_ParseWithLengthOpts(reply, len, &end, false);
    if (!r->json || !cJSON_IsObject(r->json)) {
        cJSON_Delete(r->json);
        r->json = NULL;
        r->failed = true;
        snprintf(r->err, sizeof(r->err), "Unparsable reply from the server (%zu bytes)", len);
    }
    free(reply);
}

static void *worker(void *arg)
{
    struct gather *g = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&g->next, 1);
        if (i >= g->t->hosts->n)
            return NULL;
        one(g, i);
    }
}

int cli_gather(const struct cli_targets *t, const char *body, size_t len, struct cli_reply *ret)
{
    struct gather g = { t, body, len, ret, 0 };
    size_t n = t->hosts->n, nth = n < (size_t)t->parallel ? n : (size_t)t->parallel, started = 0;
    pthread_t *tids;
    pthread_attr_t attr;

    memset(ret, 0, n * sizeof(*ret));
    atomic_init(&g.next, 0);
    if (nth == 0)
        return 0;
    tids = calloc(nth, sizeof(*tids));
    if (!tids)
        return -ENOMEM;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, GATHER_STACK);
    for (; started < nth; started++)
        if (pthread_create(&tids[started], &attr, worker, &g) != 0)
            break;
    for (size_t i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    pthread_attr_destroy(&attr);
    free(tids);
    return started ? 0 : -EAGAIN;
}

void cli_gather_fini(struct cli_reply *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cJSON_Delete(r[i].json);
        r[i].json = NULL;
    }
}

int64_t cli_json_i64(const cJSON *v, int64_t lo, int64_t hi, int64_t def)
{
    /* compare in double: lo/hi within +-2^63 round to values the conversion can take */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= (double)lo && v->valuedouble < (double)hi + 1.0) ||
        v->valuedouble >= 9223372036854775807.0)
        return def;
    return (int64_t)v->valuedouble;
}
