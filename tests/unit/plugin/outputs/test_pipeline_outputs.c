/* test_pipeline_outputs: one table of marker record sequences (END before START, records of
 * one id split over deliveries on different threads) drives all four outputs through the
 * pipeline, and every output must show the same ranges; bursts of records into JSONL and DB
 * land completely on disk; forced drops show in the stop line; a SIGKILLed DB resolves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "export_util.h"
#include "pl_test.h"
#include "plugin/outputs/proc_db.h"
#include "plugin/outputs/proc_jsonl.h"
#include "plugin/outputs/proc_memory.h"
#include "plugin/penv.h"

#if defined(__SANITIZE_ADDRESS__)
#define BURST 500000ull /* the sanitizer build: same path, fewer records */
#else
#define BURST 5000000ull
#endif

/* ---- the shared table ---- */

#define MAX_STEPS 6
#define MAX_RECS 8
#define MAX_EXPECT 4

/* A record of the table: a marker, or (kind 2) a kernel at ts; ts relative to T0. */
struct spec {
    int kind, flag, src;
    int64_t ts;
    uint64_t id;
    uint32_t o0, o1;
    const char *name, *dom;
};
struct step {
    struct spec r[MAX_RECS]; /* up to the first kind 0 */
};
struct rcase {
    const char *what;
    struct step steps[MAX_STEPS]; /* each step is one delivery, on its own thread; up to an empty one */
    const char *expect[MAX_EXPECT]; /* "H <id> <start> <end> <name>" / "D <id> <start> <end> <dev> <name>",
                                     * sorted (the DB has no device marker name: checked without it) */
    bool no_metric; /* metric mode reports a range only once all its parts are in (docs/design/outputs.md#metric-datagrams) */
};

#define M(flag, src, ts, id, o0, o1, name, dom) {1, flag, src, ts, id, o0, o1, name, dom}
#define K(ts) {2, 0, 0, ts, 0, 0, 0, "k", "AI_CORE"}

