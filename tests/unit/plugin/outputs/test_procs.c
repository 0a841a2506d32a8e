/* test_procs: the metric processor's datagrams (sum lines,
 * marker ranges, OpStats exact statistics, 4096-byte packing, final interval at stop, kind
 * mask) through a capture send function, and the standalone processor's results. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"
#include "plugin/penv.h"
#include "plugin/pipeline/output.h"
#include "plugin/outputs/proc_memory.h"

/* ---- capture ---- */
struct cap {
    cJSON *msgs[20000];
    size_t n;
    size_t max_len;
    cJSON *stats; /* the last PluginStats datagram (kept apart from the data) */
};

static int cap_send(void *ctx, const char *json, size_t len)
{
    struct cap *c = ctx;
    if (len > c->max_len)
        c->max_len = len;
    cJSON *j = cJSON_ParseWithLength(json, len);
    assert_non_null(j);
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "kind");
    if (cJSON_IsString(k) && strcmp(k->valuestring, "PluginStats") == 0) {
        cJSON_Delete(c->stats);
        c->stats = j;
        return 0;
    }
    assert_true(c->n < 20000);
    c->msgs[c->n++] = j;
    return 0;
}

static void cap_free(struct cap *c)
{
    cJSON_Delete(c->stats);
    c->stats = NULL;
    for (size_t i = 0; i < c->n; i++)
        cJSON_Delete(c->msgs[i]);
    c->n = 0;
}

static int64_t num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_non_null(v);
    return (int64_t)v->valuedouble;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

/* First message with kind and deviceId (NULL if none). */
static const cJSON *find(struct cap *c, const char *kind, int64_t dev)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(str(c->msgs[i], "kind"), kind) == 0 && num(c->msgs[i], "deviceId") == dev)
            return c->msgs[i];
    return NULL;
}

static size_t count_kind(struct cap *c, const char *kind)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++)
        n += strcmp(str(c->msgs[i], "kind"), kind) == 0;
    return n;
}

static struct mon_record kern(uint32_t dev, const char *name, uint64_t s, uint64_t e)
{
    struct mon_record r = { .kind = MON_KIND_KERNEL };
    r.u.kernel.device_id = dev;
    r.u.kernel.name = name;
    r.u.kernel.type = "KERNEL_AICORE";
    r.u.kernel.start = s;
    r.u.kernel.end = e;
    return r;
}

static struct mon_record mk(int flag, int src, uint64_t id, uint64_t ts, const char *name, const char *dom,
                            uint32_t o0, uint32_t o1)
{
    struct mon_record r = { .kind = MON_KIND_MARKER };
    r.u.marker = (struct mon_marker){ flag, src, ts, id, o0, o1, name, dom };
    return r;
}

static struct output *metric_new(struct cap *c, uint32_t mask)
{
    struct output_config cfg = { .rank = 0, .send = cap_send, .send_ctx = c };
    struct output *p = NULL;
    assert_int_equal(pt_create(&proc_metric_ops, &cfg, &p), 0);
    assert_int_equal(proc_metric_ops.start(p), 0);
    proc_metric_ops.set_kinds(p, mask);
    return p;
}

/* ---- metric ---- */

