/* fuzz_rw_inputs: the remote-write inputs an operator or a monitored rank controls. The first
 * byte picks the target:
 *   'H' --remote_write_headers text (Name=value,...) and 'F' the same bytes as an @FILE;
 *   'U' --remote_write_url (rw_url_check, through the libcurl URL parser when present);
 *   'E' samples (family, labels, value cut from the input at newlines) through rw_batch and
 *       rw_encode, then snappy-uncompressed and protobuf-unpacked again: the request must hold
 *       one TimeSeries per sample, __name__ first, with the family and label values unchanged. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <snappy-c.h>

#include "common/log.h"
#include "daemon/sinks/promfam.h"
#include "daemon/sinks/rw_encode.h"
#include "daemon/sinks/rw_queue.h"
#include "daemon/sinks/rw_sender.h"
#include "rw_remote.pb-c.h"

const char *const fuzz_seeds[] = {
    "HX-Scope-OrgID=team-a,Authorization=Bearer abc",
    "HContent-Type=text/plain",
    "H=x,,A=\r\n",
    "FX-Scope-OrgID: team-a\n# comment\n  Authorization: Bearer abc\r\n",
    "FBad Name: v\n",
    "Uhttps://prom.example:9090/api/v1/write",
    "Uhttp://[::1]:9090/api/v1/write?x=1#f",
    "Uftp://x/",
    "Uhttp://a b/",
    "Enpu_op_total_ns\nname\naclnnAdd\nhost_name\nvm\n\n12.5\nnpu_op_count\njob\n-1\n\nnan",
    "Ex\n\n1e308\ny\na\n\xc3\xa9\xff\"\\\n\n-0",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

#define MAX_LABELS 16
#define MAX_SAMPLES 16

/* Samples: family LF (name LF value LF)* LF valuetext LF ...; each field is cut in place
 * (its LF becomes the NUL that ends it). */
static size_t cut(char *p, size_t n, size_t *off)
{
    size_t s = *off;
    while (*off < n && p[*off] != '\n')
        (*off)++;
    size_t len = *off - s;
    if (*off < n)
        p[(*off)++] = 0;
    return len;
}

static void check_encode(const char *p, size_t n)
{
    char *buf = malloc(n + 1);
    memcpy(buf, p, n);
    buf[n] = 0;
    struct rw_batch *b = NULL;
    struct promfam_label labels[MAX_SAMPLES][MAX_LABELS];
    struct promfam_sample smp[MAX_SAMPLES];
    size_t ns = 0, off = 0;
    if (rw_batch_create(1749889801120, &b) != 0)
        abort();
    while (off < n && ns < MAX_SAMPLES) {
        size_t at = off;
        cut(buf, n, &off);
        smp[ns].family = buf + at;
        smp[ns].labels = labels[ns];
        smp[ns].nlabels = 0;
        for (;;) {
            size_t la = off, ll = cut(buf, n, &off);
            if (ll == 0 || off >= n || smp[ns].nlabels == MAX_LABELS)
                break;
            size_t va = off;
            cut(buf, n, &off);
            labels[ns][smp[ns].nlabels].name = buf + la;
            labels[ns][smp[ns].nlabels].value = buf + va;
            smp[ns].nlabels++;
        }
        size_t va = off;
        cut(buf, n, &off);
        smp[ns].value = strtod(buf + va, NULL);
        if (rw_batch_add(b, &smp[ns]) == 0)
            ns++;
    }
    struct rw_encoder e = { 0 };
    const uint8_t *body = NULL;
    size_t len = 0, nenc = 0;
    if (rw_encode(&e, b, &body, &len, &nenc) == 0) {
        size_t rawlen = 0;
        if (snappy_uncompressed_length((const char *)body, len, &rawlen) != SNAPPY_OK)
            abort();
        char *raw = malloc(rawlen ? rawlen : 1);
        if (snappy_uncompress((const char *)body, len, raw, &rawlen) != SNAPPY_OK)
            abort();
        Prometheus__WriteRequest *wr = prometheus__write_request__unpack(NULL, rawlen, (const uint8_t *)raw);
        if (!wr || wr->n_timeseries != nenc || nenc != ns)
            abort();
        for (size_t i = 0; i < wr->n_timeseries; i++) {
            const Prometheus__TimeSeries *ts = wr->timeseries[i];
            if (ts->n_labels < 1 || strcmp(ts->labels[0]->name, "__name__") != 0 ||
                strcmp(ts->labels[0]->value, smp[i].family) != 0 || ts->n_samples != 1 ||
                ts->samples[0]->timestamp != 1749889801120)
                abort();
            /* every label we gave is there with its value */
            for (size_t k = 0; k < smp[i].nlabels; k++) {
                int found = 0;
                for (size_t j = 1; j < ts->n_labels && !found; j++)
                    found = strcmp(ts->labels[j]->name, smp[i].labels[k].name) == 0 &&
                            strcmp(ts->labels[j]->value, smp[i].labels[k].value) == 0;
                if (!found)
                    abort();
            }
        }
        prometheus__write_request__free_unpacked(wr, NULL);
        free(raw);
    }
    rw_encoder_fini(&e);
    rw_batch_destroy(b);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        log_set_level(LOG_LVL_FATAL);
        ready = 1;
    }
    if (size < 1 || size > 65536)
        return 0;
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    char err[512];
    if (data[0] == 'E') {
        check_encode(p, n);
        return 0;
    }
    char *text = malloc(n + 64);
    if (!text)
        return 0;
    if (data[0] == 'F') {
        char path[] = "/tmp/fuzz_rwhXXXXXX";
        int fd = mkstemp(path);
        if (fd < 0)
            abort();
        if (write(fd, p, n) != (ssize_t)n)
            abort();
        close(fd);
        snprintf(text, n + 64, "@%s", path);
        struct rw_headers h;
        if (rw_headers_parse(text, &h, err, sizeof(err)) == 0)
            rw_headers_fini(&h);
        unlink(path);
    } else {
        memcpy(text, p, n);
        text[n] = 0;
        if (data[0] == 'H') {
            struct rw_headers h;
            if (rw_headers_parse(text, &h, err, sizeof(err)) == 0) {
                /* what was accepted can go on the wire: no CR/LF, a "Name: value" shape */
                for (size_t i = 0; i < h.n; i++)
                    if (strpbrk(h.line[i], "\r\n") || !strchr(h.line[i], ':'))
                        abort();
                rw_headers_fini(&h);
            }
        } else if (data[0] == 'U') {
            rw_url_check(text, err, sizeof(err));
        }
    }
    free(text);
    return 0;
}
