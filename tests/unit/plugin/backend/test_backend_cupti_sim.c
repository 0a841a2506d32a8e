/* test_backend_cupti_sim: the CUPTI backend over our simulated CUPTI with several producer
 * threads appending kernels while the consumer flushes, in small buffers so they rotate
 * (and complete on the producers' threads) thousands of times: every appended record reaches
 * the sink exactly once, nothing after stop. Run under ThreadSanitizer too. A separate
 * binary from test_backend_cupti: linking the simulator maps a libcupti.so, which would win
 * the library search that test checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "msmon/cupti_abi.h"
#include "msmon/mssim_cupti.h"
#include "plugin/backend/backend_cupti.h"
#include "plugin/penv.h"

cupti_abi_register_callbacks_fn cuptiActivityRegisterCallbacks;
cupti_abi_enable_fn cuptiActivityEnable, cuptiActivityDisable;
cupti_abi_get_next_record_fn cuptiActivityGetNextRecord;
cupti_abi_flush_all_fn cuptiActivityFlushAll;
cupti_abi_get_version_fn cuptiGetVersion;
cupti_abi_get_callback_name_fn cuptiGetCallbackName;
cupti_abi_get_num_dropped_fn cuptiActivityGetNumDroppedRecords;

#define THREADS 4
#define PER_THREAD 5000

static atomic_uint_fast64_t got, dur;
static atomic_bool producing;

static void sink(void *ctx, struct mon_record *recs, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(recs[i].kind, MON_KIND_KERNEL);
        atomic_fetch_add(&dur, recs[i].u.kernel.end - recs[i].u.kernel.start);
    }
    atomic_fetch_add(&got, n);
}

static void *producer(void *arg)
{
    uint32_t stream = (uint32_t)(uintptr_t)arg;
    for (int i = 0; i < PER_THREAD; i++)
        mssimc_kernel(0, stream, "k", 100);
    return NULL;
}

static void test_concurrent_producers(void **state)
{
    static const struct cupti_lib lib = {
        .register_callbacks = cuptiActivityRegisterCallbacks, .enable = cuptiActivityEnable,
        .disable = cuptiActivityDisable, .get_next_record = cuptiActivityGetNextRecord,
        .flush_all = cuptiActivityFlushAll, .get_version = cuptiGetVersion,
        .get_callback_name = cuptiGetCallbackName, .get_num_dropped = cuptiActivityGetNumDroppedRecords,
    };
    pthread_t th[THREADS];
    struct backend *be;
    struct backend_drops d;
    struct mssimc_stats st;
    uint32_t on;
    (void)state;
    assert_int_equal(backend_cupti_create_from(&lib, &be), 0);
    assert_int_equal(be->ops->start(be, sink, NULL), 0);
    assert_int_equal(be->ops->set_kinds(be, 1u << MON_KIND_KERNEL, &on), 0);
    atomic_store(&producing, true);
    for (uintptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, producer, (void *)i), 0);
    for (int i = 0; i < 200; i++)
        assert_int_equal(be->ops->flush(be), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    be->ops->stop(be);
    mssimc_get_stats(&st);
    be->ops->drops(be, &d);
    assert_int_equal(d.buffers_declined, 0);
    assert_int_equal(st.dropped_declined, 0);
    assert_int_equal(st.appended, THREADS * PER_THREAD); /* runtime API records: kind off */
    assert_int_equal(atomic_load(&got), THREADS * PER_THREAD);
    assert_int_equal(atomic_load(&dur), THREADS * PER_THREAD * 100ull);
    assert_true(st.buffers_completed > 1000); /* 4 KiB buffers: 18 kernels each */
    mssimc_kernel(0, 0, "late", 100); /* after stop: the kind is off, nothing arrives */
    (void)cuptiActivityFlushAll(1);
    assert_int_equal(atomic_load(&got), THREADS * PER_THREAD);
    be->ops->destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_producers),
    };
    setenv("MSMONITOR_TEST_BUFFER_SIZE", "4096", 1);
    penv_reload();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
