/* Unit tests of the process registry (matching, one-shot mailbox, busy, limit, ancestors,
 * iteration order, cap, GC, ctxt cap/idempotence, wrapping, config outcomes) and the status
 * table. */
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
#include "daemon/ipc/registry.h"
#include "daemon/ipc/status.h"

static char *poll1(struct registry *r, int64_t job, const int32_t *pids, int n, int type)
{
    char *cfg = NULL;
    size_t len;
    assert_int_equal(registry_poll(r, job, pids, n, type, REG_ORIGIN_MSMON, 100, &cfg, &len), 0);
    return cfg;
}

/* A dyno-mode rank's health report: pid (its own too), uid, pid namespace. */
static int note_member(struct registry *r, int32_t pid, uid_t uid, uint64_t pidns, const char *key, int32_t rank,
                       uint64_t now_ns)
{
    struct reg_member_id who = { pid, pid, uid, pidns };
    return registry_note_member(r, &who, key, rank, now_ns);
}

static void set(struct registry *r, int64_t job, const int32_t *pids, size_t n, int64_t limit,
                struct reg_set_result *res)
{
    assert_int_equal(registry_set_config(r, job, pids, n, "A=1", 3, limit, NULL, NULL, NULL, res), 0);
}

static void test_wrap_and_one_shot(void **state)
{
    (void)state;
    struct registry *r = NULL;
    assert_int_equal(registry_create("nodeA", &r), 0);
    int32_t p[] = { 42, 7 };
    assert_null(poll1(r, 0, p, 2, 3));
    struct reg_set_result res;
    struct reg_cfg_entry last;
    set(r, 0, NULL, 0, 1000, &res);
    assert_int_equal(res.n_matched, 1);
    assert_int_equal(res.triggered[0], 42);
    reg_set_result_fini(&res);
    assert_int_equal(registry_last_outcome(r, 42, &last), 0);
    assert_int_equal(last.outcome, REG_OUT_PENDING);
    char *cfg = poll1(r, 0, p, 2, 3);
    assert_non_null(cfg);
    size_t wl;
    char *want = registry_wrap_config(last.id, "A=1", 3, &wl);
    assert_memory_equal(cfg, "\n            A=1\n            REQUEST_TRACE_ID=", 46);
    assert_memory_equal(cfg, want, wl);
    assert_string_equal(cfg + wl, "\n");
    free(want);
    free(cfg);
    /* a process that never said it acknowledges: delivered (unacknowledged) */
    assert_int_equal(registry_last_outcome(r, 42, &last), 0);
    assert_int_equal(last.outcome, REG_OUT_UNACKED);
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
    uint64_t id = registry_config_id("h", 1, 2, 3);
    assert_true(id == registry_fnv1a64("h:1:2:3", 7));
    /* unique per delivery: the same process in the same second gets another id */
    assert_true(id != registry_config_id("h", 1, 2, 4));
    char *w = registry_wrap_config(id, "X=1\nY=2", 7, &len);
    char want[128];
    snprintf(want, sizeof(want), "\n            X=1\nY=2\n            REQUEST_TRACE_ID=%llu",
             (unsigned long long)id);
    assert_string_equal(w, want);
    assert_int_equal(len, strlen(want));
    free(w);
}

