/* test_filter: the filter parser and matcher (src/plugin/pipeline/filter.c): FAQ examples,
 * whitelist, Hccl, marker companions, batches and concurrent replacement. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "plugin/pipeline/filter.h"
#include "plugin/pipeline/record.h"

static struct mon_record kernel(const char *name)
{
    struct mon_record r = { .kind = MON_KIND_KERNEL };
    r.u.kernel.name = name;
    r.u.kernel.type = "KERNEL_AICORE";
    return r;
}

static struct mon_record named(int kind, const char *name)
{
    struct mon_record r = { .kind = kind };
    switch (kind) {
    case MON_KIND_KERNEL: r.u.kernel.name = name; break;
    case MON_KIND_COMMUNICATION: r.u.comm.name = name; break;
    case MON_KIND_HCCL: r.u.hccl.name = name; break;
    default: r.u.api.name = name; break;
    }
    return r;
}

static struct mon_record marker(int flag, int src, uint64_t id, const char *name)
{
    struct mon_record r = { .kind = MON_KIND_MARKER };
    r.u.marker.flag = flag;
    r.u.marker.source_kind = src;
    r.u.marker.id = id;
    r.u.marker.name = name;
    r.u.marker.domain = "";
    return r;
}

static const char *const workload[] = { "MatMul", "BatchMatMul", "MatMulBackward", "BatchMatMulBackward",
                                        "Conv2D", "Conv2DBackpropFilter", "LayerNorm", "Softmax", "Add" };
#define NWORK (sizeof(workload) / sizeof(workload[0]))

/* Bitmask of the workload kernels kept by a filter. */
static unsigned kept_mask(struct filter_state *fs)
{
    unsigned m = 0;
    for (size_t i = 0; i < NWORK; i++) {
        struct mon_record r = kernel(workload[i]);
        if (filter_state_keep(fs, &r))
            m |= 1u << i;
        /* second call hits the per-pointer cache and must agree */
        assert_int_equal(filter_state_keep(fs, &r), (m >> i) & 1);
    }
    return m;
}

static void test_filter_faq_examples(void **state)
{
    (void)state;
    struct filter_state *fs;
    assert_int_equal(filter_state_create(&fs), 0);
    assert_int_equal(kept_mask(fs), (1u << NWORK) - 1); /* no filter */

    assert_int_equal(filter_state_set(fs, "Kernel:MatMul"), 0);
    /* substring: MatMul in MatMul, BatchMatMul, MatMulBackward, BatchMatMulBackward */
    assert_int_equal(kept_mask(fs), 0xF);

    assert_int_equal(filter_state_set(fs, "Kernel:MatMul,Conv2D;Communication:AllReduce"), 0);
    assert_int_equal(kept_mask(fs), 0x3F);
    struct mon_record c1 = named(MON_KIND_COMMUNICATION, "hcom_AllReduce_1");
    struct mon_record c2 = named(MON_KIND_COMMUNICATION, "hcom_AllGather_1");
    assert_true(filter_state_keep(fs, &c1));
    assert_false(filter_state_keep(fs, &c2));
    struct mon_record api = named(MON_KIND_API, "MatMul"); /* kind not in the map */
    assert_false(filter_state_keep(fs, &api));

    assert_int_equal(filter_state_set(fs, "Kernel:Mat"), 0);
    assert_int_equal(kept_mask(fs), 0xF);
    /* case-sensitive */
    assert_int_equal(filter_state_set(fs, "Kernel:matmul"), 0);
    assert_int_equal(kept_mask(fs), 0);
    /* empty = none */
    assert_int_equal(filter_state_set(fs, ""), 0);
    assert_false(filter_state_active(fs));
    assert_int_equal(kept_mask(fs), (1u << NWORK) - 1);
    assert_int_equal(filter_state_set(fs, NULL), 0);
    assert_int_equal(kept_mask(fs), (1u << NWORK) - 1);
    filter_state_destroy(fs);
}

