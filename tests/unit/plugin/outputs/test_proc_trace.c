/* test_proc_trace: the nputrace writer behind the session's window stage, through the real
 * pipeline: a window's API call, its kernel and a `step` marker range become one valid file
 * (events, paired ac2g flow, track metadata, base timestamp); the gzip form above the size
 * threshold; the event cap counts drops; the window's end cuts later records, for the trace
 * and for a DB output registered beside it alike; concurrent producers lose nothing; a
 * directory gone at stop leaves no file behind and counts the loss; a marker-delimited window
 * (a program without a step call) keeps exactly what starts between the start of `step S` and
 * the start of `step E`, purging earlier steps while armed, and refuses a passed start. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <sqlite3.h>

#include "export_util.h"
#include "pl_test.h"
#include "plugin/outputs/proc_trace.h"
#include "plugin/pipeline/window.h"

/* What an nputrace window session is made of: the window and the outputs' options. */
struct topt {
    int32_t start_step, stop_step, world_size, iterations;
    const char *backend;
    bool export_db, marker_steps;
};

/* The session tracewin starts: the trace output (+ the DB with export_db) behind a window. */
/* output_config.artifact: the file the output last put in place, as the session hears it. */
static char pt_artifact[4096];
static void on_artifact(void *ctx, const char *path)
{
    assert_ptr_equal(ctx, pt_artifact);
    snprintf(pt_artifact, sizeof(pt_artifact), "%s", path);
}

static struct output *make(const char *dir, const struct topt *o)
{
    struct output_trace_opts to = { .world_size = o->world_size, .backend = o->backend };
    struct window_opts wo = { .start_step = o->start_step, .stop_step = o->stop_step,
                              .marker_steps = o->marker_steps, .iterations = o->iterations };
    struct output_config cfg = { .log_dir = dir, .rank = 1, .session_start_ns = T0, .trace = &to,
                               .artifact = on_artifact, .artifact_ctx = pt_artifact };
    const struct output_ops *ops[2] = { &proc_trace_ops, &proc_db_ops };
    struct pipeline *pl = NULL;
    int i;
    assert_int_equal(pipeline_create_set(&cfg, NULL, ops, o->export_db ? 2 : 1, &pl), 0);
    assert_int_equal(pipeline_set_window(pl, &wo), 0);
    assert_int_equal(pipeline_start(pl), 0);
    for (i = 0; i < PT_MAX && pt_live[i].p; i++)
        ;
    assert_true(i < PT_MAX);
    pt_live[i].p = pipeline_output(pl);
    pt_live[i].pl = pl;
    return pt_live[i].p;
}

static void window_of(struct output *p, struct window_state *m)
{
    assert_int_equal(pipeline_window(pt_pl(p), m), 0);
}

static void feed(struct output *p)
{
    struct mon_record r[5] = {
        r_marker(2, 0, T0 + 1500, 1, 77, 78, "step 5", "default"),
        r_api(MON_KIND_RUNTIME_API, T0 + 2000, T0 + 2100, 77, 78, 3, "launch"),
        r_kernel(T0 + 3000, T0 + 4000, 0, 2, 3, "AI_CORE", "k0"),
        r_kernel(T0 + 5000, T0 + 6000, 0, 2, 99, "AI_CORE", "k_no_launch"),
        r_marker(4, 0, T0 + 9000, 1, 77, 78, "", ""),
    };
    pt_consume(p, r, 5);
}

static cJSON *load(const char *path, bool gz)
{
    char *text;
    if (gz) {
        gzFile f = gzopen(path, "rb");
        assert_non_null(f);
        text = calloc(1, 1 << 20);
        int n = gzread(f, text, (1 << 20) - 1);
        assert_true(n > 0);
        gzclose(f);
    } else {
        text = read_all(path);
    }
    assert_non_null(text);
    cJSON *j = cJSON_Parse(text);
    free(text);
    assert_non_null(j);
    return j;
}

static int count_ph(const cJSON *ev, const char *ph)
{
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
        n += strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, ph) == 0;
    return n;
}

