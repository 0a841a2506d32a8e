/* Unit tests of the TensorBoard logger and its CRC32C: known CRC vectors, the exact bytes of
 * the version and scalar events, then a real logger writing into a temp directory whose files
 * are walked back record by record (framing CRCs checked) for tags, steps and values; plus the
 * PluginStats records data_sink.c makes for the loggers. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../logcap.h"
#include "daemon/ipc/data_sink.h"
#include "daemon/sinks/crc32c.h"
#include "daemon/sinks/json_logger.h"
#include "daemon/sinks/tb_logger.h"

static void test_crc32c(void **state)
{
    uint8_t zeros[32] = { 0 }, ones[32];
    (void)state;
    memset(ones, 0xff, sizeof(ones));
    /* RFC 3720 B.4 test vectors */
    assert_int_equal(crc32c("123456789", 9), 0xE3069283u);
    assert_int_equal(crc32c(zeros, 32), 0x8A9136AAu);
    assert_int_equal(crc32c(ones, 32), 0x62A8AB43u);
    assert_int_equal(crc32c("", 0), 0);
    uint32_t c = crc32c("123456789", 9);
    assert_int_equal(crc32c_masked("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

static void test_encoders(void **state)
{
    uint8_t b[128];
    (void)state;
    long n = tb_encode_version(b, sizeof(b), 1.0);
    static const uint8_t ver[] = { 0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x1a, 13, 'b', 'r', 'a', 'i',
                                   'n', '.', 'E', 'v', 'e', 'n', 't', ':', '2' };
    assert_int_equal(n, sizeof(ver));
    assert_memory_equal(b, ver, sizeof(ver));
    n = tb_encode_scalar(b, sizeof(b), 2.0, 300, "Kernel", 1.5f);
    static const uint8_t sc[] = { 0x09, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x10, 0xac, 0x02, 0x2a, 15, 0x0a, 13,
                                  0x0a, 6, 'K', 'e', 'r', 'n', 'e', 'l', 0x15, 0, 0, 0xc0, 0x3f };
    assert_int_equal(n, sizeof(sc));
    assert_memory_equal(b, sc, sizeof(sc));
    assert_int_equal(tb_encode_scalar(b, 10, 2.0, 1, "Kernel", 1.0f), -ENOSPC);
    uint8_t fr[64];
    n = tb_frame(fr, sizeof(fr), (const uint8_t *)"abc", 3);
    assert_int_equal(n, 8 + 4 + 3 + 4);
    assert_int_equal(fr[0], 3);
    uint32_t lc, dc;
    memcpy(&lc, fr + 8, 4);
    memcpy(&dc, fr + 15, 4);
    assert_int_equal(lc, crc32c_masked(fr, 8));
    assert_int_equal(dc, crc32c_masked("abc", 3));
}

/* ---- reading a file back ---- */

struct ev {
    double wall;
    int64_t step;
    char tag[256];
    float value;
    char version[32];
};

static uint64_t varint(const uint8_t **p)
{
    uint64_t v = 0;
    for (int s = 0;; s += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80))
            return v;
    }
}

/* Just enough of the protobuf wire format for what tb_logger writes. */
static void decode(const uint8_t *p, const uint8_t *end, struct ev *e, int depth)
{
    while (p < end) {
        uint64_t key = varint(&p);
        int field = (int)(key >> 3), wt = (int)(key & 7);
        if (wt == 1) {
            if (depth == 0 && field == 1)
                memcpy(&e->wall, p, 8);
            p += 8;
        } else if (wt == 5) {
            memcpy(&e->value, p, 4);
            p += 4;
        } else if (wt == 0) {
            uint64_t v = varint(&p);
            if (depth == 0 && field == 2)
                e->step = (int64_t)v;
        } else {
            uint64_t len = varint(&p);
            if (depth == 0 && field == 3)
                snprintf(e->version, sizeof(e->version), "%.*s", (int)len, (const char *)p);
            else if (depth == 2 && field == 1)
                snprintf(e->tag, sizeof(e->tag), "%.*s", (int)len, (const char *)p);
            else
                decode(p, p + len, e, depth + 1);
            p += len;
        }
    }
}

static size_t read_events(const char *path, struct ev *evs, size_t cap)
{
    static uint8_t buf[1 << 20];
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    assert_true(n > 0);
    size_t off = 0, k = 0;
    while (off < (size_t)n) {
        uint64_t len = 0;
        uint32_t lc, dc;
        assert_true(off + 12 <= (size_t)n);
        for (int i = 0; i < 8; i++)
            len |= (uint64_t)buf[off + i] << (8 * i);
        memcpy(&lc, buf + off + 8, 4);
        assert_int_equal(lc, crc32c_masked(buf + off, 8));
        assert_true(off + 12 + len + 4 <= (size_t)n);
        memcpy(&dc, buf + off + 12 + len, 4);
        assert_int_equal(dc, crc32c_masked(buf + off + 12, len));
        assert_true(k < cap);
        memset(&evs[k], 0, sizeof(evs[k]));
        evs[k].step = -1;
        decode(buf + off + 12, buf + off + 12 + len, &evs[k], 0);
        k++;
        off += 12 + len + 4;
    }
    return k;
}

