/* test_markpair: the plugin's one marker pairing (src/plugin/pipeline/markpair.c): parts in
 * any arrival order, device parts named by their host START (also a cut one), bounds, aging,
 * and the session-end expiry that completes device parts still waiting for a name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include "plugin/pipeline/markpair.h"

static struct mon_record mk(int flag, int src, uint64_t id, uint64_t ts, const char *name, const char *dom,
                            uint32_t o0, uint32_t o1)
{
    struct mon_record r = { .kind = MON_KIND_MARKER };
    r.u.marker = (struct mon_marker){ flag, src, ts, id, o0, o1, name, dom };
    return r;
}

/* Records completing at most one part: that part in *out. */
static int feed1(struct markpair *mp, struct mon_record r, struct pl_range *out)
{
    struct pl_range two[2] = { 0 };
    int n = markpair_feed(mp, &r.u.marker, 1, two);
    assert_true(n <= 1);
    *out = two[0];
    return n;
}

/* A device part is named by its host START, whichever arrives first. */
static void test_markpair_device_waits_for_host_name(void **state)
{
    (void)state;
    struct markpair *mp;
    struct pl_range two[2], l;
    struct mon_record r;
    assert_int_equal(markpair_create(MARKPAIR_PENDING_CAP, &mp), 0);
    /* host END, both device records, then the host START: host part and device part at once */
    assert_int_equal(feed1(mp, mk(32, 0, 9, 400, "", "", 10, 12), &l), 0);
    assert_int_equal(feed1(mp, mk(16, 1, 9, 210, "", "", 1, 0), &l), 0);
    assert_int_equal(feed1(mp, mk(32, 1, 9, 290, "", "", 1, 5), &l), 0); /* waits for the name */
    r = mk(16, 0, 9, 200, "step 9", "dom", 10, 11);
    assert_int_equal(markpair_feed(mp, &r.u.marker, 1, two), 2);
    assert_int_equal(two[0].done, PL_PART_HOST);
    assert_string_equal(two[0].name, "step 9");
    assert_int_equal(two[0].host_start, 200);
    assert_int_equal(two[0].host_end, 400);
    assert_false(pl_range_complete(&two[0]));
    assert_int_equal(two[1].done, PL_PART_DEVICE);
    assert_string_equal(two[1].name, "step 9");
    assert_string_equal(two[1].domain, "dom");
    assert_int_equal(two[1].dev_start, 210);
    assert_int_equal(two[1].dev_end, 290);
    assert_int_equal(two[1].stream_id, 5);
    assert_true(pl_range_complete(&two[1]));
    assert_int_equal(markpair_pending(mp), 0);
    /* device records first, host START next (device part), host END last (host part) */
    assert_int_equal(feed1(mp, mk(32, 1, 10, 290, "", "", 2, 5), &l), 0);
    assert_int_equal(feed1(mp, mk(16, 1, 10, 210, "", "", 2, 0), &l), 0);
    assert_int_equal(feed1(mp, mk(16, 0, 10, 200, "step 10", "", 10, 11), &l), 1);
    assert_int_equal(l.done, PL_PART_DEVICE);
    assert_string_equal(l.name, "step 10");
    assert_int_equal(feed1(mp, mk(32, 0, 10, 300, "", "", 10, 11), &l), 1);
    assert_int_equal(l.done, PL_PART_HOST);
    assert_true(pl_range_complete(&l));
    assert_int_equal(markpair_pending(mp), 0);
    /* a host START cut by the session start still names the device part: before it ... */
    r = mk(16, 0, 11, 50, "early", "d", 10, 11);
    assert_int_equal(markpair_feed_cut(mp, &r.u.marker, 1, &l), 0);
    assert_int_equal(feed1(mp, mk(16, 1, 11, 210, "", "", 3, 0), &l), 0);
    assert_int_equal(feed1(mp, mk(32, 1, 11, 290, "", "", 3, 1), &l), 1);
    assert_int_equal(l.done, PL_PART_DEVICE);
    assert_string_equal(l.name, "early");
    assert_int_equal(feed1(mp, mk(32, 0, 11, 300, "", "", 10, 11), &l), 0); /* no host part */
    /* ... and after it */
    assert_int_equal(feed1(mp, mk(16, 1, 12, 210, "", "", 3, 0), &l), 0);
    assert_int_equal(feed1(mp, mk(32, 1, 12, 290, "", "", 3, 1), &l), 0);
    r = mk(16, 0, 12, 50, "late cut", "d", 10, 11);
    assert_int_equal(markpair_feed_cut(mp, &r.u.marker, 1, &l), 1);
    assert_string_equal(l.name, "late cut");
    assert_int_equal(l.dev_end, 290);
    /* other records are not a cut START: nothing changes */
    r = mk(32, 0, 13, 50, "", "", 10, 11);
    assert_int_equal(markpair_feed_cut(mp, &r.u.marker, 1, &l), 0);
    markpair_destroy(mp);
}

