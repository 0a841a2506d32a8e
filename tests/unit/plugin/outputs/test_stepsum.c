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
    struct stepsum_row r;
    stepsum_compute(iv, 5, 100, 200, &r);
    assert_int_equal(r.wall_ns, 100);
    assert_int_equal(r.compute_ns, 60);
    assert_int_equal(r.comm_ns, 20);
    assert_int_equal(r.memcpy_ns, 10);
    assert_int_equal(r.host_ns, 20);
    int64_t n = 0;
    assert_int_equal(stepsum_step_name("step 42", &n), 1);
    assert_int_equal(n, 42);
    assert_int_equal(stepsum_step_name("step x", &n), 0);
    assert_int_equal(stepsum_step_name("stepper 1", &n), 0);
}

static void test_json(void **state)
{
    (void)state;
    struct stepsum_row r = { 7, 1000, 100, 60, 20, 10, 20 };
    char buf[512];
    size_t len = stepsum_json(&r, 1, 3, 99, "step", 0, 5, buf, sizeof(buf));
    assert_true(len > 0);
    assert_string_equal(buf, "{\"deviceId\":-1,\"dropped\":0,\"duration\":100,\"kind\":\"StepSummary\",\"pid\":99,"
                             "\"rank\":3,\"src\":\"step\",\"steps\":[{\"comm\":20,\"compute\":60,\"host\":20,"
                             "\"memcpy\":10,\"start\":1000,\"step\":7,\"wall\":100}],\"timestamp\":5}");
    assert_int_equal(stepsum_json(&r, 1, 3, 99, "step", 0, 5, buf, 40), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_compute), cmocka_unit_test(test_json) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