static void test_window_file(void **state)
{
    char *dir = tmpdir_make(), path[4096];
    struct topt o = { .start_step = 5, .stop_step = 7, .world_size = 2, .backend = "mspti" };
    (void)state;
    pt_artifact[0] = '\0';
    struct output *p = make(dir, &o);
    feed(p);
    assert_int_equal(pt_stop(p, NULL), 0);
    pt_destroy(p);
    assert_int_equal(proc_trace_name(path, sizeof(path), dir, (int)getpid(), 1, 5, 7, false), 0);
    assert_string_equal(pt_artifact, path);
    cJSON *j = load(path, false);
    assert_true((uint64_t)cJSON_GetObjectItem(j, "baseTimeNanoseconds")->valuedouble == T0 + 1000);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "distributedInfo"), "world_size")->valueint, 2);
    const cJSON *ev = cJSON_GetObjectItem(j, "traceEvents");
    assert_int_equal(count_ph(ev, "X"), 4);   /* API, 2 kernels, the step range */
    assert_int_equal(count_ph(ev, "s"), 1);   /* only the kernel with its launch in the window */
    assert_int_equal(count_ph(ev, "f"), 1);
    assert_true(count_ph(ev, "M") >= 8);      /* host and device process + thread rows */
    const cJSON *e;
    bool step = false;
    cJSON_ArrayForEach(e, ev) {
        const cJSON *n = cJSON_GetObjectItem(e, "name");
        if (n && strcmp(n->valuestring, "step 5") == 0) {
            step = true;
            assert_true(fabs(cJSON_GetObjectItem(e, "ts")->valuedouble - 0.5) < 1e-9);
            assert_true(fabs(cJSON_GetObjectItem(e, "dur")->valuedouble - 7.5) < 1e-9);
        }
    }
    assert_true(step);
    cJSON_Delete(j);
    rm_rf(dir);
    free(dir);
}

static void test_gzip_and_cap(void **state)
{
    char *dir = tmpdir_make(), path[4096];
    struct topt o = { .start_step = 1, .stop_step = 2, .backend = "cupti" };
    struct pipeline_stats st;
    (void)state;
    proc_trace_test_set_limits(0, 1); /* every file counts as large */
    struct output *p = make(dir, &o);
    feed(p);
    assert_int_equal(pt_stop(p, NULL), 0);
    pt_destroy(p);
    assert_int_equal(proc_trace_name(path, sizeof(path), dir, (int)getpid(), 1, 1, 2, true), 0);
    cJSON *j = load(path, true);
    assert_int_equal(count_ph(cJSON_GetObjectItem(j, "traceEvents"), "X"), 4);
    cJSON_Delete(j);

    proc_trace_test_set_limits(2, 0);
    o.start_step = 3;
    o.stop_step = 4;
    p = make(dir, &o);
    feed(p);
    assert_int_equal(pt_stop(p, NULL), 0);    /* the window reaches the trace at the end */
    pipeline_stats(pt_pl(p), &st);
    assert_int_equal(st.dropped_queue, 2);    /* 4 events, 2 kept */
    pt_destroy(p);
    proc_trace_test_set_limits(0, 0);
    rm_rf(dir);
    free(dir);
}

static void test_window_end_cuts(void **state)
{
    char *dir = tmpdir_make(), path[4096];
    struct topt o = { .start_step = 8, .stop_step = 9, .backend = "mspti" };
    (void)state;
    struct output *p = make(dir, &o);
    assert_int_equal(pipeline_window_close(pt_pl(p), T0 + 4500), 0); /* the second kernel and the marker END start later */
    feed(p);
    assert_int_equal(pt_stop(p, NULL), 0);
    pt_destroy(p);
    assert_int_equal(proc_trace_name(path, sizeof(path), dir, (int)getpid(), 1, 8, 9, false), 0);
    cJSON *j = load(path, false);
    const cJSON *m = cJSON_GetObjectItem(j, "msmonitor");
    assert_int_equal(cJSON_GetObjectItem(m, "afterWindow")->valueint, 1);
    assert_true((uint64_t)cJSON_GetObjectItem(m, "windowEndNanoseconds")->valuedouble == T0 + 4500);
    assert_int_equal(count_ph(cJSON_GetObjectItem(j, "traceEvents"), "X"), 3); /* the range started before */
    cJSON_Delete(j);
    rm_rf(dir);
    free(dir);
}

