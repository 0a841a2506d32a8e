/* test_tracewin: the nputrace window's options and checks alone: option bits of a config
 * (activities default CPU,NPU, booleans, export type), the creator's start-step alignment
 * (only -1 or absent, never an npu-monitor config), and the log-directory checks (symlink,
 * file, created directory). */
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
#include "msmon/msmonitor.h"
#include "plugin/control/tracewin.h"

_Static_assert(TRACEWIN_CPU == MSMON_TRACE_CPU && TRACEWIN_NPU == MSMON_TRACE_NPU &&
                   TRACEWIN_ANALYSE == MSMON_TRACE_ANALYSE && TRACEWIN_ASYNC == MSMON_TRACE_ASYNC &&
                   TRACEWIN_RECORD_SHAPES == MSMON_TRACE_RECORD_SHAPES &&
                   TRACEWIN_PROFILE_MEMORY == MSMON_TRACE_PROFILE_MEMORY &&
                   TRACEWIN_WITH_STACK == MSMON_TRACE_WITH_STACK && TRACEWIN_WITH_FLOPS == MSMON_TRACE_WITH_FLOPS &&
                   TRACEWIN_WITH_MODULES == MSMON_TRACE_WITH_MODULES && TRACEWIN_EXPORT_DB == MSMON_TRACE_EXPORT_DB,
               "public trace flags");

static void kv_from(struct kvtext *kv, const char *text)
{
    assert_int_equal(kvtext_parse(text, strlen(text), kv), 0);
}

static void test_flags(void **state)
{
    struct kvtext kv;
    (void)state;
    kv_from(&kv, "ACTIVITIES_ITERATIONS=2");
    assert_int_equal(tracewin_flags(&kv), TRACEWIN_CPU | TRACEWIN_NPU);
    kvtext_fini(&kv);
    kv_from(&kv, "PROFILE_ACTIVITIES=CPU\nPROFILE_ANALYSE=true\nPROFILE_ASYNC_MODE=True\nPROFILE_RECORD_SHAPES=false\n"
                 "PROFILE_WITH_STACK=true\nPROFILE_EXPORT_TYPE=Db");
    assert_int_equal(tracewin_flags(&kv), TRACEWIN_CPU | TRACEWIN_ANALYSE | TRACEWIN_ASYNC | TRACEWIN_WITH_STACK |
                                              TRACEWIN_EXPORT_DB);
    kvtext_fini(&kv);
    kv_from(&kv, "PROFILE_ACTIVITIES=NPU\nPROFILE_EXPORT_TYPE=Text\nPROFILE_WITH_MODULES=true");
    assert_int_equal(tracewin_flags(&kv), TRACEWIN_NPU | TRACEWIN_WITH_MODULES);
    kvtext_fini(&kv);
}

static void test_align(void **state)
{
    struct kvtext kv;
    char buf[16];
    (void)state;
    kv_from(&kv, "ACTIVITIES_LOG_FILE=/tmp/x\nPROFILE_START_STEP=-1\nACTIVITIES_ITERATIONS=2");
    assert_int_equal(tracewin_align(&kv, 40, buf, sizeof(buf)), 1);
    assert_string_equal(kvtext_get(&kv, "PROFILE_START_STEP"), "45");
    kvtext_fini(&kv);
    kv_from(&kv, "ACTIVITIES_LOG_FILE=/tmp/x\nACTIVITIES_ITERATIONS=2"); /* absent = -1 */
    assert_int_equal(tracewin_align(&kv, 1, buf, sizeof(buf)), 1);
    assert_string_equal(kvtext_get(&kv, "PROFILE_START_STEP"), "6");
    kvtext_fini(&kv);
    kv_from(&kv, "ACTIVITIES_LOG_FILE=/tmp/x\nPROFILE_START_STEP=7\nACTIVITIES_ITERATIONS=2");
    assert_int_equal(tracewin_align(&kv, 40, buf, sizeof(buf)), 0);  /* explicit: left alone */
    assert_string_equal(kvtext_get(&kv, "PROFILE_START_STEP"), "7");
    kvtext_fini(&kv);
    kv_from(&kv, "NPU_MONITOR_START=true\nPROFILE_START_STEP=-1");
    assert_int_equal(tracewin_align(&kv, 40, buf, sizeof(buf)), 0);  /* npu-monitor config */
    kvtext_fini(&kv);
}

static void test_parse_dirs(void **state)
{
    char tmpl[] = "/tmp/mmtwXXXXXX", p[256], link[256], file[256], cfg[600];
    struct tracewin_cfg c;
    struct kvtext kv;
    (void)state;
    assert_non_null(mkdtemp(tmpl));
    assert_int_equal(logcap_open(), 0);
    snprintf(p, sizeof(p), "%s/new/sub", tmpl);
    snprintf(cfg, sizeof(cfg), "ACTIVITIES_LOG_FILE=%s\nPROFILE_ACTIVITIES=NPU", p);
    kv_from(&kv, cfg);
    assert_int_equal(tracewin_parse(&kv, &c), 0);           /* created */
    assert_string_equal(c.log_dir, p);
    assert_int_equal(c.flags, TRACEWIN_NPU);
    kvtext_fini(&kv);
    snprintf(link, sizeof(link), "%s/link", tmpl);
    assert_int_equal(symlink(p, link), 0);
    snprintf(cfg, sizeof(cfg), "ACTIVITIES_LOG_FILE=%s", link);
    kv_from(&kv, cfg);
    assert_int_equal(tracewin_parse(&kv, &c), -ELOOP);
    assert_true(logcap_has("is a symbolic link"));
    kvtext_fini(&kv);
    snprintf(file, sizeof(file), "%s/file", tmpl);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(cfg, sizeof(cfg), "ACTIVITIES_LOG_FILE=%s", file);
    kv_from(&kv, cfg);
    assert_int_equal(tracewin_parse(&kv, &c), -ENOTDIR);
    assert_true(logcap_has("exists and is not a directory"));
    kvtext_fini(&kv);
    kv_from(&kv, "ACTIVITIES_ITERATIONS=1");
    assert_int_equal(tracewin_parse(&kv, &c), -EINVAL);
    kvtext_fini(&kv);
    logcap_close();
    snprintf(cfg, sizeof(cfg), "rm -rf '%s'", tmpl);
    assert_int_equal(system(cfg), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_align),
        cmocka_unit_test(test_parse_dirs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
