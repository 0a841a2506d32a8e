/* test_window: the trace window stage alone and as the session's pipeline stage: a
 * step-bounded window releases only what starts before its end, in arrival order, in batches
 * whose ranges index their own records (a marker record goes with the range it completed);
 * the one step rule opens and closes a window;
 * a full hold counts what it drops; a marker-bounded window purges earlier steps while armed,
 * opens and closes on `step <N>` range starts, resolves a start of -1 and refuses a passed
 * start; and a session with two outputs hands both the same cut, leaving out a second output
 * that fails to start. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/pipeline/output.h"
#include "plugin/pipeline/pipeline.h"
#include "plugin/pipeline/window.h"

#define T0 1000000000ull

static struct mon_record kern(uint64_t s)
{
    struct mon_record r = { .kind = MON_KIND_KERNEL };
    r.u.kernel = (struct mon_kernel){ .start = s, .end = s + 10, .name = "k", .type = "AI_CORE" };
    return r;
}

static struct mon_record mark(int32_t flag, uint64_t ts, uint64_t id, const char *name)
{
    struct mon_record r = { .kind = MON_KIND_MARKER };
    r.u.marker = (struct mon_marker){ .flag = flag, .source_kind = 0, .timestamp = ts, .id = id,
                                      .name = name, .domain = "" };
    return r;
}

/* What release handed out, flattened: starts of the records and of the ranges, and the
 * index each range named in its own batch. */
struct got {
    uint64_t rec[64], rng[16];
    size_t nrec, nrng, batches;
    bool bad_at;
};

static void collect(void *ctx, const struct pl_batch *b)
{
    struct got *g = ctx;
    g->batches++;
    for (size_t i = 0; i < b->nrecs; i++)
        g->rec[g->nrec++] = b->recs[i].kind == MON_KIND_MARKER ? b->recs[i].u.marker.timestamp
                                                                : b->recs[i].u.kernel.start;
    for (size_t i = 0; i < b->nranges; i++) {
        g->bad_at |= b->ranges[i].at >= b->nrecs || (i && b->ranges[i].at < b->ranges[i - 1].at);
        g->rng[g->nrng++] = b->ranges[i].host_start;
    }
}

static void test_step_window_cut_and_batches(void **state)
{
    _Atomic uint64_t dropped = 0;
    struct window_opts o = { .start_step = 4, .stop_step = 6 };
    struct window *w = NULL;
    struct window_state st;
    struct got g = { 0 };
    (void)state;
    assert_int_equal(window_create(&o, &dropped, &w), 0);
    struct mon_record a[4] = { kern(T0 + 10), mark(4, T0 + 30, 1, ""), kern(T0 + 40), kern(T0 + 50) };
    struct pl_range ra = { .id = 1, .done = PL_PART_HOST, .parts = PL_PART_HOST, .host_start = T0 + 20,
                           .host_end = T0 + 30, .name = "r", .domain = "", .at = 1 };
    struct pl_batch ba = { a, 4, &ra, 1 };
    window_hold(w, &ba);
    /* the range starts after the end: its END record goes with it */
    struct mon_record b[3] = { kern(T0 + 60), mark(4, T0 + 300, 2, ""), kern(T0 + 500) };
    struct pl_range rb = { .id = 2, .done = PL_PART_HOST, .parts = PL_PART_HOST, .host_start = T0 + 200,
                           .host_end = T0 + 300, .name = "r2", .domain = "", .at = 1 };
    struct pl_batch bb = { b, 3, &rb, 1 };
    window_hold(w, &bb);
    window_get(w, &st);
    assert_int_equal(st.phase, WINDOW_OPEN);
    window_close(w, T0 + 100);
    window_close(w, T0 + 1); /* the first close wins */
    window_get(w, &st);
    assert_int_equal(st.phase, WINDOW_CLOSED);
    assert_int_equal(st.end_ns, T0 + 100);
    assert_true(window_settled(&st));
    window_release(w, 2, collect, &g);
    assert_int_equal(g.nrec, 5); /* 10, END 30, 40, 50, 60 */
    assert_int_equal(g.rec[1], T0 + 30);
    assert_int_equal(g.rec[4], T0 + 60);
    assert_int_equal(g.nrng, 1);
    assert_int_equal(g.rng[0], T0 + 20);
    assert_int_equal(g.batches, 3);
    assert_false(g.bad_at);
    window_get(w, &st);
    assert_int_equal(st.after, 2); /* the kernel at 500 and the range at 200 */
    assert_int_equal(st.before, 0);
    window_destroy(w);
    assert_int_equal(window_create(&(struct window_opts){ .start_step = 5, .stop_step = 4 }, &dropped, &w), -EINVAL);
}

