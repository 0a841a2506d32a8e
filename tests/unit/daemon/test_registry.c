/* Unit tests of the process registry (matching, one-shot mailbox, busy, limit, ancestors,
 * iteration order, cap, GC, ctxt cap/idempotence, wrapping) and the status table. */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "daemon/registry.h"
#include "daemon/status.h"

static char *poll1(struct registry *r, int64_t job, const int32_t *pids, int n, int type)
{
    char *cfg = NULL;
    size_t len;
    assert_int_equal(registry_poll(r, job, pids, n, type, REG_ORIGIN_MSMON, 100, &cfg, &len), 0);
    return cfg;
}

static void set(struct registry *r, int64_t job, const int32_t *pids, size_t n, int64_t limit,
                struct reg_set_result *res)
{
    assert_int_equal(registry_set_config(r, job, pids, n, "A=1", 3, limit, NULL, NULL, res), 0);
}

static void test_wrap_and_one_shot(void **state)
{
    (void)state;
    struct registry *r = registry_create("nodeA");
    int32_t p[] = { 42, 7 };
    assert_null(poll1(r, 0, p, 2, 3));
    struct reg_set_result res;
    int64_t now = (int64_t)time(NULL);
    set(r, 0, NULL, 0, 1000, &res);
    assert_int_equal(res.n_matched, 1);
    assert_int_equal(res.triggered[0], 42);
    reg_set_result_fini(&res);
    char *cfg = poll1(r, 0, p, 2, 3);
    assert_non_null(cfg);
    size_t wl;
    char *want = registry_wrap_config("nodeA", 42, now, "A=1", 3, &wl);
    /* the second may have ticked between the two calls; compare the prefix then */
    assert_memory_equal(cfg, "\n            A=1\n            REQUEST_TRACE_ID=", 46);
    if (strncmp(cfg, want, wl) == 0)
        assert_string_equal(cfg + wl, "\n");
    free(want);
    free(cfg);
    assert_null(poll1(r, 0, p, 2, 3));       /* exactly once */
    /* type 0 keep-alive and type 1 do not take the config */
    set(r, 0, NULL, 0, 1000, &res);
    reg_set_result_fini(&res);
    assert_null(poll1(r, 0, p, 2, 0));
    assert_null(poll1(r, 0, p, 2, 1));
    cfg = poll1(r, 0, p, 2, 2);
    assert_non_null(cfg);
    free(cfg);
    registry_destroy(r);
}

