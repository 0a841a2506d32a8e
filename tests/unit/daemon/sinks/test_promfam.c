/* Unit tests of promfam: the record -> sample mapping through the real data_handle path,
 * the exposition text (HELP/TYPE, sorting, escaping, values), OpStats report removal, the
 * op-series cap and staleness. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "common/log.h"
#include "daemon/ipc/data_sink.h"
#include "daemon/sinks/promfam.h"

static char *render(struct promfam_store *st, uint64_t now_ms)
{
    char *t = NULL;
    size_t n = 0;
    assert_int_equal(promfam_store_render(st, now_ms, &t, &n), 0);
    assert_int_equal(strlen(t), n);
    return t;
}

/* the lines of text that start with prefix, concatenated */
static char *grep(const char *text, const char *prefix)
{
    static char out[65536];
    size_t o = 0;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) + 1 : strlen(p);
        if (strncmp(p, prefix, strlen(prefix)) == 0 && o + n < sizeof(out)) {
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
    }
    out[o] = '\0';
    return out;
}

static void feed(struct data_router *dr, const char *json)
{
    assert_true(data_handle(dr, json, strlen(json), 1000000000ull) >= 0);
}

static void test_host_record(void **state)
{
    struct promfam_store *st;
    (void)state;
    assert_int_equal(promfam_store_create("node1", 0, &st), 0);
    struct sink_kv kv[5] = {
        { .key = "cpu_util", .type = SINK_DOUBLE, .d = 28.658 },
        { .key = "rx_bytes.eth0", .type = SINK_UINT, .u = 123456 },
        { .key = "rx_bytes.lo", .type = SINK_UINT, .u = 7 },
        { .key = "disk_util.sda", .type = SINK_DOUBLE, .d = 0.5 },
        { .key = "uptime", .type = SINK_UINT, .u = 12345 },
    };
    struct sink_record rec = { 5, NULL, kv, 5, SINK_NO_PID, SINK_NO_RANK, SINK_NO_JOB, NULL, NULL, NULL };
    struct sink s = promfam_store_sink(st, "prometheus");
    assert_int_equal(s.ops->write(s.self, &rec), 0);
    char *t = render(st, 10);
    assert_string_equal(t,
        "# HELP cpu_util CPU utilization percent over the last interval\n"
        "# TYPE cpu_util gauge\n"
        "cpu_util{host_name=\"node1\"} 28.658000000000001\n"
        "# HELP disk_util disk busy percent over the last interval\n"
        "# TYPE disk_util gauge\n"
        "disk_util{disk=\"sda\",host_name=\"node1\"} 0.5\n"
        "# HELP rx_bytes bytes received by the interface over the last interval\n"
        "# TYPE rx_bytes gauge\n"
        "rx_bytes{host_name=\"node1\",net=\"eth0\"} 123456\n"
        "rx_bytes{host_name=\"node1\",net=\"lo\"} 7\n"
        "# HELP uptime seconds since the host booted\n"
        "# TYPE uptime gauge\n"
        "uptime{host_name=\"node1\"} 12345\n");
    free(t);
    promfam_store_destroy(st);
}

