/* Unit tests of the JSONL exporter (docs/design/outputs.md#jsonl), the line ring and the outfile helpers:
 * byte-exact line shapes, rotation with maxLines 100 / maxFiles 3, flag/env precedence and
 * clamping, capacity rules, ring overflow counting, names, modes, prepare_dir, HashId. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <cmocka.h>

#include "export_util.h"
#include "pl_test.h"
#include "plugin/outputs/outfile.h"
#include "plugin/penv.h"
#include "plugin/pipeline/output.h"
#include "plugin/outputs/proc_jsonl.h"
#include "plugin/pipeline/filter.h"

static struct output *session(const char *dir, const char *lines, const char *files, int start)
{
    struct output_config cfg = {.log_dir = dir, .rank = 2, .session_start_ns = T0,
                              .jsonl_rotate_lines = lines, .jsonl_rotate_files = files};
    struct output *p = NULL;
    assert_int_equal(pt_create(&proc_jsonl_ops, &cfg, &p), 0);
    if (start)
        assert_int_equal(proc_jsonl_ops.start(p), 0);
    return p;
}

static char *only_file(const char *dir)
{
    char *files[4];
    size_t n = list_files(dir, ".jsonl", files, 4);
    assert_int_equal(n, 1);
    char *text = read_all(files[0]);
    struct stat st;
    assert_int_equal(stat(files[0], &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    free_list(files, n);
    return text;
}

/* The session-end line (docs/outputs.md#session-end) cut out of text: its counters hold the
 * CPU time, so the tests match it apart. Returns it without its newline (caller frees). */
static char *cut_session_end(char *text)
{
    char *at = strstr(text, "{\"filter\":");
    assert_non_null(at);
    char *nl = strchr(at, '\n');
    assert_non_null(nl);
    char *line = strndup(at, (size_t)(nl - at));
    memmove(at, nl + 1, strlen(nl + 1) + 1);
    return line;
}

static void assert_has(const char *text, const char *part)
{
    if (!strstr(text, part))
        fail_msg("no %s in %s", part, text);
}

