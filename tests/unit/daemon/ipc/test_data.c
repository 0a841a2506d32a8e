/* Unit tests of data-message validation, device normalisation, OpStats expansion and the
 * JSON logger line format, with a capture sink in place of the real loggers. */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "common/log.h"
#include "daemon/ipc/data_sink.h"
#include "daemon/sinks/json_logger.h"

struct capture {
    char lines[8][512];
    int n;
};

/* Keeps the JSON-logger rendering of each record, minus the time prefix. */
static int cap_write(void *self, const struct sink_record *rec)
{
    struct capture *c = self;
    char line[1024];
    long n = json_logger_format(rec, line, sizeof(line));
    assert_true(n > 0);
    const char *data = strstr(line, " data = ");
    assert_non_null(data);
    if (c->n < 8)
        snprintf(c->lines[c->n++], sizeof(c->lines[0]), "%s", data + 8);
    return 0;
}

static const struct sink_ops cap_ops = { "capture", cap_write, NULL, NULL };

static int handle(struct capture *c, const char *text)
{
    struct data_router dr;
    data_router_init(&dr);
    data_router_add(&dr, (struct sink){ &cap_ops, c });
    int rc = data_handle(&dr, text, strlen(text), 0);
    data_router_fini(&dr);
    return rc;
}

