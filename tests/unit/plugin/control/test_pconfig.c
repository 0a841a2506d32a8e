/* test_pconfig: the one reading of a config (docs/design/session.md#the-route-of-a-config) by
 * the rules of src/contract/cfgrules.def — the class, the daemon's id, a required key missing
 * or a value invalid rejects the whole config with the exact log text (every error collected,
 * each naming its key), valid forms normalise, absent keys take the table's value; nputrace
 * keys as the window reads them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../logcap.h"
#include "common/log.h"
#include "contract/cfgrules.h"
#include "plugin/control/pconfig.h"

#define log_has logcap_has
#define log_clear logcap_clear

/* A valid base config; `over` replaces (or with value NULL removes) one key. */
static struct pconfig pc;

static int parse_with(const char *key, const char *value, struct pconfig_monitor *cfg)
{
    const char *keys[] = { "MSPTI_ACTIVITY_KIND", "REPORT_INTERVAL_S", "DURATION", "NPU_MONITOR_START",
                           "NPU_MONITOR_STOP", "NPU_MONITOR_LOG_FILE", "NPU_MONITOR_EXPORT_TYPE",
                           "NPU_MONITOR_FILTER", "REQUEST_TRACE_ID", "is_valid" };
    const char *vals[] = { "Kernel,Marker", "1", "0", "true", "false", "", "db", "", "123", "true" };
    const char *k2[10], *v2[10];
    size_t n = 0;
    for (size_t i = 0; i < 10; i++) {
        if (key && strcmp(keys[i], key) == 0) {
            if (!value)
                continue;
            k2[n] = keys[i];
            v2[n++] = value;
        } else {
            k2[n] = keys[i];
            v2[n++] = vals[i];
        }
    }
    log_clear();
    int rc = pconfig_parse_pairs(k2, v2, n, CFGKEYS_NPU_MONITOR, &pc);
    *cfg = pc.mon;
    return rc;
}

static void test_valid_base(void **state)
{
    struct pconfig_monitor c;
    (void)state;
    assert_int_equal(parse_with(NULL, NULL, &c), 0);
    assert_int_equal(c.kinds_mask, (1u << 2) | (1u << 1));
    assert_int_equal(c.report_interval_s, 1);
    assert_true(c.start);
    assert_false(c.stop);
    assert_int_equal(c.output, MSMON_OUTPUT_DB);
    assert_string_equal(c.log_file, "");
}

static void test_missing_keys(void **state)
{
    struct pconfig_monitor c;
    (void)state;
    /* only NPU_MONITOR_START is required; an older dyno's config without the
     * others applies with their defaults */
    assert_int_equal(parse_with("NPU_MONITOR_START", NULL, &c), -22);
    assert_true(log_has("Missing required key: NPU_MONITOR_START"));
    assert_int_equal(parse_with("DURATION", NULL, &c), 0);
    assert_true(c.duration_s == 0);
    assert_int_equal(parse_with("MSPTI_ACTIVITY_KIND", NULL, &c), 0);
    assert_int_equal(c.kinds_mask, 1u << 1); /* Marker */
    assert_int_equal(parse_with("REPORT_INTERVAL_S", NULL, &c), 0);
    assert_int_equal(c.report_interval_s, 0); /* keep the current one */
    assert_int_equal(parse_with("NPU_MONITOR_STOP", NULL, &c), 0);
    assert_false(c.stop);
    assert_int_equal(parse_with("NPU_MONITOR_EXPORT_TYPE", NULL, &c), 0);
    assert_int_equal(c.output, MSMON_OUTPUT_DB);
    assert_int_equal(parse_with("NPU_MONITOR_LOG_FILE", NULL, &c), 0);
    assert_string_equal(c.log_file, "");
    assert_string_equal(pc.notes, "");
    assert_string_equal(pc.id, "123");
    /* optional keys may be absent */
    assert_int_equal(parse_with("NPU_MONITOR_FILTER", NULL, &c), 0);
}

