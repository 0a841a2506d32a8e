/* Unit tests of RPC request validation, method replies (byte-exact), nlohmann type_error
 * texts and the status gate, over a real registry and status table. */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "daemon/ipc/data_sink.h"
#include "daemon/ipc/peer.h"
#include "daemon/rpc/rpc_methods.h"

struct fx {
    struct registry *reg;
    struct status_table *st;
    struct rpc_ctx ctx;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_int_equal(registry_create("host", &f->reg), 0);
    assert_int_equal(status_create(&f->st), 0);
    f->ctx = (struct rpc_ctx){ .reg = f->reg, .st = f->st, .version = "0.3.2" };
    log_set_level(LOG_LVL_ERROR);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    registry_destroy(f->reg);
    status_destroy(f->st);
    free(f);
    return 0;
}

/* Reply text, or "" for no reply (caller frees). */
static char *call(struct fx *f, const char *body)
{
    char *rep = NULL;
    size_t len = 0;
    assert_int_equal(rpc_handle(&f->ctx, body, strlen(body), &rep, &len), 0);
    if (!rep)
        return strdup("");
    assert_int_equal(strlen(rep), len);
    return rep;
}

#define EXPECT(f, body, want)                  \
    do {                                       \
        char *r_ = call((f), (body));          \
        assert_string_equal(r_, (want));       \
        free(r_);                              \
    } while (0)

static void test_no_reply_cases(void **state)
{
    struct fx *f = *state;
    EXPECT(f, "not json", "");
    EXPECT(f, "[[[[[[[[[[[]]]]]]]]]]]", "");
    EXPECT(f, "{\"fn\":\"getStatus\"} x", "");
    EXPECT(f, "[1]", "");
    EXPECT(f, "{}", "");
    EXPECT(f, "\"getStatus\"", "");
    EXPECT(f, "{\"a\":1}", "");
    EXPECT(f, "{\"fn\":\"GetStatus\"}", "");
    EXPECT(f, "{\"fn\":5}", "");
    EXPECT(f, "{\"fn\":\"getStatus\\u0000\"}", "");
    EXPECT(f, "{\"fn\":\"getVersion\",\"x\":\"\xff\"}", "");    /* invalid UTF-8 */
}

static void test_basic_methods(void **state)
{
    struct fx *f = *state;
    EXPECT(f, "{\"fn\":\"getVersion\"}", "{\"version\":\"0.3.2\"}");
    EXPECT(f, " {\"fn\" : \"getVersion\", \"a\":[[[[[[[[[]]]]]]]]]} ", "{\"version\":\"0.3.2\"}");
    EXPECT(f, "{\"fn\":\"x\",\"fn\":\"getVersion\"}", "{\"version\":\"0.3.2\"}");
    EXPECT(f, "{\"fn\":\"getStatus\"}",
           "{\"current_step\":-1,\"npumonitor\":\"Uninitialized\",\"nputrace\":\"Uninitialized\",\"processes\":[]}");
}