static void test_npu_families(void **state)
{
    struct promfam_store *st;
    struct data_router dr;
    (void)state;
    assert_int_equal(promfam_store_create("h", 0, &st), 0);
    data_router_init(&dr);
    data_router_add(&dr, promfam_store_sink(st, "prometheus"));
    feed(&dr, "{\"deviceId\":3,\"duration\":81234567,\"kind\":\"Kernel\",\"timestamp\":5}");
    feed(&dr, "{\"deviceId\":-1,\"duration\":99,\"kind\":\"API\",\"timestamp\":5}");
    feed(&dr, "{\"deviceId\":0,\"domain\":\"\",\"duration\":77,\"kind\":\"Marker\",\"name\":\"step 1\",\"timestamp\":5}");
    feed(&dr, "{\"deviceId\":0,\"domain\":\"train\",\"duration\":78,\"kind\":\"Marker\",\"name\":\"step 1\",\"timestamp\":5}");
    feed(&dr, "{\"deviceId\":0,\"duration\":1,\"kind\":\"PluginStats\",\"timestamp\":5,\"pid\":4,\"stats\":{}}");
    feed(&dr, "{\"deviceId\":0,\"duration\":1,\"kind\":\"Bogus\",\"timestamp\":5}");
    char *t = render(st, 1);
    assert_string_equal(grep(t, "npu_"),
        "npu_activity_duration_ns{device=\"3\",host_name=\"h\",kind=\"Kernel\"} 81234567\n"
        "npu_activity_duration_ns{device=\"host\",host_name=\"h\",kind=\"API\"} 99\n"
        "npu_marker_duration_ns{device=\"0\",domain=\"default\",host_name=\"h\"} 77\n"
        "npu_marker_duration_ns{device=\"0\",domain=\"train\",host_name=\"h\"} 78\n");
    free(t);
    data_router_fini(&dr);
    promfam_store_destroy(st);
}

static void test_opstats_report_removal(void **state)
{
    struct promfam_store *st;
    struct data_router dr;
    (void)state;
    assert_int_equal(promfam_store_create("h", 0, &st), 0);
    data_router_init(&dr);
    data_router_add(&dr, promfam_store_sink(st, "prometheus"));
    /* tick 100: two ops in two datagrams of the same report */
    feed(&dr, "{\"activity\":\"Kernel\",\"deviceId\":0,\"duration\":30,\"interval_ns\":1,\"kind\":\"OpStats\","
              "\"ops\":[{\"avg\":10,\"count\":3,\"max\":12,\"min\":8,\"name\":\"MatMul\",\"total\":30}],\"timestamp\":100}");
    feed(&dr, "{\"activity\":\"Kernel\",\"deviceId\":0,\"duration\":5,\"interval_ns\":1,\"kind\":\"OpStats\","
              "\"ops\":[{\"avg\":5,\"count\":1,\"max\":5,\"min\":5,\"name\":\"Add\",\"total\":5}],\"timestamp\":100}");
    /* another (device, kind) group is independent */
    feed(&dr, "{\"activity\":\"MemCpy\",\"deviceId\":1,\"duration\":4,\"interval_ns\":1,\"kind\":\"OpStats\","
              "\"ops\":[{\"avg\":4,\"bytes\":4096,\"count\":1,\"max\":4,\"min\":4,\"name\":\"HTOD\",\"total\":4}],\"timestamp\":100}");
    char *t = render(st, 1);
    assert_string_equal(grep(t, "npu_op_total_ns{"),
        "npu_op_total_ns{device=\"0\",host_name=\"h\",kind=\"Kernel\",name=\"Add\"} 5\n"
        "npu_op_total_ns{device=\"0\",host_name=\"h\",kind=\"Kernel\",name=\"MatMul\"} 30\n"
        "npu_op_total_ns{device=\"1\",host_name=\"h\",kind=\"MemCpy\",name=\"HTOD\"} 4\n");
    assert_string_equal(grep(t, "npu_op_count{"),
        "npu_op_count{device=\"0\",host_name=\"h\",kind=\"Kernel\",name=\"Add\"} 1\n"
        "npu_op_count{device=\"0\",host_name=\"h\",kind=\"Kernel\",name=\"MatMul\"} 3\n"
        "npu_op_count{device=\"1\",host_name=\"h\",kind=\"MemCpy\",name=\"HTOD\"} 1\n");
    assert_string_equal(grep(t, "npu_op_bytes{"),
        "npu_op_bytes{device=\"1\",host_name=\"h\",kind=\"MemCpy\",name=\"HTOD\"} 4096\n");
    assert_non_null(strstr(t, "npu_op_min_ns{device=\"0\",host_name=\"h\",kind=\"Kernel\",name=\"MatMul\"} 8\n"));
    assert_non_null(strstr(t, "npu_op_max_ns{device=\"0\",host_name=\"h\",kind=\"Kernel\",name=\"MatMul\"} 12\n"));
    assert_non_null(strstr(t, "npu_op_avg_ns{device=\"0\",host_name=\"h\",kind=\"Kernel\",name=\"MatMul\"} 10\n"));
    free(t);
    /* tick 200: only MatMul -> Add (all five families) is removed; MemCpy stays */
    feed(&dr, "{\"activity\":\"Kernel\",\"deviceId\":0,\"duration\":40,\"interval_ns\":1,\"kind\":\"OpStats\","
              "\"ops\":[{\"avg\":20,\"count\":2,\"max\":21,\"min\":19,\"name\":\"MatMul\",\"total\":40}],\"timestamp\":200}");
    /* a late datagram of tick 100 changes nothing */
    feed(&dr, "{\"activity\":\"Kernel\",\"deviceId\":0,\"duration\":5,\"interval_ns\":1,\"kind\":\"OpStats\","
              "\"ops\":[{\"avg\":5,\"count\":1,\"max\":5,\"min\":5,\"name\":\"Late\",\"total\":5}],\"timestamp\":100}");
    t = render(st, 2);
    assert_string_equal(grep(t, "npu_op_total_ns{"),
        "npu_op_total_ns{device=\"0\",host_name=\"h\",kind=\"Kernel\",name=\"MatMul\"} 40\n"
        "npu_op_total_ns{device=\"1\",host_name=\"h\",kind=\"MemCpy\",name=\"HTOD\"} 4\n");
    assert_null(strstr(t, "name=\"Add\""));
    assert_null(strstr(t, "name=\"Late\""));
    free(t);
    struct promfam_stats s;
    promfam_store_stats(st, &s);
    assert_int_equal(s.op_series, 2);
    assert_int_equal(s.removed_series, 5);
    data_router_fini(&dr);
    promfam_store_destroy(st);
}