static void test_unknown_keys_named(void **state)
{
    const char *keys[] = { "NPU_MONITOR_START", " NPU_MONITR_FILTER ", "X\x01", "PROFILE_ANALYSE" };
    const char *vals[] = { "true", "Kernel:A", "1", "true" };
    (void)state;
    assert_int_equal(pconfig_parse_pairs(keys, vals, 4, CFGKEYS_OTHER, &pc), 0);
    assert_int_equal(pc.cls, CFGKEYS_NPU_MONITOR);
    /* a typo is named; so is a key of the other class */
    assert_string_equal(pc.notes, "unknown key 'NPU_MONITR_FILTER' ignored; unknown key 'X?' ignored; "
                                  "unknown key 'PROFILE_ANALYSE' ignored");
    assert_string_equal(pc.mon.filter, "");
}

struct vcase {
    const char *key, *value;
    int ok;
};

static void test_values(void **state)
{
    static const struct vcase cases[] = {
        { "MSPTI_ACTIVITY_KIND", " Kernel , ,Marker ", 1 },
        { "MSPTI_ACTIVITY_KIND", "", 1 },
        { "MSPTI_ACTIVITY_KIND", "kernel", 0 },
        { "MSPTI_ACTIVITY_KIND", "Kernel,Foo", 0 },
        { "REPORT_INTERVAL_S", "4294967295", 1 },
        { "REPORT_INTERVAL_S", "4294967296", 0 },
        { "REPORT_INTERVAL_S", "-1", 0 },
        { "REPORT_INTERVAL_S", "1s", 0 },
        { "DURATION", "0.5", 1 },
        { "DURATION", "-3", 1 },
        { "DURATION", "5abc", 0 },
        { "DURATION", ".", 0 },
        { "DURATION", "inf", 0 },
        { "NPU_MONITOR_START", "TRUE", 1 },
        { "NPU_MONITOR_START", "yes", 0 },
        { "NPU_MONITOR_STOP", "False", 1 },
        { "NPU_MONITOR_STOP", "1", 0 },
        { "NPU_MONITOR_EXPORT_TYPE", "JSONL", 1 },
        { "NPU_MONITOR_EXPORT_TYPE", "csv", 0 },
    };
    struct pconfig_monitor c;
    char want[256];
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = parse_with(cases[i].key, cases[i].value, &c);
        if (cases[i].ok) {
            assert_int_equal(rc, 0);
        } else {
            assert_int_equal(rc, -22);
            snprintf(want, sizeof(want), "Invalid value for %s = '%s' (", cases[i].key, cases[i].value);
            if (!log_has(want))
                fail_msg("no '%s' in log for case %zu", want, i);
        }
    }
    assert_int_equal(parse_with("DURATION", "-3", &c), 0);
    assert_true(c.duration_s == 0);
    assert_int_equal(parse_with("DURATION", " 0.25\t", &c), 0);
    assert_true(c.duration_s == 0.25);
    assert_int_equal(parse_with("MSPTI_ACTIVITY_KIND", "", &c), 0);
    assert_int_equal(c.kinds_mask, 0);
    assert_int_equal(parse_with("NPU_MONITOR_EXPORT_TYPE", "Jsonl", &c), 0);
    assert_int_equal(c.output, MSMON_OUTPUT_JSONL);
}

static void test_lengths(void **state)
{
    struct pconfig_monitor c;
    char *big = malloc(5000);
    (void)state;
    memset(big, 'a', 4096);
    big[4096] = '\0';
    assert_int_equal(parse_with("NPU_MONITOR_LOG_FILE", big, &c), 0);
    big[4096] = 'a';
    big[4097] = '\0';
    assert_int_equal(parse_with("NPU_MONITOR_LOG_FILE", big, &c), -22);
    big[1024] = '\0';
    assert_int_equal(parse_with("NPU_MONITOR_FILTER", big, &c), 0);
    big[1024] = 'a';
    big[1025] = '\0';
    assert_int_equal(parse_with("NPU_MONITOR_FILTER", big, &c), -22);
    assert_true(log_has("Invalid value for NPU_MONITOR_FILTER"));
    free(big);
}