static const struct rcase cases[] = {
    {"host range in order",
     {{{M(2, 0, 10, 1, 7, 8, "fwd", "d"), M(4, 0, 30, 1, 7, 8, "", "")}}},
     {"H 1 10 30 fwd"}, false},
    {"host range, END consumed before START on another thread",
     {{{M(4, 0, 30, 2, 7, 9, "", "")}}, {{M(2, 0, 10, 2, 7, 8, "bwd", "d")}}},
     {"H 2 10 30 bwd"}, false},
    {"device range, every record in another delivery, ENDs first",
     {{{M(32, 1, 41, 3, 5, 6, "", "")}},
      {{M(32, 0, 40, 3, 7, 8, "", "")}},
      {{M(16, 0, 10, 3, 7, 8, "step 1", "")}},
      {{M(16, 1, 12, 3, 5, 2, "", "")}}},
     {"D 3 12 41 5 step 1", "H 3 10 40 step 1"}, false},
    {"device range in order, mixed with kernels",
     {{{M(16, 0, 10, 4, 7, 8, "step 2", "d"), K(11), M(16, 1, 13, 4, 1, 0, "", "")}},
      {{M(32, 0, 50, 4, 7, 8, "", ""), K(55), M(32, 1, 60, 4, 1, 3, "", "")}}},
     {"D 4 13 60 1 step 2", "H 4 10 50 step 2"}, false},
    {"START before the session is cut: its END alone gives nothing",
     {{{M(2, 0, -5, 5, 7, 8, "early", "d")}}, {{M(4, 0, 5, 5, 7, 8, "", "")}}},
     {NULL}, false},
    {"device part complete before its host START arrives: named by the START",
     {{{M(32, 0, 40, 6, 7, 8, "", "")}},
      {{M(16, 1, 12, 6, 5, 2, "", ""), M(32, 1, 41, 6, 5, 6, "", "")}},
      {{M(16, 0, 10, 6, 7, 8, "step 3", "")}}},
     {"D 6 12 41 5 step 3", "H 6 10 40 step 3"}, false},
    {"START_WITH_DEVICE before the session is cut: it still names the device part",
     {{{M(16, 0, -5, 7, 7, 8, "early dev", "")}},
      {{M(16, 1, 2, 7, 5, 2, "", ""), M(32, 1, 8, 7, 5, 6, "", "")}},
      {{M(32, 0, 9, 7, 7, 8, "", "")}}},
     {"D 7 2 8 5 early dev"}, true},
    {"cut START_WITH_DEVICE consumed after its device part",
     {{{M(16, 1, 2, 8, 5, 2, "", ""), M(32, 1, 8, 8, 5, 6, "", "")}},
      {{M(32, 0, 9, 8, 7, 8, "", "")}},
      {{K(1), M(16, 0, -5, 8, 7, 8, "late cut", "")}}},
     {"D 8 2 8 5 late cut"}, true},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static size_t step_records(const struct step *s, struct mon_record *out)
{
    size_t n = 0;
    for (; n < MAX_RECS && s->r[n].kind; n++) {
        const struct spec *x = &s->r[n];
        uint64_t ts = (uint64_t)((int64_t)T0 + x->ts);
        out[n] = x->kind == 1 ? r_marker(x->flag, x->src, ts, x->id, x->o0, x->o1, x->name, x->dom)
                              : r_kernel(ts, ts + 1, 0, 0, 1, x->dom, x->name);
    }
    return n;
}

struct deliver_arg {
    struct output *p;
    const struct step *s;
};
static void *deliver_thread(void *a)
{
    struct deliver_arg *d = a;
    struct mon_record r[MAX_RECS];
    pt_consume(d->p, r, step_records(d->s, r));
    return NULL;
}

/* Each step from a new thread, one after the other: msPTI's completion threads. */
static void run_steps(struct output *p, const struct rcase *c)
{
    for (int i = 0; i < MAX_STEPS && c->steps[i].r[0].kind; i++) {
        pthread_t th;
        struct deliver_arg d = {p, &c->steps[i]};
        assert_int_equal(pthread_create(&th, NULL, deliver_thread, &d), 0);
        pthread_join(th, NULL);
    }
}

struct got {
    char v[16][128];
    size_t n;
};
static void got_add(struct got *g, const char *fmt, ...)
{
    va_list ap;
    assert_true(g->n < 16);
    va_start(ap, fmt);
    vsnprintf(g->v[g->n++], sizeof(g->v[0]), fmt, ap);
    va_end(ap);
}
static int cmp_str(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}
static void got_check(struct got *g, const struct rcase *c, const char *output)
{
    size_t ne = 0;
    qsort(g->v, g->n, sizeof(g->v[0]), cmp_str);
    while (ne < MAX_EXPECT && c->expect[ne])
        ne++;
    if (g->n != ne)
        fail_msg("%s / %s: %zu ranges, expected %zu (first: %s)", c->what, output, g->n, ne, g->n ? g->v[0] : "-");
    for (size_t i = 0; i < ne; i++)
        if (strcmp(g->v[i], c->expect[i]) != 0)
            fail_msg("%s / %s: got '%s', expected '%s'", c->what, output, g->v[i], c->expect[i]);
}

/* metric */
static int metric_send(void *ctx, const char *json, size_t len)
{
    struct got *g = ctx;
    cJSON *j = cJSON_ParseWithLength(json, len);
    assert_non_null(j);
    const char *kind = cJSON_GetObjectItem(j, "kind")->valuestring;
    if (strcmp(kind, "Marker") == 0) {
        uint64_t dev = (uint64_t)cJSON_GetObjectItem(j, "deviceId")->valuedouble;
        uint64_t ts = (uint64_t)cJSON_GetObjectItem(j, "timestamp")->valuedouble - T0;
        uint64_t dur = (uint64_t)cJSON_GetObjectItem(j, "duration")->valuedouble;
        const char *name = cJSON_GetObjectItem(j, "name")->valuestring;
        /* the metric datagram has no id: the table's ids equal nothing it could carry */
        if (dev == 4294967295u)
            got_add(g, "H ? %llu %llu %s", (unsigned long long)ts, (unsigned long long)(ts + dur), name);
        else
            got_add(g, "D ? %llu %llu %llu %s", (unsigned long long)ts, (unsigned long long)(ts + dur),
                    (unsigned long long)dev, name);
    }
    cJSON_Delete(j);
    return 0;
}

/* "H 3 10 40 x" → "H ? 10 40 x" */
static void strip_ids(const struct rcase *c, struct rcase *ret)
{
    *ret = *c;
    static char buf[MAX_EXPECT][128];
    for (int i = 0; i < MAX_EXPECT && c->expect[i]; i++) {
        const char *rest = strchr(c->expect[i] + 2, ' ');
        snprintf(buf[i], sizeof(buf[i]), "%c ?%s", c->expect[i][0], rest);
        ret->expect[i] = buf[i];
    }
}

static void case_metric(const struct rcase *c)
{
    struct got g = {0};
    struct output_config cfg = {.session_start_ns = T0, .send = metric_send, .send_ctx = &g};
    struct output *p = NULL;
    struct rcase noid;
    assert_int_equal(pt_create(&proc_metric_ops, &cfg, &p), 0);
    proc_metric_ops.set_kinds(p, 1u << MON_KIND_MARKER);
    run_steps(p, c);
    assert_int_equal(proc_metric_ops.stop(p, NULL), 0);
    pt_destroy(p);
    strip_ids(c, &noid);
    if (c->no_metric)
        noid.expect[0] = NULL;
    got_check(&g, &noid, "metric");
}

/* standalone */
static void case_memory(const struct rcase *c)
{
    struct got g = {0};
    struct output_config cfg = {.session_start_ns = T0};
    struct output *p = NULL;
    const struct msmon_result *res;
    size_t n;
    int32_t kinds[] = {MON_KIND_MARKER};
    assert_int_equal(proc_memory_set_requested_kinds(kinds, 1), 0);
    assert_int_equal(pt_create(&proc_memory_ops, &cfg, &p), 0);
    run_steps(p, c);
    assert_int_equal(proc_memory_ops.stop(p, NULL), 0);
    assert_int_equal(proc_memory_results(MON_KIND_MARKER, &res, &n), 0);
    for (size_t i = 0; i < n; i++) {
        if (res[i].source_kind == 0)
            got_add(&g, "H %llu %llu %llu %s", (unsigned long long)res[i].id,
                    (unsigned long long)(res[i].start_ns - T0), (unsigned long long)(res[i].end_ns - T0), res[i].name);
        else
            got_add(&g, "D %llu %llu %llu %u %s", (unsigned long long)res[i].id,
                    (unsigned long long)(res[i].start_ns - T0), (unsigned long long)(res[i].end_ns - T0),
                    res[i].device_id, res[i].name);
    }
    pt_destroy(p);
    proc_memory_reset();
    got_check(&g, c, "standalone");
}

/* JSONL */
static void case_jsonl(const struct rcase *c)
{
    struct got g = {0};
    char *dir = tmpdir_make();
    struct output_config cfg = {.log_dir = dir, .session_start_ns = T0};
    struct output *p = NULL;
    char *files[4];
    assert_int_equal(pt_create(&proc_jsonl_ops, &cfg, &p), 0);
    assert_int_equal(proc_jsonl_ops.start(p), 0);
    run_steps(p, c);
    assert_int_equal(proc_jsonl_ops.stop(p, NULL), 0);
    pt_destroy(p);
    size_t nf = list_files(dir, ".jsonl", files, 4);
    for (size_t f = 0; f < nf; f++) {
        char *text = read_all(files[f]);
        char *save = NULL;
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            cJSON *j = cJSON_Parse(line);
            assert_non_null(j);
            if (strcmp(cJSON_GetObjectItem(j, "kind")->valuestring, "Marker") == 0) {
                bool host = strcmp(cJSON_GetObjectItem(j, "sourceKind")->valuestring, "Host") == 0;
                unsigned long long id = (unsigned long long)cJSON_GetObjectItem(j, "id")->valuedouble;
                unsigned long long s = (unsigned long long)cJSON_GetObjectItem(j, "startNs")->valuedouble - T0;
                unsigned long long e = (unsigned long long)cJSON_GetObjectItem(j, "endNs")->valuedouble - T0;
                if (host)
                    got_add(&g, "H %llu %llu %llu %s", id, s, e, cJSON_GetObjectItem(j, "name")->valuestring);
                else
                    got_add(&g, "D %llu %llu %llu %llu %s", id, s, e,
                            (unsigned long long)cJSON_GetObjectItem(j, "deviceId")->valuedouble,
                            cJSON_GetObjectItem(j, "name")->valuestring);
            }
            cJSON_Delete(j);
        }
        free(text);
    }
    free_list(files, nf);
    rm_rf(dir);
    free(dir);
    got_check(&g, c, "jsonl");
}

