/* stepsum: attribution of device activity to a step and the StepSummary datagram. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "plugin/outputs/stepsum.h"

static void test_compute(void **state)
{
    (void)state;
    /* step [100, 200): kernels 100-140 and 130-150 (overlap), comm 160-180, memcpy 190-210
     * (clipped), one kernel after the step; idle 150-160 and 180-190 */
    const struct stepsum_iv iv[] = { { 100, 140, 0 }, { 130, 150, 0 }, { 160, 180, 1 }, { 190, 210, 2 }, { 220, 230, 0 } };
    struct datamsg_step r;
    stepsum_compute(iv, 5, 100, 200, &r);
    assert_int_equal(r.wall_ns, 100);
    assert_int_equal(r.compute_ns, 60);
    assert_int_equal(r.comm_ns, 20);
    assert_int_equal(r.memcpy_ns, 10);
    assert_int_equal(r.host_ns, 20);
    assert_int_equal(r.wait_ns, 0); /* no Hccl record: no split */
    assert_int_equal(r.transfer_ns, 20);
    assert_int_equal(r.split, DATAMSG_SPLIT_NONE);
}

/* A synchronised collective: the Communication record spans arrival..end, the Hccl record the
 * transfer after the last member arrived; the difference is the wait. */
static void test_wait_split(void **state)
{
    (void)state;
    const struct stepsum_iv iv[] = { { 100, 150, 0 }, { 150, 190, 1 }, { 175, 190, 3 } };
    struct datamsg_step r;
    stepsum_compute(iv, 3, 100, 200, &r);
    assert_int_equal(r.comm_ns, 40);
    assert_int_equal(r.transfer_ns, 15);
    assert_int_equal(r.wait_ns, 25);
    assert_int_equal(r.host_ns, 10);
    assert_int_equal(r.split, DATAMSG_SPLIT_MEASURED);
    /* Hccl only: it is the communication, no wait known */
    const struct stepsum_iv iv2[] = { { 100, 150, 0 }, { 175, 190, 3 } };
    stepsum_compute(iv2, 2, 100, 200, &r);
    assert_int_equal(r.comm_ns, 15);
    assert_int_equal(r.transfer_ns, 15);
    assert_int_equal(r.wait_ns, 0);
    assert_int_equal(r.split, DATAMSG_SPLIT_NONE);
    /* both kinds, and the last to arrive: a measured wait of 0 */
    const struct stepsum_iv iv3[] = { { 100, 150, 0 }, { 175, 190, 1 }, { 175, 190, 3 } };
    stepsum_compute(iv3, 3, 100, 200, &r);
    assert_int_equal(r.comm_ns, 15);
    assert_int_equal(r.wait_ns, 0);
    assert_int_equal(r.split, DATAMSG_SPLIT_MEASURED);
}

static void test_json(void **state)
{
    (void)state;
    struct datamsg_step r = { .step = 7, .start_ns = 1000, .wall_ns = 100, .compute_ns = 60, .comm_ns = 20,
                             .wait_ns = 5, .transfer_ns = 15, .memcpy_ns = 10, .host_ns = 20 };
    char buf[512];
    size_t len = stepsum_json(&r, 1, 3, 99, "step", 0, 5, buf, sizeof(buf));
    assert_true(len > 0);
    assert_string_equal(buf, "{\"deviceId\":-1,\"dropped\":0,\"duration\":100,\"kind\":\"StepSummary\",\"pid\":99,"
                             "\"rank\":3,\"src\":\"step\",\"steps\":[{\"comm\":20,\"compute\":60,\"host\":20,"
                             "\"memcpy\":10,\"split\":\"none\",\"start\":1000,\"step\":7,\"transfer\":15,\"wait\":5,"
                             "\"wall\":100}],"
                             "\"timestamp\":5}");
    assert_int_equal(stepsum_json(&r, 1, 3, 99, "step", 0, 5, buf, 40), 0);
}

struct cap {
    int n;
    char last[4200];
};

static int cap_send(void *ctx, const char *json, size_t len)
{
    struct cap *c = ctx;
    assert_true(len < sizeof(c->last));
    memcpy(c->last, json, len);
    c->last[len] = '\0';
    c->n++;
    return 0;
}

static struct mon_record kernel(uint64_t s, uint64_t e)
{
    struct mon_record r = { .kind = MON_KIND_KERNEL };
    r.u.kernel.start = s;
    r.u.kernel.end = e;
    r.u.kernel.name = "k";
    return r;
}

/* The tick: per-interval summary before any step range; then per-step summaries, activity of
 * the running step carried to the next tick. */
static void test_tick(void **state)
{
    (void)state;
    struct stepsum *ss;
    struct cap c = { 0 };
    assert_int_equal(stepsum_create(4, 77, &ss), 0);
    struct mon_record recs[3] = { kernel(1000, 1400), kernel(1500, 1600), kernel(2100, 2300) };
    struct pl_batch b = { recs, 2, NULL, 0 };
    stepsum_feed(ss, &b);
    assert_int_equal(stepsum_tick(ss, cap_send, &c, 9, 1000), 0);
    assert_int_equal(c.n, 1);
    assert_non_null(strstr(c.last, "\"src\":\"interval\""));
    assert_non_null(strstr(c.last, "\"compute\":500"));
    /* step 1 = [2000, 2500) with one kernel; a kernel of the running step 2 at 2600 */
    struct mon_record more[2] = { kernel(2100, 2300), kernel(2600, 2700) };
    struct pl_range r = { .done = PL_PART_HOST, .parts = PL_PART_HOST, .host_start = 2000, .host_end = 2500,
                          .name = "step 1", .domain = "" };
    struct pl_batch b2 = { more, 2, &r, 1 };
    stepsum_feed(ss, &b2);
    assert_int_equal(stepsum_tick(ss, cap_send, &c, 10, 1000), 0);
    assert_int_equal(c.n, 2);
    assert_non_null(strstr(c.last, "\"rank\":4"));
    assert_non_null(strstr(c.last, "\"pid\":77"));
    assert_non_null(strstr(c.last, "{\"comm\":0,\"compute\":200,\"host\":300,\"memcpy\":0,\"split\":\"none\","
                                   "\"start\":2000,\"step\":1,\"transfer\":0,\"wait\":0,\"wall\":500}"));
    /* step 2 completes: the carried kernel belongs to it; no step, no datagram */
    struct pl_range r2 = r;
    r2.host_start = 2500;
    r2.host_end = 3000;
    r2.name = "step 2";
    struct pl_batch b3 = { NULL, 0, &r2, 1 };
    stepsum_feed(ss, &b3);
    assert_int_equal(stepsum_tick(ss, cap_send, &c, 11, 1000), 0);
    assert_int_equal(c.n, 3);
    assert_non_null(strstr(c.last, "\"compute\":100,\"host\":400,\"memcpy\":0,\"split\":\"none\",\"start\":2500,\"step\":2"));
    assert_int_equal(stepsum_tick(ss, cap_send, &c, 12, 1000), 0);
    assert_int_equal(c.n, 3);
    stepsum_destroy(ss);
}

int main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_compute), cmocka_unit_test(test_wait_split), cmocka_unit_test(test_json),
                                        cmocka_unit_test(test_tick) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