static void test_metric_sums_and_opstats(void **state)
{
    (void)state;
    static struct cap c;
    struct output *p = metric_new(&c, (1u << MON_KIND_KERNEL) | (1u << MON_KIND_API) | (1u << MON_KIND_MEMCPY));
    struct mon_record recs[] = {
        kern(0, "MatMul", 100, 130), kern(0, "MatMul", 200, 210), kern(0, "Add", 0, 5),
        kern(1, "MatMul", 0, 1000),
    };
    pt_consume(p, recs, 4);
    /* same name text under another pointer merges by text */
    char other[] = "MatMul";
    struct mon_record r2 = kern(0, other, 0, 20);
    pt_consume(p, &r2, 1);
    struct mon_record api = { .kind = MON_KIND_API };
    api.u.api = (struct mon_api){ 10, 25, 1, 2, 3, "aclnnAdd" };
    pt_consume(p, &api, 1);
    struct mon_record cp = { .kind = MON_KIND_MEMCPY };
    cp.u.memcpy = (struct mon_memcpy){ .copy_kind = 2, .bytes = 64, .start = 0, .end = 4, .device_id = 0 };
    pt_consume(p, &cp, 1);
    pt_consume(p, &cp, 1);
    struct mon_record hc = { .kind = MON_KIND_HCCL }; /* kind never enabled: not reported */
    hc.u.hccl.name = "x";
    hc.u.hccl.end = 5;
    pt_consume(p, &hc, 1);
    assert_int_equal(proc_metric_ops.tick(p), 0);

    const cJSON *k0 = find(&c, "Kernel", 0);
    assert_non_null(k0);
    assert_int_equal(num(k0, "duration"), 30 + 10 + 5 + 20);
    assert_int_equal(num(find(&c, "Kernel", 1), "duration"), 1000);
    assert_int_equal(num(find(&c, "API", -1), "duration"), 15);
    assert_int_equal(num(find(&c, "MemCpy", 0), "duration"), 8);
    assert_int_equal(count_kind(&c, "Hccl"), 0);
    assert_true(num(k0, "timestamp") > 0);

    const cJSON *os = find(&c, "OpStats", 0);
    int seen = 0;
    for (size_t i = 0; i < c.n; i++) {
        const cJSON *m = c.msgs[i];
        if (strcmp(str(m, "kind"), "OpStats") || strcmp(str(m, "activity"), "Kernel") || num(m, "deviceId") != 0)
            continue;
        os = m;
        seen++;
    }
    assert_int_equal(seen, 1);
    assert_int_equal(num(os, "duration"), 65);
    assert_true(num(os, "interval_ns") > 0);
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(os, "ops");
    assert_int_equal(cJSON_GetArraySize(ops), 2);
    const cJSON *e0 = cJSON_GetArrayItem(ops, 0);
    assert_string_equal(str(e0, "name"), "MatMul");
    assert_int_equal(num(e0, "count"), 3);
    assert_int_equal(num(e0, "total"), 60);
    assert_int_equal(num(e0, "min"), 10);
    assert_int_equal(num(e0, "max"), 30);
    assert_int_equal(num(e0, "avg"), 20);
    assert_null(cJSON_GetObjectItemCaseSensitive(e0, "bytes"));
    assert_string_equal(str(cJSON_GetArrayItem(ops, 1), "name"), "Add");
    /* MemCpy: name is the copy kind, bytes summed */
    for (size_t i = 0; i < c.n; i++) {
        const cJSON *m = c.msgs[i];
        if (strcmp(str(m, "kind"), "OpStats") == 0 && strcmp(str(m, "activity"), "MemCpy") == 0) {
            const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "ops"), 0);
            assert_string_equal(str(e, "name"), "HTOD");
            assert_int_equal(num(e, "bytes"), 128);
            assert_int_equal(num(e, "count"), 2);
            seen++;
        }
    }
    assert_int_equal(seen, 2);
    cap_free(&c);
    /* a tick with nothing collected sends nothing */
    assert_int_equal(proc_metric_ops.tick(p), 0);
    assert_int_equal(c.n, 0);
    /* the final partial interval arrives at stop (D6) */
    pt_consume(p, recs, 1);
    assert_int_equal(proc_metric_ops.stop(p, NULL), 0);
    assert_int_equal(num(find(&c, "Kernel", 0), "duration"), 30);
    cap_free(&c);
    pt_destroy(p);
}

static void test_metric_kind_mask(void **state)
{
    (void)state;
    static struct cap c;
    struct output *p = metric_new(&c, 1u << MON_KIND_KERNEL);
    struct mon_record r = kern(0, "MatMul", 0, 7);
    pt_consume(p, &r, 1);
    proc_metric_ops.set_kinds(p, 0); /* disabled mid-interval: still reported this tick */
    proc_metric_ops.tick(p);
    assert_int_equal(num(find(&c, "Kernel", 0), "duration"), 7);
    cap_free(&c);
    pt_consume(p, &r, 1); /* disabled during the whole interval */
    proc_metric_ops.tick(p);
    assert_int_equal(c.n, 0);
    pt_destroy(p);
}

