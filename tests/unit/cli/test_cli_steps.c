/* steps_merge: the slow-rank rule of docs/cluster.md §4 on fixed windows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cli/cmd_steps.h"

#define R 8
#define S 40
static struct slowrank_sample smp[R][S];
static struct slowrank_in in[R];

/* Rank `slow` from step `from` gets `add` ns more in the given component. */
static void fill(int slow, int from, int comp, uint64_t add, uint64_t noise_ns)
{
    for (int r = 0; r < R; r++) {
        in[r] = (struct slowrank_in){ "h", r, 100 + r, 0, smp[r], S };
        for (int k = 0; k < S; k++) {
            uint64_t n = noise_ns * (uint64_t)((r * 7 + k * 3) % 5);
            struct slowrank_sample x = { k + 1, 0, 12000000 + n, 2000000, 0, 300000, 0, 0, DATAMSG_SPLIT_NONE };
            if (r == slow && k + 1 >= from) {
                if (comp == 0)
                    x.compute += add;
                else if (comp == 1)
                    x.comm += add;
                else
                    x.host += add;
            }
            x.wall = x.compute + x.comm + x.host;
            smp[r][k] = x;
        }
    }
}

static void test_names_compute_comm_host(void **state)
{
    (void)state;
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    struct slowrank_result res;
    for (int comp = 0; comp < 3; comp++) {
        fill(5, 30, comp, 3000000, 10000);
        assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
        assert_int_equal(res.nslow, 1);
        assert_int_equal(in[res.slow[0].rank_index].rank, 5);
        assert_int_equal(res.slow[0].since_step, 30);
        assert_int_equal(res.slow[0].cause, comp);
        assert_true(res.slow[0].ratio > 1.1);
        assert_int_equal(res.judged_steps, S);
        slowrank_result_fini(&res);
    }
}

static void test_clean_and_short_blips(void **state)
{
    (void)state;
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    struct slowrank_result res;
    fill(-1, 0, 0, 0, 50000);
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.nslow, 0);
    assert_true(res.median_ms > 14 && res.max_ms < 15);
    slowrank_result_fini(&res);
    /* two slow steps at the end: below --min-steps 3 */
    fill(2, S - 1, 0, 5000000, 0);
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.nslow, 0);
    slowrank_result_fini(&res);
    /* too few ranks per step: nothing judged */
    rule.min_ranks = R + 1;
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.judged_steps, 0);
    assert_int_equal(res.nslow, 0);
    slowrank_result_fini(&res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_compute_comm_host),
        cmocka_unit_test(test_clean_and_short_blips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