static void test_validation(void **state)
{
    struct capture c = { .n = 0 };
    (void)state;
    static const char *const bad[] = {
        "", "[]", "{}", "nope",
        "{\"kind\":1,\"duration\":1,\"timestamp\":1,\"deviceId\":0}",
        "{\"kind\":\"K\",\"duration\":-1,\"timestamp\":1,\"deviceId\":0}",
        "{\"kind\":\"K\",\"duration\":1.5,\"timestamp\":1,\"deviceId\":0}",
        "{\"kind\":\"K\",\"duration\":1,\"timestamp\":\"1\",\"deviceId\":0}",
        "{\"kind\":\"K\",\"duration\":1,\"timestamp\":1}",
        "{\"kind\":\"K\",\"duration\":1,\"timestamp\":1,\"deviceId\":null}",
        "{\"kind\":\"K\",\"duration\":1,\"timestamp\":1,\"deviceId\":0.5}",
        "{\"kind\":\"K\",\"duration\":1,\"timestamp\":1,\"deviceId\":0,\"x\":[[[[[[[[[[1]]]]]]]]]]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(handle(&c, bad[i]), -EINVAL);
    assert_int_equal(c.n, 0);
    assert_int_equal(handle(&c, "{\"kind\":\"K\",\"duration\":1,\"timestamp\":1,\"deviceId\":0,"
                                "\"x\":[[[[[[[[1]]]]]]]]}"), 1);
}

static void test_devices(void **state)
{
    (void)state;
    static const struct { const char *dev, *want; } cases[] = {
        { "-1", "host" }, { "4294967295", "host" }, { "18446744073709551615", "host" },
        { "\"-1\"", "host" }, { "\"host\"", "host" }, { "0", "0" }, { "7", "7" },
        { "\"3\"", "3" }, { "4294967294", "4294967294" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct capture c = { .n = 0 };
        char msg[256], want[256];
        snprintf(msg, sizeof(msg), "{\"timestamp\":1749889801120000000,\"kind\":\"Kernel\","
                                   "\"duration\":81234567,\"deviceId\":%s}", cases[i].dev);
        assert_int_equal(handle(&c, msg), 1);
        snprintf(want, sizeof(want), "{\"deviceId\":\"%s\",\"duration\":81234567,\"kind\":\"Kernel\","
                                     "\"timestamp\":1749889801120000000}", cases[i].want);
        assert_string_equal(c.lines[0], want);
    }
}

static void test_marker_and_opstats(void **state)
{
    struct capture c = { .n = 0 };
    (void)state;
    assert_int_equal(handle(&c, "{\"deviceId\":4294967295,\"domain\":\"default\",\"duration\":5,"
                                "\"kind\":\"Marker\",\"name\":\"step 1\",\"timestamp\":9,\"extra\":1}"), 1);
    assert_string_equal(c.lines[0], "{\"deviceId\":\"host\",\"domain\":\"default\",\"duration\":5,"
                                    "\"kind\":\"Marker\",\"name\":\"step 1\",\"timestamp\":9}");
    c.n = 0;
    assert_int_equal(handle(&c, "{\"activity\":\"MemCpy\",\"deviceId\":1,\"duration\":30,\"interval_ns\":7,"
                                "\"kind\":\"OpStats\",\"timestamp\":11,\"ops\":["
                                "{\"avg\":10,\"bytes\":64,\"count\":2,\"max\":15,\"min\":5,\"name\":\"HTOD\",\"total\":20},"
                                "{\"avg\":10,\"count\":1,\"domain\":\"d\",\"max\":10,\"min\":10,\"name\":\"X\",\"total\":10}]}"), 2);
    assert_string_equal(c.lines[0], "{\"activity\":\"MemCpy\",\"avg\":10,\"bytes\":64,\"count\":2,"
                                    "\"deviceId\":\"1\",\"kind\":\"OpStats\",\"max\":15,\"min\":5,"
                                    "\"name\":\"HTOD\",\"timestamp\":11,\"total\":20}");
    assert_string_equal(c.lines[1], "{\"activity\":\"MemCpy\",\"avg\":10,\"count\":1,\"deviceId\":\"1\","
                                    "\"domain\":\"d\",\"kind\":\"OpStats\",\"max\":10,\"min\":10,"
                                    "\"name\":\"X\",\"timestamp\":11,\"total\":10}");
}

static void test_logger_line(void **state)
{
    (void)state;
    struct sink_kv kv[] = {
        { .key = "uptime", .type = SINK_UINT, .u = 12345 },
        { .key = "cpu_util", .type = SINK_DOUBLE, .d = 28.6584 },
        { .key = "cpu_i", .type = SINK_DOUBLE, .d = 71.342 },
        { .key = "rx_bytes.eth0", .type = SINK_INT, .i = 123456 },
    };
    /* 2025-06-14 08:31:00.002 local time */
    struct tm tm = { .tm_year = 125, .tm_mon = 5, .tm_mday = 14, .tm_hour = 8, .tm_min = 31,
                     .tm_isdst = -1 };
    uint64_t ns = (uint64_t)mktime(&tm) * 1000000000ull + 2000000ull;
    struct sink_record rec = { ns, NULL, kv, 4, SINK_NO_PID, SINK_NO_RANK, SINK_NO_JOB, NULL, NULL, NULL };
    char line[512];
    long n = json_logger_format(&rec, line, sizeof(line));
    assert_string_equal(line, "time = 2025-06-14T08:31:00.002Z data = {\"cpu_i\":\"71.342\","
                              "\"cpu_util\":\"28.658\",\"rx_bytes.eth0\":123456,\"uptime\":12345}");
    assert_int_equal(n, strlen(line));
    assert_int_equal(json_logger_format(&rec, line, 20), -ENOSPC);
}

/* A host with many interfaces: records of thousands of keys are formatted whole, sorted;
 * beyond the key cap the record is refused, never cut. */
static void test_logger_large_record(void **state)
{
    enum { N = 3000 };
    static struct sink_kv kv[N];
    static char keys[N][32];
    static char line[256 * 1024];
    (void)state;
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "rx_bytes.if%04d", N - 1 - i);
        kv[i] = (struct sink_kv){ .key = keys[i], .type = SINK_UINT, .u = (uint64_t)i };
    }
    struct sink_record rec = { 0, NULL, kv, N, SINK_NO_PID, SINK_NO_RANK, SINK_NO_JOB, NULL, NULL, NULL };
    long n = json_logger_format(&rec, line, sizeof(line));
    assert_true(n > 0);
    const char *first = strstr(line, "{\"rx_bytes.if0000\":2999,\"rx_bytes.if0001\":2998,");
    assert_non_null(first);
    assert_non_null(strstr(line, "\"rx_bytes.if2999\":0}"));
    rec.n = 5000;
    struct sink_kv *big = calloc(5000, sizeof(*big));
    assert_non_null(big);
    for (int i = 0; i < 5000; i++)
        big[i] = kv[i % N];
    rec.kv = big;
    assert_int_equal(json_logger_format(&rec, line, sizeof(line)), -E2BIG);
    free(big);
}