static void test_plugin_stats(void **state)
{
    struct promfam_store *st;
    struct data_router dr;
    (void)state;
    assert_int_equal(promfam_store_create("h", 0, &st), 0);
    data_router_init(&dr);
    data_router_add(&dr, promfam_store_sink(st, "prometheus"));
    feed(&dr, "{\"deviceId\":0,\"duration\":1500,\"kind\":\"PluginStats\",\"pid\":4242,\"timestamp\":5,"
              "\"stats\":{\"before_start\":0,\"bytes_written\":10,\"consumed\":120,\"cpu_ns\":1500,"
              "\"dropped_declined\":0,\"dropped_offline\":2,\"dropped_queue\":1,\"dropped_write\":0,"
              "\"filtered\":20,\"kept\":100,\"written\":99}}");
    char *t = render(st, 1);
    assert_string_equal(grep(t, "msmonitor_plugin_kept{"), "msmonitor_plugin_kept{device=\"0\",host_name=\"h\",pid=\"4242\"} 100\n");
    assert_string_equal(grep(t, "msmonitor_plugin_filtered{"),
                        "msmonitor_plugin_filtered{device=\"0\",host_name=\"h\",pid=\"4242\"} 20\n");
    assert_string_equal(grep(t, "msmonitor_plugin_cpu_ns{"), "msmonitor_plugin_cpu_ns{device=\"0\",host_name=\"h\",pid=\"4242\"} 1500\n");
    assert_non_null(strstr(t, "# HELP msmonitor_plugin_dropped_queue records dropped from a full queue (plugin counter)\n"));
    assert_null(strstr(t, "msmonitor_plugin_duration"));
    assert_null(strstr(t, "msmonitor_plugin_timestamp"));
    free(t);
    data_router_fini(&dr);
    promfam_store_destroy(st);
}