/* The one step rule, shared with dyno mode's step-bounded window (dynamic.c). */
static void test_step_rule(void **state)
{
    struct window_state s = { .start = 3, .stop = 5, .phase = WINDOW_ARMED };
    (void)state;
    assert_false(window_advance(&s, 2));
    assert_true(window_advance(&s, 3));
    assert_int_equal(s.phase, WINDOW_OPEN);
    assert_false(window_advance(&s, 4));
    assert_true(window_advance(&s, 5));
    assert_int_equal(s.phase, WINDOW_CLOSED);
    assert_false(window_advance(&s, 9));
    s.phase = WINDOW_ARMED; /* a step past both bounds opens and closes at once */
    assert_true(window_advance(&s, 7));
    assert_int_equal(s.phase, WINDOW_CLOSED);
    s.phase = WINDOW_REFUSED;
    assert_false(window_advance(&s, 4));
}

static void test_full_hold_counts(void **state)
{
    _Atomic uint64_t dropped = 0;
    struct window_opts o = { .start_step = 1, .stop_step = 2, .max_held = 3 };
    struct window *w = NULL;
    struct got g = { 0 };
    (void)state;
    assert_int_equal(window_create(&o, &dropped, &w), 0);
    struct mon_record a[2] = { kern(T0), kern(T0 + 1) };
    struct pl_batch ba = { a, 2, NULL, 0 };
    window_hold(w, &ba);
    window_hold(w, &ba); /* 4 > 3: this batch is dropped whole, and counted */
    assert_int_equal(dropped, 2);
    window_release(w, 256, collect, &g);
    assert_int_equal(g.nrec, 2);
    window_destroy(w);
}

static void test_marker_window(void **state)
{
    _Atomic uint64_t dropped = 0;
    struct window_opts o = { .start_step = -1, .stop_step = -1, .marker_steps = true, .iterations = 1 };
    struct window *w = NULL;
    struct window_state st;
    struct got g = { 0 };
    (void)state;
    assert_int_equal(window_create(&o, &dropped, &w), 0);
    window_get(w, &st);
    assert_int_equal(st.phase, WINDOW_ARMED);
    assert_int_equal(st.stop, -1);
    struct mon_record a[2] = { kern(T0 + 5), mark(2, T0 + 10, 1, "step 3") };
    struct pl_batch ba = { a, 2, NULL, 0 };
    window_hold(w, &ba); /* the first step that begins is the window: [3, 4) */
    window_get(w, &st);
    assert_int_equal(st.phase, WINDOW_OPEN);
    assert_int_equal(st.start, 3);
    assert_int_equal(st.stop, 4);
    assert_int_equal(st.begin_ns, T0 + 10);
    struct mon_record b[3] = { kern(T0 + 20), mark(2, T0 + 30, 2, "step 4"), kern(T0 + 40) };
    struct pl_batch bb = { b, 3, NULL, 0 };
    window_hold(w, &bb);
    window_get(w, &st);
    assert_int_equal(st.phase, WINDOW_CLOSED);
    assert_int_equal(st.step, 4);
    assert_int_equal(st.end_ns, T0 + 30);
    window_release(w, 256, collect, &g);
    /* kern 5 (before), step 3 START (10), kern 20; step 4 START and kern 40 are after */
    assert_int_equal(g.nrec, 2);
    assert_int_equal(g.rec[0], T0 + 10);
    assert_int_equal(g.rec[1], T0 + 20);
    window_get(w, &st);
    assert_int_equal(st.before, 1);
    assert_int_equal(st.after, 1);
    window_destroy(w);

    /* an explicit start already passed at the first step seen: refused, nothing released */
    o = (struct window_opts){ .start_step = 2, .stop_step = 3, .marker_steps = true };
    assert_int_equal(window_create(&o, &dropped, &w), 0);
    window_hold(w, &ba);
    window_get(w, &st);
    assert_int_equal(st.phase, WINDOW_REFUSED);
    assert_false(window_settled(&st));
    memset(&g, 0, sizeof(g));
    window_release(w, 256, collect, &g);
    assert_int_equal(g.nrec, 0);
    window_destroy(w);

    /* armed until the end: not settled, nothing released; earlier steps were let go */
    o = (struct window_opts){ .start_step = 9, .stop_step = 10, .marker_steps = true };
    assert_int_equal(window_create(&o, &dropped, &w), 0);
    window_hold(w, &ba);
    window_hold(w, &bb);
    window_get(w, &st);
    assert_int_equal(st.phase, WINDOW_ARMED);
    assert_int_equal(st.before, 1); /* kern 5, before `step 3` began */
    assert_false(window_settled(&st));
    memset(&g, 0, sizeof(g));
    window_release(w, 256, collect, &g);
    assert_int_equal(g.nrec, 0);
    window_destroy(w);
}

