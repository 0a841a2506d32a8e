/* test_idmap: the bounded id map under every piece of marker bookkeeping
 * (src/plugin/pipeline/idmap.c): FIFO eviction, deletion, clearing, a long mixed run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plugin/pipeline/idmap.h"

static void test_idmap(void **state)
{
    (void)state;
    struct idmap *m;
    assert_int_equal(idmap_create(4, sizeof(uint64_t), &m), 0);
    bool ev;
    for (uint64_t id = 1; id <= 4; id++) {
        *(uint64_t *)idmap_put(m, id, &ev) = id * 10;
        assert_false(ev);
    }
    assert_int_equal(idmap_count(m), 4);
    assert_true(idmap_del(m, 2));
    assert_false(idmap_del(m, 2));
    *(uint64_t *)idmap_put(m, 5, &ev) = 50; /* ring full of 4 slots (one dead) -> oldest (1) evicted */
    assert_true(ev);
    assert_null(idmap_get(m, 1));
    assert_int_equal(*(uint64_t *)idmap_get(m, 3), 30);
    uint64_t id;
    assert_int_equal(*(uint64_t *)idmap_oldest(m, &id), 30);
    assert_int_equal(id, 3);
    idmap_clear(m);
    assert_int_equal(idmap_count(m), 0);
    assert_null(idmap_oldest(m, &id));
    idmap_destroy(m);
    /* many ids with deletions keep lookups exact */
    assert_int_equal(idmap_create(1000, 8, &m), 0);
    for (uint64_t i = 0; i < 100000; i++) {
        *(uint64_t *)idmap_put(m, i * 7919, NULL) = i;
        if (i % 3 == 0)
            assert_true(idmap_del(m, i * 7919));
    }
    size_t live = 0;
    for (uint64_t i = 100000 - 1000; i < 100000; i++) {
        uint64_t *v = idmap_get(m, i * 7919);
        if (i % 3 == 0)
            assert_null(v);
        else if (v) {
            assert_int_equal(*v, i);
            live++;
        }
    }
    assert_int_equal(live, idmap_count(m));
    idmap_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idmap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