struct tmpdir {
    char path[64];
};

static void rm_rf(const char *p)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
    assert_int_equal(system(cmd), 0);
}

static int send(struct data_router *dr, const char *json, uint64_t now_ns)
{
    return data_handle(dr, json, strlen(json), now_ns);
}

static void test_logger_files(void **state)
{
    char dir[64], sub[128], path[256], err[512];
    struct sink s;
    struct data_router dr;
    struct ev evs[64];
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/tbtestXXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(sub, sizeof(sub), "%s/a/b", dir); /* created with its parents */
    struct tb_cfg cfg = { sub, true };
    assert_int_equal(tb_logger_create(&cfg, &s, err, sizeof(err)), 0);
    data_router_init(&dr);
    assert_int_equal(data_router_add(&dr, s), 0);
    char names[64];
    data_router_names(&dr, names, sizeof(names));
    assert_string_equal(names, "tensorboard");
    send(&dr, "{\"kind\":\"Kernel\",\"duration\":100,\"timestamp\":1,\"deviceId\":0}", 1000000000ull);
    send(&dr, "{\"kind\":\"Kernel\",\"duration\":250,\"timestamp\":2,\"deviceId\":\"0\"}", 2000000000ull);
    send(&dr, "{\"kind\":\"Communication\",\"duration\":7,\"timestamp\":2,\"deviceId\":0}", 2000000000ull);
    send(&dr, "{\"kind\":\"Marker\",\"domain\":\"fwd\",\"duration\":9,\"timestamp\":3,\"deviceId\":0}", 3000000000ull);
    send(&dr, "{\"kind\":\"Marker\",\"domain\":\"bwd\",\"duration\":11,\"timestamp\":3,\"deviceId\":0}", 3000000000ull);
    send(&dr, "{\"kind\":\"RuntimeAPI\",\"duration\":5,\"timestamp\":3,\"deviceId\":-1}", 3000000000ull);
    send(&dr, "{\"kind\":\"OpStats\",\"activity\":\"Kernel\",\"duration\":0,\"timestamp\":4,\"deviceId\":0,"
              "\"ops\":[{\"name\":\"matmul\",\"count\":3,\"total\":300,\"avg\":100,\"min\":90,\"max\":110}]}",
         4000000000ull);
    send(&dr, "{\"kind\":\"PluginInfo\",\"duration\":0,\"timestamp\":4,\"deviceId\":0,\"pid\":5,"
              "\"backend\":\"mspti\",\"library\":\"\"}", 4000000000ull);
    /* a device string that would escape the directory is refused */
    send(&dr, "{\"kind\":\"Kernel\",\"duration\":1,\"timestamp\":1,\"deviceId\":\"../x\"}", 1);
    struct tb_counters c;
    tb_logger_counters(&dr.sinks[0], &c);
    assert_int_equal(c.events, 9);
    assert_int_equal(c.dropped, 1);
    /* host metrics (device NULL): one tag per key */
    struct sink_kv kv[2] = { { .key = "uptime", .type = SINK_UINT, .u = 42 },
                             { .key = "cpu_util", .type = SINK_DOUBLE, .d = 12.5 } };
    struct sink_record hr = { 5000000000ull, NULL, kv, 2, SINK_NO_PID, SINK_NO_RANK, SINK_NO_JOB, NULL, NULL, NULL };
    data_router_write(&dr, &hr);
    data_router_fini(&dr);

    snprintf(path, sizeof(path), "%s/device_0/tfevents.pb", sub);
    size_t n = read_events(path, evs, 64);
    assert_int_equal(n, 1 + 2 + 1 + 2 + 3);
    assert_string_equal(evs[0].version, "brain.Event:2");
    assert_true(evs[0].wall == 1.0);
    assert_string_equal(evs[1].tag, "Kernel");
    assert_int_equal(evs[1].step, 0);
    assert_true(evs[1].value == 100.0f);
    assert_true(evs[1].wall == 1.0);
    assert_string_equal(evs[2].tag, "Kernel");
    assert_int_equal(evs[2].step, 1);
    assert_true(evs[2].value == 250.0f);
    assert_string_equal(evs[3].tag, "Communication");
    assert_int_equal(evs[3].step, 0);
    /* marker domains share one step counter */
    assert_string_equal(evs[4].tag, "Marker/fwd");
    assert_int_equal(evs[4].step, 0);
    assert_string_equal(evs[5].tag, "Marker/bwd");
    assert_int_equal(evs[5].step, 1);
    assert_string_equal(evs[6].tag, "ops/Kernel/matmul/total_ns");
    assert_true(evs[6].value == 300.0f);
    assert_string_equal(evs[7].tag, "ops/Kernel/matmul/count");
    assert_true(evs[7].value == 3.0f);
    assert_string_equal(evs[8].tag, "ops/Kernel/matmul/avg_ns");
    assert_int_equal(evs[8].step, 0);

    snprintf(path, sizeof(path), "%s/device_host/tfevents.pb", sub);
    n = read_events(path, evs, 64);
    assert_int_equal(n, 2);
    assert_string_equal(evs[1].tag, "RuntimeAPI");
    snprintf(path, sizeof(path), "%s/host_metrics/tfevents.pb", sub);
    n = read_events(path, evs, 64);
    assert_int_equal(n, 3);
    assert_string_equal(evs[1].tag, "uptime");
    assert_true(evs[1].value == 42.0f);
    assert_string_equal(evs[2].tag, "cpu_util");
    assert_true(evs[2].value == 12.5f);

    /* a second run appends: no second version record, steps restart at 0 */
    cfg.op_stats = false;
    assert_int_equal(tb_logger_create(&cfg, &s, err, sizeof(err)), 0);
    data_router_init(&dr);
    data_router_add(&dr, s);
    send(&dr, "{\"kind\":\"Kernel\",\"duration\":1,\"timestamp\":1,\"deviceId\":0}", 6000000000ull);
    send(&dr, "{\"kind\":\"OpStats\",\"activity\":\"Kernel\",\"duration\":0,\"timestamp\":4,\"deviceId\":0,"
              "\"ops\":[{\"name\":\"matmul\",\"count\":3,\"total\":300,\"avg\":100}]}", 6000000000ull);
    data_router_fini(&dr);
    snprintf(path, sizeof(path), "%s/device_0/tfevents.pb", sub);
    n = read_events(path, evs, 64);
    assert_int_equal(n, 10); /* op stats off: only the Kernel event was added */
    assert_string_equal(evs[9].tag, "Kernel");
    assert_int_equal(evs[9].step, 0);
    assert_string_equal(evs[9].version, "");
    rm_rf(dir);
}