static void test_status_example(void **state)
{
    struct fx *f = *state;
    char *cfg;
    size_t len;
    int32_t pids[] = { 4242 };
    assert_int_equal(registry_poll(f->reg, 0, pids, 1, 3, REG_ORIGIN_MSMON, 1, &cfg, &len), 0);
    struct ipc_status s = { 0, -1, -1, -1, 4242, 0, 0 };
    status_update(f->st, STATUS_TRACE, &s, 1);
    status_update(f->st, STATUS_MONITOR, &s, 1);
    s = (struct ipc_status){ 1, 120, -1, -1, 4250, 0, 0 };
    status_update(f->st, STATUS_MONITOR, &s, 2);
    s = (struct ipc_status){ 0, 120, -1, -1, 4250, 0, 0 };
    status_update(f->st, STATUS_TRACE, &s, 2);
    s = (struct ipc_status){ 1, -1, -1, -1, 4251, 0, 0 };
    status_update(f->st, STATUS_MONITOR, &s, 3);
    /* the poller's age is time-dependent: it polled at mono 3 ns, so it is "now" in ms; the
     * digits are checked to be a plausible age and then masked for the byte comparison */
    char *r0 = call(f, "{\"fn\":\"getStatus\"}");
    char *age = strstr(r0, "\"last_poll_age_ms\":");
    assert_non_null(age);
    char *digits = age + strlen("\"last_poll_age_ms\":"), *end = digits;
    while (*end >= '0' && *end <= '9')
        end++;
    assert_true(end > digits && *end == ',');
    assert_true(strtoull(digits, NULL, 10) + 1000 >= clock_mono_ns() / 1000000u);
    memmove(digits + 1, end, strlen(end) + 1);
    digits[0] = 'N';
    assert_string_equal(r0,
           "{\"current_step\":120,\"npumonitor\":\"Running\",\"nputrace\":\"Idle\",\"processes\":["
           "{\"current_step\":-1,\"job_id\":0,\"last_poll_age_ms\":N,\"npumonitor\":\"Idle\",\"nputrace\":\"Idle\",\"pid\":4242,\"polling\":true},"
           "{\"current_step\":120,\"job_id\":0,\"npumonitor\":\"Running\",\"nputrace\":\"Idle\",\"pid\":4250,\"polling\":false},"
           "{\"current_step\":-1,\"job_id\":0,\"npumonitor\":\"Running\",\"nputrace\":\"Uninitialized\",\"pid\":4251,\"polling\":false}]}");
    free(r0);
    /* trace Ready: step keys at both levels */
    s = (struct ipc_status){ 2, 7, 10, 20, 4250, 0, 0 };
    status_update(f->st, STATUS_TRACE, &s, 4);
    char *r = call(f, "{\"fn\":\"getStatus\"}");
    assert_non_null(strstr(r, "\"pid\":4250,\"polling\":false,\"start_step\":10,\"stop_step\":20}"));
    assert_non_null(strstr(r, "],\"start_step\":10,\"stop_step\":20}"));
    free(r);
}

/* PluginStats data messages put a session's counters into that pid's getStatus entry; the
 * counters never create an entry, and a malformed report changes nothing. */
