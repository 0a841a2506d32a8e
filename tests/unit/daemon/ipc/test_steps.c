/* steps: the daemon's per-rank window — validation, ring bound, restart, repeats. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "contract/cjx.h"
#include "daemon/ipc/data_sink.h"
#include "daemon/ipc/steps.h"
#include "daemon/rpc/rpc_methods.h"

static int take(struct steps_store *s, const char *text)
{
    cJSON *m = NULL;
    assert_int_equal(cjx_parse(text, strlen(text), 10, &m), 0);
    int rc = steps_take(s, NULL, m, 1, 1, NULL);
    cJSON_Delete(m);
    return rc;
}

static int msg(char *buf, size_t cap, int pid, int rank, int from, int n)
{
    int o = snprintf(buf, cap, "{\"kind\":\"StepSummary\",\"pid\":%d,\"rank\":%d,\"steps\":[", pid, rank);
    for (int k = 0; k < n; k++)
        o += snprintf(buf + o, cap - (size_t)o, "%s{\"comm\":1,\"compute\":2,\"host\":3,\"memcpy\":4,\"start\":5,"
                      "\"step\":%d,\"wall\":10}", k ? "," : "", from + k);
    return o + snprintf(buf + o, cap - (size_t)o, "]}");
}

static void test_window(void **state)
{
    (void)state;
    struct steps_store *s = NULL;
    assert_int_equal(steps_create(&s), 0);
    char buf[8192];
    struct steps_rank *rs;
    size_t n, nr;
    uint64_t refused, evicted;
    for (int b = 0; b < 10; b++) {
        msg(buf, sizeof(buf), 42, 3, 1 + b * 20, 20);
        assert_int_equal(take(s, buf), 20);
    }
    msg(buf, sizeof(buf), 42, 3, 200, 1); /* a repeat replaces, is not new */
    assert_int_equal(take(s, buf), 0);
    assert_int_equal(steps_snapshot(s, &rs, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rs[0].n, STEPS_WINDOW);
    assert_int_equal(rs[0].rows[0].step, 200 - STEPS_WINDOW + 1);
    assert_int_equal(rs[0].rows[STEPS_WINDOW - 1].step, 200);
    assert_int_equal(rs[0].rows[0].compute_ns, 2);
    free(rs);
    /* the same rank as a new process: a fresh window */
    msg(buf, sizeof(buf), 43, 3, 1, 2);
    assert_int_equal(take(s, buf), 2);
    assert_int_equal(steps_snapshot(s, &rs, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rs[0].pid, 43);
    assert_int_equal(rs[0].n, 2);
    free(rs);
    /* refused whole: bad pid, a row with a negative wall, steps not an array */
    assert_int_equal(take(s, "{\"pid\":0,\"rank\":1,\"steps\":[]}"), -EINVAL);
    assert_int_equal(take(s, "{\"pid\":7,\"rank\":1,\"steps\":[{\"comm\":1,\"compute\":2,\"host\":3,\"memcpy\":4,"
                             "\"start\":5,\"step\":1,\"wall\":-1}]}"), -EINVAL);
    assert_int_equal(take(s, "{\"pid\":7,\"rank\":1,\"steps\":{}}"), -EINVAL);
    steps_counters(s, &nr, &refused, &evicted);
    assert_int_equal(nr, 1);
    assert_int_equal(refused, 3);
    steps_destroy(s);
}

/* The comm split: taken when consistent, defaulted for older plugins, refused beyond comm. */
static void test_wait_transfer(void **state)
{
    (void)state;
    struct steps_store *s = NULL;
    assert_int_equal(steps_create(&s), 0);
    struct steps_rank *rs;
    size_t n;
    assert_int_equal(take(s, "{\"pid\":7,\"rank\":1,\"steps\":[{\"comm\":10,\"compute\":2,\"host\":3,\"memcpy\":4,"
                             "\"start\":5,\"step\":1,\"transfer\":4,\"wait\":6,\"wall\":30},{\"comm\":10,"
                             "\"compute\":2,\"host\":3,\"memcpy\":4,\"start\":5,\"step\":2,\"wall\":30}]}"), 2);
    assert_int_equal(steps_snapshot(s, &rs, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rs[0].rows[0].wait_ns, 6);
    assert_int_equal(rs[0].rows[0].transfer_ns, 4);
    assert_int_equal(rs[0].rows[1].wait_ns, 0); /* no split: all transfer */
    assert_int_equal(rs[0].rows[1].transfer_ns, 10);
    /* an older plugin says nothing of how: a wait can only have been measured */
    assert_int_equal(rs[0].rows[0].split, DATAMSG_SPLIT_MEASURED);
    assert_int_equal(rs[0].rows[1].split, DATAMSG_SPLIT_NONE);
    free(rs);
    /* the plugin's "split": measured (even a wait of 0: the last to arrive) or none */
    assert_int_equal(take(s, "{\"pid\":7,\"rank\":1,\"steps\":[{\"comm\":10,\"compute\":2,\"host\":3,\"memcpy\":4,"
                             "\"split\":\"measured\",\"start\":5,\"step\":3,\"transfer\":10,\"wait\":0,\"wall\":30},"
                             "{\"comm\":10,\"compute\":2,\"host\":3,\"memcpy\":4,\"split\":\"none\",\"start\":5,"
                             "\"step\":4,\"transfer\":10,\"wait\":0,\"wall\":30}]}"), 2);
    assert_int_equal(steps_snapshot(s, &rs, &n), 0);
    assert_int_equal(rs[0].rows[2].split, DATAMSG_SPLIT_MEASURED);
    assert_int_equal(rs[0].rows[3].split, DATAMSG_SPLIT_NONE);
    free(rs);
    /* refused: an unknown name, not a string, "inferred" (one rank has no peers to infer
     * from), "none" with a wait */
    static const char *const bad[] = { "\"split\":\"guessed\",", "\"split\":2,", "\"split\":\"inferred\",",
                                       "\"split\":\"none\",\"wait\":1,", "\"split\":\"\"," };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char m[512];
        snprintf(m, sizeof(m), "{\"pid\":7,\"rank\":1,\"steps\":[{\"comm\":10,\"compute\":2,\"host\":3,"
                               "\"memcpy\":4,%s\"start\":5,\"step\":9,\"wall\":30}]}", bad[i]);
        assert_int_equal(take(s, m), -EINVAL);
    }
    assert_int_equal(take(s, "{\"pid\":7,\"rank\":1,\"steps\":[{\"comm\":10,\"compute\":2,\"host\":3,\"memcpy\":4,"
                             "\"start\":5,\"step\":3,\"transfer\":4,\"wait\":11,\"wall\":30}]}"), -EINVAL);
    assert_int_equal(take(s, "{\"pid\":7,\"rank\":1,\"steps\":[{\"comm\":10,\"compute\":2,\"host\":3,\"memcpy\":4,"
                             "\"start\":5,\"step\":3,\"transfer\":\"x\",\"wall\":30}]}"), -EINVAL);
    steps_destroy(s);
}

/* getSteps through the RPC layer: every rank of a crowded daemon fits the reply cap. */
static void test_rpc_get_steps(void **state)
{
    (void)state;
    struct steps_store *s = NULL;
    assert_int_equal(steps_create(&s), 0);
    struct rpc_ctx ctx = { .version = "x", .steps = s };
    char buf[8192], *reply = NULL;
    size_t len = 0;
    for (int r = 0; r < 1000; r++)
        for (int b = 0; b < 4; b++) {
            msg(buf, sizeof(buf), 1000 + r, r, 1 + b * 20, 20);
            assert_int_equal(take(s, buf), 20);
        }
    const char *req = "{\"fn\":\"getSteps\",\"last\":64}";
    assert_int_equal(rpc_handle(&ctx, req, strlen(req), &reply, &len), 0);
    assert_non_null(reply);
    assert_true(len < (1u << 20));
    cJSON *j = cJSON_Parse(reply);
    assert_non_null(j);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "ranks")), 1000);
    int last = cJSON_GetObjectItem(j, "last")->valueint;
    assert_true(last >= 1 && last < 64);
    const cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "ranks"), 0);
    const cJSON *rows = cJSON_GetObjectItem(r0, "steps");
    assert_int_equal(cJSON_GetArraySize(rows), last);
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, last - 1), 0)->valueint, 80); /* newest */
    /* the split, by name, in the last column */
    const cJSON *cols = cJSON_GetObjectItem(j, "columns");
    assert_string_equal(cJSON_GetArrayItem(cols, 9)->valuestring, "split");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(rows, 0)), 10);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, 0), 9)->valuestring, "none");
    cJSON_Delete(j);
    free(reply);
    req = "{\"fn\":\"getSteps\",\"last\":0}";
    assert_int_equal(rpc_handle(&ctx, req, strlen(req), &reply, &len), 0);
    assert_non_null(strstr(reply, "failed: 'last' must be an integer in [1, 128]"));
    free(reply);
    steps_destroy(s);
}