static void test_escaping_and_names(void **state)
{
    struct promfam_store *st;
    struct data_router dr;
    (void)state;
    assert_int_equal(promfam_store_create("h\"x", 0, &st), 0);
    data_router_init(&dr);
    data_router_add(&dr, promfam_store_sink(st, "prometheus"));
    /* quote, backslash, newline; an invalid UTF-8 byte (\xff) becomes '?' */
    feed(&dr, "{\"activity\":\"Kernel\",\"deviceId\":0,\"duration\":1,\"kind\":\"OpStats\","
              "\"ops\":[{\"avg\":1,\"count\":1,\"max\":1,\"min\":1,\"name\":\"a\\\"b\\\\c\\nd\",\"total\":1}],\"timestamp\":1}");
    char *t = render(st, 1);
    assert_string_equal(grep(t, "npu_op_total_ns{"),
        "npu_op_total_ns{device=\"0\",host_name=\"h\\\"x\",kind=\"Kernel\",name=\"a\\\"b\\\\c\\nd\"} 1\n");
    free(t);
    data_router_fini(&dr);
    promfam_store_destroy(st);

    char out[64];
    assert_int_equal(promfam_sanitize_name("cpu-util/x", 10, out, sizeof(out)), 10);
    assert_string_equal(out, "cpu_util_x");
    assert_int_equal(promfam_sanitize_name("9lives", 6, out, sizeof(out)), 7);
    assert_string_equal(out, "_9lives");
    assert_int_equal(promfam_sanitize_name("", 0, out, sizeof(out)), -EINVAL);

    struct sink_kv kv[2] = { { .key = "x.y", .type = SINK_STR, .s = "s", .slen = 1 },
                             { .key = "weird\xff", .type = SINK_INT, .i = -3 } };
    struct sink_record rec = { 5, "7", kv, 2, 12, 3, 44, NULL, NULL, NULL };
    assert_int_equal(promfam_store_create("h", 0, &st), 0);
    assert_int_equal(promfam_store_write(st, &rec, 1), 0);
    t = render(st, 1);
    /* strings are not samples; job/pid/rank become labels when known */
    assert_string_equal(grep(t, "weird"), "weird_{device=\"7\",host_name=\"h\",job=\"44\",pid=\"12\",rank=\"3\"} -3\n");
    free(t);
    promfam_store_destroy(st);
}

static void test_long_label_cut(void **state)
{
    struct promfam_store *st;
    char name[2001];
    (void)state;
    /* 'a' then 666 three-byte characters (1999 bytes): cut at 1024 on a character boundary */
    name[0] = 'a';
    for (int i = 0; i < 666; i++)
        memcpy(name + 1 + 3 * i, "\xe2\x82\xac", 3);
    name[1999] = '\0';
    struct sink_kv kv[5] = {
        { .key = "activity", .type = SINK_STR, .s = "Kernel", .slen = 6 },
        { .key = "kind", .type = SINK_STR, .s = "OpStats", .slen = 7 },
        { .key = "name", .type = SINK_STR, .s = name, .slen = 1999 },
        { .key = "timestamp", .type = SINK_UINT, .u = 1 },
        { .key = "total", .type = SINK_UINT, .u = 7 },
    };
    struct sink_record rec = { 1, "0", kv, 5, SINK_NO_PID, SINK_NO_RANK, SINK_NO_JOB, NULL, NULL, NULL };
    assert_int_equal(promfam_store_create("h", 0, &st), 0);
    assert_int_equal(promfam_store_write(st, &rec, 1), 0);
    char *t = render(st, 1);
    const char *p = strstr(t, "name=\"a");
    assert_non_null(p);
    const char *q = strchr(p + 7, '"');
    assert_int_equal(q - (p + 6), 1 + 3 * 341); /* 1024 bytes max, whole characters: 1 + 3 x 341 */
    free(t);
    promfam_store_destroy(st);
}