static void test_metric_markers(void **state)
{
    (void)state;
    static struct cap c;
    struct output *p = metric_new(&c, 1u << MON_KIND_MARKER);
    struct mon_record seq[] = {
        mk(16, 0, 5, 1000, "step 3", "", 1, 1), mk(16, 1, 5, 1100, "", "", 2, 0),
        mk(32, 0, 5, 1500, "", "", 1, 1), mk(32, 1, 5, 1400, "", "", 2, 0),
        mk(2, 0, 6, 2000, "host only", "mydom", 1, 1), mk(4, 0, 6, 2600, "", "", 1, 1),
        mk(16, 0, 7, 3000, "incomplete", "", 1, 1),
    };
    pt_consume(p, seq, 7);
    proc_metric_ops.tick(p);
    int host = 0, dev = 0;
    for (size_t i = 0; i < c.n; i++) {
        const cJSON *m = c.msgs[i];
        if (strcmp(str(m, "kind"), "Marker"))
            continue;
        if (num(m, "deviceId") == 4294967295ll) {
            host++;
            if (strcmp(str(m, "name"), "step 3") == 0) {
                assert_int_equal(num(m, "duration"), 500);
                assert_int_equal(num(m, "timestamp"), 1000);
                assert_string_equal(str(m, "domain"), "default");
            } else {
                assert_string_equal(str(m, "name"), "host only");
                assert_string_equal(str(m, "domain"), "mydom");
                assert_int_equal(num(m, "duration"), 600);
            }
        } else {
            dev++;
            assert_int_equal(num(m, "deviceId"), 2);
            assert_int_equal(num(m, "duration"), 300);
            assert_int_equal(num(m, "timestamp"), 1100);
            assert_string_equal(str(m, "name"), "step 3");
        }
    }
    assert_int_equal(host, 2);
    assert_int_equal(dev, 1);
    /* OpStats for markers carry the domain; host ranges under device -1 */
    const cJSON *os = find(&c, "OpStats", -1);
    assert_non_null(os);
    const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(os, "ops"), 0);
    assert_string_equal(str(e, "name"), "host only");
    assert_string_equal(str(e, "domain"), "mydom");
    assert_non_null(find(&c, "OpStats", 2));
    cap_free(&c);
    /* completing id 7 later still works (not evicted before 300 s) */
    struct mon_record rest[] = { mk(32, 0, 7, 3100, "", "", 1, 1), mk(16, 1, 7, 3010, "", "", 0, 0),
                                 mk(32, 1, 7, 3090, "", "", 0, 0) };
    pt_consume(p, rest, 3);
    proc_metric_ops.stop(p, NULL);
    assert_int_equal(count_kind(&c, "Marker"), 2);
    cap_free(&c);
    pt_destroy(p);
}

/* Buffers complete concurrently on several msPTI threads: the END records of a range may be
 * consumed before its START. The range still completes with the same datagrams. */