static void test_line_shapes(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    mode_t old = umask(0);
    struct output *p = session(dir, NULL, NULL, 1);
    struct mon_record r[] = {
        r_api(MON_KIND_ACL_API, T0 + 1, T0 + 2, 7, 8, 3, "aclnn\"Add"),
        r_kernel(T0 + 3, T0 + 4, 1, 2, 5, "AI_CORE", "MatMul"),
        r_comm(T0 + 5, T0 + 6, 3, 4, 4, 1024, "RING", "allReduce", "group1", 9),
        r_hccl(T0 + 7, T0 + 8, 1, 2, 0.1, "hcclOp", "group1"),
        r_memory(1, 1, 11, T0 + 9, T0 + 10, 4096, 64, 7, 1, 2),
        r_memset(5, 1, 64, T0 + 11, T0 + 12, 1, 2, 12),
        r_memcpy(2, 0, 128, T0 + 13, T0 + 14, 1, 2, 13),
        r_kernel(1, 2, 0, 0, 1, "T", "BeforeSession"),
        r_marker(16, 0, T0 + 20, 6, 7, 8, "step 1", "default"),
        r_marker(16, 1, T0 + 21, 6, 9, 3, "", ""),
        r_marker(32, 0, T0 + 30, 6, 7, 10, "", ""),
        r_marker(32, 1, T0 + 31, 6, 9, 3, "", ""),
        r_comm(T0 + 40, T0 + 41, 3, 4, 13, 1, "HD", "x", "g", 10),
    };
    pt_consume(p, r, sizeof(r) / sizeof(r[0]));
    assert_int_equal(proc_jsonl_ops.tick(p), 0);
    assert_int_equal(proc_jsonl_ops.stop(p, "{\"tp\":[0,1]}"), 0);
    pt_destroy(p);
    umask(old);
    char *text = only_file(dir);
    char *end = cut_session_end(text);
    assert_has(end, "{\"filter\":\"\",\"kind\":\"session_stats\",\"stats\":{\"before_start\":1,");
    assert_has(end, ",\"consumed\":13,");
    assert_has(end, ",\"kept\":12,");
    free(end);
    char exp[4096];
    snprintf(exp, sizeof(exp),
        "{\"correlationId\":3,\"endNs\":%llu,\"kind\":\"AclAPI\",\"name\":\"aclnn\\\"Add\",\"processId\":7,\"startNs\":%llu,\"threadId\":8}\n"
        "{\"correlationId\":5,\"deviceId\":1,\"endNs\":%llu,\"kind\":\"Kernel\",\"name\":\"MatMul\",\"startNs\":%llu,\"streamId\":2,\"type\":\"AI_CORE\"}\n"
        "{\"algType\":\"RING\",\"commName\":\"group1\",\"correlationId\":9,\"count\":1024,\"dataType\":\"FP32\",\"deviceId\":3,\"endNs\":%llu,\"kind\":\"Communication\",\"name\":\"allReduce\",\"startNs\":%llu,\"streamId\":4}\n"
        "{\"bandWidth\":0.1,\"commName\":\"group1\",\"deviceId\":1,\"endNs\":%llu,\"kind\":\"Hccl\",\"name\":\"hcclOp\",\"startNs\":%llu,\"streamId\":2}\n"
        "{\"address\":4096,\"bytes\":64,\"correlationId\":11,\"deviceId\":1,\"endNs\":%llu,\"kind\":\"Memory\",\"memoryKind\":\"DEVICE\",\"operationType\":\"RELEASE\",\"processId\":7,\"startNs\":%llu,\"streamId\":2}\n"
        "{\"bytes\":64,\"correlationId\":12,\"deviceId\":1,\"endNs\":%llu,\"isAsync\":true,\"kind\":\"MemSet\",\"startNs\":%llu,\"streamId\":2,\"value\":5}\n"
        "{\"bytes\":128,\"copyKind\":\"HTOD\",\"correlationId\":13,\"deviceId\":1,\"endNs\":%llu,\"isAsync\":false,\"kind\":\"MemCpy\",\"startNs\":%llu,\"streamId\":2}\n"
        "{\"domain\":\"default\",\"endNs\":%llu,\"id\":6,\"kind\":\"Marker\",\"name\":\"step 1\",\"processId\":7,\"sourceKind\":\"Host\",\"startNs\":%llu,\"threadId\":10}\n"
        "{\"deviceId\":9,\"domain\":\"default\",\"endNs\":%llu,\"id\":6,\"kind\":\"Marker\",\"name\":\"step 1\",\"sourceKind\":\"Device\",\"startNs\":%llu,\"streamId\":3}\n"
        "{\"algType\":\"HD\",\"commName\":\"g\",\"correlationId\":10,\"count\":1,\"dataType\":\"INVALID_TYPE\",\"deviceId\":3,\"endNs\":%llu,\"kind\":\"Communication\",\"name\":\"x\",\"startNs\":%llu,\"streamId\":4}\n"
        "{\"kind\":\"parallel_group_info\",\"value\":\"{\\\"tp\\\":[0,1]}\"}\n"
        "{\"device\":[1,3,9],\"kind\":\"rank_device_map\",\"rank\":2}\n",
        T0 + 2, T0 + 1, T0 + 4, T0 + 3, T0 + 6, T0 + 5, T0 + 8, T0 + 7, T0 + 10, T0 + 9, T0 + 12, T0 + 11,
        T0 + 14, T0 + 13, T0 + 30, T0 + 20, T0 + 31, T0 + 21, T0 + 41, T0 + 40);
    assert_string_equal(text, exp);
    free(text);
    rm_rf(dir);
    free(dir);
}

static void feed_n(struct output *p, int from, int n)
{
    for (int i = from; i < from + n; i++) {
        struct mon_record r = r_api(MON_KIND_API, T0 + (uint64_t)i, T0 + (uint64_t)i + 1, 1, 1, (uint64_t)i, "a");
        pt_consume(p, &r, 1);
    }
}

