/* test_pipeline: the pipeline stage alone (src/plugin/pipeline/pipeline.c) with a capturing
 * output: filter and session-start cutoff counted, marker parts handed over with the record
 * that completed them, devices seen, ticks and stop reaching the output and the daemon
 * (PluginStats), the counters' text and JSON forms, and the string pool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/pipeline/output.h"
#include "plugin/pipeline/filter.h"
#include "plugin/pipeline/pipeline.h"

/* ---- the capturing output ---- */
#define CAP_RECS 256
#define CAP_RANGES 64
struct output {
    int started, ticks, stops;
    uint32_t kinds;
    size_t batches, nrecs, nranges;
    int32_t kinds_seen[CAP_RECS];
    uint64_t ends[CAP_RECS];
    struct pl_range ranges[CAP_RANGES];
    int32_t range_kind[CAP_RANGES]; /* kind of the record the range points at */
    char pgi[64];
};
static struct output *g_last;

static int cap_create(const struct output_config *cfg, struct output **ret)
{
    assert_non_null(cfg->pl); /* the pipeline hands itself to its output */
    *ret = calloc(1, sizeof(**ret));
    g_last = *ret;
    return *ret ? 0 : -ENOMEM;
}
static int cap_start(struct output *p) { p->started++; return 0; }
static void cap_consume(struct output *p, const struct pl_batch *b)
{
    p->batches++;
    for (size_t i = 0; i < b->nranges; i++) {
        assert_true(b->ranges[i].at < b->nrecs);
        if (i)
            assert_true(b->ranges[i].at >= b->ranges[i - 1].at); /* ascending `at` */
        assert_true(p->nranges < CAP_RANGES);
        p->range_kind[p->nranges] = b->recs[b->ranges[i].at].kind;
        p->ranges[p->nranges++] = b->ranges[i];
    }
    for (size_t i = 0; i < b->nrecs; i++) {
        assert_true(p->nrecs < CAP_RECS);
        p->kinds_seen[p->nrecs] = b->recs[i].kind;
        p->ends[p->nrecs++] = mon_record_end(&b->recs[i]);
    }
}
static int cap_tick(struct output *p) { p->ticks++; return 0; }
static void cap_set_kinds(struct output *p, uint32_t m) { p->kinds = m; }
static int cap_stop(struct output *p, const char *pgi)
{
    p->stops++;
    snprintf(p->pgi, sizeof(p->pgi), "%s", pgi ? pgi : "(null)");
    return 0;
}
static void cap_destroy(struct output *p) { free(p); }

static const struct output_ops cap_ops = {
    "capture", cap_create, cap_start, cap_consume, cap_tick, cap_set_kinds, cap_stop, cap_destroy, NULL,
};

/* ---- the daemon side: PluginStats datagrams ---- */
struct sent {
    int n;
    char last[1024];
};
static int cap_send(void *ctx, const char *json, size_t len)
{
    struct sent *s = ctx;
    s->n++;
    assert_true(len < sizeof(s->last));
    memcpy(s->last, json, len);
    s->last[len] = '\0';
    return 0;
}

static struct mon_record kern(uint32_t dev, const char *name, uint64_t s, uint64_t e)
{
    struct mon_record r = { .kind = MON_KIND_KERNEL };
    r.u.kernel.device_id = dev;
    r.u.kernel.name = name;
    r.u.kernel.type = "KERNEL_AICORE";
    r.u.kernel.start = s;
    r.u.kernel.end = e;
    return r;
}

static struct mon_record comm(uint32_t dev, const char *name, uint64_t s, uint64_t e)
{
    struct mon_record r = { .kind = MON_KIND_COMMUNICATION };
    r.u.comm.device_id = dev;
    r.u.comm.name = name;
    r.u.comm.alg_type = "RING";
    r.u.comm.comm_name = "world";
    r.u.comm.start = s;
    r.u.comm.end = e;
    return r;
}

