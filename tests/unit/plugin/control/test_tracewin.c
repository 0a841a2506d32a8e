/* test_tracewin: the nputrace window's options and checks alone: option bits of a config
 * (activities default CPU,NPU, booleans, export type), the creator's start-step alignment
 * (only -1 or absent, never an npu-monitor config), the log-directory checks (symlink,
 * file, created directory), the window rule, and the commands of the one window state (arm,
 * step boundaries, leave, status; a window without NPU activities starts no session, so no
 * backend is needed), with the steps that go without waiting and the change counter. */
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
#include "plugin/control/dynamic.h"
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
    snprintf(cfg, sizeof(cfg), "rm -rf '%s'", tmpl);
    assert_int_equal(system(cfg), 0);
}

static void test_rule(void **state)
{
    struct window_state t = { .phase = WINDOW_CLOSED, .start = -1, .stop = -1 };
    struct kvtext kv;

    (void)state;
    /* PROFILE_START_STEP -1: the next step; [start, start + iterations). */
    kv_from(&kv, "PROFILE_START_STEP=-1\nACTIVITIES_ITERATIONS=2");
    assert_int_equal(tracewin_rule(&kv, 0, 5, &t), 1);
    kvtext_fini(&kv);
    assert_int_equal(t.phase, WINDOW_ARMED);
    assert_int_equal(t.start, 6);
    assert_int_equal(t.stop, 8); /* the step rule itself: test_window */

    /* A start already passed is refused (the ranks' traces must cover the same steps);
     * iterations < 1 become 1; defaults. */
    logcap_clear();
    kv_from(&kv, "PROFILE_START_STEP=3\nACTIVITIES_ITERATIONS=2");
    assert_int_equal(tracewin_rule(&kv, 0, 5, &t), -ERANGE);
    kvtext_fini(&kv);
    assert_true(logcap_has("start step 3 already passed (now at step 5)"));
    kv_from(&kv, "PROFILE_START_STEP=6\nACTIVITIES_ITERATIONS=0");
    assert_int_equal(tracewin_rule(&kv, 0, 5, &t), 1);
    kvtext_fini(&kv);
    assert_int_equal(t.start, 6);
    assert_int_equal(t.stop, 7);
    kv_from(&kv, "PROFILE_START_STEP= 20 ");
    assert_int_equal(tracewin_rule(&kv, 0, 5, &t), 1);
    kvtext_fini(&kv);
    assert_int_equal(t.start, 20);
    assert_int_equal(t.stop, 21);
    /* Ready -> Running -> Idle in one step when the window is already behind. */
    assert_true(window_advance(&t, 30));
    assert_int_equal(t.phase, WINDOW_CLOSED);

    /* Rank selection. */
    t = (struct window_state){ .phase = WINDOW_CLOSED, .start = -1, .stop = -1 };
    kv_from(&kv, "PROFILE_IS_RANK=True\nPROFILE_RANK_LIST=0, 2 ,11");
    assert_int_equal(tracewin_rule(&kv, 1, 1, &t), 0);
    assert_int_equal(t.phase, WINDOW_CLOSED);
    assert_int_equal(tracewin_rule(&kv, 11, 1, &t), 1);
    assert_int_equal(tracewin_rule(&kv, 2, 1, &t), 1);
    kvtext_fini(&kv);
    kv_from(&kv, "PROFILE_IS_RANK=false\nPROFILE_RANK_LIST=0");
    assert_int_equal(tracewin_rule(&kv, 1, 1, &t), 1);
    kvtext_fini(&kv);

    logcap_clear();
    t = (struct window_state){ .phase = WINDOW_CLOSED, .start = -1, .stop = -1 };
    kv_from(&kv, "PROFILE_START_STEP=x");
    assert_int_equal(tracewin_rule(&kv, 0, 1, &t), -EINVAL);
    kvtext_fini(&kv);
    assert_int_equal(t.phase, WINDOW_CLOSED);
    assert_true(logcap_has("nputrace config ignored: PROFILE_START_STEP='x'"));
}

static void expect_status(int32_t status, int32_t step, int32_t start, int32_t stop)
{
    struct tracewin_status st;

    tracewin_status(&st);
    assert_int_equal(st.status, status);
    assert_int_equal(st.step, step);
    assert_int_equal(st.start, start);
    assert_int_equal(st.stop, stop);
}

static void arm_text(const char *text, int32_t rank, int32_t step, int want)
{
    struct kvtext kv;

    kv_from(&kv, text);
    assert_int_equal(tracewin_arm(&kv, rank, step), want);
    kvtext_fini(&kv);
}

/* The commands a config source posts, over the one window state: a window without NPU
 * activities goes through every phase without a collection session. */
