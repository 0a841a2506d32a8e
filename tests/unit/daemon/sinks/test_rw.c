/* Unit tests of remote write without the network: batch packing, the drop-oldest queue
 * bounds (samples and bytes, exact drop counts), the WriteRequest body (snappy-decoded and
 * protobuf-unpacked back: __name__ first, sorted labels, ms timestamps), header and URL checks. */
#include <errno.h>
#include <setjmp.h>
#include <snappy-c.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "daemon/sinks/rw_encode.h"
#include "daemon/sinks/rw_queue.h"
#include "daemon/sinks/rw_sender.h"
#include "rw_remote.pb-c.h"

static struct rw_batch *mk(int64_t ts, int n)
{
    struct rw_batch *b;
    struct promfam_label l[2] = { { "host_name", "h" }, { "name", "MatMul" } };
    assert_int_equal(rw_batch_create(ts, &b), 0);
    for (int i = 0; i < n; i++) {
        struct promfam_sample s = { "npu_op_total_ns", l, 2, (double)(ts * 100 + i) };
        assert_int_equal(rw_batch_add(b, &s), 0);
    }
    return b;
}

static void test_batch_roundtrip(void **state)
{
    struct rw_batch *b = mk(7, 3);
    struct rw_sample_view v;
    size_t off = 0;
    int n = 0;
    (void)state;
    while (rw_batch_next(b, &off, &v) == 1) {
        assert_string_equal(v.family, "npu_op_total_ns");
        assert_int_equal(v.nlabels, 2);
        assert_string_equal(v.labels[0], "host_name");
        assert_string_equal(v.labels[3], "MatMul");
        assert_true(v.value == (double)(700 + n));
        n++;
    }
    assert_int_equal(n, 3);
    assert_int_equal(b->nsamples, 3);
    rw_batch_destroy(b);
}

static void test_queue_bounds(void **state)
{
    struct rw_queue q;
    (void)state;
    /* by samples: 10 samples max, batches of 4 */
    rw_queue_init(&q, 10, 1 << 20);
    assert_int_equal(rw_queue_push(&q, mk(1, 4)), 0);
    assert_int_equal(rw_queue_push(&q, mk(2, 4)), 0);
    assert_int_equal(rw_queue_push(&q, mk(3, 4)), 4);   /* batch 1 dropped */
    assert_int_equal(rw_queue_push(&q, mk(4, 11)), 11); /* larger than the bound by itself */
    size_t s = 0, by = 0;
    uint64_t pushed = 0, dropped = 0;
    rw_queue_counts(&q, &s, &by, &pushed, &dropped);
    assert_int_equal(s, 8);
    assert_int_equal(pushed, 23);
    assert_int_equal(dropped, 15);
    /* take: oldest first, no more than max_samples unless the first alone is larger */
    struct rw_batch *c = rw_queue_take(&q, 5, false);
    assert_non_null(c);
    assert_int_equal(c->ts_ms, 2);
    assert_null(c->next);
    rw_batch_destroy(c);
    assert_int_equal(rw_queue_push(&q, mk(5, 4)), 0);
    c = rw_queue_take(&q, 100, false);
    assert_int_equal(c->ts_ms, 3);
    assert_non_null(c->next);
    assert_int_equal(c->next->ts_ms, 5);
    rw_batch_destroy(c);
    rw_queue_stop(&q);
    assert_null(rw_queue_take(&q, 100, false));
    assert_true(rw_queue_wait_stop(&q, 1));
    rw_queue_fini(&q);

    /* by bytes: room for two batches of 4 samples */
    struct rw_batch *probe = mk(1, 4);
    size_t one = probe->len;
    rw_batch_destroy(probe);
    rw_queue_init(&q, 1000, 2 * one + 1);
    assert_int_equal(rw_queue_push(&q, mk(1, 4)), 0);
    assert_int_equal(rw_queue_push(&q, mk(2, 4)), 0);
    assert_int_equal(rw_queue_push(&q, mk(3, 4)), 4);
    rw_queue_counts(&q, &s, &by, NULL, NULL);
    assert_int_equal(s, 8);
    assert_int_equal(by, 2 * one);
    assert_false(rw_queue_wait_stop(&q, 1));
    rw_queue_fini(&q);
}

