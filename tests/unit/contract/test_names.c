/* test_names: the contract's tables and codecs that peers meet by — the standalone kind
 * subset, the `step <N>` marker, record value names, the data-message envelope and the
 * StepSummary row. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "common/jw.h"
#include "contract/cfgkeys.h"
#include "contract/cfgrules.h"
#include "contract/datamsg.h"
#include "contract/kinds.h"
#include "contract/names.h"
#include "contract/stats.h"

static void test_standalone_kinds(void **state)
{
    (void)state;
    static const int order[KINDS_STANDALONE_COUNT] = { 3, 2, 9, 1, 10, 11, 12 }; /* ActivityKind's */
    int n = 0;

    for (size_t i = 0; i < KINDS_STANDALONE_COUNT; i++) {
        assert_int_equal(kinds_standalone_at(i), order[i]);
        assert_true(kinds_standalone(order[i]));
    }
    assert_int_equal(kinds_standalone_at(KINDS_STANDALONE_COUNT), -EINVAL);
    for (int v = -1; v <= KINDS_VALUE_LIMIT; v++)
        n += kinds_standalone(v);
    assert_int_equal(n, KINDS_STANDALONE_COUNT);
    assert_false(kinds_standalone(4));  /* Hccl */
    assert_false(kinds_standalone(7));  /* MemCpy */
    assert_false(kinds_standalone(8));
}

/* The output files' names: built here only, matched by the generated patterns. */
static void test_file_names(void **state)
{
    char b[128];
    (void)state;
    assert_int_equal(names_export_file(b, sizeof(b), "/d", 42, "20250614093001", 1123, -1, NAMES_EXT_DB), 0);
    assert_string_equal(b, "/d/msmonitor_42_20250614093001123_-1.db");
    assert_int_equal(names_export_file(b, 20, "/d", 42, "20250614093001", 5, 3, NAMES_EXT_JSONL), -ENAMETOOLONG);
    assert_int_equal(names_trace_file(b, sizeof(b), "/t", NAMES_TRACE_OURS, 7, -1, 5, 7, false), 0);
    assert_string_equal(b, "/t/msmonitor_trace_7_rank0_step5-7.json");
    assert_int_equal(names_trace_file(b, sizeof(b), "/t", NAMES_TRACE_TORCH, 7, 3, 5, 7, true), 0);
    assert_string_equal(b, "/t/msmonitor_torch_7_rank3_step5-7.json.gz");
    assert_int_equal(names_trace_file(b, 30, "/t", NAMES_TRACE_OURS, 7, 3, 5, 7, true), -ENAMETOOLONG);
}

/* The getter stems Python calls (get_<stem>_data): the table ID in lower case. */
static void test_kind_stems(void **state)
{
    char b[16];
    (void)state;
    assert_int_equal(kinds_stem(10, b, sizeof(b)), 0);
    assert_string_equal(b, "acl_api");
    assert_int_equal(kinds_stem(9, b, sizeof(b)), 0);
    assert_string_equal(b, "communication");
    assert_int_equal(kinds_stem(9, b, 13), -ENAMETOOLONG); /* 13 letters need 14 bytes */
    assert_int_equal(kinds_stem(8, b, sizeof(b)), -EINVAL);
    assert_int_equal(kinds_stem(KINDS_VALUE_LIMIT, b, sizeof(b)), -EINVAL);
    assert_int_equal(kinds_stem(-1, b, sizeof(b)), -EINVAL);
}