static struct mon_record mk(int flag, int src, uint64_t id, uint64_t ts, const char *name, uint32_t o0, uint32_t o1)
{
    struct mon_record r = { .kind = MON_KIND_MARKER };
    r.u.marker = (struct mon_marker){ flag, src, ts, id, o0, o1, name, "" };
    return r;
}

static struct pipeline *new_pipeline(struct filter_state *fs, struct sent *s, uint64_t start_ns)
{
    struct output_config cfg = { .rank = 0, .session_start_ns = start_ns,
                               .report_interval_s = 1, .send = s ? cap_send : NULL, .send_ctx = s };
    struct pipeline *pl = NULL;
    assert_int_equal(pipeline_create(&cfg, fs, &cap_ops, &pl), 0);
    assert_ptr_equal(pipeline_output(pl), g_last);
    return pl;
}

/* Cutoff: a record that ended before the session start is counted, not delivered; the rest
 * arrive in order. Counters add up: consumed = filtered + before_start + kept. */
static void test_cutoff_and_counters(void **state)
{
    (void)state;
    struct pipeline_stats st;
    struct pipeline *pl = new_pipeline(NULL, NULL, 1000);
    struct output *p = pipeline_output(pl);
    struct mon_record recs[] = {
        kern(0, "old", 100, 999),     /* ended before the start */
        kern(0, "across", 900, 1100), /* ended after: kept */
        kern(1, "new", 1200, 1300),
        comm(2, "hcom_AllReduce_1", 500, 800), /* before */
    };
    pipeline_deliver(pl, recs, 4);
    pipeline_stats(pl, &st);
    assert_int_equal(st.consumed, 4);
    assert_int_equal(st.before_start, 2);
    assert_int_equal(st.kept, 2);
    assert_int_equal(st.filtered, 0);
    assert_int_equal(p->nrecs, 2);
    assert_int_equal(p->ends[0], 1100);
    assert_int_equal(p->ends[1], 1300);
    /* an empty delivery reaches nobody */
    size_t batches = p->batches;
    pipeline_deliver(pl, recs, 0);
    assert_int_equal(p->batches, batches);
    pipeline_destroy(pl);
}

/* The filter runs before the cutoff, and what it removes is counted as filtered. */
static void test_filter_counted(void **state)
{
    (void)state;
    struct filter_state *fs;
    struct pipeline_stats st;
    assert_int_equal(filter_state_create(&fs), 0);
    assert_int_equal(filter_state_set(fs, "Kernel:MatMul"), 0);
    struct pipeline *pl = new_pipeline(fs, NULL, 0);
    struct output *p = pipeline_output(pl);
    struct mon_record recs[] = {
        kern(0, "MatMul", 1, 2), kern(0, "Softmax", 3, 4), kern(0, "BatchMatMul", 5, 6),
    };
    pipeline_deliver(pl, recs, 3);
    pipeline_stats(pl, &st);
    assert_int_equal(st.consumed, 3);
    assert_int_equal(st.filtered, 1);
    assert_int_equal(st.kept, 2);
    assert_int_equal(p->nrecs, 2);
    pipeline_destroy(pl);
    filter_state_destroy(fs);
}

/* Markers are paired across deliveries (END in a later buffer than its START); the range
 * points at the record that completed it; device parts note their device. */