static void test_status_session_stats(void **state)
{
    struct fx *f = *state;
    struct data_router dr;
    const char *good = "{\"deviceId\":-1,\"duration\":5,\"kind\":\"PluginStats\",\"name\":\"x\",\"pid\":4250,"
                       "\"stats\":{\"before_start\":1,\"bytes_written\":2,\"consumed\":100,\"cpu_ns\":5,"
                       "\"dropped_declined\":3,\"dropped_offline\":7,\"dropped_queue\":4,\"dropped_write\":6,\"filtered\":10,"
                       "\"kept\":86,"
                       "\"written\":80},\"timestamp\":9}";
    char *r;

    data_router_init(&dr);
    dr.st = f->st;
    struct ipc_status s = { 1, -1, -1, -1, 4250, 0, 0 };
    status_update(f->st, STATUS_MONITOR, &s, 1);
    assert_true(data_handle(&dr, good, strlen(good), 1) >= 0);
    /* an unknown pid, a negative counter, a missing counter: no effect on status */
    const char *bad[] = {
        "{\"deviceId\":-1,\"duration\":5,\"kind\":\"PluginStats\",\"pid\":4251,\"stats\":{},\"timestamp\":9}",
        "{\"deviceId\":-1,\"duration\":5,\"kind\":\"PluginStats\",\"pid\":4250,\"stats\":{\"consumed\":-1},\"timestamp\":9}",
        "{\"deviceId\":-1,\"duration\":5,\"kind\":\"PluginStats\",\"pid\":\"4250\",\"stats\":{},\"timestamp\":9}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        (void)data_handle(&dr, bad[i], strlen(bad[i]), 1);
    r = call(f, "{\"fn\":\"getStatus\"}");
    assert_non_null(strstr(r, "\"pid\":4250,\"polling\":false,\"session_stats\":{\"before_start\":1,\"bytes_written\":2,"
                              "\"consumed\":100,\"cpu_ns\":5,\"dropped_declined\":3,\"dropped_offline\":7,\"dropped_queue\":4,"
                              "\"dropped_write\":6,\"filtered\":10,\"kept\":86,\"written\":80}}"));
    assert_null(strstr(r, "4251"));
    free(r);
    data_router_fini(&dr);
}

/* PluginInfo data messages record which vendor library a polling process loaded ("" = none
 * found); getStatus shows it on that process; hostile values change nothing. */
static void test_status_library(void **state)
{
    struct fx *f = *state;
    struct data_router dr;
    char *cfg, *r;
    size_t len;
    int32_t pids[] = { 4242 }, other[] = { 4243 };
    const char *ok = "{\"backend\":\"mspti\",\"deviceId\":-1,\"duration\":0,\"kind\":\"PluginInfo\","
                     "\"library\":\"/opt/cann/lib64/libmspti.so\",\"pid\":4242,\"timestamp\":1}";
    const char *none = "{\"backend\":\"mspti\",\"deviceId\":-1,\"duration\":0,\"kind\":\"PluginInfo\","
                       "\"library\":\"\",\"pid\":4243,\"timestamp\":1}";
    const char *bad[] = {
        "{\"backend\":\"mspti\",\"deviceId\":-1,\"duration\":0,\"kind\":\"PluginInfo\",\"library\":\"/x\\n/y\",\"pid\":4242,\"timestamp\":1}",
        "{\"backend\":\"\",\"deviceId\":-1,\"duration\":0,\"kind\":\"PluginInfo\",\"library\":\"/z\",\"pid\":4242,\"timestamp\":1}",
        "{\"backend\":\"mspti\",\"deviceId\":-1,\"duration\":0,\"kind\":\"PluginInfo\",\"library\":\"/z\",\"pid\":-4,\"timestamp\":1}",
    };

    data_router_init(&dr);
    dr.reg = f->reg;
    assert_int_equal(registry_poll(f->reg, 0, pids, 1, 3, REG_ORIGIN_MSMON, clock_mono_ns(), &cfg, &len), 0);
    assert_int_equal(registry_poll(f->reg, 0, other, 1, 3, REG_ORIGIN_MSMON, clock_mono_ns(), &cfg, &len), 0);
    assert_true(data_handle(&dr, ok, strlen(ok), 1) >= 0);
    assert_true(data_handle(&dr, none, strlen(none), 1) >= 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        (void)data_handle(&dr, bad[i], strlen(bad[i]), 1);
    r = call(f, "{\"fn\":\"getStatus\"}");
    assert_non_null(strstr(r, "{\"backend\":\"mspti\",\"current_step\":-1,\"job_id\":0,\"last_poll_age_ms\":"));
    assert_non_null(strstr(r, ",\"library\":\"/opt/cann/lib64/libmspti.so\",\"npumonitor\":\"Uninitialized\""
                              ",\"nputrace\":\"Uninitialized\",\"pid\":4242,"));
    assert_non_null(strstr(r, ",\"library\":\"\",\"npumonitor\":\"Uninitialized\",\"nputrace\":\"Uninitialized\""
                              ",\"pid\":4243,"));
    free(r);
    data_router_fini(&dr);
}

static void test_field_errors(void **state)
{
    struct fx *f = *state;
    const char *pre = "{\"status\":\"failed with exception = [json.exception.type_error.302] type must be ";
    char want[256];
    EXPECT(f, "{\"fn\":\"setKinetOnDemandRequest\",\"pids\":[0]}", "{\"status\":\"failed\"}");
    EXPECT(f, "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"x\"}", "{\"status\":\"failed\"}");
    static const struct { const char *body, *tail; } cases[] = {
        { "\"config\":null,\"pids\":[]", "string, but is null" },
        { "\"config\":true,\"pids\":[]", "string, but is boolean" },
        { "\"config\":[],\"pids\":[]", "string, but is array" },
        { "\"config\":\"a\",\"pids\":3", "array, but is number" },
        { "\"config\":\"a\",\"pids\":\"1\"", "array, but is string" },
        { "\"config\":\"a\",\"pids\":[1,{}]", "number, but is object" },
        { "\"config\":\"a\",\"pids\":[],\"job_id\":\"x\"", "number, but is string" },
        { "\"config\":\"a\",\"pids\":[],\"job_id\":null", "number, but is null" },
        { "\"config\":\"a\",\"pids\":[],\"process_limit\":[1]", "number, but is array" },
        { "\"config\":1,\"pids\":\"x\"", "string, but is number" },   /* config read first */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body), "{\"fn\":\"setKinetOnDemandRequest\",%s}", cases[i].body);
        snprintf(want, sizeof(want), "%s%s\"}", pre, cases[i].tail);
        EXPECT(f, body, want);
    }
    /* a number out of the field's range says so plainly, not "number, but is number" */
    EXPECT(f, "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"a\",\"pids\":[2147483648]}",
           "{\"status\":\"failed: pids element 2147483648 is out of range -2147483648..2147483647\"}");
    EXPECT(f, "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"a\",\"pids\":[],\"job_id\":1e30}",
           "{\"status\":\"failed: job_id 1e+30 is out of range -9223372036854775808..9223372036854775807\"}");
    /* fractions truncate, booleans convert (nlohmann get<int>) */
    EXPECT(f, "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"NPU_MONITOR_START=true\",\"pids\":[1.9,true],\"job_id\":-0.5}",
           "{\"commandStatus\":\"ineffective\"}");
}