static int parse_text(const char *text)
{
    log_clear();
    return pconfig_parse_text(text, strlen(text), &pc);
}

/* The class rule, the id, and a config from the daemon as delivered (indented, id last). */
static void test_text_classes(void **state)
{
    (void)state;
    assert_int_equal(parse_text("\n            NPU_MONITOR_START=true\nMSPTI_ACTIVITY_KIND=Kernel\n"
                                "            REQUEST_TRACE_ID=42\n"), 0);
    assert_int_equal(pc.cls, CFGKEYS_NPU_MONITOR);
    assert_string_equal(pc.id, "42");
    assert_int_equal(pc.mon.kinds_mask, 1u << 2);
    assert_int_equal(pc.mon.report_interval_s, 0); /* absent: keep the interval */
    assert_int_equal(parse_text("ACTIVITIES_ITERATIONS=2\nACTIVITIES_LOG_FILE=/tmp/t\nREQUEST_TRACE_ID=0"), 0);
    assert_int_equal(pc.cls, CFGKEYS_NPU_TRACE);
    assert_string_equal(pc.id, ""); /* 0 is no id */
    /* a Kineto gputrace config: neither class */
    assert_int_equal(parse_text("ACTIVITIES_DURATION_MSECS=500\nREQUEST_TRACE_ID=9"), -ENOMSG);
    assert_string_equal(pc.id, "9"); /* still answerable */
    assert_int_equal(parse_text(""), -ENOMSG);
}

/* Every invalid value is its own line naming its key, and all of them reach the answer. */
static void test_errors_collected(void **state)
{
    (void)state;
    assert_int_equal(parse_text("NPU_MONITOR_START=yes\nREPORT_INTERVAL_S=-1\nDURATION=soon\nREQUEST_TRACE_ID=5"),
                     -EINVAL);
    assert_int_equal(pc.nerrors, 3);
    assert_string_equal(pc.errors, "Invalid value for NPU_MONITOR_START = 'yes' (true or false); "
                                   "Invalid value for REPORT_INTERVAL_S = '-1' (digits only, at most 4294967295); "
                                   "Invalid value for DURATION = 'soon' (decimal number of seconds)");
    assert_true(log_has("Invalid value for DURATION = 'soon' (decimal number of seconds)"));
    assert_string_equal(pc.id, "5");
    assert_int_equal(parse_text("NPU_MONITOR_START=true\nNPU_MONITOR_EXPORT_TYPE=csv"), -EINVAL);
    assert_string_equal(pc.errors, "Invalid value for NPU_MONITOR_EXPORT_TYPE = 'csv' (db or jsonl)");
}