/* ---- fan-out: two outputs of one session see the same batches ---- */

struct output {
    struct got g;
    int start_rc;
    bool stopped;
};
static int g_next_start_rc;
static struct output *g_made[4];
static size_t g_nmade;

static int cap_create(const struct output_config *cfg, struct output **ret)
{
    (void)cfg;
    *ret = calloc(1, sizeof(**ret));
    (*ret)->start_rc = g_next_start_rc;
    g_made[g_nmade++] = *ret;
    return 0;
}
static int cap_start(struct output *p) { return p->start_rc; }
static void cap_consume(struct output *p, const struct pl_batch *b) { collect(&p->g, b); }
static int cap_tick(struct output *p) { (void)p; return 0; }
static void cap_kinds(struct output *p, uint32_t m) { (void)p; (void)m; }
static int cap_stop(struct output *p, const char *pgi) { (void)pgi; p->stopped = true; return 0; }
static void cap_destroy(struct output *p) { free(p); }
static const struct output_ops cap_ops = { "cap", cap_create, cap_start, cap_consume, cap_tick, cap_kinds, cap_stop,
                                         cap_destroy, NULL };

static void test_fanout_same_cut(void **state)
{
    struct output_config cfg = { .session_start_ns = T0 };
    const struct output_ops *ops[3] = { &cap_ops, &cap_ops, &cap_ops };
    struct window_opts o = { .start_step = 1, .stop_step = 2 };
    struct pipeline *pl = NULL;
    (void)state;
    g_nmade = 0;
    assert_int_equal(pipeline_create_set(&cfg, NULL, ops, 2, &pl), 0);
    assert_int_equal(pipeline_set_window(pl, &o), 0);
    assert_int_equal(pipeline_set_window(pl, &o), -EALREADY);
    assert_int_equal(pipeline_start(pl), 0);
    struct mon_record r[3] = { kern(T0 + 10), kern(T0 + 20), kern(T0 + 30) };
    pipeline_deliver(pl, r, 3);
    assert_int_equal(g_made[0]->g.nrec, 0); /* held by the window until the session's end */
    assert_int_equal(pipeline_window_close(pl, T0 + 25), 0);
    assert_int_equal(pipeline_stop(pl, NULL), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(g_made[i]->g.nrec, 2);
        assert_int_equal(g_made[i]->g.rec[1], T0 + 20);
        assert_true(g_made[i]->stopped);
    }
    pipeline_destroy(pl);

    /* a second output that does not start is left out; the session goes on */
    g_nmade = 0;
    assert_int_equal(pipeline_create_set(&cfg, NULL, ops, 3, &pl), 0);
    g_made[1]->start_rc = -EIO;
    assert_int_equal(pipeline_start(pl), 0);
    pipeline_deliver(pl, r, 3);
    assert_int_equal(g_made[0]->g.nrec, 3); /* no window: straight through */
    assert_int_equal(g_made[2]->g.nrec, 3);
    assert_int_equal(pipeline_window_close(pl, T0), -ENOENT);
    assert_int_equal(pipeline_stop(pl, NULL), 0);
    pipeline_destroy(pl);
    /* ... but the session's own output must start */
    g_nmade = 0;
    assert_int_equal(pipeline_create_set(&cfg, NULL, ops, 1, &pl), 0);
    g_made[0]->start_rc = -EIO;
    assert_int_equal(pipeline_start(pl), -EIO);
    pipeline_destroy(pl);
    assert_int_equal(pipeline_create_set(&cfg, NULL, ops, 0, &pl), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_window_cut_and_batches),
        cmocka_unit_test(test_step_rule),
        cmocka_unit_test(test_full_hold_counts),
        cmocka_unit_test(test_marker_window),
        cmocka_unit_test(test_fanout_same_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