static void test_logger_bad_dir(void **state)
{
    char dir[64], file[128], sub[160], err[512];
    struct sink s;
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/tbtestXXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(file, sizeof(file), "%s/plain", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    struct tb_cfg cfg = { file, false };
    assert_int_equal(tb_logger_create(&cfg, &s, err, sizeof(err)), -ENOTDIR);
    snprintf(sub, sizeof(sub), "%s/plain/sub", dir);
    cfg.dir = sub;
    assert_int_equal(tb_logger_create(&cfg, &s, err, sizeof(err)), -ENOTDIR);
    assert_non_null(strstr(err, "Unable to record logs in the target folder"));
    assert_non_null(strstr(err, sub));
    rm_rf(dir);
}

/* PluginStats: the counters become a record of their own, with the sender's pid. */
struct capture {
    char line[2048];
    int32_t pid;
    int64_t job;
    int n;
};

static int cap_write(void *self, const struct sink_record *rec)
{
    struct capture *c = self;
    char line[4096];
    long n = json_logger_format(rec, line, sizeof(line));
    assert_true(n > 0);
    snprintf(c->line, sizeof(c->line), "%s", strstr(line, " data = ") + 8);
    c->pid = rec->pid;
    c->job = rec->job;
    c->n++;
    return 0;
}

static const struct sink_ops cap_ops = { "capture", cap_write, NULL, NULL };

static void test_plugin_stats_record(void **state)
{
    struct capture c = { .n = 0 };
    struct data_router dr;
    (void)state;
    data_router_init(&dr);
    data_router_add(&dr, (struct sink){ &cap_ops, &c });
    data_router_add(&dr, json_logger_sink());
    char names[64];
    data_router_names(&dr, names, sizeof(names));
    assert_string_equal(names, "capture,json");
    const char *m = "{\"deviceId\":-1,\"duration\":1234,\"kind\":\"PluginStats\",\"timestamp\":9,\"pid\":77,"
                    "\"stats\":{\"before_start\":1,\"bytes_written\":2,\"consumed\":3,\"cpu_ns\":1234,"
                    "\"dropped_declined\":4,\"dropped_offline\":5,\"dropped_queue\":6,\"dropped_write\":7,"
                    "\"filtered\":8,\"kept\":9,\"written\":10}}";
    assert_int_equal(data_handle(&dr, m, strlen(m), 0), 1);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.pid, 77);
    assert_int_equal(c.job, SINK_NO_JOB); /* no status table: job unknown */
    /* with the pid's status report known, its records carry that job */
    struct status_table *st = NULL;
    assert_int_equal(status_create(&st), 0);
    struct ipc_status rep = { .pid = 77, .job_id = 5, .status = 1, .current_step = -1,
                              .start_step = -1, .stop_step = -1 };
    status_update(st, STATUS_MONITOR, &rep, 1);
    dr.st = st;
    assert_int_equal(data_handle(&dr, m, strlen(m), 0), 1);
    assert_int_equal(c.job, 5);
    dr.st = NULL;
    status_destroy(st);
    assert_string_equal(c.line,
                        "{\"before_start\":1,\"bytes_written\":2,\"consumed\":3,\"cpu_ns\":1234,\"deviceId\":"
                        "\"host\",\"dropped_declined\":4,\"dropped_offline\":5,\"dropped_queue\":6,"
                        "\"dropped_write\":7,\"duration\":1234,\"filtered\":8,\"kept\":9,\"kind\":"
                        "\"PluginStats\",\"timestamp\":9,\"written\":10}");
    /* a malformed stats object: the message is still an ordinary record, without counters */
    m = "{\"deviceId\":-1,\"duration\":1,\"kind\":\"PluginStats\",\"timestamp\":9,\"pid\":77,"
        "\"stats\":{\"kept\":-1}}";
    assert_int_equal(data_handle(&dr, m, strlen(m), 0), 1);
    assert_string_equal(c.line, "{\"deviceId\":\"host\",\"duration\":1,\"kind\":\"PluginStats\",\"timestamp\":9}");
    assert_int_equal(c.pid, 0);
    data_router_fini(&dr);
}

