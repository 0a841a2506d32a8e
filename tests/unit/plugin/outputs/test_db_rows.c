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

/* docs/design/outputs.md#tables: a device START allocates the globalTaskId of its range, so a kernel between the START
 * and the completed part gets the next id, whatever the order the part completes in. */
static void test_device_task_id_at_start(void **state)
{
    (void)state;
    struct db_rows r;
    assert_int_equal(db_rows_init(&r, 42), 0);
    struct mon_record ds = r_marker(16, 1, 110, 7, 5, 6, "", "");
    struct mon_record k = r_kernel(120, 130, 1, 2, 3, "AI_CORE", "MatMul");
    struct mon_record de = r_marker(32, 1, 140, 7, 5, 6, "", "");
    assert_int_equal(db_rows_add_record(&r, &ds), 0);
    assert_int_equal(db_rows_add_record(&r, &k), 0);
    assert_int_equal(db_rows_add_record(&r, &de), 0);
    struct pl_range d = {.id = 7, .done = PL_PART_DEVICE, .parts = PL_PART_DEVICE | PL_PART_HOST,
                         .with_device = true, .dev_start = 110, .dev_end = 140, .device_id = 5, .stream_id = 6,
                         .name = "step", .domain = ""};
    assert_int_equal(db_rows_add_range(&r, &d), 0);
    assert_int_equal(r.rows[T_TASK].n, 2);
    assert_int_equal(r.rows[T_TASK].v[4], 1);           /* the kernel: after the START's id */
    assert_int_equal(r.rows[T_TASK].v[11 + 3], 4000000007LL);
    assert_int_equal(r.rows[T_TASK].v[11 + 4], 0);      /* the marker: allocated at its START */
    /* END consumed before START: the START still allocates, the part takes that id */
    struct mon_record de2 = r_marker(32, 1, 240, 8, 5, 6, "", "");
    struct mon_record ds2 = r_marker(16, 1, 210, 8, 5, 6, "", "");
    assert_int_equal(db_rows_add_record(&r, &de2), 0);
    assert_int_equal(db_rows_add_record(&r, &ds2), 0);
    assert_int_equal(db_rows_add_record(&r, &k), 0);
    d.id = 8;
    assert_int_equal(db_rows_add_range(&r, &d), 0);
    assert_int_equal(r.rows[T_TASK].v[2 * 11 + 4], 3); /* the second kernel */
    assert_int_equal(r.rows[T_TASK].v[3 * 11 + 4], 2); /* the second marker: its START's id */
    /* an instant allocates when it completes */
    d.id = 9;
    d.instant = true;
    assert_int_equal(db_rows_add_range(&r, &d), 0);
    assert_int_equal(r.rows[T_TASK].v[4 * 11 + 4], 4);
    db_rows_fini(&r);
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
        cmocka_unit_test(test_device_task_id_at_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