static void test_ranges_and_devices(void **state)
{
    (void)state;
    uint32_t devs[8];
    size_t ndev = 0;
    struct pipeline *pl = new_pipeline(NULL, NULL, 0);
    struct output *p = pipeline_output(pl);
    struct mon_record a[] = { kern(3, "k", 1, 2), mk(16, 0, 7, 10, "step 1", 1, 1) };
    struct mon_record b[] = { mk(16, 1, 7, 11, "", 5, 0), kern(3, "k", 3, 4), mk(32, 0, 7, 20, "", 1, 1) };
    struct mon_record c[] = { comm(9, "hcom_AllReduce_1", 5, 6), mk(32, 1, 7, 19, "", 5, 2) };
    pipeline_deliver(pl, a, 2);
    assert_int_equal(p->nranges, 0);
    pipeline_deliver(pl, b, 3);
    assert_int_equal(p->nranges, 1);
    assert_int_equal(p->ranges[0].done, PL_PART_HOST);
    assert_int_equal(p->range_kind[0], MON_KIND_MARKER);
    assert_int_equal(p->ranges[0].at, 2); /* the host END, third record of its batch */
    assert_string_equal(p->ranges[0].name, "step 1");
    assert_false(pl_range_complete(&p->ranges[0]));
    pipeline_deliver(pl, c, 2);
    assert_int_equal(p->nranges, 2);
    assert_int_equal(p->ranges[1].done, PL_PART_DEVICE);
    assert_int_equal(p->ranges[1].at, 1);
    assert_int_equal(p->ranges[1].device_id, 5);
    assert_true(pl_range_complete(&p->ranges[1]));
    pipeline_devices(pl, devs, 8, &ndev);
    assert_int_equal(ndev, 3); /* kernel 3, communication 9, marker device 5: ascending */
    assert_int_equal(devs[0], 3);
    assert_int_equal(devs[1], 5);
    assert_int_equal(devs[2], 9);
    /* a short array still reports the total */
    pipeline_devices(pl, devs, 1, &ndev);
    assert_int_equal(ndev, 3);
    assert_int_equal(devs[0], 3);
    pipeline_destroy(pl);
}

/* Tick and stop reach the output, then the daemon gets the session's counters; the stop
 * completes device parts still waiting for their host START. */
static void test_tick_stop_report(void **state)
{
    (void)state;
    struct sent s = { 0 };
    struct pipeline *pl = new_pipeline(NULL, &s, 0);
    struct output *p = pipeline_output(pl);
    struct mon_record recs[] = { kern(0, "k", 1, 2), mk(16, 1, 4, 5, "", 2, 0), mk(32, 1, 4, 6, "", 2, 1) };
    pipeline_deliver(pl, recs, 3);
    pipeline_set_declined(pl, 5);
    assert_int_equal(pipeline_tick(pl), 0);
    assert_int_equal(p->ticks, 1);
    assert_int_equal(s.n, 1);
    cJSON *j = cJSON_Parse(s.last);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "kind")->valuestring, PIPELINE_STATS_KIND);
    const cJSON *stats = cJSON_GetObjectItemCaseSensitive(j, "stats");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(stats, "consumed")->valuedouble, 3);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(stats, "kept")->valuedouble, 3);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(stats, "dropped_declined")->valuedouble, 5);
    cJSON_Delete(j);
    assert_int_equal(p->nranges, 0); /* the device part waits for its name */
    assert_int_equal(pipeline_stop(pl, "pgi"), 0);
    assert_int_equal(p->stops, 1);
    assert_string_equal(p->pgi, "pgi");
    assert_int_equal(p->nranges, 1);
    assert_int_equal(p->ranges[0].done, PL_PART_DEVICE);
    assert_int_equal(s.n, 2);
    struct pipeline_stats last;
    pipeline_last_stats(&last);
    assert_int_equal(last.consumed, 3);
    assert_int_equal(last.dropped_declined, 5);
    pipeline_destroy(pl);
}

/* The text form names every counter; the JSON form is the data-message envelope with the
 * counters sorted by key; too small a buffer gives 0, never a cut message. */