/* A write that fails part-way (file size limit here, a full disk in production) is cut back
 * and counted: the file stays readable and later records land after the last whole one. */
static void test_logger_short_write(void **state)
{
    char dir[64], path[128], err[512];
    struct sink s;
    struct data_router dr;
    struct ev evs[16];
    struct rlimit old, lim;
    struct stat st;
    const char *m = "{\"kind\":\"Kernel\",\"duration\":7,\"timestamp\":1,\"deviceId\":0}";
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/tbtestXXXXXX");
    assert_non_null(mkdtemp(dir));
    struct tb_cfg cfg = { dir, false };
    assert_int_equal(tb_logger_create(&cfg, &s, err, sizeof(err)), 0);
    data_router_init(&dr);
    data_router_add(&dr, s);
    send(&dr, m, 1000000000ull);
    snprintf(path, sizeof(path), "%s/device_0/tfevents.pb", dir);
    assert_int_equal(stat(path, &st), 0);
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = (rlim_t)st.st_size + 60; /* room for one more record of ~45 bytes, not two */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    send(&dr, m, 2000000000ull);
    send(&dr, m, 3000000000ull);
    send(&dr, m, 4000000000ull);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_DFL);
    struct tb_counters c;
    tb_logger_counters(&dr.sinks[0], &c);
    assert_int_equal(c.events, 2);
    assert_int_equal(c.dropped, 2);
    send(&dr, m, 5000000000ull);
    data_router_fini(&dr);
    size_t n = read_events(path, evs, 16);
    assert_int_equal(n, 4); /* version, two before the limit, one after */
    assert_true(evs[3].wall == 5.0);
    /* the steps of the dropped records were taken: gaps show the loss in TensorBoard */
    assert_int_equal(evs[2].step, 1);
    assert_int_equal(evs[3].step, 4);
    rm_rf(dir);
}

/* The JSON logger's data line is written whole even past log_write's 8 KiB cut. */
static void test_json_long_line(void **state)
{
    enum { N = 1200 };
    static struct sink_kv kv[N];
    static char keys[N][32];
    (void)state;
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "cpu_core_util.cpu%04d", i);
        kv[i] = (struct sink_kv){ .key = keys[i], .type = SINK_DOUBLE, .d = 12.5 };
    }
    struct sink_record rec = { 0, NULL, kv, N, SINK_NO_PID, SINK_NO_RANK, SINK_NO_JOB, NULL, NULL, NULL };
    struct sink js = json_logger_sink();
    assert_int_equal(logcap_open(), 0);
    assert_int_equal(js.ops->write(js.self, &rec), 0);
    const char *text = logcap_text();
    assert_true(strlen(text) > 30000);
    assert_non_null(strstr(text, "Logging : 1200 values\n"));
    assert_non_null(strstr(text, "\"cpu_core_util.cpu1199\":\"12.500\"}\n"));
    logcap_close();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c),         cmocka_unit_test(test_encoders),
        cmocka_unit_test(test_logger_files),   cmocka_unit_test(test_logger_bad_dir),
        cmocka_unit_test(test_plugin_stats_record), cmocka_unit_test(test_json_long_line),
        cmocka_unit_test(test_logger_short_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