static void test_markpair_rules(void **state)
{
    (void)state;
    struct markpair *mp;
    struct pl_range l;
    assert_int_equal(markpair_create(MARKPAIR_PENDING_CAP, &mp), 0);
    /* instant with device */
    assert_int_equal(feed1(mp, mk(8, 0, 1, 100, "mark", "d", 10, 11), &l), 1);
    assert_int_equal(l.done, PL_PART_HOST);
    assert_true(l.instant);
    assert_int_equal(l.host_start, 100);
    assert_int_equal(l.host_end, 100);
    assert_int_equal(l.end_pid, 10);
    assert_int_equal(feed1(mp, mk(8, 1, 1, 150, "", "", 3, 4), &l), 1);
    assert_int_equal(l.done, PL_PART_DEVICE);
    assert_string_equal(l.name, "mark");
    assert_string_equal(l.domain, "d");
    assert_int_equal(l.device_id, 3);
    assert_int_equal(l.stream_id, 4);
    assert_int_equal(markpair_pending(mp), 0);
    /* range with device: host part, then device part carrying both (the metric range) */
    assert_int_equal(feed1(mp, mk(16, 0, 2, 200, "step 1", "", 10, 11), &l), 0);
    assert_int_equal(feed1(mp, mk(16, 1, 2, 210, "", "", 1, 0), &l), 0);
    assert_int_equal(feed1(mp, mk(32, 0, 2, 300, "", "", 10, 12), &l), 1);
    assert_int_equal(l.done, PL_PART_HOST);
    assert_int_equal(l.host_start, 200);
    assert_int_equal(l.host_end, 300);
    assert_int_equal(l.end_tid, 12); /* from the END record */
    assert_string_equal(l.name, "step 1");
    assert_false(pl_range_complete(&l));
    assert_int_equal(feed1(mp, mk(32, 1, 2, 290, "", "", 1, 5), &l), 1);
    assert_int_equal(l.done, PL_PART_DEVICE);
    assert_int_equal(l.dev_start, 210);
    assert_int_equal(l.dev_end, 290);
    assert_int_equal(l.stream_id, 5);
    assert_string_equal(l.name, "step 1");
    assert_true(pl_range_complete(&l));
    assert_int_equal(markpair_pending(mp), 0);
    /* host-only range; a second END without START gives nothing */
    assert_int_equal(feed1(mp, mk(2, 0, 3, 400, "fwd", "", 1, 1), &l), 0);
    assert_int_equal(feed1(mp, mk(4, 0, 3, 450, "", "", 1, 1), &l), 1);
    assert_int_equal(l.host_end - l.host_start, 50);
    assert_true(pl_range_complete(&l));
    assert_int_equal(markpair_pending(mp), 0);
    assert_int_equal(feed1(mp, mk(4, 0, 3, 450, "", "", 1, 1), &l), 0);
    assert_int_equal(markpair_pending(mp), 1); /* the lone END waits for a START, then ages out */
    assert_int_equal(markpair_expire(mp, 1000, 10, NULL, 0, NULL), 1);
    /* END before START (another completion thread): the same range */
    assert_int_equal(feed1(mp, mk(4, 0, 5, 550, "", "", 1, 2), &l), 0);
    assert_int_equal(feed1(mp, mk(2, 0, 5, 500, "late", "d", 1, 1), &l), 1);
    assert_int_equal(l.host_start, 500);
    assert_int_equal(l.host_end, 550);
    assert_int_equal(l.end_tid, 2);
    assert_string_equal(l.name, "late");
    /* bounded: 70000 starts never ended keep at most 65536 pending */
    for (uint64_t id = 1000; id < 71000; id++)
        (void)feed1(mp, mk(2, 0, id, id, "x", "", 1, 1), &l);
    assert_int_equal(markpair_pending(mp), MARKPAIR_PENDING_CAP);
    assert_int_equal(feed1(mp, mk(4, 0, 1000, 5, "", "", 1, 1), &l), 0); /* evicted: no line */
    markpair_destroy(mp);
}

