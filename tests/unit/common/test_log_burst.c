/* test_log_burst: the burst limiter behind LOG_BURST (log.h): a burst passes, the rest is
 * counted and reported by the next line that passes; the refill is simulated by moving the
 * limiter's state back in time, never by sleeping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/log.h"

static void test_burst_then_suppressed_count(void **state)
{
    (void)state;
    struct log_burst b = { 0 };
    uint64_t t0 = clock_mono_ns();
    for (int i = 0; i < 5; i++)
        assert_int_equal(log_burst_take(&b, 1, 5), 0);
    int passed = 0;
    for (int i = 0; i < 7; i++)
        passed += log_burst_take(&b, 1, 5) >= 0;
    if (clock_mono_ns() - t0 >= 1000000000ull)
        skip();                 /* a second went by (a stalled machine): a refill is legitimate */
    assert_int_equal(passed, 0);
    assert_int_equal(b.suppressed, 7);
    /* ten seconds later (simulated): one passes and carries the count, and the burst is back */
    b.tat_ns -= 10000000000ull;
    assert_int_equal(log_burst_take(&b, 1, 5), 7);
    for (int i = 0; i < 4; i++)
        assert_int_equal(log_burst_take(&b, 1, 5), 0);
}

static void test_rate_one_burst(void **state)
{
    (void)state;
    struct log_burst b = { 0 };
    assert_int_equal(log_burst_take(&b, 1000000, 1), 0);
    /* a huge rate never suppresses more than the calls made in one step */
    b.tat_ns -= 1000000000ull;
    assert_true(log_burst_take(&b, 1000000, 1) >= 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_then_suppressed_count),
        cmocka_unit_test(test_rate_one_burst),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