static void test_values(void **state)
{
    char b[64];
    (void)state;
    /* the HELP table is searched by bisection: every listed family is found */
    static const char *const listed[] = { "cpu_core_util", "cpu_guest", "cpu_util", "disk_io_ms", "load_15m",
                                          "mem_used_pct", "msmonitor_plugin_kept", "msmonitor_remote_write_up",
                                          "npu_op_total_ns", "procs_total", "tx_packets", "uptime" };
    for (size_t i = 0; i < sizeof(listed) / sizeof(listed[0]); i++)
        assert_null(strstr(promfam_help(listed[i], b, sizeof(b)), "latest value of"));
    assert_non_null(strstr(promfam_help("zz_unknown", b, sizeof(b)), "latest value of zz_unknown reported"));
    promfam_format_value(NAN, b, sizeof(b));
    assert_string_equal(b, "NaN");
    promfam_format_value(INFINITY, b, sizeof(b));
    assert_string_equal(b, "+Inf");
    promfam_format_value(-INFINITY, b, sizeof(b));
    assert_string_equal(b, "-Inf");
    promfam_format_value(1.5, b, sizeof(b));
    assert_string_equal(b, "1.5");
    promfam_format_value(-42, b, sizeof(b));
    assert_string_equal(b, "-42");
    promfam_format_value(0.1, b, sizeof(b));
    assert_string_equal(b, "0.10000000000000001");
    promfam_format_value(1e300, b, sizeof(b));
    assert_string_equal(b, "1.0000000000000001e+300");
    promfam_format_value(9007199254740993.0, b, sizeof(b));
    assert_string_equal(b, "9007199254740992");
}

static void test_op_cap(void **state)
{
    struct promfam_store *st;
    (void)state;
    assert_int_equal(promfam_store_create("h", 0, &st), 0);
    /* the hard cap alone: the per-process bounds (test_process_bound) out of its way */
    promfam_store_set_limits(st, 200000, 200000);
    for (int i = 0; i < PROMFAM_MAX_OP_SERIES + 5; i++) {
        char name[32];
        int n = snprintf(name, sizeof(name), "op%05d", i);
        struct sink_kv kv[5] = {
            { .key = "activity", .type = SINK_STR, .s = "Kernel", .slen = 6 },
            { .key = "count", .type = SINK_UINT, .u = 1 },
            { .key = "name", .type = SINK_STR, .s = name, .slen = (size_t)n },
            { .key = "timestamp", .type = SINK_UINT, .u = 9 },
            { .key = "total", .type = SINK_UINT, .u = (uint64_t)i },
        };
        struct sink_kv all[6] = { kv[0], kv[1], kv[2], { .key = "kind", .type = SINK_STR, .s = "OpStats", .slen = 7 },
                                  kv[3], kv[4] };
        struct sink_record rec = { 1, "0", all, 6, SINK_NO_PID, SINK_NO_RANK, SINK_NO_JOB, NULL, NULL, NULL };
        assert_int_equal(promfam_store_write(st, &rec, 1), 0);
    }
    struct promfam_stats s;
    promfam_store_stats(st, &s);
    assert_int_equal(s.op_series, PROMFAM_MAX_OP_SERIES);
    assert_int_equal(s.series, 2 * PROMFAM_MAX_OP_SERIES);   /* total + count per op */
    assert_int_equal(s.dropped_series, 5);
    char *t = render(st, 1);
    assert_null(strstr(t, "name=\"op10000\""));
    assert_non_null(strstr(t, "name=\"op09999\"} 9999\n"));
    free(t);
    promfam_store_publish(st, 1);
    t = render(st, 1);
    assert_non_null(strstr(t, "msmonitor_prometheus_dropped_series{host_name=\"h\"} 5\n"));
    free(t);
    promfam_store_destroy(st);
}

static void test_stale(void **state)
{
    struct promfam_store *st;
    (void)state;
    assert_int_equal(promfam_store_create("h", 1000, &st), 0);
    struct sink_kv kv[1] = { { .key = "load_1m", .type = SINK_DOUBLE, .d = 0.25 } };
    struct sink_record rec = { 1, NULL, kv, 1, SINK_NO_PID, SINK_NO_RANK, SINK_NO_JOB, NULL, NULL, NULL };
    assert_int_equal(promfam_store_write(st, &rec, 100), 0);
    char *t = render(st, 1100);
    assert_non_null(strstr(t, "load_1m{host_name=\"h\"} 0.25\n"));
    free(t);
    t = render(st, 1101);
    assert_string_equal(t, "");
    free(t);
    promfam_store_destroy(st);
}

