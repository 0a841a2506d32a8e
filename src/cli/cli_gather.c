/* cli_gather: parallel fan-out of one body with the replies kept (see cli_gather.h). The
 * per-host work is rpc_call + a strict parse; failures are per host and never stop others. */
#include "cli/cli_gather.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_fanout.h"
#include "cli/hosts.h"
#include "cli/rpc_client.h"

struct gather {
    const struct cli_targets *t;
    const char *body;
    size_t len;
    struct cli_reply *r;
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

static void one_cb(void *ctx, size_t i)
{
    one(ctx, i);
}

int cli_gather(const struct cli_targets *t, const char *body, size_t len, struct cli_reply *ret)
{
    struct gather g = { t, body, len, ret };

    memset(ret, 0, t->hosts->n * sizeof(*ret));
    return cli_fanout(t->hosts->n, t->parallel, one_cb, &g);
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