/* --export-type Db: the DB of the window gets the same cut as the trace (k0 starts inside the
 * window; k_no_launch starts after its end and is in neither). */
static void test_window_end_cuts_db_too(void **state)
{
    char *dir = tmpdir_make(), *files[8];
    struct topt o = { .start_step = 8, .stop_step = 9, .backend = "mspti", .export_db = true };
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    (void)state;
    struct output *p = make(dir, &o);
    assert_int_equal(pipeline_window_close(pt_pl(p), T0 + 4500), 0);
    feed(p);
    assert_int_equal(pt_stop(p, NULL), 0);
    pt_destroy(p);
    size_t n = list_files(dir, ".db", files, 8);
    assert_int_equal(n, 1);
    assert_int_equal(sqlite3_open_v2(files[0], &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT t.startNs FROM TASK t JOIN COMPUTE_TASK_INFO c "
                                            "ON c.globalTaskId = t.globalTaskId", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(st, 0), (sqlite3_int64)(T0 + 3000));
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);
    free_list(files, n);
    rm_rf(dir);
    free(dir);
}

struct prod {
    struct output *p;
    uint32_t stream;
};

static void *producer(void *a)
{
    struct prod *pr = a;
    struct mon_record r[100];
    for (int b = 0; b < 50; b++) {
        for (int i = 0; i < 100; i++) {
            uint64_t t = T0 + 1000 + (uint64_t)(b * 100 + i) * 10;
            r[i] = r_kernel(t, t + 5, 0, pr->stream, 0, "AI_CORE", "k");
        }
        pt_consume(pr->p, r, 100);
    }
    return NULL;
}