/* New rows reach the sinks through the router seen as a plain sink (data_router_sink): one
 * step-series record per new row, none for a repeat; the router keeps owning its sinks. */
struct series {
    int records;
    int64_t last_step;
    int32_t last_pid;
    uint64_t last_split;
};

static int series_write(void *self, const struct sink_record *rec)
{
    struct series *c = self;
    c->records++;
    c->last_pid = rec->pid;
    c->last_split = 99;
    for (size_t i = 0; i < rec->n; i++) {
        if (strcmp(rec->kv[i].key, "msmonitor_step") == 0)
            c->last_step = rec->kv[i].i;
        if (strcmp(rec->kv[i].key, "msmonitor_step_split") == 0)
            c->last_split = rec->kv[i].u;
    }
    return 0;
}

static void test_series_through_router(void **state)
{
    (void)state;
    static const struct sink_ops ops = { .name = "series", .write = series_write };
    struct series c = { 0 };
    struct data_router dr;
    struct steps_store *s = NULL;
    char buf[8192];
    cJSON *m = NULL;
    assert_int_equal(steps_create(&s), 0);
    data_router_init(&dr);
    assert_int_equal(data_router_add(&dr, (struct sink){ &ops, &c }), 0);
    struct sink view = data_router_sink(&dr);
    assert_string_equal(view.ops->name, "router");
    msg(buf, sizeof(buf), 77, 2, 5, 3);
    assert_int_equal(cjx_parse(buf, strlen(buf), 10, &m), 0);
    assert_int_equal(steps_take(s, &view, m, 1, 1, NULL), 3);
    assert_int_equal(c.records, 3);
    assert_int_equal(c.last_step, 7);
    assert_int_equal(c.last_pid, 77);
    assert_int_equal(c.last_split, 0); /* the gauge of how the step was split: 0 none */
    assert_int_equal(steps_take(s, &view, m, 2, 2, NULL), 0); /* repeats: nothing new to write */
    assert_int_equal(c.records, 3);
    cJSON_Delete(m);
    data_router_fini(&dr);
    steps_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_window), cmocka_unit_test(test_wait_transfer),
                                        cmocka_unit_test(test_rpc_get_steps),
                                        cmocka_unit_test(test_series_through_router) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