static void test_gate_matrix(void **state)
{
    (void)state;
    /* rows: trace -1..2; columns: monitor -1..2 */
    static const char *const npu[4][4] = {
        { "ineffective", "effective", "effective", "effective" },       /* trace -1: unknown unless monitor -1 */
        { "ineffective", "effective", "effective", "effective" },       /* trace 0 */
        { "ineffective", "ineffective", "ineffective", "ineffective" }, /* trace 1 */
        { "ineffective", "effective", "effective", "effective" },       /* trace 2 */
    };
    static const char *const trace[4][4] = {
        { "ineffective", "ineffective", "ineffective", "ineffective" }, /* trace -1 */
        { "unknown", "effective", "ineffective", "unknown" },           /* trace 0 */
        { "unknown", "effective", "ineffective", "unknown" },
        { "unknown", "effective", "ineffective", "unknown" },
    };
    for (int t = -1; t <= 2; t++) {
        for (int m = -1; m <= 2; m++) {
            const char *want_npu = npu[t + 1][m + 1];
            if (t == -1 && m != -1)
                want_npu = "unknown";
            assert_string_equal(rpc_gate(REG_KIND_NPU_MONITOR, t, m), want_npu);
            assert_string_equal(rpc_gate(REG_KIND_TRACE, t, m), trace[t + 1][m + 1]);
        }
    }
}

/* The daemon's own liveness rule, as dynolog installs it: the reporter pids below that no
 * system has read gone, and this test's own pid reads alive. */
static bool node_gone(int32_t pid)
{
    return peer_gone(NULL, pid);
}

/* The gate through the whole handler: one MSMON process, every status combination. */
static void test_gate_through_handler(void **state)
{
    struct fx *f = *state;
    int32_t pids[] = { 77 };
    rpc_set_pid_gone(node_gone);
    for (int kind = 0; kind < 2; kind++) {
        for (int t = -1; t <= 2; t++) {
            for (int m = -1; m <= 2; m++) {
                char *cfg;
                size_t len;
                registry_poll(f->reg, 0, pids, 1, 3, REG_ORIGIN_MSMON, 1, &cfg, &len);
                free(cfg);   /* empty the mailbox */
                /* a reporter pid no system has: the upstream gate alone (the busy-trace
                 * refusal applies only to a live reporter) */
                struct ipc_status s = { t, -1, -1, -1, 2147480000, 0, 0 };
                status_update(f->st, STATUS_TRACE, &s, 1);
                s.status = m;
                status_update(f->st, STATUS_MONITOR, &s, 1);
                const char *gate = rpc_gate(kind ? REG_KIND_NPU_MONITOR : REG_KIND_TRACE, t, m);
                char *r = call(f, kind ? "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"NPU_MONITOR_START=true\",\"pids\":[0]}"
                                       : "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"PROFILE_X=1\",\"pids\":[]}");
                if (strcmp(gate, "effective") == 0) {
                    assert_string_equal(r, "{\"activityProfilersBusy\":0,\"activityProfilersTriggered\":[77],"
                                           "\"commandStatus\":\"effective\",\"eventProfilersBusy\":0,"
                                           "\"eventProfilersTriggered\":[],\"processesMatched\":[77]}");
                } else {
                    char want[64];
                    snprintf(want, sizeof(want), "{\"commandStatus\":\"%s\"}", gate);
                    assert_string_equal(r, want);
                }
                free(r);
            }
        }
    }
    rpc_set_pid_gone(NULL);
}