/* last wins in the mailbox, outcomes per delivery, acknowledgements. */
static void test_outcomes(void **state)
{
    (void)state;
    struct registry *r = NULL;
    assert_int_equal(registry_create("h", &r), 0);
    int32_t a[] = { 11 }, b[] = { 12 };
    struct reg_set_result res;
    struct reg_cfg_entry *v = NULL, last;
    size_t n = 0;
    poll1(r, 0, a, 1, 3);
    poll1(r, 0, b, 1, 3);
    assert_int_equal(registry_set_acks(r, 11, true), 0);
    assert_int_equal(registry_set_acks(r, 99, true), -ENOENT);
    /* start, then stop before anyone polled: the stop replaces the start */
    assert_int_equal(registry_set_config(r, 0, NULL, 0, "START", 5, 1000, NULL, NULL, "t1", &res), 0);
    assert_int_equal(res.n_triggered, 2);
    assert_int_equal(res.busy, 0);
    reg_set_result_fini(&res);
    assert_int_equal(registry_set_config(r, 0, NULL, 0, "STOP", 4, 1, NULL, NULL, "t2", &res), 0);
    assert_int_equal(res.n_triggered, 1);
    assert_int_equal(res.busy, 1);       /* 11's start was replaced */
    assert_int_equal(res.n_skipped, 1);  /* 12 is beyond the limit of 1 */
    reg_set_result_fini(&res);
    assert_int_equal(registry_outcomes(r, "t1", &v, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(v[0].pid, 11);
    assert_int_equal(v[0].outcome, REG_OUT_SUPERSEDED);
    assert_string_equal(v[0].reason, "replaced by a newer command before the process polled");
    assert_int_equal(v[1].pid, 12);
    assert_int_equal(v[1].outcome, REG_OUT_PENDING);   /* 12 still gets the start */
    free(v);
    char *cfg = poll1(r, 0, a, 1, 3);
    assert_non_null(strstr(cfg, "STOP"));
    assert_null(strstr(cfg, "START"));
    free(cfg);
    assert_int_equal(registry_outcomes(r, "t2", &v, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(v[0].outcome, REG_OUT_DELIVERED);   /* 11 acknowledges: waiting */
    uint64_t id = v[0].id;
    free(v);
    assert_false(registry_outcome_final(REG_OUT_DELIVERED));
    /* a forged or unknown id, a wrong pid, a non-answer outcome */
    assert_int_equal(registry_ack(r, 11, id + 1, REG_OUT_APPLIED, 0, "", ""), -ENOENT);
    assert_int_equal(registry_ack(r, 12, id, REG_OUT_APPLIED, 0, "", ""), -ENOENT);
    assert_int_equal(registry_ack(r, 11, id, REG_OUT_PENDING, 0, "", ""), -EINVAL);
    assert_int_equal(registry_ack(r, 11, id, REG_OUT_APPLIED, 3, "note", "Idle"), 0);
    assert_int_equal(registry_ack(r, 11, id, REG_OUT_REJECTED, 3, "late", "Idle"), -EALREADY);
    assert_int_equal(registry_last_outcome(r, 11, &last), 0);
    assert_int_equal(last.outcome, REG_OUT_APPLIED);
    assert_int_equal(last.rank, 3);
    assert_string_equal(last.reason, "note");
    assert_string_equal(last.state, "Idle");
    assert_string_equal(registry_outcome_name(REG_OUT_UNACKED), "delivered (unacknowledged)");
    /* an id that is still pending cannot be answered (the process never saw it) */
    assert_int_equal(registry_outcomes(r, "t1", &v, &n), 0);
    assert_int_equal(registry_ack(r, 12, v[1].id, REG_OUT_APPLIED, 0, "", ""), -ENOENT);
    free(v);
    assert_int_equal(registry_outcomes(r, "", &v, &n), -EINVAL);
    /* the history is bounded: old deliveries are forgotten, the newest kept */
    for (int i = 0; i < REG_CFG_HISTORY + 2; i++) {
        assert_int_equal(registry_set_config(r, 0, a, 1, "X", 1, 1000, NULL, NULL, "t3", &res), 0);
        reg_set_result_fini(&res);
    }
    assert_int_equal(registry_outcomes(r, "t3", &v, &n), 0);
    assert_int_equal(n, REG_CFG_HISTORY);
    free(v);
    registry_destroy(r);
}

static void test_match_busy_limit_order(void **state)
{
    (void)state;
    struct registry *r = NULL;
    assert_int_equal(registry_create("h", &r), 0);
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
    assert_int_equal(res.n_skipped, 2);
    reg_set_result_fini(&res);
    /* again: a pending config is replaced, last wins; the limit counts every
     * triggered process, so the first three get the new one */
    set(r, 0, zero, 1, 3, &res);
    assert_int_equal(res.busy, 2);
    assert_int_equal(res.n_triggered, 3);
    assert_int_equal(res.triggered[0], 30);
    assert_int_equal(res.triggered[2], 20);
    assert_int_equal(res.n_skipped, 1);
    reg_set_result_fini(&res);
    /* limit 0: matched, but neither triggered nor replaced */
    set(r, 0, zero, 1, 0, &res);
    assert_int_equal(res.n_matched, 4);
    assert_int_equal(res.busy, 0);
    assert_int_equal(res.n_skipped, 4);
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
    struct registry *r = NULL;
    assert_int_equal(registry_create("h", &r), 0);
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
    struct registry *r = NULL;
    assert_int_equal(registry_create("h", &r), 0);
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
    struct registry *r = NULL;
    assert_int_equal(registry_create("h", &r), 0);
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

/* A dyno-mode job: one rank polls (the process delivered to), every rank answers. The ranks
 * named by their PluginHealth (same job key, same uid) get an entry each for the delivery,
 * which follows it (pending, delivered, superseded) until the rank answers; a rank of another
 * job or uid cannot answer it; a rank the daemon learns of later still can. */
static void test_member_acks(void **state)
{
    (void)state;
    struct registry *r = NULL;
    struct reg_set_result res;
    struct reg_cfg_entry *v = NULL, last;
    size_t n = 0;
    uid_t me = geteuid();
    int32_t lead[] = { 21 };
    const char *key = "00112233aabbccdd";
    assert_int_equal(registry_create("h", &r), 0);
    poll1(r, 0, lead, 1, 3);
    assert_int_equal(registry_set_acks(r, 21, true), 0);
    assert_int_equal(note_member(r, 21, me, 0, key, 0, 1), 0);       /* the poller's own rank */
    assert_int_equal(note_member(r, 22, me, 0, key, 1, 1), 0);
    assert_int_equal(note_member(r, 23, me + 1, 0, key, 2, 1), 0);   /* another uid */
    assert_int_equal(note_member(r, 24, me, 0, "ffffffffffffffff", 0, 1), 0); /* another job */
    assert_int_equal(note_member(r, 25, me, 0, "not-a-key", 0, 1), -EINVAL);
    assert_int_equal(note_member(r, 28, me, 7, key, 1, 1), 0); /* the same key in another container */
    assert_int_equal(registry_set_config(r, 0, NULL, 0, "START", 5, 1000, NULL, NULL, "m1", &res), 0);
    assert_int_equal(res.n_triggered, 1);
    reg_set_result_fini(&res);
    assert_int_equal(registry_outcomes(r, "m1", &v, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(v[0].pid, 21);
    assert_int_equal(v[1].pid, 22);
    assert_int_equal(v[1].via, 21);
    assert_int_equal(v[1].rank, 1);
    assert_int_equal(v[1].outcome, REG_OUT_PENDING);
    uint64_t id = v[0].id;
    assert_true(v[1].id == id);
    free(v);
    /* not published yet: a rank cannot have applied it */
    assert_int_equal(registry_ack(r, 22, id, REG_OUT_APPLIED, 1, "", "Running"), -ENOENT);
    free(poll1(r, 0, lead, 1, 3));
    assert_int_equal(registry_outcomes(r, "m1", &v, &n), 0);
    assert_int_equal(v[1].outcome, REG_OUT_DELIVERED);
    free(v);
    assert_int_equal(registry_ack(r, 21, id, REG_OUT_APPLIED, 0, "", "Running"), 0);
    assert_int_equal(registry_ack(r, 22, id, REG_OUT_PARTLY, 1, "Hccl not enabled (x)", "Running"), 0);
    assert_int_equal(registry_ack(r, 22, id, REG_OUT_APPLIED, 1, "", "Running"), -EALREADY);
    assert_int_equal(registry_ack(r, 23, id, REG_OUT_APPLIED, 2, "", "Running"), -ENOENT); /* another uid */
    assert_int_equal(registry_ack(r, 24, id, REG_OUT_APPLIED, 0, "", "Running"), -ENOENT); /* another job */
    assert_int_equal(registry_ack(r, 28, id, REG_OUT_APPLIED, 1, "", "Running"), -ENOENT); /* another launch */
    assert_int_equal(registry_ack(r, 26, id, REG_OUT_APPLIED, 0, "", "Running"), -ENOENT); /* no rank */
    /* a rank first heard of after the delivery answers too */
    assert_int_equal(note_member(r, 27, me, 0, key, 3, 2), 0);
    assert_int_equal(registry_ack(r, 27, id, REG_OUT_APPLIED, 3, "", "Running"), 0);
    assert_int_equal(registry_outcomes(r, "m1", &v, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(v[1].outcome, REG_OUT_PARTLY);
    assert_string_equal(v[1].reason, "Hccl not enabled (x)");
    assert_int_equal(v[2].pid, 27);
    assert_int_equal(v[2].outcome, REG_OUT_APPLIED);
    free(v);
    assert_true(registry_outcome_final(REG_OUT_PARTLY));
    assert_string_equal(registry_outcome_name(REG_OUT_PARTLY), "applied, partly");
    /* getStatus's "config" of a rank is its own last answer */
    assert_int_equal(registry_last_outcome(r, 22, &last), 0);
    assert_int_equal(last.outcome, REG_OUT_PARTLY);
    assert_int_equal(last.rank, 1);
    assert_int_equal(registry_last_outcome(r, 26, &last), -ENOENT);
    /* a delivery replaced before the poll takes its ranks' entries with it */
    assert_int_equal(registry_set_config(r, 0, NULL, 0, "A", 1, 1000, NULL, NULL, "m2", &res), 0);
    reg_set_result_fini(&res);
    assert_int_equal(registry_set_config(r, 0, NULL, 0, "B", 1, 1000, NULL, NULL, "m3", &res), 0);
    reg_set_result_fini(&res);
    assert_int_equal(registry_outcomes(r, "m2", &v, &n), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(v[i].outcome, REG_OUT_SUPERSEDED);
    assert_int_equal(n, 3); /* 21, and ranks 22 and 27 */
    free(v);
    /* ranks that stop reporting are forgotten by the GC */
    assert_int_equal(registry_gc(r, 1000, 500), 1); /* the poller (polled at 100) goes too */
    assert_int_equal(registry_set_config(r, 0, NULL, 0, "C", 1, 1000, NULL, NULL, "m4", &res), 0);
    assert_int_equal(res.n_triggered, 0);
    reg_set_result_fini(&res);
    registry_destroy(r);
}

/* A process that leaves reports -1: the gate's last-reporter record falls back to a process
 * that is still there, so one job's exit does not close the gate for another. */
static void test_status_fallback(void **state)
{
    (void)state;
    struct status_table *st = NULL;
    struct status_last last;
    assert_int_equal(status_create(&st), 0);
    struct ipc_status s = { 0, -1, -1, -1, 300, 0, 0 };
    status_update(st, STATUS_MONITOR, &s, 1);
    s = (struct ipc_status){ 1, -1, -1, -1, 301, 0, 0 };
    status_update(st, STATUS_MONITOR, &s, 2);
    s = (struct ipc_status){ -1, -1, -1, -1, 301, 0, 0 };   /* 301 leaves */
    status_update(st, STATUS_MONITOR, &s, 3);
    status_get_last(st, &last);
    assert_int_equal(last.monitor.status, 0);
    assert_int_equal(last.monitor.pid, 300);
    s = (struct ipc_status){ -1, -1, -1, -1, 300, 0, 0 };   /* the last one leaves too */
    status_update(st, STATUS_MONITOR, &s, 4);
    status_get_last(st, &last);
    assert_int_equal(last.monitor.status, -1);
    status_destroy(st);
}

static void test_status_table(void **state)
{
    (void)state;
    struct status_table *st = NULL;
    assert_int_equal(status_create(&st), 0);
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
        cmocka_unit_test(test_outcomes),
        cmocka_unit_test(test_member_acks),
        cmocka_unit_test(test_status_fallback),
        cmocka_unit_test(test_match_busy_limit_order),
        cmocka_unit_test(test_cap_and_gc),
        cmocka_unit_test(test_ctxt),
        cmocka_unit_test(test_gc_releases_ctxt_of_many_jobs),
        cmocka_unit_test(test_status_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