static void test_encode(void **state)
{
    struct rw_batch *a = mk(1700000000123, 2), *b = mk(1700000001123, 1);
    const uint8_t *body;
    size_t len, n, rawlen;
    struct rw_encoder enc = { 0 };
    (void)state;
    a->next = b;
    /* twice through the same encoder: the reused buffers give the same body */
    assert_int_equal(rw_encode(&enc, a, &body, &len, &n), 0);
    assert_int_equal(rw_encode(&enc, a, &body, &len, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(snappy_uncompressed_length((const char *)body, len, &rawlen), SNAPPY_OK);
    char *raw = malloc(rawlen);
    assert_int_equal(snappy_uncompress((const char *)body, len, raw, &rawlen), SNAPPY_OK);
    Prometheus__WriteRequest *wr = prometheus__write_request__unpack(NULL, rawlen, (const uint8_t *)raw);
    assert_non_null(wr);
    assert_int_equal(wr->n_timeseries, 3);
    for (size_t i = 0; i < 3; i++) {
        Prometheus__TimeSeries *t = wr->timeseries[i];
        assert_int_equal(t->n_labels, 3);
        assert_string_equal(t->labels[0]->name, "__name__");
        assert_string_equal(t->labels[0]->value, "npu_op_total_ns");
        assert_string_equal(t->labels[1]->name, "host_name");
        assert_string_equal(t->labels[2]->name, "name");
        assert_string_equal(t->labels[2]->value, "MatMul");
        assert_int_equal(t->n_samples, 1);
    }
    assert_int_equal(wr->timeseries[0]->samples[0]->timestamp, 1700000000123);
    assert_true(wr->timeseries[1]->samples[0]->value == 170000000012301.0);
    assert_int_equal(wr->timeseries[2]->samples[0]->timestamp, 1700000001123);
    prometheus__write_request__free_unpacked(wr, NULL);
    free(raw);
    rw_encoder_fini(&enc);
    rw_batch_destroy(a);
}

static void test_headers(void **state)
{
    struct rw_headers h;
    char err[256];
    (void)state;
    assert_int_equal(rw_headers_parse("Authorization=Bearer abc==, X-Scope-OrgID = team1", &h, err, sizeof(err)), 0);
    assert_int_equal(h.n, 2);
    assert_string_equal(h.line[0], "Authorization: Bearer abc==");
    assert_string_equal(h.line[1], "X-Scope-OrgID: team1");
    rw_headers_fini(&h);
    assert_int_equal(rw_headers_parse("", &h, err, sizeof(err)), 0);
    assert_int_equal(h.n, 0);
    assert_int_equal(rw_headers_parse("Bad Name=x", &h, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "'Bad Name'"));
    assert_int_equal(rw_headers_parse("Content-Type=text/plain", &h, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "set by the protocol"));
    assert_int_equal(rw_headers_parse("novalue", &h, err, sizeof(err)), -EINVAL);
    assert_int_equal(rw_headers_parse("X-A=ok\x01", &h, err, sizeof(err)), -EINVAL);
    assert_null(strstr(err, "ok")); /* values are never echoed: they may be secrets */

    char path[] = "/tmp/test_rw_hdrXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "# token\nAuthorization: Bearer a,b\n\nX-Org: 1\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char arg[64];
    snprintf(arg, sizeof(arg), "@%s", path);
    assert_int_equal(rw_headers_parse(arg, &h, err, sizeof(err)), 0);
    assert_int_equal(h.n, 2);
    assert_string_equal(h.line[0], "Authorization: Bearer a,b");
    rw_headers_fini(&h);
    unlink(path);
    assert_true(rw_headers_parse(arg, &h, err, sizeof(err)) < 0);
}

static void test_url(void **state)
{
    char err[256];
    (void)state;
    assert_int_equal(rw_url_check("http://127.0.0.1:9090/api/v1/write", err, sizeof(err)), 0);
    assert_int_equal(rw_url_check("https://mimir.example/api/v1/push", err, sizeof(err)), 0);
    assert_int_equal(rw_url_check("ftp://x/y", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "'ftp://x/y'"));
    assert_int_equal(rw_url_check("http://a b/", err, sizeof(err)), -EINVAL);
    assert_int_equal(rw_url_check("not a url", err, sizeof(err)), -EINVAL);
    assert_int_equal(rw_url_check("http://", err, sizeof(err)), -EINVAL);
}

int main(void)
{
    log_set_level(LOG_LVL_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_roundtrip), cmocka_unit_test(test_queue_bounds),
        cmocka_unit_test(test_encode),          cmocka_unit_test(test_headers),
        cmocka_unit_test(test_url),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