/* maxLines 100 / maxFiles 3: 450 lines → five files created, the two oldest deleted. */
static void test_rotation(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    struct output *p = session(dir, "100", "3", 1);
    feed_n(p, 0, 450);
    assert_int_equal(proc_jsonl_ops.stop(p, NULL), 0);
    pt_destroy(p);
    char *files[8];
    size_t n = list_files(dir, ".jsonl", files, 8);
    assert_int_equal(n, 3);
    int expect_first[3] = {200, 300, 400};
    int expect_lines[3] = {100, 100, 51}; /* + the session-end line */
    for (size_t f = 0; f < n; f++) {
        char *t = read_all(files[f]);
        int lines = 0;
        for (char *c = t; *c; c++)
            lines += *c == '\n';
        assert_int_equal(lines, expect_lines[f]);
        char want[64];
        snprintf(want, sizeof(want), "{\"correlationId\":%d,", expect_first[f]);
        assert_true(strncmp(t, want, strlen(want)) == 0);
        free(t);
    }
    free_list(files, n);
    rm_rf(dir);
    free(dir);
}

/* One consume() of 2500 records fills several line blocks; rotation at 1000 lines cuts
 * blocks between lines. Every line arrives once, in order, whole; a name needing escapes and
 * longer than a default block still makes one line. */
static void test_rotation_large_batches(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    struct output *p = session(dir, "1000", NULL, 1);
    char *big = malloc(70001);
    for (int i = 0; i < 70000; i++)
        big[i] = i % 100 == 99 ? '"' : 'x';
    big[70000] = '\0';
    struct mon_record *r = calloc(2500, sizeof(*r));
    for (int i = 0; i < 2500; i++)
        r[i] = r_api(MON_KIND_API, T0 + (uint64_t)i, T0 + (uint64_t)i + 1, 1, 1, (uint64_t)i, i == 1234 ? big : "a");
    pt_consume(p, r, 2500);
    assert_int_equal(proc_jsonl_ops.stop(p, NULL), 0);
    pt_destroy(p);
    char *files[8];
    size_t n = list_files(dir, ".jsonl", files, 8);
    assert_int_equal(n, 3);
    int next = 0;
    for (size_t f = 0; f < n; f++) {
        char *t = read_all(files[f]);
        int lines = 0;
        for (char *line = t; *line; lines++) {
            char *nl = strchr(line, '\n');
            assert_non_null(nl);
            int id = -1;
            if (f == n - 1 && nl[1] == '\0' && strncmp(line, "{\"filter\":", 10) == 0) {
                line = nl + 1; /* the session-end line */
                continue;
            }
            assert_int_equal(sscanf(line, "{\"correlationId\":%d,", &id), 1);
            assert_int_equal(id, next++);
            assert_true(nl[-1] == '}');
            if (id == 1234) {
                /* the 118 bytes of the line with an empty name, plus 70000 + 700 escapes */
                assert_int_equal(nl - line, 118 + 70700);
                assert_memory_equal(line + 65 + 97, "xx\\\"xx", 6); /* name at 65: 99 x, \" */
            }
            line = nl + 1;
        }
        assert_int_equal(lines, f < 2 ? 1000 : 500 + 1);
        free(t);
    }
    assert_int_equal(next, 2500);
    free_list(files, n);
    free(r);
    free(big);
    rm_rf(dir);
    free(dir);
}

static size_t count_files_lines(const char *dir, size_t *ret_files)
{
    char *files[64];
    size_t n = list_files(dir, ".jsonl", files, 64), lines = 0;
    for (size_t f = 0; f < n; f++) {
        char *t = read_all(files[f]);
        size_t l = 0;
        for (char *c = t; *c; c++)
            l += *c == '\n';
        if (f == 0)
            lines = l;
        free(t);
    }
    free_list(files, n);
    *ret_files = n;
    return lines; /* lines of the first file = effective maxLines when n > 1 */
}