static void test_metric_markers_out_of_order(void **state)
{
    (void)state;
    static struct cap c;
    struct output *p = metric_new(&c, 1u << MON_KIND_MARKER);
    struct mon_record ends[] = {
        mk(32, 0, 9, 1500, "", "", 1, 1), mk(32, 1, 9, 1400, "", "", 2, 0), /* device-bound range */
        mk(4, 0, 10, 2600, "", "", 1, 1),                                     /* host-only range */
    };
    struct mon_record starts[] = {
        mk(16, 1, 9, 1100, "", "", 2, 0), mk(16, 0, 9, 1000, "step 4", "", 1, 1),
        mk(2, 0, 10, 2000, "host only", "mydom", 1, 1),
    };
    pt_consume(p, ends, 3);
    pt_consume(p, starts, 3);
    proc_metric_ops.tick(p);
    int host = 0, dev = 0;
    for (size_t i = 0; i < c.n; i++) {
        const cJSON *m = c.msgs[i];
        if (strcmp(str(m, "kind"), "Marker"))
            continue;
        if (num(m, "deviceId") == 4294967295ll) {
            host++;
            if (strcmp(str(m, "name"), "step 4") == 0) {
                assert_int_equal(num(m, "duration"), 500);
                assert_int_equal(num(m, "timestamp"), 1000);
            } else {
                assert_string_equal(str(m, "name"), "host only");
                assert_string_equal(str(m, "domain"), "mydom");
                assert_int_equal(num(m, "duration"), 600);
                assert_int_equal(num(m, "timestamp"), 2000);
            }
        } else {
            dev++;
            assert_int_equal(num(m, "deviceId"), 2);
            assert_int_equal(num(m, "duration"), 300);
            assert_string_equal(str(m, "name"), "step 4");
        }
    }
    assert_int_equal(host, 2);
    assert_int_equal(dev, 1);
    cap_free(&c);
    /* an instant opens nothing and a lone START stays pending: nothing more is reported */
    struct mon_record more[] = { mk(1, 0, 11, 3000, "instant", "", 1, 1), mk(16, 0, 12, 3000, "open", "", 1, 1) };
    pt_consume(p, more, 2);
    proc_metric_ops.stop(p, NULL);
    assert_int_equal(count_kind(&c, "Marker"), 0);
    cap_free(&c);
    pt_destroy(p);
}

static void test_metric_many_long_names(void **state)
{
    (void)state;
    static struct cap c;
    struct output *p = metric_new(&c, 1u << MON_KIND_KERNEL);
    enum { N = 5000 };
    char **names = calloc(N, sizeof(char *));
    for (int i = 0; i < N; i++) {
        names[i] = malloc(700);
        memset(names[i], 'k', 699);
        names[i][699] = 0;
        /* distinct prefix; multi-byte UTF-8 straddling the 512-byte cut */
        snprintf(names[i], 16, "op%05d_", i);
        names[i][8] = 'k';
        memcpy(names[i] + 510, "\xc3\xa9\xc3\xa9", 4);
        struct mon_record r = kern(0, names[i], 0, (uint64_t)(i + 1));
        pt_consume(p, &r, 1);
    }
    proc_metric_ops.tick(p);
    assert_true(c.max_len <= 4096);
    size_t entries = 0;
    uint64_t total = 0, prev = UINT64_MAX;
    bool other = false;
    for (size_t i = 0; i < c.n; i++) {
        const cJSON *m = c.msgs[i];
        if (strcmp(str(m, "kind"), "OpStats"))
            continue;
        const cJSON *ops = cJSON_GetObjectItemCaseSensitive(m, "ops");
        uint64_t sum = 0;
        for (int j = 0; j < cJSON_GetArraySize(ops); j++) {
            const cJSON *e = cJSON_GetArrayItem(ops, j);
            uint64_t t = (uint64_t)num(e, "total");
            const char *nm = str(e, "name");
            if (strcmp(nm, "<other>") == 0) {
                other = true;
                assert_int_equal(num(e, "count"), N - 4096);
            } else {
                assert_true(strlen(nm) <= 512);
                assert_true(t <= prev); /* sorted by total desc */
                prev = t;
            }
            sum += t;
            entries++;
        }
        assert_int_equal(num(m, "duration"), sum);
        total += sum;
    }
    assert_true(other);
    assert_int_equal(entries, 4097);
    assert_int_equal(total, (uint64_t)N * (N + 1) / 2);
    assert_int_equal(num(find(&c, "Kernel", 0), "duration"), (uint64_t)N * (N + 1) / 2);
    cap_free(&c);
    pt_destroy(p);
    for (int i = 0; i < N; i++)
        free(names[i]);
    free(names);
}

/* The per-thread table's inlined probe keys on (kind, device, name pointer): one name pointer
 * under two devices and under an API kind stays three entries, also across the table growing
 * (300 names > the first 256 slots) and across batches of the consume call. */