/* Aging: only ids first seen more than max_age before now go; a device part still waiting
 * for its host START is not lost but completes with the device records' own name, into the
 * caller's array (bounded; the rest stay for the next call), as at session end. */
static void test_markpair_expire(void **state)
{
    (void)state;
    struct markpair *mp;
    struct pl_range l, two[2], out[1];
    size_t nout = 99;
    assert_int_equal(markpair_create(MARKPAIR_PENDING_CAP, &mp), 0);
    assert_int_equal(feed1(mp, mk(2, 0, 1, 100, "old", "", 1, 1), &l), 0);                     /* seen at 1 */
    struct mon_record r = mk(2, 0, 2, 100, "young", "", 1, 1);
    assert_int_equal(markpair_feed(mp, &r.u.marker, 500, two), 0); /* seen at 500 */
    assert_int_equal(markpair_pending(mp), 2);
    assert_int_equal(markpair_expire(mp, 600, 200, NULL, 0, NULL), 1);  /* 1 is older than 200, 500 is not */
    assert_int_equal(markpair_pending(mp), 1);
    assert_int_equal(feed1(mp, mk(4, 0, 1, 150, "", "", 1, 1), &l), 0); /* the aged-out START is gone */
    assert_int_equal(feed1(mp, mk(4, 0, 2, 150, "", "", 1, 1), &l), 1);
    assert_string_equal(l.name, "young");
    assert_int_equal(markpair_pending(mp), 1);                           /* the lone END of id 1 */
    assert_int_equal(markpair_expire(mp, UINT64_MAX, 0, NULL, 0, NULL), 1);
    assert_int_equal(markpair_pending(mp), 0);

    /* two device parts without their host START: one slot per call, nothing lost */
    for (uint64_t id = 20; id < 22; id++) {
        assert_int_equal(feed1(mp, mk(16, 1, id, 210, "", "devname", 4, 0), &l), 0);
        assert_int_equal(feed1(mp, mk(32, 1, id, 290, "", "", 4, 6), &l), 0);
    }
    assert_int_equal(markpair_pending(mp), 2);
    size_t done = 0;
    for (int call = 0; call < 2; call++) {
        nout = 99;
        markpair_expire(mp, UINT64_MAX, 0, out, 1, &nout);
        assert_int_equal(nout, 1);
        assert_int_equal(out[0].done, PL_PART_DEVICE);
        assert_int_equal(out[0].dev_start, 210);
        assert_int_equal(out[0].dev_end, 290);
        assert_int_equal(out[0].device_id, 4);
        assert_non_null(out[0].name);
        done++;
    }
    assert_int_equal(done, 2);
    assert_int_equal(markpair_pending(mp), 0);
    nout = 99;
    assert_int_equal(markpair_expire(mp, UINT64_MAX, 0, out, 1, &nout), 0);
    assert_int_equal(nout, 0);
    markpair_destroy(mp);
}

/* Feeding is serialised inside: START and END of one id on different threads (two msPTI
 * completion threads) pair exactly once, whatever the interleaving. */
#define MT_IDS 20000
struct mt_arg {
    struct markpair *mp;
    int flag;
    unsigned completed;
};

static void *mt_feed(void *arg)
{
    struct mt_arg *a = arg;
    for (uint64_t id = 1; id <= MT_IDS; id++) {
        struct mon_record r = mk(a->flag, 0, id, a->flag == 2 ? 100 : 200, a->flag == 2 ? "s" : "", "", 1, 1);
        struct pl_range two[2];
        a->completed += (unsigned)markpair_feed(a->mp, &r.u.marker, 1, two);
    }
    return NULL;
}

static void test_markpair_threads(void **state)
{
    (void)state;
    struct markpair *mp;
    pthread_t t[2];
    struct mt_arg a[2];
    assert_int_equal(markpair_create(MARKPAIR_PENDING_CAP, &mp), 0);
    a[0] = (struct mt_arg){ mp, 2, 0 };
    a[1] = (struct mt_arg){ mp, 4, 0 };
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, mt_feed, &a[i]), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(a[0].completed + a[1].completed, MT_IDS);
    assert_int_equal(markpair_pending(mp), 0);
    markpair_destroy(mp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_markpair_rules),
        cmocka_unit_test(test_markpair_device_waits_for_host_name),
        cmocka_unit_test(test_markpair_expire),
        cmocka_unit_test(test_markpair_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