/* Completion threads deliver concurrently (pipeline/output.h): every record of every thread is written. */
static void test_concurrent_producers(void **state)
{
    char *dir = tmpdir_make(), path[4096];
    struct topt o = { .start_step = 2, .stop_step = 3, .backend = "mspti" };
    pthread_t th[4];
    struct prod pr[4];
    (void)state;
    struct output *p = make(dir, &o);
    for (int i = 0; i < 4; i++) {
        pr[i] = (struct prod){ p, (uint32_t)i };
        assert_int_equal(pthread_create(&th[i], NULL, producer, &pr[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(pt_stop(p, NULL), 0);
    pt_destroy(p);
    assert_int_equal(proc_trace_name(path, sizeof(path), dir, (int)getpid(), 1, 2, 3, false), 0);
    cJSON *j = load(path, false);
    assert_int_equal(count_ph(cJSON_GetObjectItem(j, "traceEvents"), "X"), 4 * 50 * 100);
    cJSON_Delete(j);
    rm_rf(dir);
    free(dir);
}

static void test_dir_gone_at_stop(void **state)
{
    char *dir = tmpdir_make();
    struct topt o = { .start_step = 5, .stop_step = 7, .backend = "mspti" };
    struct pipeline_stats st;
    (void)state;
    struct output *p = make(dir, &o);
    feed(p);
    rm_rf(dir);
    pipeline_stats(pt_pl(p), &st);
    assert_int_equal(st.dropped_write, 0);
    assert_int_not_equal(pt_stop(p, NULL), 0);
    pipeline_stats(pt_pl(p), &st);
    assert_int_equal(st.dropped_write, 4);
    assert_int_equal(access(dir, F_OK), -1);
    pt_destroy(p);
    free(dir);
}

static int count_kind(const cJSON *ev, const char *kind)
{
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev) {
        const cJSON *a = cJSON_GetObjectItem(e, "args"), *k = a ? cJSON_GetObjectItem(a, "kind") : NULL;
        n += k && strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X") == 0 && strcmp(k->valuestring, kind) == 0;
    }
    return n;
}

static void test_marker_window(void **state)
{
    char *dir = tmpdir_make(), path[4096];
    struct topt o = { .start_step = 2, .stop_step = 3, .backend = "cupti", .marker_steps = true };
    struct window_state m;
    size_t n = 5000; /* more than a storage chunk: the purge compacts across chunks */
    struct mon_record *r = calloc(n + 1, sizeof(*r));
    (void)state;
    assert_non_null(r);
    struct output *p = make(dir, &o);
    r[0] = r_marker(2, 0, T0 + 1000, 1, 77, 78, "step 1", "default");
    for (size_t i = 1; i <= n; i++)
        r[i] = r_kernel(T0 + 1000 + i, T0 + 1001 + i, 0, 2, 0, "KERNEL", "pre");
    pt_consume(p, r, n + 1);
    window_of(p, &m);
    assert_int_equal(m.phase, WINDOW_ARMED);
    assert_int_equal(m.step, 1);
    struct mon_record b2[6] = {
        r_marker(4, 0, T0 + 9000, 1, 77, 78, "", ""),
        r_marker(2, 0, T0 + 10000, 2, 77, 78, "step 2", "default"),
        r_kernel(T0 + 9500, T0 + 9600, 0, 2, 0, "KERNEL", "late_pre"), /* step 1's, delivered late */
        r_kernel(T0 + 10100, T0 + 10200, 0, 2, 0, "KERNEL", "in1"),
        r_kernel(T0 + 10300, T0 + 10400, 0, 2, 0, "KERNEL", "in2"),
        r_marker(4, 0, T0 + 19000, 2, 77, 78, "", ""),
    };
    pt_consume(p, b2, 6);
    window_of(p, &m);
    assert_int_equal(m.phase, WINDOW_OPEN);
    struct mon_record b3[3] = {
        r_marker(2, 0, T0 + 20000, 3, 77, 78, "step 3", "default"),
        r_kernel(T0 + 19500, T0 + 25000, 0, 2, 0, "KERNEL", "in3"), /* before step 3 began */
        r_kernel(T0 + 20100, T0 + 20200, 0, 2, 0, "KERNEL", "after"),
    };
    pt_consume(p, b3, 3);
    window_of(p, &m);
    assert_int_equal(m.phase, WINDOW_CLOSED);
    assert_int_equal(m.start, 2);
    assert_int_equal(m.stop, 3);
    assert_int_equal(pt_stop(p, NULL), 0);
    pt_destroy(p);
    assert_int_equal(proc_trace_name(path, sizeof(path), dir, (int)getpid(), 1, 2, 3, false), 0);
    cJSON *j = load(path, false);
    const cJSON *ev = cJSON_GetObjectItem(j, "traceEvents");
    assert_int_equal(count_kind(ev, "Kernel"), 3);   /* in1, in2, in3 */
    assert_int_equal(count_kind(ev, "Marker"), 1);   /* the `step 2` range */
    assert_true((uint64_t)cJSON_GetObjectItem(cJSON_GetObjectItem(j, "msmonitor"), "windowEndNanoseconds")->valuedouble
                == T0 + 20000);
    cJSON_Delete(j);
    free(r);
    rm_rf(dir);
    free(dir);
}

static void test_marker_window_start_minus_one_and_refusal(void **state)
{
    char *dir = tmpdir_make(), path[4096];
    struct topt o = { .start_step = -1, .stop_step = -1, .iterations = 2, .backend = "cupti",
                                 .marker_steps = true };
    struct window_state m;
    (void)state;
    struct output *p = make(dir, &o);
    struct mon_record b[3] = {
        r_marker(2, 0, T0 + 1000, 1, 77, 78, "step 7", "default"),
        r_kernel(T0 + 1100, T0 + 1200, 0, 2, 0, "KERNEL", "k"),
        r_marker(2, 0, T0 + 2000, 2, 77, 78, "step 9", "default"),
    };
    pt_consume(p, b, 3);
    window_of(p, &m);
    assert_int_equal(m.start, 7);  /* -1: the first step that begins */
    assert_int_equal(m.stop, 9);
    assert_int_equal(m.phase, WINDOW_CLOSED);
    assert_int_equal(pt_stop(p, NULL), 0);
    pt_destroy(p);
    assert_int_equal(proc_trace_name(path, sizeof(path), dir, (int)getpid(), 1, 7, 9, false), 0);
    assert_int_equal(access(path, F_OK), 0);

    /* an explicit start the program has passed when the first step is seen: no file */
    struct topt o2 = { .start_step = 3, .stop_step = 4, .backend = "cupti", .marker_steps = true };
    p = make(dir, &o2);
    struct mon_record b2[2] = {
        r_marker(2, 0, T0 + 1000, 1, 77, 78, "step 5", "default"),
        r_kernel(T0 + 1100, T0 + 1200, 0, 2, 0, "KERNEL", "k"),
    };
    pt_consume(p, b2, 2);
    window_of(p, &m);
    assert_int_equal(m.phase, WINDOW_REFUSED);
    assert_int_equal(pt_stop(p, NULL), 0);
    pt_destroy(p);
    assert_int_equal(proc_trace_name(path, sizeof(path), dir, (int)getpid(), 1, 3, 4, false), 0);
    assert_int_not_equal(access(path, F_OK), 0);

    /* the session ends before `step <start>` began: no file either */
    struct topt o3 = { .start_step = 30, .stop_step = 31, .backend = "cupti", .marker_steps = true };
    p = make(dir, &o3);
    pt_consume(p, b2, 2);
    assert_int_equal(pt_stop(p, NULL), 0);
    pt_destroy(p);
    assert_int_equal(proc_trace_name(path, sizeof(path), dir, (int)getpid(), 1, 30, 31, false), 0);
    assert_int_not_equal(access(path, F_OK), 0);
    rm_rf(dir);
    free(dir);
}

/* The vendor may deliver kernels in an earlier buffer than the markers: the window still
 * holds exactly what starts between the start of `step 2` and the start of `step 3`. */
static void test_marker_window_markers_delivered_late(void **state)
{
    char *dir = tmpdir_make(), path[4096];
    struct topt o = { .start_step = 2, .stop_step = 3, .backend = "cupti", .marker_steps = true };
    (void)state;
    struct output *p = make(dir, &o);
    struct mon_record k[4] = {
        r_kernel(T0 + 1100, T0 + 1200, 0, 2, 0, "KERNEL", "s1"),
        r_kernel(T0 + 2100, T0 + 2200, 0, 2, 0, "KERNEL", "s2a"),
        r_kernel(T0 + 2300, T0 + 2400, 0, 2, 0, "KERNEL", "s2b"),
        r_kernel(T0 + 3100, T0 + 3200, 0, 2, 0, "KERNEL", "s3"),
    };
    struct mon_record m[5] = {
        r_marker(2, 0, T0 + 1000, 1, 77, 78, "step 1", "default"),
        r_marker(4, 0, T0 + 1900, 1, 77, 78, "", ""),
        r_marker(2, 0, T0 + 2000, 2, 77, 78, "step 2", "default"),
        r_marker(4, 0, T0 + 2900, 2, 77, 78, "", ""),
        r_marker(2, 0, T0 + 3000, 3, 77, 78, "step 3", "default"),
    };
    pt_consume(p, k, 4);
    pt_consume(p, m, 5);
    assert_int_equal(pt_stop(p, NULL), 0);
    pt_destroy(p);
    assert_int_equal(proc_trace_name(path, sizeof(path), dir, (int)getpid(), 1, 2, 3, false), 0);
    cJSON *j = load(path, false);
    const cJSON *ev = cJSON_GetObjectItem(j, "traceEvents");
    assert_int_equal(count_kind(ev, "Kernel"), 2);
    assert_int_equal(count_kind(ev, "Marker"), 1);
    assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "msmonitor"), "afterWindow")->valueint >= 1);
    cJSON_Delete(j);
    rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_file),
        cmocka_unit_test(test_gzip_and_cap),
        cmocka_unit_test(test_window_end_cuts),
        cmocka_unit_test(test_window_end_cuts_db_too),
        cmocka_unit_test(test_concurrent_producers),
        cmocka_unit_test(test_dir_gone_at_stop),
        cmocka_unit_test(test_marker_window),
        cmocka_unit_test(test_marker_window_start_minus_one_and_refusal),
        cmocka_unit_test(test_marker_window_markers_delivered_late),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