/* nputrace keys as the window reads them: lenient where upstream was, strict on ints. */
static void test_trace_values(void **state)
{
    (void)state;
    assert_int_equal(parse_text("ACTIVITIES_LOG_FILE= /tmp/x \nPROFILE_START_STEP=7\nACTIVITIES_ITERATIONS=2\n"
                                "PROFILE_ACTIVITIES=CPU\nPROFILE_ANALYSE=true\nPROFILE_ASYNC_MODE=True\n"
                                "PROFILE_RECORD_SHAPES=false\nPROFILE_WITH_STACK=true\nPROFILE_EXPORT_TYPE=Db\n"
                                "PROFILE_PROFILER_LEVEL=Level1\nPROFILE_GC_DETECT_THRESHOLD=None"), 0);
    assert_string_equal(pc.trace.log_file, "/tmp/x");
    assert_int_equal(pc.trace.start_step, 7);
    assert_int_equal(pc.trace.iterations, 2);
    assert_int_equal(pc.trace.flags, PCONFIG_TRACE_CPU | PCONFIG_TRACE_ANALYSE | PCONFIG_TRACE_ASYNC |
                                         PCONFIG_TRACE_WITH_STACK | PCONFIG_TRACE_EXPORT_DB);
    assert_string_equal(pc.notes, "");
    /* defaults: every activity, the next step, one iteration, every rank */
    assert_int_equal(parse_text("ACTIVITIES_LOG_FILE=/tmp/x"), 0);
    assert_int_equal(pc.trace.flags, PCONFIG_TRACE_CPU | PCONFIG_TRACE_NPU);
    assert_int_equal(pc.trace.start_step, -1);
    assert_int_equal(pc.trace.iterations, 1);
    assert_true(pconfig_trace_for_rank(&pc.trace, 5));
    /* lenient: a switch other than true is off, < 1 iteration is one, a negative start the next step */
    assert_int_equal(parse_text("ACTIVITIES_LOG_FILE=/tmp/x\nPROFILE_ANALYSE=1\nACTIVITIES_ITERATIONS=0\n"
                                "PROFILE_START_STEP= -5 \nPROFILE_ACTIVITIES=NPU\nPROFILE_WITH_MODULES=true"), 0);
    assert_int_equal(pc.trace.flags, PCONFIG_TRACE_NPU | PCONFIG_TRACE_WITH_MODULES);
    assert_int_equal(pc.trace.iterations, 1);
    assert_int_equal(pc.trace.start_step, -1);
    /* rank selection */
    assert_int_equal(parse_text("ACTIVITIES_LOG_FILE=/tmp/x\nPROFILE_IS_RANK=True\nPROFILE_RANK_LIST=0, 2 ,11"), 0);
    assert_false(pconfig_trace_for_rank(&pc.trace, 1));
    assert_true(pconfig_trace_for_rank(&pc.trace, 11));
    assert_true(pconfig_trace_for_rank(&pc.trace, 2));
    assert_int_equal(parse_text("ACTIVITIES_LOG_FILE=/tmp/x\nPROFILE_IS_RANK=false\nPROFILE_RANK_LIST=0"), 0);
    assert_true(pconfig_trace_for_rank(&pc.trace, 1));
    /* strict: ints that are not int32, a missing or empty directory */
    assert_int_equal(parse_text("ACTIVITIES_LOG_FILE=/tmp/x\nPROFILE_START_STEP=x\nACTIVITIES_ITERATIONS=9999999999"),
                     -EINVAL);
    assert_string_equal(pc.errors, "Invalid value for PROFILE_START_STEP = 'x' (an integer; -1 = the next step); "
                                   "Invalid value for ACTIVITIES_ITERATIONS = '9999999999' (an integer >= 1)");
    assert_int_equal(parse_text("ACTIVITIES_ITERATIONS=1"), -EINVAL);
    assert_string_equal(pc.errors, "Missing required key: ACTIVITIES_LOG_FILE");
    assert_int_equal(parse_text("ACTIVITIES_LOG_FILE=\nACTIVITIES_ITERATIONS=1"), -EINVAL);
    assert_true(log_has("Invalid value for ACTIVITIES_LOG_FILE = '' (a directory, at most 4096 bytes)"));
}

/* The table covers every key the CLI sends, so none of them is ever "unknown". */
static void test_table_covers_the_cli(void **state)
{
    const struct cfgrules_rule *r;
    size_t nmon = 0, ntrace = 0;

    (void)state;
    for (size_t i = 0; (r = cfgrules_at(i)); i++) {
        nmon += cfgrules_for(r, "npu-monitor");
        ntrace += cfgrules_for(r, "nputrace");
    }
    assert_int_equal(nmon, 10);
    assert_int_equal(ntrace, 27);
    assert_int_equal(nmon + ntrace, cfgrules_count());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_base),
        cmocka_unit_test(test_missing_keys),
        cmocka_unit_test(test_unknown_keys_named),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_text_classes),
        cmocka_unit_test(test_errors_collected),
        cmocka_unit_test(test_trace_values),
        cmocka_unit_test(test_table_covers_the_cli),
    };
    return cmocka_run_group_tests(tests, logcap_group_setup, logcap_group_teardown);
}