static void test_filter_parse(void **state)
{
    (void)state;
    struct filter_state *fs;
    assert_int_equal(filter_state_create(&fs), 0);
    /* invalid tokens skipped, valid ones kept; repeated kinds merge; spaces trimmed */
    assert_int_equal(filter_state_set(fs, " Kernel : MatMul , ,Conv2D ;;Bogus:X;NoColon;A:B:C;:X;Kernel:;"
                                          "Kernel:LayerNorm,MatMul; API : aclnn"), 0);
    assert_true(filter_state_active(fs));
    assert_int_equal(filter_state_kind_names(fs, MON_KIND_KERNEL), 3);
    assert_int_equal(filter_state_kind_names(fs, MON_KIND_API), 1);
    assert_int_equal(kept_mask(fs), 0x3F | (1u << 6));
    /* kind names are case-sensitive: "kernel" is not a kind -> no valid item -> no filter */
    assert_int_equal(filter_state_set(fs, "kernel:MatMul;;"), 0);
    assert_false(filter_state_active(fs));
    assert_int_equal(kept_mask(fs), (1u << NWORK) - 1);
    /* > 1024 bytes: rejected, previous filter unchanged */
    assert_int_equal(filter_state_set(fs, "Kernel:Conv2D"), 0);
    char big[1100];
    memset(big, 'a', sizeof(big));
    memcpy(big, "Kernel:", 7);
    big[1025] = 0;
    assert_int_equal(filter_state_set(fs, big), -EINVAL);
    assert_int_equal(kept_mask(fs), 0x30);
    big[1024] = 0; /* exactly 1024 bytes is allowed */
    assert_int_equal(filter_state_set(fs, big), 0);
    assert_int_equal(kept_mask(fs), 0);
    filter_state_destroy(fs);
}

/* the CLI trims tabs, so the plugin must too (one grammar, contract/fgram.h). */
static void test_filter_tab_trimmed(void **state)
{
    (void)state;
    struct filter_state *fs;
    assert_int_equal(filter_state_create(&fs), 0);
    assert_int_equal(filter_state_set(fs, "Kernel:\tMatMul"), 0);
    assert_int_equal(filter_state_kind_names(fs, MON_KIND_KERNEL), 1);
    assert_int_equal(kept_mask(fs), 0xF);
    assert_int_equal(filter_state_set(fs, "\tKernel\t:\tMatMul\t,\tConv2D\t"), 0);
    assert_int_equal(kept_mask(fs), 0x3F);
    filter_state_destroy(fs);
}

static void test_filter_whitelist_hccl_empty(void **state)
{
    (void)state;
    struct filter_state *fs;
    assert_int_equal(filter_state_create(&fs), 0);
    assert_int_equal(filter_state_set(fs, "Hccl:allReduce"), 0);
    int mem_kinds[] = { MON_KIND_MEMORY, MON_KIND_MEMSET, MON_KIND_MEMCPY };
    for (int i = 0; i < 3; i++) {
        struct mon_record r = { .kind = mem_kinds[i] };
        assert_true(filter_state_keep(fs, &r));
    }
    struct mon_record h1 = named(MON_KIND_HCCL, "hcom_allReduce_");
    struct mon_record h2 = named(MON_KIND_HCCL, "hcom_broadcast_");
    struct mon_record h3 = named(MON_KIND_HCCL, "");
    struct mon_record h4 = named(MON_KIND_HCCL, NULL);
    assert_true(filter_state_keep(fs, &h1));
    assert_false(filter_state_keep(fs, &h2));
    assert_false(filter_state_keep(fs, &h3));
    assert_false(filter_state_keep(fs, &h4));
    struct mon_record k = kernel("MatMul");
    assert_false(filter_state_keep(fs, &k));
    struct mon_record ext = { .kind = 8 };
    assert_false(filter_state_keep(fs, &ext));
    filter_state_destroy(fs);
}

static void test_filter_marker_companions(void **state)
{
    (void)state;
    struct filter_state *fs;
    assert_int_equal(filter_state_create(&fs), 0);
    assert_int_equal(filter_state_set(fs, "Marker:step"), 0);
    /* kept range: all four records kept */
    struct mon_record a[] = { marker(16, 0, 1, "step 1"), marker(32, 0, 1, ""), marker(16, 1, 1, ""),
                              marker(32, 1, 1, "") };
    for (int i = 0; i < 4; i++)
        assert_true(filter_state_keep(fs, &a[i]));
    /* dropped range with device part: companions dropped, id forgotten at the device END */
    struct mon_record b[] = { marker(16, 0, 2, "forward"), marker(32, 0, 2, ""), marker(16, 1, 2, ""),
                              marker(32, 1, 2, "") };
    for (int i = 0; i < 4; i++)
        assert_false(filter_state_keep(fs, &b[i]));
    struct mon_record again = marker(32, 1, 2, "");
    assert_true(filter_state_keep(fs, &again)); /* forgotten */
    /* host-only range: forgotten at the host END */
    struct mon_record c0 = marker(2, 0, 3, "fwd"), c1 = marker(4, 0, 3, "");
    assert_false(filter_state_keep(fs, &c0));
    assert_false(filter_state_keep(fs, &c1));
    assert_true(filter_state_keep(fs, &c1));
    /* empty name is dropped by rule 5, its companions too */
    struct mon_record d0 = marker(8, 0, 4, ""), d1 = marker(8, 1, 4, "");
    assert_false(filter_state_keep(fs, &d0));
    assert_false(filter_state_keep(fs, &d1));
    assert_true(filter_state_keep(fs, &d1));
    /* plain instant kept by name; unrelated companion ids are kept */
    struct mon_record e0 = marker(1, 0, 5, "step mark"), e1 = marker(32, 1, 99, "");
    assert_true(filter_state_keep(fs, &e0));
    assert_true(filter_state_keep(fs, &e1));
    /* the companion set is bounded: 65536 newer drops evict id 1000 */
    struct mon_record s = marker(2, 0, 1000, "x");
    assert_false(filter_state_keep(fs, &s));
    for (uint64_t id = 2000; id < 2000 + FILTER_COMPANION_CAP; id++) {
        struct mon_record t = marker(2, 0, id, "x");
        assert_false(filter_state_keep(fs, &t));
    }
    struct mon_record end1000 = marker(4, 0, 1000, "");
    assert_true(filter_state_keep(fs, &end1000));
    struct mon_record endlast = marker(4, 0, 2000 + FILTER_COMPANION_CAP - 1, "");
    assert_false(filter_state_keep(fs, &endlast));
    filter_state_destroy(fs);
}