static void test_step_marker(void **state)
{
    (void)state;
    int64_t n = -5;
    char buf[32];

    assert_int_equal(names_step_parse("step 0", &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(names_step_parse("step 42", &n), 0);
    assert_int_equal(n, 42);
    assert_int_equal(names_step_parse("step 2147483647", &n), 0);
    assert_int_equal(n, INT32_MAX);
    n = -5;
    static const char *const bad[] = { "step 2147483648", "step -1", "step +1", "step x", "stepper 1", "step ",
                                       "step  1", "step 1 ", "Step 1", "step 99999999999999999999999", "" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(names_step_parse(bad[i], &n), -EINVAL);
    assert_int_equal(names_step_parse(NULL, &n), -EINVAL);
    assert_int_equal(n, -5); /* untouched on error */

    assert_int_equal(names_step_format(buf, sizeof(buf), 7), 0);
    assert_string_equal(buf, "step 7");
    assert_int_equal(names_step_parse(buf, &n), 0);
    assert_int_equal(n, 7);
    assert_int_equal(names_step_format(buf, sizeof(buf), -1), -EINVAL);
    assert_int_equal(names_step_format(buf, sizeof(buf), (int64_t)INT32_MAX + 1), -EINVAL);
    assert_int_equal(names_step_format(buf, 6, 7), -ENOSPC); /* "step 7" needs 7 bytes */
    assert_int_equal(names_step_format(buf, 7, 7), 0);
    assert_string_equal(buf, "step 7");
    for (int64_t v = 0; v <= NAMES_STEP_MAX; v = v * 10 + 9) { /* every length, the same text as printf */
        char want[32];
        snprintf(want, sizeof(want), "step %lld", (long long)v);
        assert_int_equal(names_step_format(buf, sizeof(buf), v), 0);
        assert_string_equal(buf, want);
        assert_int_equal(names_step_format(buf, sizeof(buf), v + 1), 0);
        snprintf(want, sizeof(want), "step %lld", (long long)(v + 1));
        assert_string_equal(buf, want);
    }
    assert_int_equal(names_step_format(buf, sizeof(buf), NAMES_STEP_MAX), 0);
    assert_string_equal(buf, "step 2147483647");
}

static void test_record_value_names(void **state)
{
    (void)state;
    assert_string_equal(names_dtype(0), "INT8");
    assert_string_equal(names_dtype(4), "FP32");
    assert_string_equal(names_dtype(11), "BFP16");
    assert_string_equal(names_dtype(13), "INVALID_TYPE"); /* a hole in msPTI's numbering */
    assert_string_equal(names_dtype(17), "FP8E8M0");
    assert_string_equal(names_dtype(18), "INVALID_TYPE");
    assert_string_equal(names_dtype(-1), "INVALID_TYPE");
    assert_string_equal(names_memcpy_kind(2), "HTOD");
    assert_string_equal(names_memcpy_kind(5), "DEFAULT");
    assert_string_equal(names_memcpy_kind(6), "UNKNOWN");
    assert_string_equal(names_memcpy_kind(-3), "UNKNOWN");
}

static void write_arr(struct jw *w, const void *ctx)
{
    jw_arr_begin(w);
    jw_int(w, *(const int *)ctx);
    jw_arr_end(w);
}

static void test_datamsg_envelope(void **state)
{
    (void)state;
    char buf[512];
    struct jw w;
    int one = 1;
    const struct datamsg m = { .kind = "OpStats", .device_id = 3, .duration = 10, .timestamp = 99,
                               .name = "abc\"def", .name_len = 3 };
    /* extras in any order come out sorted among the envelope keys */
    const struct datamsg_field extra[] = {
        { .key = "zeta", .type = DATAMSG_FN, .fn = write_arr, .ctx = &one },
        { .key = "acks", .type = DATAMSG_BOOL, .b = true },
        { .key = "pid", .type = DATAMSG_INT, .i = -7 },
        { .key = "domain", .type = DATAMSG_STR, .s = "d\n", .slen = SIZE_MAX },
        { .key = "interval_ns", .type = DATAMSG_UINT, .u = 18446744073709551615ull },
    };

    jw_init(&w, buf, sizeof(buf));
    assert_int_equal(datamsg_write(&w, &m, extra, 5), 0);
    assert_string_equal(buf, "{\"acks\":true,\"deviceId\":3,\"domain\":\"d\\n\",\"duration\":10,"
                             "\"interval_ns\":18446744073709551615,\"kind\":\"OpStats\",\"name\":\"abc\","
                             "\"pid\":-7,\"timestamp\":99,\"zeta\":[1]}");

    /* no device: -1; no name: no key; a host marker's 4294967295 stays as it is */
    const struct datamsg host = { .kind = "Marker", .device_id = -9, .duration = 0, .timestamp = 1 };
    jw_init(&w, buf, sizeof(buf));
    assert_int_equal(datamsg_write(&w, &host, NULL, 0), 0);
    assert_string_equal(buf, "{\"deviceId\":-1,\"duration\":0,\"kind\":\"Marker\",\"timestamp\":1}");
    const struct datamsg hm = { .kind = "Marker", .device_id = 4294967295LL, .timestamp = 1 };
    jw_init(&w, buf, sizeof(buf));
    assert_int_equal(datamsg_write(&w, &hm, NULL, 0), 0);
    assert_non_null(strstr(buf, "\"deviceId\":4294967295,"));

    /* refused: no kind, too many extras, a NULL string or key; a full buffer is the writer's error */
    const struct datamsg nokind = { .kind = NULL };
    jw_init(&w, buf, sizeof(buf));
    assert_int_equal(datamsg_write(&w, &nokind, NULL, 0), -EINVAL);
    struct datamsg_field many[DATAMSG_EXTRA_MAX + 1];
    for (size_t i = 0; i < DATAMSG_EXTRA_MAX + 1; i++)
        many[i] = (struct datamsg_field){ .key = "k", .type = DATAMSG_INT };
    jw_init(&w, buf, sizeof(buf));
    assert_int_equal(datamsg_write(&w, &host, many, DATAMSG_EXTRA_MAX + 1), -EINVAL);
    const struct datamsg_field nul[] = { { .key = "s", .type = DATAMSG_STR, .s = NULL, .slen = SIZE_MAX } };
    jw_init(&w, buf, sizeof(buf));
    assert_int_equal(datamsg_write(&w, &host, nul, 1), 0); /* NULL reads as "" */
    assert_non_null(strstr(buf, "\"s\":\"\""));
    const struct datamsg_field nofn[] = { { .key = "f", .type = DATAMSG_FN, .fn = NULL } };
    jw_init(&w, buf, sizeof(buf));
    assert_int_equal(datamsg_write(&w, &host, nofn, 1), -EINVAL);
    const struct datamsg_field nokey[] = { { .key = NULL, .type = DATAMSG_INT } };
    jw_init(&w, buf, sizeof(buf));
    assert_int_equal(datamsg_write(&w, &host, nokey, 1), -EINVAL);
    jw_init(&w, buf, 20);
    assert_int_equal(datamsg_write(&w, &m, extra, 5), -ENOSPC);
}

static void test_datamsg_step(void **state)
{
    (void)state;
    char buf[512];
    struct jw w;
    const struct datamsg_step r = { .step = 7, .start_ns = 1000, .wall_ns = 100, .compute_ns = 60, .comm_ns = 20,
                                    .wait_ns = 5, .transfer_ns = 15, .memcpy_ns = 10, .host_ns = 20,
                                    .split = DATAMSG_SPLIT_MEASURED };
    enum datamsg_split sp = DATAMSG_SPLIT_NONE;

    jw_init(&w, buf, sizeof(buf));
    datamsg_step_write(&w, &r);
    assert_int_equal(w.err, 0);
    assert_string_equal(buf, "{\"comm\":20,\"compute\":60,\"host\":20,\"memcpy\":10,\"split\":\"measured\","
                             "\"start\":1000,\"step\":7,\"transfer\":15,\"wait\":5,\"wall\":100}");
    /* the names round-trip; the codes are the Prometheus gauge's values */
    for (int c = 0; c < DATAMSG_SPLIT_COUNT; c++) {
        const char *n = datamsg_split_name((enum datamsg_split)c);
        assert_int_equal(datamsg_split_parse(n, strlen(n), &sp), 0);
        assert_int_equal((int)sp, c);
    }
    assert_string_equal(datamsg_split_name(DATAMSG_SPLIT_INFERRED), "inferred");
    assert_int_equal(datamsg_split_parse("measure", 7, &sp), -EINVAL);
    assert_int_equal(datamsg_split_parse("measured!", 9, &sp), -EINVAL);
    assert_int_equal(datamsg_split_parse("", 0, &sp), -EINVAL);
}

static void test_cfgrules(void **state)
{
    (void)state;
    const struct cfgrules_rule *l = cfgrules_of(CFGKEY_JSONL_ROTATE_LOG_LINES);
    const struct cfgrules_rule *f = cfgrules_of(CFGKEY_JSONL_ROTATE_LOG_FILES);
    int64_t v = 0;
    size_t n = 0;

    assert_non_null(l);
    assert_non_null(f);
    assert_null(cfgrules_of("NO_SUCH_KEY"));
    assert_null(cfgrules_of(NULL));
    while (cfgrules_at(n) && cfgrules_for(cfgrules_at(n), "npu-monitor"))
        n++;
    assert_int_equal(n, 10); /* the ten npu-monitor keys first, in the CLI's order */
    assert_string_equal(cfgrules_at(0)->key, CFGKEY_NPU_MONITOR_START);
    assert_string_equal(cfgrules_at(9)->key, CFGKEY_NPU_MONITOR_FILTER);
    assert_string_equal(cfgrules_at(10)->key, CFGKEY_ACTIVITIES_LOG_FILE); /* then nputrace's */
    assert_null(cfgrules_at(cfgrules_count()));
    assert_string_equal(cfgrules_of(CFGKEY_MSPTI_ACTIVITY_KIND)->dflt, "Marker");
    assert_null(cfgrules_of(CFGKEY_NPU_MONITOR_START)->absent); /* the one required key */
    assert_string_equal(cfgrules_of(CFGKEY_REPORT_INTERVAL_S)->absent, "0"); /* absent: keep */
    {
        int32_t i = 0;
        const struct cfgrules_rule *st = cfgrules_of(CFGKEY_PROFILE_START_STEP);
        assert_int_equal(cfgrules_pyint(st, " -1 ", &i), 0);
        assert_int_equal(i, -1);
        assert_int_equal(cfgrules_pyint(st, "-2", &i), -ERANGE);
        assert_int_equal(cfgrules_pyint(st, "2147483648", &i), -EINVAL);
        assert_int_equal(cfgrules_pyint(cfgrules_of(CFGKEY_ACTIVITIES_ITERATIONS), "0", &i), -ERANGE);
        assert_int_equal(cfgrules_pyint(l, "1", &i), -EINVAL); /* not a PYINT rule */
    }

    assert_int_equal(cfgrules_int(l, "100", &v), 0);
    assert_int_equal(v, 100);
    assert_int_equal(cfgrules_int(l, "500000", &v), 0);
    assert_int_equal(cfgrules_int(l, "99", &v), -ERANGE);
    assert_int_equal(v, 99);
    assert_int_equal(cfgrules_int(l, "500001", &v), -ERANGE);
    assert_int_equal(cfgrules_int(l, "-1", &v), -EINVAL); /* no sign where no negative is meant */
    assert_int_equal(cfgrules_int(l, "+100", &v), -EINVAL);
    assert_int_equal(cfgrules_int(l, "1e3", &v), -EINVAL);
    assert_int_equal(cfgrules_int(l, "", &v), -EINVAL);
    assert_int_equal(cfgrules_int(f, "-1", &v), 0);
    assert_int_equal(v, -1);
    assert_int_equal(cfgrules_int(f, "2", &v), 0);
    assert_int_equal(cfgrules_int(f, "1", &v), -ERANGE);
    assert_int_equal(cfgrules_int(f, "0", &v), -ERANGE);
    assert_int_equal(cfgrules_int(f, "-2", &v), -ERANGE);
    assert_int_equal(cfgrules_int(f, "2147483648", &v), -ERANGE);
    assert_int_equal(cfgrules_int(f, "x", &v), -EINVAL);
    assert_int_equal(cfgrules_int(cfgrules_of(CFGKEY_DURATION), "1", &v), -EINVAL); /* not an INT rule */
    assert_int_equal(cfgrules_int(NULL, "1", &v), -EINVAL);
    /* the CLI's flags and reasons come from the rules and the tables they name */
    char why[128];
    assert_string_equal(cfgrules_of(CFGKEY_NPU_MONITOR_LOG_FILE)->flag, "log-file");
    assert_string_equal(cfgrules_of(CFGKEY_NPU_MONITOR_START)->command, "npu-monitor");
    assert_int_equal(cfgrules_reason(l, why, sizeof(why)), strlen("Must be an integer in [100, 500000]"));
    assert_string_equal(why, "Must be an integer in [100, 500000]");
    cfgrules_reason(f, why, sizeof(why));
    assert_string_equal(why, "Must be -1 or an integer greater than or equal to 2");
    cfgrules_reason(cfgrules_of(CFGKEY_REPORT_INTERVAL_S), why, sizeof(why));
    assert_string_equal(why, "Must be an integer in [0, 4294967295]");
    cfgrules_reason(cfgrules_of(CFGKEY_NPU_MONITOR_EXPORT_TYPE), why, sizeof(why));
    assert_string_equal(why, "possible values: DB, Jsonl"); /* the output table's exportable rows */
    cfgrules_reason(cfgrules_of(CFGKEY_NPU_MONITOR_STOP), why, sizeof(why));
    assert_string_equal(why, "Must be true or false");
    assert_int_equal(cfgrules_reason(cfgrules_of(CFGKEY_NPU_MONITOR_FILTER), why, sizeof(why)), 0);
    assert_string_equal(why, "");
    assert_int_equal(cfgrules_reason(l, why, 8), strlen("Must be an integer in [100, 500000]")); /* cut, terminated */
    assert_string_equal(why, "Must be");
}

/* Every counter has its own place in the stats line, and the keys are sorted (JSON order). */
static void test_stats_counters(void **state)
{
    (void)state;
    int seen[STATS_COUNT] = { 0 };
    const char *prev = "";
    size_t n = 0;

#define CHECK(key, label, pos, what)                                                              \
    assert_true(pos >= 0 && pos < STATS_COUNT);                                                   \
    seen[pos]++;                                                                                  \
    assert_true(strcmp(prev, #key) < 0);                                                          \
    prev = #key;                                                                                  \
    n++;
    STATS_COUNTERS(CHECK)
#undef CHECK
    assert_int_equal(n, STATS_COUNT);
    for (size_t i = 0; i < STATS_COUNT; i++)
        assert_int_equal(seen[i], 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_standalone_kinds),   cmocka_unit_test(test_step_marker),
        cmocka_unit_test(test_record_value_names), cmocka_unit_test(test_datamsg_envelope),
        cmocka_unit_test(test_datamsg_step),       cmocka_unit_test(test_cfgrules),
        cmocka_unit_test(test_kind_stems),
        cmocka_unit_test(test_file_names),
        cmocka_unit_test(test_stats_counters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