/* One OpStats entry of a Marker report from pid: count 1, total = min = max = avg = dur. */
static void op_write(struct promfam_store *st, int32_t pid, uint64_t ts, const char *name, uint64_t dur,
                     uint64_t now_ms)
{
    struct sink_kv kv[] = {
        { .key = "activity", .type = SINK_STR, .s = "Marker", .slen = 6 },
        { .key = "avg", .type = SINK_UINT, .u = dur },
        { .key = "count", .type = SINK_UINT, .u = 1 },
        { .key = "domain", .type = SINK_STR, .s = "d", .slen = 1 },
        { .key = "kind", .type = SINK_STR, .s = "OpStats", .slen = 7 },
        { .key = "max", .type = SINK_UINT, .u = dur },
        { .key = "min", .type = SINK_UINT, .u = dur },
        { .key = "name", .type = SINK_STR, .s = name, .slen = strlen(name) },
        { .key = "timestamp", .type = SINK_UINT, .u = ts },
        { .key = "total", .type = SINK_UINT, .u = dur },
    };
    struct sink_record rec = { 1, "0", kv, sizeof(kv) / sizeof(kv[0]), pid, SINK_NO_RANK, SINK_NO_JOB, NULL, NULL, NULL };
    assert_int_equal(promfam_store_write(st, &rec, now_ms), 0);
}

static int count_lines(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

#define OTHER_OP(fam, pid) fam "{device=\"<other>\",domain=\"<other>\",host_name=\"h\",kind=\"<other>\"," \
                           "name=\"<other>\",pid=\"" pid "\"} "

static void test_process_bound(void **state)
{
    struct promfam_store *st;
    struct promfam_stats s;
    char name[16];
    (void)state;
    assert_int_equal(promfam_store_create("h", 0, &st), 0);
    promfam_store_set_limits(st, 10, 1000);   /* two ops of 5 families each */
    /* report 1: ops 0..4 of pid 7, durations 10..14: ops 0, 1 get series, 2..4 are folded */
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof(name), "m%d", i);
        op_write(st, 7, 1, name, 10 + (uint64_t)i, 1);
    }
    /* another process is not held back by pid 7's bound */
    op_write(st, 8, 1, "mine", 5, 1);
    char *t = render(st, 1);
    assert_int_equal(count_lines(t, "pid=\"7\"} "), 10 + 5);   /* own + one <other> per family */
    assert_non_null(strstr(t, "name=\"m1\",pid=\"7\"} 11\n"));
    assert_null(strstr(t, "name=\"m2\""));
    assert_non_null(strstr(t, OTHER_OP("npu_op_count", "7") "3\n"));
    assert_non_null(strstr(t, OTHER_OP("npu_op_total_ns", "7") "39\n"));   /* 12 + 13 + 14 */
    assert_non_null(strstr(t, OTHER_OP("npu_op_min_ns", "7") "12\n"));
    assert_non_null(strstr(t, OTHER_OP("npu_op_max_ns", "7") "14\n"));
    assert_non_null(strstr(t, OTHER_OP("npu_op_avg_ns", "7") "13\n"));
    assert_non_null(strstr(t, "npu_op_total_ns{device=\"0\",domain=\"d\",host_name=\"h\",kind=\"Marker\",name=\"mine\",pid=\"8\"} 5\n"));
    assert_null(strstr(t, "pid=\"8\"} 0"));
    free(t);
    promfam_store_stats(st, &s);
    assert_int_equal(s.folded_process, 3 * 5);
    assert_int_equal(s.folded_daemon, 0);
    assert_int_equal(s.processes_folded, 1);
    assert_int_equal(s.process_series, 10 + 5 + 5);   /* pid 7's own and <other>s, pid 8's */
    /* report 2 names m3..m6: the previous report's series no longer count, so m3 and m4 have
     * the places; m5, m6 are folded and <other> starts over for this report */
    for (int i = 3; i < 7; i++) {
        snprintf(name, sizeof(name), "m%d", i);
        op_write(st, 7, 2, name, 20 + (uint64_t)i, 2);
    }
    t = render(st, 2);
    assert_null(strstr(t, "name=\"m0\""));
    assert_non_null(strstr(t, "npu_op_count{device=\"0\",domain=\"d\",host_name=\"h\",kind=\"Marker\",name=\"m4\",pid=\"7\"} 1\n"));
    assert_null(strstr(t, "name=\"m5\""));
    assert_non_null(strstr(t, OTHER_OP("npu_op_count", "7") "2\n"));
    assert_non_null(strstr(t, OTHER_OP("npu_op_total_ns", "7") "51\n"));   /* 25 + 26 */
    free(t);
    promfam_store_stats(st, &s);
    assert_int_equal(s.folded_process, 5 * 5);
    assert_int_equal(s.process_series, 10 + 5 + 5);
    /* report 3 of pid 7 without overflow: its <other> series go with the older report */
    op_write(st, 7, 3, "m0", 1, 3);
    t = render(st, 3);
    assert_null(strstr(t, "<other>"));
    assert_int_equal(count_lines(t, "pid=\"7\"} "), 5);
    free(t);
    promfam_store_publish(st, 3);
    t = render(st, 3);
    assert_non_null(strstr(t, "msmonitor_prometheus_folded_samples{cap=\"process\",host_name=\"h\"} 25\n"));
    assert_non_null(strstr(t, "msmonitor_prometheus_folded_samples{cap=\"daemon\",host_name=\"h\"} 0\n"));
    free(t);
    promfam_store_destroy(st);
}