static void test_metric_table_keys(void **state)
{
    (void)state;
    static struct cap c;
    struct output *p = metric_new(&c, (1u << MON_KIND_KERNEL) | (1u << MON_KIND_API));
    enum { N = 300, ROUNDS = 4 };
    static char names[N][16];
    static struct mon_record b[3 * N];
    for (int i = 0; i < N; i++)
        snprintf(names[i], sizeof(names[i]), "op%03d", i);
    for (int r = 0; r < ROUNDS; r++) {
        size_t n = 0;
        for (int i = 0; i < N; i++) {
            b[n++] = kern(0, names[i], 0, (uint64_t)(i + 1 + r));
            b[n++] = kern(1, names[i], 0, 2 * (uint64_t)(i + 1));
            b[n] = (struct mon_record){ .kind = MON_KIND_API };
            b[n++].u.api = (struct mon_api){ .start = 3, .end = 10, .name = names[i] };
        }
        for (size_t off = 0; off < n; off += 256)
            pt_consume(p, b + off, n - off < 256 ? n - off : 256);
    }
    assert_int_equal(proc_metric_ops.tick(p), 0);
    size_t seen[3] = { 0 };
    for (size_t m = 0; m < c.n; m++) {
        const cJSON *o = c.msgs[m];
        if (strcmp(str(o, "kind"), "OpStats"))
            continue;
        bool api = strcmp(str(o, "activity"), "API") == 0;
        int64_t dev = num(o, "deviceId");
        const cJSON *ops = cJSON_GetObjectItemCaseSensitive(o, "ops");
        for (int j = 0; j < cJSON_GetArraySize(ops); j++) {
            const cJSON *e = cJSON_GetArrayItem(ops, j);
            int i = atoi(str(e, "name") + 2);
            assert_int_equal(num(e, "count"), ROUNDS);
            if (api) {
                assert_int_equal(dev, -1);
                assert_int_equal(num(e, "total"), 7 * ROUNDS);
                seen[2]++;
            } else if (dev == 0) {
                assert_int_equal(num(e, "min"), i + 1);
                assert_int_equal(num(e, "max"), i + ROUNDS);
                assert_int_equal(num(e, "total"), ROUNDS * (i + 1) + ROUNDS * (ROUNDS - 1) / 2);
                seen[0]++;
            } else {
                assert_int_equal(dev, 1);
                assert_int_equal(num(e, "min"), 2 * (i + 1));
                assert_int_equal(num(e, "max"), 2 * (i + 1));
                seen[1]++;
            }
        }
    }
    assert_int_equal(seen[0], N);
    assert_int_equal(seen[1], N);
    assert_int_equal(seen[2], N);
    cap_free(&c);
    pt_destroy(p);
}

static void test_metric_aggregates_off(void **state)
{
    (void)state;
    static struct cap c;
    setenv("MSMONITOR_METRIC_AGGREGATES", "0", 1);
    penv_reload();
    struct output *p = metric_new(&c, 1u << MON_KIND_KERNEL);
    struct mon_record r = kern(0, "MatMul", 0, 7);
    pt_consume(p, &r, 1);
    proc_metric_ops.stop(p, NULL);
    assert_int_equal(c.n, 1);
    assert_int_equal(count_kind(&c, "OpStats"), 0);
    cap_free(&c);
    pt_destroy(p);
    unsetenv("MSMONITOR_METRIC_AGGREGATES");
    penv_reload();
}

/* ---- standalone ---- */