/* Flag beats env; env used when the flag is empty; clamping to [100, 500000]. */
static void test_flag_env_precedence(void **state)
{
    (void)state;
    struct { const char *flag, *env; int feed; size_t first_lines, files; } cases[] = {
        {"150", "120", 299, 150, 2},   /* 299 + the session-end line */
        {"", "120", 300, 120, 3},
        {NULL, "120", 300, 120, 3},
        {"5", NULL, 250, 100, 3},      /* clamped up */
        {"abc", NULL, 300, 301, 1},    /* invalid → 10000; + the session-end line */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *dir = tmpdir_make();
        if (cases[i].env)
            setenv("MSMONITOR_JSONL_ROTATE_LOG_LINES", cases[i].env, 1);
        else
            unsetenv("MSMONITOR_JSONL_ROTATE_LOG_LINES");
        penv_reload();
        struct output *p = session(dir, cases[i].flag, NULL, 1);
        feed_n(p, 0, cases[i].feed);
        assert_int_equal(proc_jsonl_ops.stop(p, NULL), 0);
        pt_destroy(p);
        size_t nfiles;
        size_t first = count_files_lines(dir, &nfiles);
        assert_int_equal(nfiles, cases[i].files);
        assert_int_equal(first, cases[i].first_lines);
        rm_rf(dir);
        free(dir);
    }
    unsetenv("MSMONITOR_JSONL_ROTATE_LOG_LINES");
    penv_reload();
}

static void test_settings_rules(void **state)
{
    (void)state;
    struct jsonl_settings s;
    char lp[64];
    int fd = log_capture_begin(lp, sizeof(lp));
    jsonl_settings_resolve(NULL, NULL, NULL, NULL, NULL, NULL, &s);
    assert_int_equal(s.max_lines, 10000);
    assert_int_equal(s.max_files, -1);
    assert_int_equal(s.capacity, 524288);
    assert_int_equal(s.interval_ms, 30000);
    jsonl_settings_resolve("600000", "1", NULL, NULL, "1000", "999", &s);
    assert_int_equal(s.max_lines, 500000);
    assert_int_equal(s.max_files, -1);
    assert_int_equal(s.capacity, 524288);  /* not a power of two → default */
    assert_int_equal(s.interval_ms, 30000); /* below the minimum → default */
    jsonl_settings_resolve("", "", "99", "2", "4096", "1000", &s);
    assert_int_equal(s.max_lines, 100);
    assert_int_equal(s.max_files, 2);
    assert_int_equal(s.capacity, 8192);     /* clamped up */
    assert_int_equal(s.interval_ms, 1000);
    jsonl_settings_resolve("-5", "x", "300", "7", "4194304", "abc", &s);
    assert_int_equal(s.max_lines, 10000);   /* flag invalid: no fallback to env */
    assert_int_equal(s.max_files, -1);
    assert_int_equal(s.capacity, 2097152);  /* clamped down */
    assert_int_equal(s.interval_ms, 30000);
    jsonl_settings_resolve("100", "-1", NULL, NULL, "16384", "2000", &s);
    assert_int_equal(s.max_lines, 100);
    assert_int_equal(s.max_files, -1);
    assert_int_equal(s.capacity, 16384);
    assert_int_equal(s.interval_ms, 2000);
    char *log = log_capture_end(fd, lp);
    assert_non_null(strstr(log, "'1000' is not a power of two"));
    assert_non_null(strstr(log, "rotate log lines 600000 out of [100, 500000]; clamped to 500000"));
    assert_non_null(strstr(log, "invalid rotate log files '1'"));
    assert_non_null(strstr(log, "invalid rotate log lines '-5'"));
    free(log);
}

/* No writer thread running: the queue fills; 10000 pushes into capacity 8192 (holds 8191)
 * drop 1809 lines, counted and reported at stop, which writes everything queued. */
