/* test_db_rows: the DB row formatter alone (no SQLite): rows and string ids of records and of
 * completed marker parts, in upstream numbering order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "export_util.h"
#include "plugin/outputs/db_rows.h"

static const char *text(struct db_rows *r, int64_t id)
{
    return pl_strpool_text(r->pool, (size_t)id, NULL);
}

static void test_rows_and_ids(void **state)
{
    (void)state;
    struct db_rows r;
    assert_int_equal(db_rows_init(&r, 42), 0);
    struct mon_record k = r_kernel(10, 20, 1, 2, 3, "AI_CORE", "MatMul");
    assert_int_equal(db_rows_add_record(&r, &k), 0);
    assert_int_equal(r.rows[T_TASK].n, 1);
    assert_int_equal(r.rows[T_COMPUTE_TASK_INFO].n, 1);
    const int64_t *t = r.rows[T_TASK].v;
    assert_int_equal(t[0], 10);
    assert_int_equal(t[2], 1);   /* deviceId */
    assert_int_equal(t[4], 0);   /* globalTaskId */
    assert_int_equal(t[5], 42);  /* globalPid */
    assert_string_equal(text(&r, t[6]), "AI_CORE");
    assert_string_equal(text(&r, r.rows[T_COMPUTE_TASK_INFO].v[0]), "MatMul");
    assert_string_equal(text(&r, 0), "MatMul"); /* name, type, N/A: first-request order */
    assert_string_equal(text(&r, 1), "AI_CORE");
    assert_string_equal(text(&r, 2), "N/A");
    /* a marker record requests ids only; its completed part makes the row */
    struct mon_record m = r_marker(2, 0, 100, 7, 1, 2, "step", "dom");
    assert_int_equal(db_rows_add_record(&r, &m), 0);
    assert_int_equal(r.rows[T_MSTX_EVENTS].n, 0);
    struct pl_range h = {.id = 7, .done = PL_PART_HOST, .parts = PL_PART_HOST, .host_start = 100, .host_end = 150,
                         .pid = 1, .tid = 2, .end_pid = 1, .end_tid = 3, .name = "step", .domain = "dom"};
    assert_int_equal(db_rows_add_range(&r, &h), 0);
    const int64_t *e = r.rows[T_MSTX_EVENTS].v;
    assert_int_equal(e[0], 100);
    assert_int_equal(e[1], 150);
    assert_int_equal(e[2], 2);
    assert_string_equal(text(&r, e[5]), "step");
    assert_int_equal(e[6], (1LL << 32) | 2);
    assert_int_equal(e[7], (1LL << 32) | 3);
    assert_int_equal(e[9], 4000000007LL);
    struct pl_range d = {.id = 7, .done = PL_PART_DEVICE, .parts = PL_PART_DEVICE, .dev_start = 110, .dev_end = 140,
                         .device_id = 5, .stream_id = 6, .name = "step", .domain = "dom"};
    assert_int_equal(db_rows_add_range(&r, &d), 0);
    assert_int_equal(r.rows[T_TASK].n, 2);
    assert_int_equal(r.rows[T_TASK].v[11 + 4], 1); /* the shared globalTaskId counter */
    assert_int_equal(r.tx_rows, 4);
    db_rows_clear(&r);
    assert_int_equal(r.tx_rows, 0);
    assert_int_equal(r.rows[T_TASK].n, 0);
    db_rows_fini(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_and_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