static void test_daemon_bound(void **state)
{
    struct promfam_store *st;
    struct promfam_stats s;
    char name[16];
    (void)state;
    assert_int_equal(promfam_store_create("h", 0, &st), 0);
    promfam_store_set_limits(st, 100, 15);
    for (int pid = 1; pid <= 2; pid++) {
        for (int i = 0; i < 3; i++) {
            snprintf(name, sizeof(name), "m%d", i);
            op_write(st, pid, 1, name, 1, 1);
        }
    }
    /* pid 1 takes 15 series; every op of pid 2 goes to the daemon's <other> */
    struct sink_kv kv[1] = { { .key = "load_1m", .type = SINK_DOUBLE, .d = 0.5 } };
    struct sink_record host = { 1, NULL, kv, 1, SINK_NO_PID, SINK_NO_RANK, SINK_NO_JOB, NULL, NULL, NULL };
    assert_int_equal(promfam_store_write(st, &host, 1), 0);   /* host metrics are not bounded */
    char *t = render(st, 1);
    assert_int_equal(count_lines(t, "pid=\"1\"} "), 15);
    assert_int_equal(count_lines(t, "pid=\"2\"} "), 0);
    assert_non_null(strstr(t, OTHER_OP("npu_op_count", "<other>") "3\n"));
    assert_non_null(strstr(t, "load_1m{host_name=\"h\"} 0.5\n"));
    free(t);
    promfam_store_stats(st, &s);
    assert_int_equal(s.folded_daemon, 3 * 5);
    assert_int_equal(s.folded_process, 0);
    promfam_store_destroy(st);
}

/* An exited process sends no newer report to remove its op series: they expire after the
 * store's staleness, or after three of the process's report periods when that is longer. */
static void test_op_series_stale(void **state)
{
    struct promfam_store *st;
    (void)state;
    assert_int_equal(promfam_store_create("h", 1000, &st), 0);
    op_write(st, 7, 1, "a", 1, 1000);
    op_write(st, 7, 2, "a", 1, 3000);   /* a report every 2 s: kept for 6 s */
    char *t = render(st, 8999);
    assert_non_null(strstr(t, "name=\"a\""));
    free(t);
    t = render(st, 9001);
    assert_string_equal(t, "");
    free(t);
    struct promfam_stats s;
    promfam_store_stats(st, &s);
    assert_int_equal(s.process_series, 0);
    promfam_store_destroy(st);
}