static void test_stats_forms(void **state)
{
    (void)state;
    struct pipeline_stats s = { .consumed = 10, .kept = 7, .filtered = 1, .before_start = 2, .dropped_queue = 3,
                                .dropped_declined = 4, .dropped_write = 5, .dropped_offline = 6, .written = 8,
                                .bytes_written = 9, .cpu_ns = 11 };
    char text[512], json[1024], tiny[32];
    size_t n = pipeline_stats_format(&s, text, sizeof(text));
    assert_int_equal(n, strlen(text));
    for (const char *k = "consumed=10\0kept=7\0filtered=1\0before_start=2\0dropped_queue=3\0dropped_declined=4\0"
                         "dropped_write=5\0dropped_offline=6\0written=8\0";
         *k; k += strlen(k) + 1)
        assert_non_null(strstr(text, k));
    n = pipeline_stats_json(&s, 4242, 123456789, json, sizeof(json));
    assert_int_equal(n, strlen(json));
    cJSON *j = cJSON_Parse(json);
    assert_non_null(j);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "deviceId")->valuedouble, -1);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "duration")->valuedouble, 11);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "pid")->valuedouble, 4242);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "timestamp")->valuedouble, 123456789);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "name")->valuestring, text);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "stats");
    assert_int_equal(cJSON_GetArraySize(st), 11);
    const char *prev = "";
    for (const cJSON *c = st->child; c; c = c->next) {
        assert_true(strcmp(prev, c->string) < 0);
        prev = c->string;
    }
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(st, "dropped_offline")->valuedouble, 6);
    cJSON_Delete(j);
    assert_int_equal(pipeline_stats_json(&s, 1, 1, tiny, sizeof(tiny)), 0);
}

/* The string pool: ids in first-request order, stable copies, NULL = "", a full pool says
 * -1, and per-string counters start at 0. */
static void test_strpool(void **state)
{
    (void)state;
    struct pl_strpool *sp;
    const char *copy = NULL;
    size_t len = 0;
    char name[32];
    assert_int_equal(pl_strpool_create(1000, &sp), 0);
    assert_int_equal(pl_strpool_id(sp, "MatMul", &copy), 0);
    assert_string_equal(copy, "MatMul");
    assert_int_equal(pl_strpool_id(sp, NULL, NULL), 1);
    assert_int_equal(pl_strpool_id(sp, "", NULL), 1);
    assert_int_equal(pl_strpool_id(sp, "MatMul", NULL), 0);
    for (int i = 0; i < 998; i++) { /* grows past any initial table size */
        snprintf(name, sizeof(name), "k%d", i);
        assert_int_equal(pl_strpool_id(sp, name, NULL), i + 2);
    }
    assert_int_equal(pl_strpool_count(sp), 1000);
    assert_int_equal(pl_strpool_id(sp, "one too many", NULL), -1);
    assert_int_equal(pl_strpool_id(sp, "k500", NULL), 502); /* known strings still resolve */
    assert_string_equal(pl_strpool_text(sp, 0, &len), "MatMul");
    assert_int_equal(len, 6);
    assert_string_equal(pl_strpool_text(sp, 1, &len), "");
    assert_int_equal(len, 0);
    assert_ptr_equal(pl_strpool_text(sp, 0, NULL), copy); /* the copy is stable across growth */
    uint64_t *c = pl_strpool_counter(sp, 502);
    assert_non_null(c);
    assert_int_equal(*c, 0);
    (*c)++;
    assert_int_equal(*pl_strpool_counter(sp, 502), 1);
    pl_strpool_destroy(sp);
}

/* Bad arguments are refused, not crashed on. */
static void test_create_args(void **state)
{
    (void)state;
    struct pipeline *pl = NULL;
    struct output_config cfg = { };
    assert_int_equal(pipeline_create(NULL, NULL, &cap_ops, &pl), -EINVAL);
    assert_int_equal(pipeline_create(&cfg, NULL, NULL, &pl), -EINVAL);
    assert_int_equal(pipeline_create(&cfg, NULL, &cap_ops, NULL), -EINVAL);
    assert_null(pl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cutoff_and_counters), cmocka_unit_test(test_filter_counted),
        cmocka_unit_test(test_ranges_and_devices),  cmocka_unit_test(test_tick_stop_report),
        cmocka_unit_test(test_stats_forms),         cmocka_unit_test(test_strpool),
        cmocka_unit_test(test_create_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