/* ---- concurrent replacement ---- */

struct race {
    struct filter_state *fs;
    atomic_bool stop;
    atomic_long bad, calls;
};

static void *race_reader(void *arg)
{
    struct race *rc = arg;
    struct mon_record mm = kernel(workload[0]), ln = kernel(workload[6]);
    while (!atomic_load(&rc->stop)) {
        /* Every filter installed keeps MatMul; LayerNorm only under the second one. */
        if (!filter_state_keep(rc->fs, &mm))
            atomic_fetch_add(&rc->bad, 1);
        (void)filter_state_keep(rc->fs, &ln);
        atomic_fetch_add(&rc->calls, 1);
    }
    return NULL;
}

/* filter_state_apply compacts a batch to exactly what filter_state_keep keeps, in order,
 * including marker companions that depend on an earlier record of the same batch. */
static void test_filter_apply_batch(void **state)
{
    (void)state;
    struct filter_state *fs;
    assert_int_equal(filter_state_create(&fs), 0);
    struct mon_record b[12];
    size_t n = 0;
    for (size_t i = 0; i < NWORK; i++)
        b[n++] = kernel(workload[i]);
    b[n++] = marker(16, 0, 7, "other");    /* dropped range start ... */
    b[n++] = marker(16, 1, 7, "");         /* ... and its device companion */
    b[n++] = (struct mon_record){ .kind = MON_KIND_MEMCPY };
    /* no filter: everything, untouched */
    assert_int_equal(filter_state_apply(fs, b, n), n);
    assert_string_equal(b[1].u.kernel.name, "BatchMatMul");

    assert_int_equal(filter_state_set(fs, "Kernel:Conv2D,Softmax;Marker:step"), 0);
    size_t kept = filter_state_apply(fs, b, n);
    assert_int_equal(kept, 4);
    assert_string_equal(b[0].u.kernel.name, "Conv2D");
    assert_string_equal(b[1].u.kernel.name, "Conv2DBackpropFilter");
    assert_string_equal(b[2].u.kernel.name, "Softmax");
    assert_int_equal(b[3].kind, MON_KIND_MEMCPY);
    assert_int_equal(filter_state_apply(fs, b, 0), 0);
    filter_state_destroy(fs);
}

static void test_filter_concurrent_replace(void **state)
{
    (void)state;
    struct race rc = { 0 };
    assert_int_equal(filter_state_create(&rc.fs), 0);
    assert_int_equal(filter_state_set(rc.fs, "Kernel:MatMul"), 0);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, race_reader, &rc), 0);
    for (int i = 0; i < 2000; i++)
        assert_int_equal(filter_state_set(rc.fs, (i & 1) ? "Kernel:MatMul" : "Kernel:Mat,LayerNorm;API:x"), 0);
    while (atomic_load(&rc.calls) < 1000)
        sched_yield();
    atomic_store(&rc.stop, true);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&rc.bad), 0);
    /* the last installed filter is what a reader sees now */
    struct mon_record ln = kernel(workload[6]);
    assert_false(filter_state_keep(rc.fs, &ln));
    filter_state_destroy(rc.fs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_filter_faq_examples),
        cmocka_unit_test(test_filter_parse),
        cmocka_unit_test(test_filter_tab_trimmed),
        cmocka_unit_test(test_filter_whitelist_hccl_empty),
        cmocka_unit_test(test_filter_marker_companions),
        cmocka_unit_test(test_filter_apply_batch),
        cmocka_unit_test(test_filter_concurrent_replace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