/* "D 3 12 41 5 step 1" → "D 3 12 41 5": TASK rows carry no name */
static void strip_dev_names(const struct rcase *c, struct rcase *ret)
{
    static char buf[MAX_EXPECT][128];
    *ret = *c;
    for (int i = 0; i < MAX_EXPECT && c->expect[i]; i++) {
        const char *x = c->expect[i];
        int fields = 0;
        size_t k = 0;
        if (x[0] != 'D')
            continue;
        for (; x[k] && !(x[k] == ' ' && ++fields == 5); k++)
            ;
        snprintf(buf[i], sizeof(buf[i]), "%.*s", (int)k, x);
        ret->expect[i] = buf[i];
    }
}

/* DB */
static void case_db(const struct rcase *c)
{
    struct rcase noname;
    struct got g = {0};
    char *dir = tmpdir_make();
    struct output_config cfg = {.log_dir = dir, .session_start_ns = T0};
    struct output *p = NULL;
    char *files[4];
    sqlite3 *db;
    sqlite3_stmt *st;
    assert_int_equal(pt_create(&proc_db_ops, &cfg, &p), 0);
    assert_int_equal(proc_db_ops.start(p), 0);
    run_steps(p, c);
    assert_int_equal(proc_db_ops.stop(p, NULL), 0);
    pt_destroy(p);
    size_t nf = list_files(dir, ".db", files, 4);
    assert_true(nf <= 1);
    if (nf == 1) {
        assert_int_equal(sqlite3_open_v2(files[0], &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        static const char *const sqls[] = {
            "SELECT 'H', connectionId - 4000000000, startNs, endNs, "
            "(SELECT value FROM STRING_IDS WHERE id = message) FROM MSTX_EVENTS",
            "SELECT 'D', connectionId - 4000000000, startNs, endNs, deviceId FROM TASK "
            "WHERE connectionId >= 4000000000",
        };
        for (int q = 0; q < 2; q++) {
            if (sqlite3_prepare_v2(db, sqls[q], -1, &st, NULL) != SQLITE_OK)
                continue; /* no such table: no rows of that part */
            while (sqlite3_step(st) == SQLITE_ROW)
                got_add(&g, "%s %lld %lld %lld %s", sqlite3_column_text(st, 0), sqlite3_column_int64(st, 1),
                        sqlite3_column_int64(st, 2) - (long long)T0, sqlite3_column_int64(st, 3) - (long long)T0,
                        sqlite3_column_text(st, 4));
            sqlite3_finalize(st);
        }
        sqlite3_close(db);
    }
    free_list(files, nf);
    rm_rf(dir);
    free(dir);
    strip_dev_names(c, &noname);
    got_check(&g, &noname, "db");
}

static void test_same_ranges_in_every_output(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES; i++) {
        case_metric(&cases[i]);
        case_memory(&cases[i]);
        case_jsonl(&cases[i]);
        case_db(&cases[i]);
    }
}

/* ---- bursts: exactly every record on disk ---- */

static void burst(struct output *p, uint64_t total)
{
    struct mon_record r[256];
    for (uint64_t n = 0; n < total; n += 256) {
        size_t k = total - n < 256 ? (size_t)(total - n) : 256;
        for (size_t i = 0; i < k; i++)
            r[i] = r_kernel(T0 + n + i, T0 + n + i + 5, 0, 1, n + i, "AI_CORE", "MatMul_burst");
        pt_consume(p, r, k);
    }
}

static void test_burst_jsonl_lossless(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    struct output_config cfg = {.log_dir = dir, .session_start_ns = T0,
                              .jsonl_rotate_lines = "500000"};
    struct output *p = NULL;
    struct pipeline_stats s;
    char cmd[256];
    assert_int_equal(pt_create(&proc_jsonl_ops, &cfg, &p), 0);
    assert_int_equal(proc_jsonl_ops.start(p), 0);
    burst(p, BURST);
    assert_int_equal(pt_stop(p, NULL), 0);
    pipeline_stats(pt_pl(p), &s);
    pt_destroy(p);
    snprintf(cmd, sizeof(cmd), "cat %s/*.jsonl | grep -c '\"kind\":\"Kernel\"'", dir);
    FILE *f = popen(cmd, "r");
    unsigned long long lines = 0;
    assert_int_equal(fscanf(f, "%llu", &lines), 1);
    pclose(f);
    assert_int_equal(lines, BURST);
    assert_int_equal(s.consumed, BURST);
    assert_int_equal(s.dropped_queue, 0);
    assert_int_equal(s.written, BURST + 2); /* + the session-end and rank_device_map lines */
    rm_rf(dir);
    free(dir);
}

static void test_burst_db_lossless(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    struct output_config cfg = {.log_dir = dir, .session_start_ns = T0};
    struct output *p = NULL;
    struct pipeline_stats s;
    char *files[2];
    sqlite3 *db;
    sqlite3_stmt *st;
    assert_int_equal(pt_create(&proc_db_ops, &cfg, &p), 0);
    assert_int_equal(proc_db_ops.start(p), 0);
    burst(p, BURST);
    assert_int_equal(pt_stop(p, NULL), 0);
    pipeline_stats(pt_pl(p), &s);
    pt_destroy(p);
    assert_int_equal(list_files(dir, ".db", files, 2), 1);
    assert_int_equal(sqlite3_open_v2(files[0], &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*), count(DISTINCT connectionId) FROM TASK", -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(st, 0), BURST);
    assert_int_equal(sqlite3_column_int64(st, 1), BURST);
    sqlite3_finalize(st);
    sqlite3_close(db);
    assert_int_equal(s.dropped_queue, 0);
    assert_int_equal(s.written, 2 * BURST); /* TASK + COMPUTE_TASK_INFO */
    free_list(files, 1);
    rm_rf(dir);
    free(dir);
}

/* Several completion threads into a DB queue of two chunks: producers wait for each other and
 * the writer (back-pressure); not one record may get lost between them. */
struct burst_arg {
    struct output *p;
    uint64_t n, base;
};
static void *burst_thread(void *a)
{
    struct burst_arg *b = a;
    struct mon_record r[256];
    for (uint64_t n = 0; n < b->n; n += 256) {
        size_t k = b->n - n < 256 ? (size_t)(b->n - n) : 256;
        for (size_t i = 0; i < k; i++)
            r[i] = r_kernel(T0 + n + i, T0 + n + i + 5, 0, 1, b->base + n + i, "AI_CORE", "MatMul_mt");
        pt_consume(b->p, r, k);
    }
    return NULL;
}

static void test_db_concurrent_producers_lossless(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    struct output_config cfg = {.log_dir = dir, .session_start_ns = T0};
    struct output *p = NULL;
    struct pipeline_stats s;
    pthread_t th[4];
    struct burst_arg a[4];
    proc_db_test_set_queue(2, 60000);
    assert_int_equal(pt_create(&proc_db_ops, &cfg, &p), 0);
    assert_int_equal(proc_db_ops.start(p), 0);
    for (int i = 0; i < 4; i++) {
        a[i] = (struct burst_arg){p, BURST / 20, (uint64_t)i * BURST};
        assert_int_equal(pthread_create(&th[i], NULL, burst_thread, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(pt_stop(p, NULL), 0);
    pipeline_stats(pt_pl(p), &s);
    pt_destroy(p);
    proc_db_test_set_queue(0, 5000);
    assert_int_equal(s.dropped_queue, 0);
    assert_int_equal(s.written, 2 * 4 * (BURST / 20));
    rm_rf(dir);
    free(dir);
}

/* ---- forced drops: counted, and in the stop line ---- */

static void test_forced_drops_in_stop_line(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    char lp[64], *log;
    struct output *p = NULL;
    struct output_config jc = {.log_dir = dir, .session_start_ns = T0};
    struct output_config dc = {.log_dir = dir, .session_start_ns = T0};

    /* JSONL: the smallest queue (8191 lines), no waiting, the writer not started yet */
    setenv("MSMONITOR_JSONL_BUFFER_CAPACITY", "8192", 1);
    penv_reload();
    proc_jsonl_test_set_backpressure_ms(0);
    log_set_level(LOG_LVL_INFO);
    int fd = log_capture_begin(lp, sizeof(lp));
    assert_int_equal(pt_create(&proc_jsonl_ops, &jc, &p), 0);
    burst(p, 20000);
    assert_int_equal(proc_jsonl_ops.start(p), 0);
    assert_int_equal(pt_stop(p, NULL), 0);
    pt_destroy(p);
    log = log_capture_end(fd, lp);
    /* written: the 8191 queued lines + the session-end and rank_device_map lines */
    if (!strstr(log, "MsptiMonitor session stats: consumed=20000 kept=20000 filtered=0 before_start=0 "
                     "dropped_queue=11809 dropped_declined=0 dropped_write=0 dropped_offline=0 written=8193 "))
        fail_msg("jsonl stop line:\n%s", log);
    free(log);
    unsetenv("MSMONITOR_JSONL_BUFFER_CAPACITY");
    penv_reload();
    proc_jsonl_test_set_backpressure_ms(5000);

    /* DB: one chunk of 4096 items, no waiting, no writer yet */
    proc_db_test_set_queue(1, 0);
    fd = log_capture_begin(lp, sizeof(lp));
    assert_int_equal(pt_create(&proc_db_ops, &dc, &p), 0);
    burst(p, 10000);
    assert_int_equal(pt_stop(p, NULL), 0);
    pt_destroy(p);
    log = log_capture_end(fd, lp);
    if (!strstr(log, "consumed=10000 kept=10000 filtered=0 before_start=0 dropped_queue=5904 dropped_declined=0 "
                     "dropped_write=0 dropped_offline=0 written=8192 "))
        fail_msg("db stop line:\n%s", log);
    free(log);
    proc_db_test_set_queue(0, 5000);
    log_set_level(LOG_LVL_WARNING);
    rm_rf(dir);
    free(dir);
}

/* ---- kill -9: every committed row resolves ---- */

static void test_sigkill_db_resolves(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    char *files[2];
    sqlite3 *db;
    sqlite3_stmt *st;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct output_config cfg = {.log_dir = dir, .session_start_ns = T0};
        struct output *p = NULL;
        if (pt_create(&proc_db_ops, &cfg, &p) != 0 || proc_db_ops.start(p) != 0)
            _exit(1);
        for (uint64_t n = 0;; n += 256) { /* no tick, no stop: rows stream on their own */
            struct mon_record r[256];
            for (int i = 0; i < 256; i++) {
                char name[32];
                snprintf(name, sizeof(name), "kernel_%llu", (unsigned long long)((n + (uint64_t)i) % 5000));
                /* distinct names: STRING_IDS grows while rows stream (names live as long as the process) */
                r[i] = r_kernel(T0 + n + (uint64_t)i, T0 + n + (uint64_t)i + 1, 0, 0, n + (uint64_t)i, "AI_CORE",
                                strdup(name));
            }
            pt_consume(p, r, 256);
        }
    }
    /* wait until some rows are committed, then kill mid-stream */
    long long rows = 0;
    for (int i = 0; i < 600 && rows < 20000; i++) {
        usleep(50000);
        if (list_files(dir, ".db", files, 2) != 1)
            continue;
        if (sqlite3_open_v2(files[0], &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
            sqlite3_prepare_v2(db, "SELECT count(*) FROM TASK", -1, &st, NULL) == SQLITE_OK) {
            if (sqlite3_step(st) == SQLITE_ROW)
                rows = sqlite3_column_int64(st, 0);
            sqlite3_finalize(st);
        }
        sqlite3_close(db);
        free_list(files, 1);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_true(rows >= 20000);
    assert_int_equal(list_files(dir, ".db", files, 2), 1);
    assert_int_equal(sqlite3_open_v2(files[0], &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    const char *sql =
        "SELECT (SELECT count(*) FROM COMPUTE_TASK_INFO), "
        "(SELECT count(*) FROM COMPUTE_TASK_INFO WHERE name NOT IN (SELECT id FROM STRING_IDS) "
        "   OR taskType NOT IN (SELECT id FROM STRING_IDS)), "
        "(SELECT count(*) FROM TASK WHERE taskType NOT IN (SELECT id FROM STRING_IDS)), "
        "(SELECT count(*) FROM ENUM_API_TYPE), (SELECT count(*) FROM ENUM_HCCL_DATA_TYPE), "
        "(SELECT count(*) FROM ENUM_MSTX_EVENT_TYPE), (SELECT count(*) FROM META_DATA), "
        "(SELECT count(*) FROM HOST_INFO)";
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_true(sqlite3_column_int64(st, 0) >= 20000);
    assert_int_equal(sqlite3_column_int64(st, 1), 0); /* every name resolves */
    assert_int_equal(sqlite3_column_int64(st, 2), 0);
    assert_int_equal(sqlite3_column_int64(st, 3), 9);
    assert_int_equal(sqlite3_column_int64(st, 4), 18);
    assert_int_equal(sqlite3_column_int64(st, 5), 4);
    assert_int_equal(sqlite3_column_int64(st, 6), 4);
    assert_int_equal(sqlite3_column_int64(st, 7), 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
    free_list(files, 1);
    rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_ranges_in_every_output),
        cmocka_unit_test(test_forced_drops_in_stop_line),
        cmocka_unit_test(test_sigkill_db_resolves),
        cmocka_unit_test(test_burst_jsonl_lossless),
        cmocka_unit_test(test_burst_db_lossless),
        cmocka_unit_test(test_db_concurrent_producers_lossless),
    };
    log_set_level(LOG_LVL_WARNING);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