static void test_fnv(void **state)
{
    (void)state;
    assert_true(registry_fnv1a64("", 0) == 0xcbf29ce484222325ull);
    assert_true(registry_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
    size_t len;
    char *w = registry_wrap_config("h", 1, 2, "X=1\nY=2", 7, &len);
    char want[128];
    snprintf(want, sizeof(want), "\n            X=1\nY=2\n            REQUEST_TRACE_ID=%llu",
             (unsigned long long)registry_fnv1a64("h:1:2", 5));
    assert_string_equal(w, want);
    assert_int_equal(len, strlen(want));
    free(w);
}

static void test_match_busy_limit_order(void **state)
{
    (void)state;
    struct registry *r = registry_create("h");
    /* pid sets {5,10}, {3,20}, {3}, {30,1} -> order {1,30} {3} {3,20} {5,10} */
    int32_t a[] = { 10, 5 }, b[] = { 20, 3 }, c[] = { 3 }, d[] = { 30, 1 };
    poll1(r, 0, a, 2, 3);
    poll1(r, 0, b, 2, 3);
    poll1(r, 0, c, 1, 3);
    poll1(r, 0, d, 2, 3);
    int32_t other[] = { 99 };
    poll1(r, 5, other, 1, 3);
    struct reg_set_result res;
    int32_t zero[] = { 0 };
    set(r, 0, zero, 1, 2, &res);
    assert_int_equal(res.n_matched, 4);
    assert_int_equal(res.matched[0], 30);
    assert_int_equal(res.matched[1], 3);
    assert_int_equal(res.matched[2], 20);
    assert_int_equal(res.matched[3], 10);
    assert_int_equal(res.n_triggered, 2);
    assert_int_equal(res.busy, 0);
    reg_set_result_fini(&res);
    /* again: the first two are busy, which does not count against the limit (only
     * triggered processes do, 03-ipc.md §4.3), so the other two are triggered */
    set(r, 0, zero, 1, 3, &res);
    assert_int_equal(res.busy, 2);
    assert_int_equal(res.n_triggered, 2);
    assert_int_equal(res.triggered[0], 20);
    assert_int_equal(res.triggered[1], 10);
    reg_set_result_fini(&res);
    /* all four busy now: with limit 1 nothing is triggered, so every one counts busy */
    set(r, 0, zero, 1, 1, &res);
    assert_int_equal(res.n_matched, 4);
    assert_int_equal(res.busy, 4);
    assert_int_equal(res.n_triggered, 0);
    reg_set_result_fini(&res);
    /* limit 0: matched, but neither triggered nor counted busy */
    set(r, 0, zero, 1, 0, &res);
    assert_int_equal(res.n_matched, 4);
    assert_int_equal(res.busy, 0);
    reg_set_result_fini(&res);
    /* ancestor pid 3 selects {3} and {3,20}; job 5 only sees its own process */
    int32_t anc[] = { 3 };
    set(r, 0, anc, 1, 100, &res);
    assert_int_equal(res.n_matched, 2);
    assert_int_equal(res.busy, 2);
    reg_set_result_fini(&res);
    set(r, 5, NULL, 0, 100, &res);
    assert_int_equal(res.n_matched, 1);
    assert_int_equal(res.matched[0], 99);
    reg_set_result_fini(&res);
    set(r, 7, NULL, 0, 100, &res);
    assert_int_equal(res.n_matched, 0);
    reg_set_result_fini(&res);
    /* a duplicate pid in the list is the same set */
    int32_t dup[] = { 3, 3 };
    poll1(r, 0, dup, 2, 0);
    assert_int_equal(registry_count(r), 5);
    registry_destroy(r);
}

static void test_cap_and_gc(void **state)
{
    (void)state;
    struct registry *r = registry_create("h");
    char *cfg;
    size_t len;
    for (int i = 0; i < REGISTRY_MAX_PROCS; i++) {
        int32_t p = 1000 + i;
        assert_int_equal(registry_poll(r, i % 2, &p, 1, 3, REG_ORIGIN_MSMON, (uint64_t)i, &cfg, &len), 0);
    }
    int32_t p = 99999;
    assert_int_equal(registry_poll(r, 0, &p, 1, 3, REG_ORIGIN_MSMON, 0, &cfg, &len), -ENOSPC);
    assert_null(cfg);
    assert_int_equal(registry_count(r), REGISTRY_MAX_PROCS);
    assert_int_equal(registry_ctxt(r, 0, 0, 1000), 1);
    assert_int_equal(registry_ctxt(r, 1, 0, 1001), 1);
    /* processes polled at t < 100 are older than 50 at t = 150 */
    assert_int_equal(registry_gc(r, 150, 50), 100);
    assert_int_equal(registry_count(r), REGISTRY_MAX_PROCS - 100);
    assert_int_equal(registry_ctxt_count(r), 0);    /* their leaves went away */
    assert_int_equal(registry_gc(r, 1000000, 1), REGISTRY_MAX_PROCS - 100);
    assert_int_equal(registry_count(r), 0);
    registry_destroy(r);
}

static void test_ctxt(void **state)
{
    (void)state;
    struct registry *r = registry_create("h");
    assert_int_equal(registry_ctxt(r, 0, 0, 1), 1);
    assert_int_equal(registry_ctxt(r, 0, 0, 2), 2);
    assert_int_equal(registry_ctxt(r, 0, 0, 2), 2);
    assert_int_equal(registry_ctxt(r, 0, 1, 2), 1);
    for (int i = 3; i < REGISTRY_MAX_CTXT; i++)
        assert_true(registry_ctxt(r, 3, 0, i) > 0);
    assert_int_equal(registry_ctxt_count(r), REGISTRY_MAX_CTXT);
    assert_int_equal(registry_ctxt(r, 3, 0, 5000), -ENOSPC);
    assert_int_equal(registry_ctxt(r, 0, 0, 1), 2);  /* idempotent even at the cap */
    assert_int_equal(registry_count(r), 0);           /* ctxt creates no process */
    /* a job's registrations go when its last process is collected */
    char *cfg;
    size_t len;
    int32_t p = 77;
    registry_poll(r, 3, &p, 1, 3, REG_ORIGIN_MSMON, 0, &cfg, &len);
    registry_gc(r, 100, 10);
    assert_int_equal(registry_ctxt_count(r), 3);
    registry_destroy(r);
}

/* A GC pass that empties many jobs at once releases the ctxt registrations of every one
 * of them (a fixed list of 64 gone jobs used to leak the rest, filling the 50-slot cap). */
static void test_gc_releases_ctxt_of_many_jobs(void **state)
{
    (void)state;
    struct registry *r = registry_create("h");
    char *cfg;
    size_t len;
    const int njobs = 200;
    for (int j = 0; j < njobs; j++) {
        int32_t p = 5000 + j;
        assert_int_equal(registry_poll(r, j, &p, 1, 3, REG_ORIGIN_KINETO, 10, &cfg, &len), 0);
    }
    /* the registrations belong to other pids of the jobs, so only the job rule frees them;
     * the last 40 jobs hold them */
    for (int j = njobs - 40; j < njobs; j++)
        assert_int_equal(registry_ctxt(r, j, 0, 9000 + j), 1);
    /* job 199 keeps a live process: its registration stays */
    int32_t live = 7777;
    assert_int_equal(registry_poll(r, njobs - 1, &live, 1, 3, REG_ORIGIN_KINETO, 1000, &cfg, &len), 0);
    assert_int_equal(registry_gc(r, 1000, 100), njobs);
    assert_int_equal(registry_count(r), 1);
    assert_int_equal(registry_ctxt_count(r), 1);
    /* the freed slots are usable again */
    for (int i = 0; i < REGISTRY_MAX_CTXT - 1; i++)
        assert_true(registry_ctxt(r, 1000000, i, 1) > 0);
    assert_int_equal(registry_ctxt(r, 1000000, 99, 1), -ENOSPC);
    registry_destroy(r);
}

static void test_status_table(void **state)
{
    (void)state;
    struct status_table *st = status_create();
    struct status_last last;
    status_get_last(st, &last);
    assert_false(last.any_received);
    assert_int_equal(last.trace.status, -1);
    assert_int_equal(last.monitor.current_step, -1);
    struct ipc_status s = { 1, 5, 1, 9, 100, 0, 0 };
    status_update(st, STATUS_TRACE, &s, 1);
    s = (struct ipc_status){ 0, -1, -1, -1, 0x3FFFFFF2, 0, 3 };
    status_update(st, STATUS_MONITOR, &s, 2);
    status_get_last(st, &last);
    assert_true(last.any_received);
    assert_int_equal(last.trace.status, 1);
    assert_int_equal(last.trace.stop_step, 9);
    assert_int_equal(last.monitor.pid, 0x3FFFFFF2);
    struct status_entry *e;
    size_t n;
    assert_int_equal(status_list(st, &e, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(e[0].pid, 100);
    assert_int_equal(e[0].trace, 1);
    assert_int_equal(e[0].monitor, -1);
    assert_int_equal(e[1].job, 3);
    free(e);
    /* both -1 -> removed; last-reporter records keep the values */
    s = (struct ipc_status){ -1, -1, -1, -1, 100, 0, 0 };
    status_update(st, STATUS_TRACE, &s, 3);
    status_list(st, &e, &n);
    assert_int_equal(n, 1);
    free(e);
    /* GC prunes dead pids only (pids above pid_max never exist), our own pid survives */
    s = (struct ipc_status){ 0, -1, -1, -1, (int32_t)getpid(), 0, 0 };
    status_update(st, STATUS_MONITOR, &s, 4);
    s = (struct ipc_status){ 0, -1, -1, -1, 0x3FFFFFF0, 0, 0 };
    status_update(st, STATUS_MONITOR, &s, 4);
    assert_int_equal(status_gc(st, 1000, 10), 2);
    status_list(st, &e, &n);
    assert_int_equal(e[0].pid, (int32_t)getpid());
    free(e);
    /* cap: the least recently updated entry is evicted */
    for (int i = 0; i < STATUS_MAX_ENTRIES + 5; i++) {
        s = (struct ipc_status){ 0, -1, -1, -1, 100000 + i, 0, 0 };
        status_update(st, STATUS_MONITOR, &s, (uint64_t)(10000 + i));
    }
    status_list(st, &e, &n);
    assert_int_equal(n, STATUS_MAX_ENTRIES);
    assert_int_equal(e[n - 1].pid, 100000 + STATUS_MAX_ENTRIES + 4);
    int32_t oldest = e[0].pid;
    free(e);
    /* a full table: the exit report (-1) of an unknown pid evicts nobody */
    s = (struct ipc_status){ -1, -1, -1, -1, 50, 0, 0 };
    status_update(st, STATUS_TRACE, &s, 99999);
    status_update(st, STATUS_MONITOR, &s, 99999);
    status_list(st, &e, &n);
    assert_int_equal(n, STATUS_MAX_ENTRIES);
    assert_int_equal(e[0].pid, oldest);
    free(e);
    status_get_last(st, &last);
    assert_int_equal(last.trace.pid, 50);      /* the last-reporter record still updates */
    status_destroy(st);
}

int main(void)
{
    log_set_level(LOG_LVL_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrap_and_one_shot),
        cmocka_unit_test(test_fnv),
        cmocka_unit_test(test_match_busy_limit_order),
        cmocka_unit_test(test_cap_and_gc),
        cmocka_unit_test(test_ctxt),
        cmocka_unit_test(test_gc_releases_ctxt_of_many_jobs),
        cmocka_unit_test(test_status_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
