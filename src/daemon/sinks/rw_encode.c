/* rw_encode: builds the protobuf-c message tree over the batch bytes (label strings point into
 * the batches, which are NUL-terminated there), packs it, then snappy-compresses the result.
 * All storage lives in the caller's rw_encoder and is reused from request to request. */
#include "daemon/sinks/rw_encode.h"

#include <errno.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>

#include "rw_remote.pb-c.h"

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 1024;
    while (nc < need)
        nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np)
        return -ENOMEM;
    *p = np;
    *cap = nc;
    return 0;
}

void rw_encoder_fini(struct rw_encoder *e)
{
    free(e->ts);
    free(e->tsp);
    free(e->sm);
    free(e->smp);
    free(e->lb);
    free(e->lbp);
    free(e->raw);
    free(e->out);
    memset(e, 0, sizeof(*e));
}

static int resize(void **p, size_t bytes)
{
    void *np = realloc(*p, bytes);
    if (!np)
        return -ENOMEM;
    *p = np;
    return 0;
}

static size_t next_cap(size_t cap, size_t need)
{
    size_t nc = cap ? cap : 1024;
    while (nc < need)
        nc *= 2;
    return nc;
}

/* The per-sample arrays share ns_cap and the per-label ones nl_cap; a capacity is recorded
 * only once every array of its group has grown to it. */
static int reserve(struct rw_encoder *e, size_t ns, size_t nl)
{
    if (ns > e->ns_cap) {
        size_t nc = next_cap(e->ns_cap, ns);
        if (resize(&e->ts, nc * sizeof(Prometheus__TimeSeries)) || resize(&e->tsp, nc * sizeof(void *)) ||
            resize(&e->sm, nc * sizeof(Prometheus__Sample)) || resize(&e->smp, nc * sizeof(void *)))
            return -ENOMEM;
        e->ns_cap = nc;
    }
    if (nl > e->nl_cap) {
        size_t nc = next_cap(e->nl_cap, nl);
        if (resize(&e->lb, nc * sizeof(Prometheus__Label)) || resize(&e->lbp, nc * sizeof(void *)))
            return -ENOMEM;
        e->nl_cap = nc;
    }
    return 0;
}

int rw_encode(struct rw_encoder *e, const struct rw_batch *chain, const uint8_t **ret_body, size_t *ret_len,
              size_t *ret_samples)
{
    size_t ns = 0, nl = 0, k = 0, kl = 0;
    struct rw_sample_view v;

    *ret_body = NULL;
    *ret_len = 0;
    *ret_samples = 0;
    /* pass 1: counts */
    for (const struct rw_batch *b = chain; b; b = b->next) {
        size_t off = 0;
        int r;
        while ((r = rw_batch_next(b, &off, &v)) == 1) {
            ns++;
            nl += v.nlabels + 1;
        }
        if (r < 0)
            return -EINVAL;
    }
    if (reserve(e, ns ? ns : 1, nl ? nl : 1) != 0)
        return -ENOMEM;
    Prometheus__TimeSeries *ts = e->ts, **tsp = e->tsp;
    Prometheus__Sample *sm = e->sm, **smp = e->smp;
    Prometheus__Label *lb = e->lb, **lbp = e->lbp;
    /* pass 2: the message tree */
    for (const struct rw_batch *b = chain; b; b = b->next) {
        size_t off = 0;
        while (rw_batch_next(b, &off, &v) == 1) {
            Prometheus__TimeSeries *t = &ts[k];
            prometheus__time_series__init(t);
            prometheus__sample__init(&sm[k]);
            sm[k].value = v.value;
            sm[k].timestamp = b->ts_ms;
            smp[k] = &sm[k];
            t->samples = &smp[k];
            t->n_samples = 1;
            t->labels = &lbp[kl];
            /* __name__ first (remote write 1.0: sorted by name; ours are lower case) */
            prometheus__label__init(&lb[kl]);
            lb[kl].name = (char *)"__name__";
            lb[kl].value = (char *)v.family;
            lbp[kl] = &lb[kl];
            kl++;
            for (size_t i = 0; i < v.nlabels; i++, kl++) {
                prometheus__label__init(&lb[kl]);
                lb[kl].name = (char *)v.labels[2 * i];
                lb[kl].value = (char *)v.labels[2 * i + 1];
                lbp[kl] = &lb[kl];
            }
            t->n_labels = v.nlabels + 1;
            tsp[k] = t;
            k++;
        }
    }
    Prometheus__WriteRequest wr = PROMETHEUS__WRITE_REQUEST__INIT;
    wr.timeseries = tsp;
    wr.n_timeseries = ns;
    size_t rawlen = prometheus__write_request__get_packed_size(&wr);
    if (grow((void **)&e->raw, &e->raw_cap, rawlen + 1, 1) != 0)
        return -ENOMEM;
    prometheus__write_request__pack(&wr, e->raw);
    size_t outlen = snappy_max_compressed_length(rawlen);
    if (grow((void **)&e->out, &e->out_cap, outlen + 1, 1) != 0)
        return -ENOMEM;
    if (snappy_compress((const char *)e->raw, rawlen, (char *)e->out, &outlen) != SNAPPY_OK)
        return -EIO;
    *ret_body = e->out;
    *ret_len = outlen;
    *ret_samples = ns;
    return 0;
}
