/* slowrank: the shared slow-rank rule on synchronised windows — every rank's wall is equal,
 * the straggler shows as compute/host excess matched by the others' wait, a slow link as
 * transfer excess — plus the job-wide cost and the unsynchronised fallback. */
#include <setjmp.h>
#include <stdarg.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "contract/slowrank.h"

#define R 16
#define S 60
#define MS 1000000ull
static struct slowrank_sample smp[R][S];
static struct slowrank_in in[R];

enum kind { NONE, COMPUTE, HOST, LINK };

/* A synchronised job: compute 12 ms, transfer 2 ms, host 0.3 ms per step, with deterministic
 * noise of up to 4 * noise ns on compute and host. The slow rank from step `from` adds `add`
 * to its compute/host (the others wait that long in the collective) or its transfer. */
static void fill_sync(int slow, int from, enum kind k, uint64_t add, uint64_t noise)
{
    for (int r = 0; r < R; r++) {
        in[r] = (struct slowrank_in){ "h", r, 100 + r, 0, smp[r], S };
        for (int i = 0; i < S; i++) {
            uint64_t n = noise * (uint64_t)((r * 7 + i * 3) % 5);
            bool on = k != NONE && i + 1 >= from;
            struct slowrank_sample x = { .step = i + 1, .compute = 12 * MS + n, .host = 300000 + n / 2,
                                         .transfer = 2 * MS };
            if (on && r == slow) {
                if (k == COMPUTE)
                    x.compute += add;
                else if (k == HOST)
                    x.host += add;
                else
                    x.transfer += add;
            } else if (on && k != LINK) {
                x.wait = add; /* the others wait for the straggler */
            }
            x.wait += 4 * noise - n; /* whoever is noisiest waits least */
            x.comm = x.wait + x.transfer;
            /* everybody's step ends with the collective; a slow link ends later only for itself */
            x.wall = 12 * MS + 4 * noise + 300000 + 2 * MS + (on && (k != LINK || r == slow) ? add : 0);
            smp[r][i] = x;
        }
    }
}

static void test_sync_causes(void **state)
{
    (void)state;
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    struct slowrank_result res;
    const enum kind kinds[] = { COMPUTE, HOST, LINK };
    const enum slowrank_cause want[] = { SLOWRANK_COMPUTE, SLOWRANK_HOST, SLOWRANK_COMMUNICATION };
    for (int i = 0; i < 3; i++) {
        fill_sync(5, 30, kinds[i], 2400000, 20000);
        assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
        assert_int_equal(res.nslow, 1);
        assert_int_equal(in[res.slow[0].rank_index].rank, 5);
        assert_int_equal(res.slow[0].since_step, 30);
        assert_int_equal(res.slow[0].last_step, S);
        assert_int_equal(res.slow[0].cause, want[i]);
        /* the walls are equal: the wall ratio alone could never name it */
        if (kinds[i] != LINK)
            assert_true(res.slow[0].ratio < 1.01);
        /* the others wait 2.4 ms per step on it (a slow link costs its own 2.4 ms here) */
        assert_true(res.slow[0].cost_ms > 2.3 && res.slow[0].cost_ms < 2.5);
        assert_int_equal(res.slow[0].cost_last_step, S);
        slowrank_result_fini(&res);
    }
    /* the newest two steps not reported by rank 0 yet: judged, but not costed */
    fill_sync(5, 30, COMPUTE, 2400000, 20000);
    in[0].n = S - 2;
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.nslow, 1);
    assert_int_equal(res.slow[0].last_step, S);
    assert_int_equal(res.slow[0].cost_last_step, S - 2);
    slowrank_result_fini(&res);
}

static void test_sync_clean_and_blips(void **state)
{
    (void)state;
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    struct slowrank_result res;
    fill_sync(-1, 0, NONE, 0, 100000);
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.nslow, 0);
    assert_int_equal(res.judged_steps, S);
    slowrank_result_fini(&res);
    /* a compute excess the others do not wait for is not the synchronised signature (and
     * below the wall rule): nobody */
    fill_sync(-1, 0, NONE, 0, 0);
    for (int i = 40; i < S; i++)
        smp[3][i].compute += 2400000;
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.nslow, 0);
    slowrank_result_fini(&res);
    /* two slow steps at the end: below min_steps */
    fill_sync(7, S - 1, COMPUTE, 3000000, 0);
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.nslow, 0);
    slowrank_result_fini(&res);
}

/* No split and no synchronisation: the wall rule, as before. */
static void test_unsync_wall(void **state)
{
    (void)state;
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    struct slowrank_result res;
    fill_sync(-1, 0, NONE, 0, 0);
    for (int r = 0; r < R; r++)
        for (int i = 0; i < S; i++) {
            smp[r][i].wait = 0;
            smp[r][i].transfer = 0; /* an older daemon: comm only */
            smp[r][i].comm = 2 * MS;
            smp[r][i].wall = 14300000;
            if (r == 9 && i + 1 >= 50) {
                smp[r][i].comm += 4 * MS;
                smp[r][i].wall += 4 * MS;
            }
        }
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.nslow, 1);
    assert_int_equal(in[res.slow[0].rank_index].rank, 9);
    assert_int_equal(res.slow[0].cause, SLOWRANK_COMMUNICATION);
    assert_int_equal(res.slow[0].since_step, 50);
    assert_true(res.slow[0].ratio > 1.2);
    assert_true(res.slow[0].cost_ms > 3.9 && res.slow[0].cost_ms < 4.1);
    slowrank_result_fini(&res);
    assert_int_equal(slowrank_merge(NULL, 1, &rule, &res), -EINVAL);
    assert_int_equal(slowrank_merge(NULL, 0, &rule, &res), 0);
    assert_int_equal(res.judged_steps, 0);
    assert_int_equal(res.first_step, -1);
    slowrank_result_fini(&res);
}

/* A reply may list one step several times for a rank (the fuzzer's find: a step group larger
 * than the number of ranks overran the scratch space). Every step judged, no fault. */
static void test_repeated_steps(void **state)
{
    (void)state;
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    struct slowrank_result res;
    fill_sync(5, 30, NONE, 0, 20000);
    for (int i = 0; i < S; i++)
        smp[0][i].step = 7; /* rank 0 reports step 7 sixty times */
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0); /* step 7's group: 75 samples, 16 ranks */
    assert_int_equal(res.judged_steps, S);
    assert_int_equal(res.first_step, 1);
    assert_int_equal(res.last_step, S);
    slowrank_result_fini(&res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_causes),
        cmocka_unit_test(test_sync_clean_and_blips),
        cmocka_unit_test(test_unsync_wall),
        cmocka_unit_test(test_repeated_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
