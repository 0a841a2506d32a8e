/* rw_encode: builds the protobuf-c message tree over the batch bytes (label strings point into
 * the batches, which are NUL-terminated there), packs it, then snappy-compresses the result. */
#include "daemon/rw_encode.h"

#include <errno.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>

#include "rw_remote.pb-c.h"

int rw_encode(const struct rw_batch *chain, uint8_t **ret_body, size_t *ret_len, size_t *ret_samples)
{
    size_t ns = 0, nl = 0, k = 0, kl = 0;
    int rc = -ENOMEM;
    struct rw_sample_view v;
    Prometheus__TimeSeries *ts = NULL, **tsp = NULL;
    Prometheus__Sample *sm = NULL, **smp = NULL;
    Prometheus__Label *lb = NULL, **lbp = NULL;
    uint8_t *raw = NULL, *out = NULL;

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
    ts = calloc(ns ? ns : 1, sizeof(*ts));
    tsp = calloc(ns ? ns : 1, sizeof(*tsp));
    sm = calloc(ns ? ns : 1, sizeof(*sm));
    smp = calloc(ns ? ns : 1, sizeof(*smp));
    lb = calloc(nl ? nl : 1, sizeof(*lb));
    lbp = calloc(nl ? nl : 1, sizeof(*lbp));
    if (!ts || !tsp || !sm || !smp || !lb || !lbp)
        goto out;
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
    raw = malloc(rawlen ? rawlen : 1);
    if (!raw)
        goto out;
    prometheus__write_request__pack(&wr, raw);
    size_t outlen = snappy_max_compressed_length(rawlen);
    out = malloc(outlen ? outlen : 1);
    if (!out)
        goto out;
    if (snappy_compress((const char *)raw, rawlen, (char *)out, &outlen) != SNAPPY_OK) {
        rc = -EIO;
        goto out;
    }
    *ret_body = out;
    *ret_len = outlen;
    *ret_samples = ns;
    out = NULL;
    rc = 0;
out:
    free(out);
    free(raw);
    free(lbp);
    free(lb);
    free(smp);
    free(sm);
    free(tsp);
    free(ts);
    return rc;
}