static void test_ring_overflow_count(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    setenv("MSMONITOR_JSONL_BUFFER_CAPACITY", "8192", 1);
    penv_reload();
    char lp[64];
    int fd = log_capture_begin(lp, sizeof(lp));
    struct output *p = session(dir, "500000", NULL, 0);
    feed_n(p, 0, 10000);
    assert_int_equal(proc_jsonl_ops.stop(p, NULL), 0);
    pt_destroy(p);
    char *log = log_capture_end(fd, lp);
    assert_non_null(strstr(log, "RingBuffer full 1809 times"));
    free(log);
    size_t nfiles;
    assert_int_equal(count_files_lines(dir, &nfiles), 8191 + 1); /* + the session-end line */
    char *files[2];
    assert_int_equal(list_files(dir, ".jsonl", files, 2), 1);
    char *text = read_all(files[0]);
    char *end = cut_session_end(text);
    assert_has(end, "\"dropped_queue\":1809,"); /* the drops are in the file, not only the log */
    free(end);
    free(text);
    free_list(files, 1);
    assert_int_equal(nfiles, 1);
    unsetenv("MSMONITOR_JSONL_BUFFER_CAPACITY");
    penv_reload();
    rm_rf(dir);
    free(dir);
}

/* The log directory is deleted (and recreated) while a file is open: the exporter notices,
 * logs it and continues in a new file, so the last lines and the session-end lines are not
 * written into the unlinked inode. */