static void test_commands(void **state)
{
    char tmpl[] = "/tmp/mmtwcXXXXXX", cfg[512], cmd[600];
    struct msmon_trace_info *info = calloc(1, sizeof(*info));
    uint32_t windows, epoch;

    (void)state;
    assert_non_null(info);
    assert_non_null(mkdtemp(tmpl));
    assert_int_equal(msmon_dynamic_trace_info(info), 0);
    assert_int_equal(info->state, -1); /* no window yet */
    windows = info->windows;
    expect_status(DYN_TRACE_IDLE, -1, -1, -1);

    /* arm at step 5 for [7, 9): Ready; the options are the window's */
    snprintf(cfg, sizeof(cfg), "ACTIVITIES_LOG_FILE=%s\nPROFILE_ACTIVITIES=CPU\nPROFILE_START_STEP=7\n"
             "ACTIVITIES_ITERATIONS=2", tmpl);
    epoch = msmon_dynamic_trace_epoch();
    arm_text(cfg, 0, 5, 0);
    assert_true(msmon_dynamic_trace_epoch() != epoch);
    assert_true(logcap_has("dynamic_profile: nputrace ready: steps [7, 9)"));
    expect_status(DYN_TRACE_READY, 5, 7, 9);
    assert_int_equal(msmon_dynamic_trace_info(info), 0);
    assert_int_equal(info->state, DYN_TRACE_READY);
    assert_int_equal(info->flags, TRACEWIN_CPU);
    assert_string_equal(info->log_dir, tmpl);
    /* a second config while armed is refused, and the armed window stays */
    logcap_clear();
    arm_text(cfg, 0, 5, -EBUSY);
    assert_true(logcap_has("nputrace config ignored on rank 0: a window [7, 9) is already armed"));
    expect_status(DYN_TRACE_READY, 5, 7, 9);

    /* the step boundaries: open at 7 (no NPU: no session, said once), close at 9; the
     * steps between them go without waiting and leave the epoch alone */
    epoch = msmon_dynamic_trace_epoch();
    assert_false(tracewin_step(6));
    expect_status(DYN_TRACE_READY, 6, 7, 9);
    assert_int_equal(tracewin_step_nowait(6), 0);
    assert_int_equal(tracewin_step_nowait(7), -EAGAIN); /* it opens here: nothing changed */
    expect_status(DYN_TRACE_READY, 6, 7, 9);
    assert_int_equal(msmon_dynamic_trace_epoch(), epoch);
    logcap_clear();
    assert_true(tracewin_step(7));
    expect_status(DYN_TRACE_RUNNING, 7, 7, 9);
    assert_true(msmon_dynamic_trace_epoch() != epoch);
    epoch = msmon_dynamic_trace_epoch();
    assert_int_equal(tracewin_step_nowait(8), 0);
    expect_status(DYN_TRACE_RUNNING, 8, 7, 9);
    assert_int_equal(tracewin_step_nowait(9), -EAGAIN);
    assert_int_equal(msmon_dynamic_trace_epoch(), epoch);
    assert_true(logcap_has("nputrace: steps [7, 9): PROFILE_ACTIVITIES has no NPU"));
    arm_text(cfg, 0, 7, -EBUSY);
    assert_true(logcap_has("a window [7, 9) is already running"));
    assert_false(tracewin_step(8));
    assert_true(tracewin_step(9));
    expect_status(DYN_TRACE_IDLE, 9, -1, -1);
    assert_true(msmon_dynamic_trace_epoch() != epoch);
    assert_int_equal(tracewin_step_nowait(10), 0); /* closed: nothing moves any more */
    assert_int_equal(tracewin_step_nowait(9), 0);
    assert_int_equal(msmon_dynamic_trace_info(info), 0);
    assert_int_equal(info->state, DYN_TRACE_IDLE);
    assert_int_equal(info->start_step, 7);
    assert_int_equal(info->stop_step, 9);
    assert_int_equal(info->windows, windows + 1);

    /* a start step that has passed is refused; the window stays Idle */
    logcap_clear();
    arm_text(cfg, 0, 9, -EINVAL);
    assert_true(logcap_has("start step 7 already passed (now at step 9)"));
    expect_status(DYN_TRACE_IDLE, 9, -1, -1);
    /* not for this rank: refused too */
    snprintf(cfg, sizeof(cfg), "ACTIVITIES_LOG_FILE=%s\nPROFILE_ACTIVITIES=CPU\nPROFILE_IS_RANK=true\n"
             "PROFILE_RANK_LIST=3", tmpl);
    arm_text(cfg, 0, 9, -EINVAL);
    expect_status(DYN_TRACE_IDLE, 9, -1, -1);

    /* the job leaves inside a window: Idle at once */
    snprintf(cfg, sizeof(cfg), "ACTIVITIES_LOG_FILE=%s\nPROFILE_ACTIVITIES=CPU\nPROFILE_START_STEP=-1\n"
             "ACTIVITIES_ITERATIONS=3", tmpl);
    arm_text(cfg, 0, 10, 0);
    expect_status(DYN_TRACE_READY, 10, 11, 14);
    assert_true(tracewin_step(11));
    expect_status(DYN_TRACE_RUNNING, 11, 11, 14);
    tracewin_leave(12);
    expect_status(DYN_TRACE_IDLE, 12, -1, -1);
    assert_false(tracewin_step(13)); /* a left window stays closed */
    expect_status(DYN_TRACE_IDLE, 13, -1, -1);

    free(info);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpl);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_align),
        cmocka_unit_test(test_parse_dirs),
        cmocka_unit_test(test_rule),
        cmocka_unit_test(test_commands),
    };
    return cmocka_run_group_tests(tests, logcap_group_setup, logcap_group_teardown);
}