/* A render formats outside the store's lock (the render thread of prom_http): series removed
 * meanwhile by a sweep on the writing thread wait in the grave until the render is done. Run
 * under TSan and ASan (scripts/test.sh). */
struct render_loop {
    struct promfam_store *st;
    int renders;
    int bad;
};

static void *render_thread(void *arg)
{
    struct render_loop *r = arg;
    for (int i = 0; i < 200; i++) {
        char *t = NULL;
        size_t n = 0;
        if (promfam_store_render(r->st, 1, &t, &n) != 0 || strlen(t) != n)
            r->bad++;
        free(t);
        r->renders++;
    }
    return NULL;
}

static void noop_fn(void *arg, const struct promfam_sample *s)
{
    (void)arg;
    (void)s;
}

static void test_render_concurrent(void **state)
{
    struct promfam_store *st;
    pthread_t th;
    char name[16];
    (void)state;
    assert_int_equal(promfam_store_create("h", 0, &st), 0);
    promfam_store_set_limits(st, 50, 1000);
    struct render_loop r = { st, 0, 0 };
    assert_int_equal(pthread_create(&th, NULL, render_thread, &r), 0);
    /* reports with shifting names: every sweep removes the previous report's extra ones */
    for (uint64_t ts = 1; ts <= 300; ts++) {
        for (int i = 0; i < 20; i++) {
            snprintf(name, sizeof(name), "m%d", (int)((ts + (uint64_t)i) % 37));
            op_write(st, 7, ts, name, ts, 1);
        }
        (void)promfam_store_each(st, 1, noop_fn, NULL);
    }
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(r.bad, 0);
    assert_int_equal(r.renders, 200);
    struct promfam_stats s;
    promfam_store_stats(st, &s);
    assert_true(s.process_series <= 50 + 5);
    promfam_store_destroy(st);
}

struct each_ctx {
    int n;
    char first[256];
};

static void each_fn(void *arg, const struct promfam_sample *s)
{
    struct each_ctx *c = arg;
    if (c->n++ == 0) {
        int o = snprintf(c->first, sizeof(c->first), "%s", s->family);
        for (size_t i = 0; i < s->nlabels; i++)
            o += snprintf(c->first + o, sizeof(c->first) - (size_t)o, " %s=%s", s->labels[i].name, s->labels[i].value);
        snprintf(c->first + o, sizeof(c->first) - (size_t)o, " %g", s->value);
    }
}

static void test_each(void **state)
{
    struct promfam_store *st;
    struct each_ctx c = { 0, "" };
    (void)state;
    assert_int_equal(promfam_store_create("h", 0, &st), 0);
    struct sink_kv kv[1] = { { .key = "tx_bytes.eth1", .type = SINK_UINT, .u = 9 } };
    struct sink_record rec = { 1, NULL, kv, 1, SINK_NO_PID, SINK_NO_RANK, SINK_NO_JOB, NULL, NULL, NULL };
    assert_int_equal(promfam_store_write(st, &rec, 1), 0);
    assert_int_equal(promfam_store_each(st, 1, each_fn, &c), 1);
    assert_string_equal(c.first, "tx_bytes host_name=h net=eth1 9");
    promfam_store_destroy(st);
}

int main(void)
{
    log_set_level(LOG_LVL_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_record),
        cmocka_unit_test(test_npu_families),
        cmocka_unit_test(test_opstats_report_removal),
        cmocka_unit_test(test_plugin_stats),
        cmocka_unit_test(test_escaping_and_names),
        cmocka_unit_test(test_long_label_cut),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_op_cap),
        cmocka_unit_test(test_stale),
        cmocka_unit_test(test_each),
        cmocka_unit_test(test_process_bound),
        cmocka_unit_test(test_daemon_bound),
        cmocka_unit_test(test_op_series_stale),
        cmocka_unit_test(test_render_concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