/* Ours: a second nputrace while a live rank reports Ready/Running is refused with a reason;
 * the same status from a pid that is gone does not block the node. */
static void test_busy_trace_refused(void **state)
{
    struct fx *f = *state;
    int32_t pids[] = { 77 };
    char *cfg;
    size_t len;
    rpc_set_pid_gone(node_gone);
    registry_poll(f->reg, 0, pids, 1, 3, REG_ORIGIN_MSMON, 1, &cfg, &len);
    struct ipc_status s = { 1, 12, 10, 14, (int32_t)getpid(), 0, 0 };
    status_update(f->st, STATUS_TRACE, &s, 1);
    s.status = 0;
    status_update(f->st, STATUS_MONITOR, &s, 1);
    char want[256];
    snprintf(want, sizeof(want), "{\"commandStatus\":\"ineffective\",\"reason\":\"nputrace is already "
             "Running in pid %d (steps 10-14); wait until it is Idle\"}", (int)getpid());
    EXPECT(f, "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"PROFILE_X=1\",\"pids\":[0]}", want);
    registry_poll(f->reg, 0, pids, 1, 3, REG_ORIGIN_MSMON, 1, &cfg, &len);
    assert_null(cfg);   /* nothing was delivered */
    s = (struct ipc_status){ 2, 12, 20, 22, 2147480000, 0, 0 };
    status_update(f->st, STATUS_TRACE, &s, 2);
    s.status = 0;
    status_update(f->st, STATUS_MONITOR, &s, 2);
    char *r = call(f, "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"PROFILE_X=1\",\"pids\":[0]}");
    assert_non_null(strstr(r, "\"commandStatus\":\"effective\""));
    free(r);
    rpc_set_pid_gone(NULL);
}

static void test_origin_rule(void **state)
{
    struct fx *f = *state;
    int32_t kin[] = { 500 }, ms[] = { 600 };
    char *cfg;
    size_t len;
    registry_poll(f->reg, 0, kin, 1, 3, REG_ORIGIN_KINETO, 1, &cfg, &len);
    registry_poll(f->reg, 0, ms, 1, 3, REG_ORIGIN_MSMON, 1, &cfg, &len);
    struct ipc_status s = { 0, -1, -1, -1, 600, 0, 0 };
    status_update(f->st, STATUS_TRACE, &s, 1);
    s.status = 1;
    status_update(f->st, STATUS_MONITOR, &s, 1);
    /* npu-monitor Running on msMonitor: gputrace still reaches Kineto */
    EXPECT(f, "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"ACTIVITIES=1\",\"pids\":[0]}",
           "{\"activityProfilersBusy\":0,\"activityProfilersTriggered\":[500],\"commandStatus\":\"effective\","
           "\"eventProfilersBusy\":0,\"eventProfilersTriggered\":[],\"processesMatched\":[500]}");
    s.status = 0;
    status_update(f->st, STATUS_MONITOR, &s, 1);
    EXPECT(f, "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"NPU_MONITOR_START=1\",\"pids\":[0]}",
           "{\"activityProfilersBusy\":0,\"activityProfilersTriggered\":[600],\"commandStatus\":\"effective\","
           "\"eventProfilersBusy\":0,\"eventProfilersTriggered\":[],\"processesMatched\":[600]}");
    /* a status from the Kineto leaf turns it into an msMonitor process */
    registry_mark_msmon(f->reg, 500);
    free(call(f, "{\"fn\":\"getVersion\"}"));
    char *r = call(f, "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"NPU_MONITOR_START=1\",\"pids\":[500]}");
    assert_non_null(strstr(r, "\"processesMatched\":[500]"));
    free(r);
}