static void test_file_removed_mid_session(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    char lp[64];
    int fd = log_capture_begin(lp, sizeof(lp));
    struct output *p = session(dir, NULL, NULL, 1);
    feed_n(p, 0, 300); /* > 256 queued: the writer creates the first file */
    char *files[4];
    size_t n = 0;
    const struct timespec nap = {0, 1000000};
    for (int i = 0; i < 600000 && (n = list_files(dir, ".jsonl", files, 4)) == 0; i++)
        nanosleep(&nap, NULL);
    assert_int_equal(n, 1);
    char *old = strdup(files[0]);
    free_list(files, n);
    rm_rf(dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    feed_n(p, 300, 10);
    assert_int_equal(proc_jsonl_ops.stop(p, "{\"tp\":[0]}"), 0);
    pt_destroy(p);
    char *log = log_capture_end(fd, lp);
    char want[256];
    snprintf(want, sizeof(want), "jsonl: %s was removed or replaced", old);
    assert_non_null(strstr(log, want));
    free(log);
    char *text = only_file(dir);
    free(cut_session_end(text));
    const char *last = "{\"kind\":\"parallel_group_info\",\"value\":\"{\\\"tp\\\":[0]}\"}\n";
    assert_true(strlen(text) >= strlen(last));
    assert_string_equal(text + strlen(text) - strlen(last), last);
    free(text);
    free(old);
    rm_rf(dir);
    free(dir);
}

/* The session-end line keeps the filter as set, however hostile: 1024 bytes of control
 * characters escape to 6x that and the line is still written whole. */
static void test_session_end_hostile_filter(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    struct filter_state *fs = NULL;
    struct pipeline *pl = NULL;
    struct output_config cfg = {.log_dir = dir, .rank = 2, .session_start_ns = T0};
    char text[FILTER_MAX_TEXT + 1];
    memset(text, 0x01, FILTER_MAX_TEXT);
    memcpy(text, "Kernel:", 7);
    text[FILTER_MAX_TEXT] = '\0';
    assert_int_equal(filter_state_create(&fs), 0);
    assert_int_equal(filter_state_set(fs, text), 0);
    assert_int_equal(pipeline_create(&cfg, fs, &proc_jsonl_ops, &pl), 0);
    assert_int_equal(pipeline_start(pl), 0);
    struct mon_record r = r_kernel(T0 + 3, T0 + 4, 1, 2, 5, "AI_CORE", "MatMul");
    pipeline_deliver(pl, &r, 1);
    assert_int_equal(pipeline_stop(pl, NULL), 0);
    pipeline_destroy(pl);
    filter_state_destroy(fs);
    char *all = only_file(dir);
    char *end = cut_session_end(all);
    assert_true(strncmp(end, "{\"filter\":\"Kernel:\\u0001", 18) == 0);
    assert_int_equal(strstr(end, "\",\"kind\":\"session_stats\"") - end, 11 + 7 + 6 * (FILTER_MAX_TEXT - 7));
    assert_has(end, "\"filtered\":1,"); /* no kernel name matches: MatMul was filtered out */
    free(end);
    free(all);
    rm_rf(dir);
    free(dir);
}

/* No file can be created (directory gone): the lines are counted and reported once, and the
 * failed attempts do not push the forced-unique name stamps into the future (one attempt per
 * block would advance them 1 ms each: 20 s for these 20000 blocks). */
static void test_no_directory(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    rm_rf(dir);
    char lp[64];
    int fd = log_capture_begin(lp, sizeof(lp));
    struct output *p = session(dir, NULL, NULL, 0);
    feed_n(p, 0, 20000);
    assert_int_equal(proc_jsonl_ops.stop(p, NULL), 0);
    pt_destroy(p);
    char *log = log_capture_end(fd, lp);
    char name[256];
    assert_int_equal(outfile_make_name(name, sizeof(name), "/x", 0, "t"), 0);
    /* "/x/msmonitor_<pid>_<YYYYmmddHHMMSS><mmm>_0.t" */
    const char *stamp = strchr(name + strlen("/x/msmonitor_"), '_') + 1;
    struct tm tm = {0};
    assert_int_equal(sscanf(stamp, "%4d%2d%2d%2d%2d%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                            &tm.tm_min, &tm.tm_sec), 6);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_isdst = -1;
    int64_t stamp_ms = (int64_t)mktime(&tm) * 1000 +
                       (int64_t)((stamp[14] - '0') * 100 + (stamp[15] - '0') * 10 + (stamp[16] - '0'));
    int64_t now_ms = (int64_t)(clock_real_ns() / 1000000u);
    assert_true(stamp_ms - now_ms < 1000);
    assert_non_null(strstr(log, "jsonl: 20001 lines lost because no file could be created in "));
    free(log);
    free(dir);
}

static void test_outfile_names_and_hash(void **state)
{
    (void)state;
    char buf[256];
    setenv("TZ", "UTC", 1);
    tzset();
    assert_int_equal(outfile_format_name(buf, sizeof(buf), "/d", 42, 1749889801123ULL, -1, "db"), 0);
    assert_string_equal(buf, "/d/msmonitor_42_20250614083001123_-1.db");
    assert_int_equal(outfile_format_name(buf, 20, "/d", 42, 1749889801123ULL, -1, "db"), -ENAMETOOLONG);
    char a[256], b[256];
    assert_int_equal(outfile_make_name(a, sizeof(a), "/d", 0, "jsonl"), 0);
    assert_int_equal(outfile_make_name(b, sizeof(b), "/d", 0, "jsonl"), 0);
    assert_true(strcmp(a, b) < 0); /* unique and ordered within one millisecond */
    assert_true(outfile_hash_id("", 0) == 0);
    assert_true(outfile_hash_id("a", 1) == 416611827809ULL);
    assert_true(outfile_hash_id("ab", 2) == 12502649811461ULL);
    assert_true(outfile_hash_id("group1", 6) == 9432122935399943722ULL);
    assert_true(outfile_hash_id("hccl_world_group", 16) == 7415574198778220483ULL);
    char uid[32];
    assert_int_equal(outfile_host_uid(uid, sizeof(uid)), 0);
    for (char *c = uid; *c; c++)
        assert_true(*c >= '0' && *c <= '9');
}

static void test_prepare_dir(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    char out[4200], path[4400];
    mode_t old = umask(0077);
    snprintf(path, sizeof(path), "%s/a/b/c", dir);
    assert_int_equal(outfile_prepare_dir(path, out, sizeof(out)), 0);
    assert_string_equal(out, path);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0750);
    snprintf(path, sizeof(path), "%s/a", dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0750);
    umask(old);
    /* relative path against the cwd, trailing slash */
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(dir), 0);
    assert_int_equal(outfile_prepare_dir("rel/x/", out, sizeof(out)), 0);
    snprintf(path, sizeof(path), "%s/rel/x", dir);
    assert_string_equal(out, path);
    assert_int_equal(chdir(cwd), 0);
    /* symlink: warning, resolved */
    char link[4400];
    snprintf(link, sizeof(link), "%s/lnk", dir);
    snprintf(path, sizeof(path), "%s/a/b", dir);
    assert_int_equal(symlink(path, link), 0);
    char lp[64];
    int fd = log_capture_begin(lp, sizeof(lp));
    assert_int_equal(outfile_prepare_dir(link, out, sizeof(out)), 0);
    assert_string_equal(out, path);
    /* a regular file, an over-long path, an empty path */
    snprintf(path, sizeof(path), "%s/file", dir);
    close(open(path, O_CREAT | O_WRONLY, 0600));
    assert_int_equal(outfile_prepare_dir(path, out, sizeof(out)), -ENOTDIR);
    char *longp = malloc(5000);
    memset(longp, 'x', 4999);
    longp[0] = '/';
    longp[4999] = '\0';
    assert_int_equal(outfile_prepare_dir(longp, out, sizeof(out)), -ENAMETOOLONG);
    free(longp);
    assert_int_equal(outfile_prepare_dir("", out, sizeof(out)), -EINVAL);
    /* a component that is a file */
    snprintf(path, sizeof(path), "%s/file/sub", dir);
    assert_true(outfile_prepare_dir(path, out, sizeof(out)) < 0);
    char *log = log_capture_end(fd, lp);
    assert_non_null(strstr(log, "is a symlink"));
    assert_non_null(strstr(log, "/file' is not a directory"));
    assert_non_null(strstr(log, "longer than 4096 bytes"));
    free(log);
    rm_rf(dir);
    free(dir);
}

/* Disk full: the child writes into files limited by RLIMIT_FSIZE to an odd size
 * (SIGXFSZ ignored, so writes fail with EFBIG mid-line). Each failed write is cut back to the
 * last whole line: every file ends with a newline and every line is one whole record. */
static void test_full_file_keeps_whole_lines(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    char lp[64];
    int logfd = log_capture_begin(lp, sizeof(lp));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {40000 + 37, 40000 + 37};
        setrlimit(RLIMIT_FSIZE, &rl);
        struct output *p = session(dir, NULL, NULL, 1);
        feed_n(p, 0, 3000);
        proc_jsonl_ops.stop(p, NULL);
        pt_destroy(p);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    char *log = log_capture_end(logfd, lp);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    if (!strstr(log, "(file cut back to its last whole line)"))
        fail_msg("no cut-back line in:\n%s", log);
    free(log);
    char *files[4];
    size_t n = list_files(dir, ".jsonl", files, 4);
    assert_true(n >= 1);
    for (size_t i = 0; i < n; i++) {
        char *text = read_all(files[i]);
        size_t len = strlen(text);
        assert_true(len > 0 && len <= 40000 + 37);
        if (text[len - 1] != '\n')
            fail_msg("%s ends with a cut line (%zu bytes)", files[i], len);
        for (char *l = text; *l; l = strchr(l, '\n') + 1)
            if (l[0] != '{' || strchr(l, '\n')[-1] != '}')
                fail_msg("%s holds a broken line at byte %zu", files[i], (size_t)(l - text));
        free(text);
    }
    free_list(files, n);
    rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_shapes),
        cmocka_unit_test(test_rotation),
        cmocka_unit_test(test_rotation_large_batches),
        cmocka_unit_test(test_flag_env_precedence),
        cmocka_unit_test(test_settings_rules),
        cmocka_unit_test(test_ring_overflow_count),
        cmocka_unit_test(test_file_removed_mid_session),
        cmocka_unit_test(test_session_end_hostile_filter),
        cmocka_unit_test(test_no_directory),
        cmocka_unit_test(test_outfile_names_and_hash),
        cmocka_unit_test(test_prepare_dir),
        cmocka_unit_test(test_full_file_keeps_whole_lines),
    };
    log_set_level(LOG_LVL_WARNING);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