/* ConfigAck records the outcome of a delivery for the process it names, only from
 * that process, only for an id it was handed; PluginInfo's "acks" makes deliveries wait. */
static void test_config_ack(void **state)
{
    (void)state;
    struct data_router dr;
    struct registry *reg = NULL;
    assert_int_equal(registry_create("h", &reg), 0);
    struct reg_set_result res;
    struct reg_cfg_entry e;
    char *cfg = NULL, msg[512];
    size_t len;
    int32_t pid = 4321;
    data_router_init(&dr);
    dr.reg = reg;
    assert_int_equal(registry_poll(reg, 0, &pid, 1, 3, REG_ORIGIN_MSMON, 1, &cfg, &len), 0);
    const char *info = "{\"acks\":true,\"backend\":\"mspti\",\"deviceId\":-1,\"duration\":0,"
                       "\"kind\":\"PluginInfo\",\"library\":\"\",\"pid\":4321,\"timestamp\":1}";
    data_handle_from(&dr, info, strlen(info), 1, pid);
    assert_int_equal(registry_set_config(reg, 0, NULL, 0, "A=1", 3, 10, NULL, NULL, "t", &res), 0);
    reg_set_result_fini(&res);
    assert_int_equal(registry_poll(reg, 0, &pid, 1, 3, REG_ORIGIN_MSMON, 2, &cfg, &len), 0);
    free(cfg);
    assert_int_equal(registry_last_outcome(reg, pid, &e), 0);
    assert_int_equal(e.outcome, REG_OUT_DELIVERED);
    const char *fmt = "{\"deviceId\":-1,\"duration\":0,\"id\":\"%llu\",\"kind\":\"ConfigAck\",\"outcome\":\"%s\","
                      "\"pid\":%d,\"rank\":2,\"reason\":\"%s\",\"state\":\"Idle\",\"timestamp\":1}";
    /* another process speaking for 4321, an unknown outcome, an unknown id: all ignored */
    snprintf(msg, sizeof(msg), fmt, (unsigned long long)e.id, "applied", pid, "");
    assert_int_equal(data_handle_from(&dr, msg, strlen(msg), 1, 999), 0);
    snprintf(msg, sizeof(msg), fmt, (unsigned long long)e.id, "maybe", pid, "");
    data_handle_from(&dr, msg, strlen(msg), 1, pid);
    snprintf(msg, sizeof(msg), fmt, (unsigned long long)e.id + 1, "applied", pid, "");
    data_handle_from(&dr, msg, strlen(msg), 1, pid);
    assert_int_equal(dr.bad_acks, 3);
    assert_int_equal(registry_last_outcome(reg, pid, &e), 0);
    assert_int_equal(e.outcome, REG_OUT_DELIVERED);
    /* the real one */
    snprintf(msg, sizeof(msg), fmt, (unsigned long long)e.id, "rejected", pid, "Invalid value for DURATION");
    assert_int_equal(data_handle_from(&dr, msg, strlen(msg), 1, pid), 0);
    assert_int_equal(registry_last_outcome(reg, pid, &e), 0);
    assert_int_equal(e.outcome, REG_OUT_REJECTED);
    assert_int_equal(e.rank, 2);
    assert_string_equal(e.reason, "Invalid value for DURATION");
    assert_string_equal(e.state, "Idle");
    assert_int_equal(dr.bad_acks, 3);
    data_router_fini(&dr);
    registry_destroy(reg);
}

int main(void)
{
    log_set_level(LOG_LVL_FATAL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_marker_and_opstats),
        cmocka_unit_test(test_logger_line),
        cmocka_unit_test(test_logger_large_record),
        cmocka_unit_test(test_config_ack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