/* The requested pids arrive unsorted with duplicates; each process is matched by any of
 * its pids (leaf or ancestor), and [0,0] is the set {0}: trace-all. */
static void test_pid_matching_unsorted(void **state)
{
    struct fx *f = *state;
    int32_t a[] = { 10, 5 }, b[] = { 20, 3 }, c[] = { 30, 4 };
    char *cfg;
    size_t len;
    registry_poll(f->reg, 0, a, 2, 3, REG_ORIGIN_KINETO, 1, &cfg, &len);
    registry_poll(f->reg, 0, b, 2, 3, REG_ORIGIN_KINETO, 1, &cfg, &len);
    registry_poll(f->reg, 0, c, 2, 3, REG_ORIGIN_KINETO, 1, &cfg, &len);
    char body[8192];
    int n = snprintf(body, sizeof(body),
                     "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=1\",\"pids\":[99,3,7,3,1");
    for (int i = 0; i < 1000; i++)          /* many pids that match nothing */
        n += snprintf(body + n, sizeof(body) - (size_t)n, ",%d", 100000 - i);
    snprintf(body + n, sizeof(body) - (size_t)n, ",5,-2]}");
    EXPECT(f, body,
           "{\"activityProfilersBusy\":0,\"activityProfilersTriggered\":[20,10],\"commandStatus\":\"effective\","
           "\"eventProfilersBusy\":0,\"eventProfilersTriggered\":[],\"processesMatched\":[20,10]}");
    /* the pending configs of 20 and 10 are replaced (last wins), nobody is busy */
    EXPECT(f, "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=1\",\"pids\":[0,0]}",
           "{\"activityProfilersBusy\":0,\"activityProfilersTriggered\":[20,30,10],\"commandStatus\":\"effective\","
           "\"eventProfilersBusy\":0,\"eventProfilersTriggered\":[],\"processesMatched\":[20,30,10]}");
    /* with a client_token (ours): processesSkipped in the reply, and the outcomes by token */
    EXPECT(f, "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=1\",\"pids\":[0],\"process_limit\":1,"
              "\"client_token\":\"tok-1\"}",
           "{\"activityProfilersBusy\":0,\"activityProfilersTriggered\":[20],\"commandStatus\":\"effective\","
           "\"eventProfilersBusy\":0,\"eventProfilersTriggered\":[],\"processesMatched\":[20,30,10],"
           "\"processesSkipped\":2}");
    EXPECT(f, "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=1\",\"pids\":[0],\"client_token\":\"a b\"}",
           "{\"status\":\"failed: client_token must be 1-64 characters [0-9A-Za-z_-]\"}");
    EXPECT(f, "{\"fn\":\"getConfigOutcomes\",\"client_token\":7}",
           "{\"status\":\"failed: client_token must be 1-64 characters [0-9A-Za-z_-]\"}");
    char *rep = NULL;
    size_t rlen = 0;
    const char *q = "{\"fn\":\"getConfigOutcomes\",\"client_token\":\"tok-1\"}";
    assert_int_equal(rpc_handle(&f->ctx, q, strlen(q), &rep, &rlen), 0);
    assert_non_null(strstr(rep, "\"outcome\":\"pending\",\"pid\":20,\"rank\":-1,\"reason\":\"\",\"state\":\"\"}]}"));
    assert_int_equal(strncmp(rep, "{\"outcomes\":[{\"id\":\"", strlen("{\"outcomes\":[{\"id\":\"")), 0);
    free(rep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_no_reply_cases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_basic_methods, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_example, setup, teardown),
        cmocka_unit_test_setup_teardown(test_field_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_session_stats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_library, setup, teardown),
        cmocka_unit_test(test_gate_matrix),
        cmocka_unit_test_setup_teardown(test_gate_through_handler, setup, teardown),
        cmocka_unit_test_setup_teardown(test_busy_trace_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_origin_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pid_matching_unsorted, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