static void test_standalone(void **state)
{
    (void)state;
    int32_t kinds[] = { MON_KIND_KERNEL, MON_KIND_MEMORY, MON_KIND_MARKER, MON_KIND_COMMUNICATION,
                        MON_KIND_KERNEL, MON_KIND_ACL_API };
    assert_int_equal(proc_memory_set_requested_kinds(kinds, 1 * 0 + 0), -EINVAL);
    int32_t bad = MON_KIND_MEMORY;
    assert_int_equal(proc_memory_set_requested_kinds(&bad, 1), -EINVAL);
    assert_int_equal(proc_memory_set_requested_kinds(kinds, 6), 0);
    int32_t out[8];
    size_t n;
    assert_int_equal(proc_memory_kinds(out, 8, &n), 0);
    assert_int_equal(n, 4);
    assert_int_equal(out[0], MON_KIND_KERNEL);
    assert_int_equal(out[1], MON_KIND_MARKER);
    assert_int_equal(out[2], MON_KIND_COMMUNICATION);
    assert_int_equal(out[3], MON_KIND_ACL_API);

    struct output_config cfg = { .session_start_ns = 1000 };
    struct output *p = NULL;
    assert_int_equal(pt_create(&proc_memory_ops, &cfg, &p), 0);
    char kname[] = "MatMul";
    struct mon_record recs[8];
    recs[0] = kern(1, kname, 1500, 1600);
    recs[1] = kern(1, "Old", 10, 999); /* ended before the session start */
    recs[2] = (struct mon_record){ .kind = MON_KIND_COMMUNICATION };
    recs[2].u.comm = (struct mon_comm){ .data_type = 4, .count = 8, .device_id = 2, .stream_id = 3, .start = 2000,
                                        .end = 2100, .alg_type = "RING", .name = "AllReduce", .comm_name = "g",
                                        .correlation_id = 9 };
    recs[3] = (struct mon_record){ .kind = MON_KIND_ACL_API };
    recs[3].u.api = (struct mon_api){ 1200, 1300, 11, 12, 13, "aclopCompile" };
    recs[4] = (struct mon_record){ .kind = MON_KIND_API }; /* not requested */
    recs[4].u.api = (struct mon_api){ 1200, 1300, 11, 12, 13, "x" };
    recs[5] = mk(16, 0, 4, 3000, "step 1", "", 11, 12);
    recs[6] = mk(32, 0, 4, 3500, "", "", 11, 13);
    recs[7] = mk(16, 1, 4, 3100, "", "", 5, 6);
    pt_consume(p, recs, 8);
    struct mon_record dend = mk(32, 1, 4, 3400, "", "", 5, 6);
    pt_consume(p, &dend, 1);
    /* while collecting, consume() may move the arrays: nothing is handed out */
    const struct msmon_result *busy_arr = (const void *)1;
    size_t busy_n = 99;
    assert_int_equal(proc_memory_results(MON_KIND_KERNEL, &busy_arr, &busy_n), -EBUSY);
    assert_null(busy_arr);
    assert_int_equal(busy_n, 0);
    assert_int_equal(proc_memory_ops.stop(p, NULL), 0);
    pt_destroy(p);
    memcpy(kname, "XXXXXX", 7); /* results hold their own copies */

    const struct msmon_result *arr;
    assert_int_equal(proc_memory_results(MON_KIND_KERNEL, &arr, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(arr[0].name, "MatMul");
    assert_string_equal(arr[0].type, "KERNEL_AICORE");
    assert_int_equal(arr[0].device_id, 1);
    assert_int_equal(arr[0].start_ns, 1500);
    assert_int_equal(proc_memory_results(MON_KIND_COMMUNICATION, &arr, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(arr[0].data_type, "FP32");
    assert_string_equal(arr[0].alg_type, "RING");
    assert_string_equal(arr[0].comm_name, "g");
    assert_int_equal(arr[0].count, 8);
    assert_int_equal(proc_memory_results(MON_KIND_ACL_API, &arr, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(arr[0].pid, 11);
    assert_int_equal(arr[0].correlation_id, 13);
    assert_int_equal(proc_memory_results(MON_KIND_API, &arr, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(proc_memory_results(MON_KIND_MARKER, &arr, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(arr[0].source_kind, 0);
    assert_string_equal(arr[0].name, "step 1");
    assert_int_equal(arr[0].tid, 13);
    assert_int_equal(arr[0].device_id, 0);
    assert_int_equal(arr[1].source_kind, 1);
    assert_string_equal(arr[1].name, "step 1");
    assert_int_equal(arr[1].start_ns, 3100);
    assert_int_equal(arr[1].end_ns, 3400);
    assert_int_equal(arr[1].device_id, 5);
    assert_int_equal(arr[1].pid, 0);
    assert_int_equal(proc_memory_results(MON_KIND_MEMORY, &arr, &n), -EINVAL);
    /* a new session clears the previous results */
    assert_int_equal(pt_create(&proc_memory_ops, &cfg, &p), 0);
    assert_int_equal(proc_memory_ops.stop(p, NULL), 0);
    assert_int_equal(proc_memory_results(MON_KIND_KERNEL, &arr, &n), 0);
    assert_int_equal(n, 0);
    pt_destroy(p);
    proc_memory_reset();
}

/* The compact store behind the standalone results: many chunks, durations that do not fit 32
 * bits, end before start, NULL names, API signatures by (name, pid, tid); every field comes
 * back exactly, in arrival order. */
static void test_standalone_compact_store(void **state)
{
    (void)state;
    static const char *names[5] = { "MatMul", "Add", "Conv2D", NULL, "Softmax" };
    enum { N = 200000 }; /* > 2 chunks of 2 MiB at 24 bytes a record */
    int32_t kinds[] = { MON_KIND_KERNEL, MON_KIND_API };
    struct output_config cfg = { .session_start_ns = 1000 };
    struct output *p = NULL;
    struct mon_record r[256];
    const struct msmon_result *arr;
    size_t n;

    assert_int_equal(proc_memory_set_requested_kinds(kinds, 2), 0);
    assert_int_equal(pt_create(&proc_memory_ops, &cfg, &p), 0);
    for (uint64_t i = 0; i < N; i += 256) {
        for (size_t j = 0; j < 256; j++) {
            uint64_t k = i + j, s0 = 1000 + k * 10;
            uint64_t e0 = k % 7777 == 0 ? s0 + 5000000000ull : k % 9999 == 1 ? s0 - 1 : s0 + k % 1000;
            r[j] = kern((uint32_t)(k % 3), names[k % 5], s0, e0);
            r[j].u.kernel.stream_id = (uint32_t)(k % 11);
            r[j].u.kernel.correlation_id = k * 3;
            if (k % 13 == 0)
                r[j].u.kernel.type = NULL;
        }
        pt_consume(p, r, 256);
    }
    for (uint32_t t = 0; t < 3; t++) {
        r[t] = (struct mon_record){ .kind = MON_KIND_API };
        r[t].u.api = (struct mon_api){ 2000 + t, 2100 + t, 40 + t % 2, 50 + t, 60 + t, "aclnnAdd" };
    }
    pt_consume(p, r, 3);
    assert_int_equal(proc_memory_ops.stop(p, NULL), 0);
    assert_int_equal(proc_memory_results(MON_KIND_KERNEL, &arr, &n), 0);
    assert_int_equal(n, 200192);
    for (uint64_t k = 0; k < n; k++) {
        uint64_t s0 = 1000 + k * 10;
        uint64_t e0 = k % 7777 == 0 ? s0 + 5000000000ull : k % 9999 == 1 ? s0 - 1 : s0 + k % 1000;
        const char *want = names[k % 5] ? names[k % 5] : "";
        if (arr[k].start_ns != s0 || arr[k].end_ns != e0 || arr[k].device_id != k % 3 ||
            arr[k].stream_id != k % 11 || arr[k].correlation_id != k * 3 || strcmp(arr[k].name, want) != 0 ||
            strcmp(arr[k].type, k % 13 == 0 ? "" : "KERNEL_AICORE") != 0 || arr[k].kind != MON_KIND_KERNEL)
            fail_msg("kernel %llu differs: %llu-%llu dev %u stream %u corr %llu %s/%s", (unsigned long long)k,
                     (unsigned long long)arr[k].start_ns, (unsigned long long)arr[k].end_ns, arr[k].device_id,
                     arr[k].stream_id, (unsigned long long)arr[k].correlation_id, arr[k].name, arr[k].type);
    }
    assert_int_equal(proc_memory_results(MON_KIND_API, &arr, &n), 0);
    assert_int_equal(n, 3);
    for (uint32_t t = 0; t < 3; t++) {
        assert_int_equal(arr[t].pid, 40 + t % 2);
        assert_int_equal(arr[t].tid, 50 + t);
        assert_int_equal(arr[t].correlation_id, 60 + t);
        assert_int_equal(arr[t].end_ns, 2100 + t);
        assert_string_equal(arr[t].name, "aclnnAdd");
        assert_null(arr[t].type);
    }
    pt_destroy(p);
    proc_memory_reset();
}

/* The 12-byte layout's escapes: starts jumping back and forth by more than ±2.1 s, correlation
 * ids by more than ±32767, more than 65534 distinct signatures and long durations, mixed with
 * records that fit, all read back exactly and in order. */
static void test_standalone_delta_escapes(void **state)
{
    (void)state;
    enum { N = 150016 };
    int32_t kinds[] = { MON_KIND_KERNEL };
    struct output_config cfg = { .session_start_ns = 1000 };
    struct output *p = NULL;
    struct mon_record r[256];
    const struct msmon_result *arr;
    size_t n;

#define ESC_START(k) ((k) % 5 == 0 ? 10000000000ull + (k) * 7 : (k) % 5 == 1 ? 20000000000ull - (k) : 15000000000ull + (k) * 3)
#define ESC_END(k) (ESC_START(k) + ((k) % 17 == 0 ? 6000000000ull : (k) % 1000))
#define ESC_CORR(k) ((k) % 3 == 0 ? (k) * 40000 : (k) % 3 == 1 ? 1ull << 40 : (k) + 5)
    assert_int_equal(proc_memory_set_requested_kinds(kinds, 1), 0);
    assert_int_equal(pt_create(&proc_memory_ops, &cfg, &p), 0);
    for (uint64_t i = 0; i < N; i += 256) {
        for (size_t j = 0; j < 256; j++) {
            uint64_t k = i + j;
            r[j] = kern((uint32_t)(k % 2), "MatMul", ESC_START(k), ESC_END(k));
            r[j].u.kernel.stream_id = (uint32_t)(k < 100000 ? k : k % 7); /* 100000 signatures */
            r[j].u.kernel.correlation_id = ESC_CORR(k);
        }
        pt_consume(p, r, 256);
    }
    assert_int_equal(proc_memory_ops.stop(p, NULL), 0);
    assert_int_equal(proc_memory_results(MON_KIND_KERNEL, &arr, &n), 0);
    assert_int_equal(n, N);
    for (uint64_t k = 0; k < n; k++) {
        if (arr[k].start_ns != ESC_START(k) || arr[k].end_ns != ESC_END(k) || arr[k].correlation_id != ESC_CORR(k) ||
            arr[k].device_id != k % 2 || arr[k].stream_id != (k < 100000 ? k : k % 7) ||
            strcmp(arr[k].name, "MatMul") != 0)
            fail_msg("kernel %llu differs: %llu-%llu corr %llu dev %u stream %u", (unsigned long long)k,
                     (unsigned long long)arr[k].start_ns, (unsigned long long)arr[k].end_ns,
                     (unsigned long long)arr[k].correlation_id, arr[k].device_id, arr[k].stream_id);
    }
#undef ESC_START
#undef ESC_END
#undef ESC_CORR
    pt_destroy(p);
    proc_memory_reset();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metric_sums_and_opstats),
        cmocka_unit_test(test_metric_kind_mask),
        cmocka_unit_test(test_metric_markers),
        cmocka_unit_test(test_metric_markers_out_of_order),
        cmocka_unit_test(test_metric_many_long_names),
        cmocka_unit_test(test_metric_table_keys),
        cmocka_unit_test(test_metric_aggregates_off),
        cmocka_unit_test(test_standalone),
        cmocka_unit_test(test_standalone_compact_store),
        cmocka_unit_test(test_standalone_delta_escapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
