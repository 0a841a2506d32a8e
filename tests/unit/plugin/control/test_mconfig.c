/* test_mconfig: the validation table of docs/design/session.md#applying-a-config — the required key missing or a value
 * invalid rejects the whole config with the exact log text; valid forms normalise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../logcap.h"
#include "common/log.h"
#include "plugin/control/mconfig.h"

#define log_has logcap_has
#define log_clear logcap_clear

static int setup(void **state)
{
    (void)state;
    return logcap_open();
}

static int teardown(void **state)
{
    (void)state;
    logcap_close();
    return 0;
}


/* A valid base config; `over` replaces (or with value NULL removes) one key. */
static int parse_with(const char *key, const char *value, struct mconfig *cfg)
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
    return mconfig_parse(k2, v2, n, cfg);
}

static void test_valid_base(void **state)
{
    struct mconfig c;
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
    struct mconfig c;
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
    assert_string_equal(c.notes, "");
    /* optional keys may be absent */
    assert_int_equal(parse_with("NPU_MONITOR_FILTER", NULL, &c), 0);
}

static void test_unknown_keys_named(void **state)
{
    const char *keys[] = { "NPU_MONITOR_START", " NPU_MONITR_FILTER ", "X\x01" };
    const char *vals[] = { "true", "Kernel:A", "1" };
    struct mconfig c;
    (void)state;
    assert_int_equal(mconfig_parse(keys, vals, 3, &c), 0);
    assert_string_equal(c.notes, "unknown key 'NPU_MONITR_FILTER' ignored; unknown key 'X?' ignored");
    assert_string_equal(c.filter, "");
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
    struct mconfig c;
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
    struct mconfig c;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_base),
        cmocka_unit_test(test_missing_keys),
        cmocka_unit_test(test_unknown_keys_named),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_lengths),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
