/* test_sim: a consumer of the simulated libmspti.so that uses only the public msPTI ABI and the
 * mssim_* driver API — field round trips, buffer rules, quirks, profiles, markers, workload
 * and the MSSIM_DUMP ground-truth file. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "msmon/mspti.h"
#include "msmon/mssim.h"

#define MAXREC 200000
#define RECMAX 72

struct rec {
    uint8_t b[RECMAX];
    size_t size;
};

/* The consumer: records copied out of completed buffers, plus what the callbacks saw. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    size_t buf_size;           /* size handed out; 0 = decline */
    struct rec *recs;
    size_t n;
    unsigned completions, null_completions, foreign_thread_completions, zero_valid;
    size_t valid_sizes[4096];
    unsigned nvalid;
    pthread_t main_thread;
    int cb_events[64][2];      /* [cbid][site] for the last domain seen */
    int cb_domain;
} C = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
static msptiSubscriberHandle H;

static size_t stride(int32_t kind)
{
    static const size_t s[] = {0, 56, 56, 48, 56, 64, 56, 56, 24, 72, 48, 48, 48};
    return kind >= 1 && kind <= 12 ? s[kind] : 0;
}

static void on_request(uint8_t **buffer, size_t *size, size_t *maxn)
{
    *maxn = 0;
    if (C.buf_size == 0) {
        *buffer = NULL;
        *size = 0;
        return;
    }
    *buffer = aligned_alloc(8, (C.buf_size + 7) / 8 * 8);
    *size = C.buf_size;
}

static void on_complete(uint8_t *buffer, size_t size, size_t valid)
{
    (void)size;
    msptiActivity *r = NULL;
    pthread_mutex_lock(&C.lock);
    if (!buffer) {
        C.null_completions++;
        goto out;
    }
    C.completions++;
    if (valid == 0)
        C.zero_valid++;
    if (C.nvalid < 4096)
        C.valid_sizes[C.nvalid++] = valid;
    if (!pthread_equal(pthread_self(), C.main_thread))
        C.foreign_thread_completions++;
    msptiResult rc;
    while ((rc = msptiActivityGetNextRecord(buffer, valid, &r)) == MSPTI_SUCCESS) {
        if (C.n < MAXREC) {
            int32_t kind;
            memcpy(&kind, r, 4);
            C.recs[C.n].size = stride(kind);
            memcpy(C.recs[C.n].b, r, C.recs[C.n].size);
            C.n++;
        }
    }
    /* Stopped early (unknown kind): reset the thread-local cursor (docs/design/mspti.md#runtime-semantics). */
    if (rc != MSPTI_ERROR_MAX_LIMIT_REACHED)
        msptiActivityGetNextRecord(buffer, 0, &r);
    free(buffer);
out:
    pthread_cond_broadcast(&C.cv);
    pthread_mutex_unlock(&C.lock);
}

static void on_callback(void *ud, msptiCallbackDomain domain, msptiCallbackId cbid, const msptiCallbackData *d)
{
    (void)ud;
    pthread_mutex_lock(&C.lock);
    C.cb_domain = domain;
    if (cbid < 64 && d->callbackSite <= MSPTI_API_EXIT && d->functionName)
        C.cb_events[cbid][d->callbackSite]++;
    pthread_mutex_unlock(&C.lock);
}

static const char *const knobs[] = {
    "MSSIM_QUIRKS", "MSSIM_PROFILE", "MSSIM_CHECK_PRELOAD", "MSSIM_GETNEXT", "MSSIM_BUFFER_LIMIT",
    "MSSIM_NULL_COMPLETIONS", "MSSIM_DROP_EVERY", "MSSIM_DROP_RATE", "MSSIM_SEED", "MSSIM_DEVICE_LAG_MS",
    "MSSIM_LAUNCH_LATENCY_NS", "MSSIM_API_OVERHEAD_NS", "MSSIM_WAKE_MS", "MSSIM_DEVICES", "MSSIM_DUMP",
    "LD_PRELOAD",
};

/* Knobs as "NAME=VALUE" strings, NULL-terminated; then reset, subscribe and register. */
static void start(size_t buf_size, ...)
{
    va_list ap;
    for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++)
        unsetenv(knobs[i]);
    va_start(ap, buf_size);
    for (const char *kv = va_arg(ap, const char *); kv; kv = va_arg(ap, const char *)) {
        char name[64];
        const char *eq = strchr(kv, '=');
        snprintf(name, sizeof(name), "%.*s", (int)(eq - kv), kv);
        setenv(name, eq + 1, 1);
    }
    va_end(ap);
    mssim_reset();
    pthread_mutex_lock(&C.lock);
    if (!C.recs)
        C.recs = calloc(MAXREC, sizeof(*C.recs));
    C.n = 0;
    C.completions = C.null_completions = C.foreign_thread_completions = C.zero_valid = C.nvalid = 0;
    memset(C.cb_events, 0, sizeof(C.cb_events));
    C.buf_size = buf_size;
    C.main_thread = pthread_self();
    pthread_mutex_unlock(&C.lock);
    assert_int_equal(msptiSubscribe(&H, on_callback, NULL), MSPTI_SUCCESS);
    assert_int_equal(msptiActivityRegisterCallbacks(on_request, on_complete), MSPTI_SUCCESS);
}

static void enable(int kind) { assert_int_equal(msptiActivityEnable((msptiActivityKind)kind), MSPTI_SUCCESS); }

static void finish(void)
{
    mssim_synchronize(-1);
    assert_int_equal(msptiActivityFlushAll(1), MSPTI_SUCCESS);
}

static int32_t kind_of(size_t i)
{
    int32_t k;
    memcpy(&k, C.recs[i].b, 4);
    return k;
}
static size_t count_kind(int32_t kind)
{
    size_t n = 0;
    for (size_t i = 0; i < C.n; i++)
        n += kind_of(i) == kind;
    return n;
}
static const void *first_kind(int32_t kind, size_t nth)
{
    for (size_t i = 0; i < C.n; i++)
        if (kind_of(i) == kind && nth-- == 0)
            return C.recs[i].b;
    fail_msg("no record of kind %d", kind);
    return NULL;
}

/* ---------------------------------------------------------------- */

static void test_error_paths(void **state)
{
    (void)state;
    msptiSubscriberHandle h2;
    const char *s;
    uint64_t last;
    msptiActivity *r = NULL;
    uint8_t buf[8] = {0};
    start(1 << 20, NULL);
    assert_int_equal(mssim_is_simulator(), 1);
    assert_int_equal(msptiSubscribe(NULL, NULL, NULL), MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(msptiSubscribe(&h2, NULL, NULL), MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    assert_int_equal(msptiUnsubscribe((msptiSubscriberHandle)&h2), MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(msptiActivityRegisterCallbacks(NULL, on_complete), MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(msptiActivityRegisterCallbacks(on_request, NULL), MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(msptiActivityEnable(MSPTI_ACTIVITY_KIND_INVALID), MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(msptiActivityEnable(MSPTI_ACTIVITY_KIND_COUNT), MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(msptiActivityDisable((msptiActivityKind)-1), MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(msptiActivityGetNextRecord(NULL, 8, &r), MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(msptiActivityGetNextRecord(buf, 8, NULL), MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(msptiActivityPushExternalCorrelationId(MSPTI_EXTERNAL_CORRELATION_KIND_INVALID, 1),
                     MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(msptiActivityPushExternalCorrelationId(MSPTI_EXTERNAL_CORRELATION_KIND_SIZE, 1),
                     MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(msptiActivityPopExternalCorrelationId(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last),
                     MSPTI_ERROR_QUEUE_EMPTY);
    assert_int_equal(msptiActivityDisableMarkerDomain(NULL), MSPTI_ERROR_INVALID_PARAMETER);
    char longname[300];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[299] = '\0';
    assert_int_equal(msptiActivityEnableMarkerDomain(longname), MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(msptiEnableCallback(1, (msptiSubscriberHandle)&h2, MSPTI_CB_DOMAIN_RUNTIME, 10),
                     MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(msptiEnableDomain(1, H, MSPTI_CB_DOMAIN_INVALID), MSPTI_ERROR_INVALID_PARAMETER);
    /* 26.1 with the LD_PRELOAD check and no LD_PRELOAD. */
    assert_int_equal(msptiEnableDomain(1, H, MSPTI_CB_DOMAIN_RUNTIME), MSPTI_ERROR_WITHOUT_LD_PRELOAD);
    assert_int_equal(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MEMCPY), MSPTI_ERROR_WITHOUT_LD_PRELOAD);
    assert_int_equal(msptiGetResultString(MSPTI_ERROR_INNER, &s), MSPTI_SUCCESS);
    assert_string_equal(s, "An unknown internal error has occurred.");
    assert_int_equal(msptiGetResultString(MSPTI_ERROR_WITHOUT_LD_PRELOAD, &s), MSPTI_SUCCESS);
    assert_string_equal(s, "The operation requires LD_PRELOAD injection.");
    assert_int_equal(msptiGetResultString((msptiResult)42, &s), MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(msptiGetResultString(MSPTI_SUCCESS, NULL), MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(mssim_set_device(8), -EINVAL);
    assert_int_equal(mssim_synchronize(8), -EINVAL);
    assert_int_equal(mssim_emit_raw(NULL, 8), -EINVAL);
    assert_int_equal(mssim_api(NULL, MSSIM_LEVEL_ACL, 1), 0);
    assert_int_equal(mssim_api("x", 7, 1), 0);
    assert_int_equal(mssim_launch_kernel(0, NULL, "KERNEL_AIVEC", 1), 0);
    assert_int_equal(mssim_memcpy(0, 9, 1), 0);
    assert_int_equal(mssim_free(12345), 0);
    assert_null(mssim_mstx_domain_create("default"));
    assert_null(mssim_mstx_domain_create(NULL));
    assert_int_equal(mssim_workload_run(NULL), -EINVAL);
    assert_int_equal(msptiUnsubscribe(H), MSPTI_SUCCESS);
    assert_int_equal(msptiUnsubscribe(H), MSPTI_SUCCESS);   /* not subscribed: success */
    uint8_t rec[48] = {3};
    assert_int_equal(mssim_emit_raw(rec, sizeof(rec)), -ENOTCONN);
    assert_int_equal(mssim_bench_fill(1u << 3, 10), -ENOTCONN);
}

static void test_roundtrip_all_kinds(void **state)
{
    (void)state;
    uint64_t addr = 0;
    start(1 << 20, "MSSIM_CHECK_PRELOAD=0", NULL);
    for (int k = 1; k <= 12; k++)
        enable(k);
    assert_true(msptiActivityIsEnabled(MSPTI_ACTIVITY_KIND_HCCL));
    assert_int_equal(mssim_set_device(3), 0);
    uint64_t t0 = mssim_now_ns();
    uint64_t c_api = mssim_api("myNodeOp", MSSIM_LEVEL_NODE, 777);
    uint64_t c_k = mssim_launch_kernel(5, "MatMul", "KERNEL_AICORE", 1000);
    uint64_t c_coll = mssim_collective(2, "HcclAllReduce", "world", "RING", MSPTI_ACTIVITY_COMMUNICATION_FP32,
                                       1024, 4096000, 2000);
    uint64_t c_mc = mssim_memcpy(1, MSPTI_ACTIVITY_MEMCPY_KIND_DTOD, 5000000);
    uint64_t c_ms = mssim_memset(-1, 7, 1000000);
    uint64_t c_ma = mssim_malloc(4096, &addr);
    uint64_t c_fr = mssim_free(addr);
    assert_int_equal(msptiActivityPushExternalCorrelationId(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 99), 0);
    uint64_t c_ext = mssim_api("aclOther", MSSIM_LEVEL_OTHER, 10);
    uint64_t popped = 0;
    assert_int_equal(msptiActivityPopExternalCorrelationId(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, &popped), 0);
    assert_int_equal(popped, 99);
    finish();
    uint64_t t1 = mssim_now_ns();
    const msptiActivityApi *a = first_kind(MSPTI_ACTIVITY_KIND_NODE_API, 0);
    assert_string_equal(a->name, "myNodeOp");
    assert_int_equal(a->correlationId, c_api);
    assert_int_equal(a->end - a->start, 777);
    assert_true(a->start >= t0 && a->start <= t1);
    assert_int_equal(a->pt.processId, (uint32_t)getpid());
    const msptiActivityApi *la = first_kind(MSPTI_ACTIVITY_KIND_RUNTIME_API, 0);
    assert_string_equal(la->name, "aclrtLaunchKernel");
    assert_int_equal(la->correlationId, c_k);
    assert_int_equal(la->end - la->start, 2000);
    const msptiActivityKernel *k = first_kind(MSPTI_ACTIVITY_KIND_KERNEL, 0);
    assert_string_equal(k->name, "MatMul");
    assert_string_equal(k->type, "KERNEL_AICORE");
    assert_int_equal(k->correlationId, c_k);
    assert_int_equal(k->ds.deviceId, 3);
    assert_int_equal(k->ds.streamId, 5);
    assert_int_equal(k->end - k->start, 1000);
    assert_true(k->start >= la->start + 5000);
    const msptiActivityCommunication *cm = first_kind(MSPTI_ACTIVITY_KIND_COMMUNICATION, 0);
    assert_string_equal(cm->name, "HcclAllReduce");
    assert_string_equal(cm->commName, "world");
    assert_string_equal(cm->algType, "RING");
    assert_int_equal(cm->dataType, MSPTI_ACTIVITY_COMMUNICATION_FP32);
    assert_int_equal(cm->count, 1024);
    assert_int_equal(cm->correlationId, c_coll);
    assert_int_equal(cm->ds.streamId, 2);
    assert_int_equal(cm->end - cm->start, 2000);
    const msptiActivityHccl *hc = first_kind(MSPTI_ACTIVITY_KIND_HCCL, 0);
    assert_string_equal(hc->name, "HcclAllReduce");
    assert_string_equal(hc->commName, "world");
    assert_true(hc->bandWidth == 2048.0);
    assert_int_equal(hc->start, cm->start);
    const msptiActivityMemcpy *mc = first_kind(MSPTI_ACTIVITY_KIND_MEMCPY, 0);
    assert_int_equal(mc->copyKind, MSPTI_ACTIVITY_MEMCPY_KIND_DTOD);
    assert_int_equal(mc->bytes, 5000000);
    assert_int_equal(mc->end - mc->start, 2000 + 10000);
    assert_int_equal(mc->isAsync, 1);
    assert_int_equal(mc->streamId, 1);
    assert_int_equal(mc->deviceId, 3);
    assert_int_equal(mc->correlationId, c_mc);
    const msptiActivityMemset *ms = first_kind(MSPTI_ACTIVITY_KIND_MEMSET, 0);
    assert_int_equal(ms->value, 7);
    assert_int_equal(ms->bytes, 1000000);
    assert_int_equal(ms->end - ms->start, 2000 + 1000);
    assert_int_equal(ms->isAsync, 0);
    assert_int_equal(ms->streamId, MSPTI_INVALID_STREAM_ID);
    assert_int_equal(ms->correlationId, c_ms);
    const msptiActivityMemory *m0 = first_kind(MSPTI_ACTIVITY_KIND_MEMORY, 0);
    const msptiActivityMemory *m1 = first_kind(MSPTI_ACTIVITY_KIND_MEMORY, 1);
    assert_int_equal(m0->memoryOperationType, MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
    assert_int_equal(m1->memoryOperationType, MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
    assert_int_equal(m0->memoryKind, MSPTI_ACTIVITY_MEMORY_KIND_DEVICE);
    assert_int_equal(m0->address, addr);
    assert_int_equal(m1->address, addr);
    assert_int_equal(m0->bytes, 4096);
    assert_int_equal(m1->bytes, 4096);
    assert_int_equal(m0->correlationId, c_ma);
    assert_int_equal(m1->correlationId, c_fr);
    assert_int_equal(m0->processId, (uint32_t)getpid());
    assert_int_equal(m0->deviceId, 3);
    assert_int_equal(m0->streamId, MSPTI_INVALID_STREAM_ID);
    /* The external correlation record directly precedes its API record. */
    const msptiActivityExternalCorrelation *ec = first_kind(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, 0);
    assert_int_equal(count_kind(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION), 1);
    assert_int_equal(ec->externalKind, MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1);
    assert_int_equal(ec->externalId, 99);
    assert_int_equal(ec->correlationId, c_ext);
    const msptiActivityApi *next = (const void *)((const struct rec *)((const uint8_t *)ec - offsetof(struct rec, b)) + 1)->b;
    assert_int_equal(next->kind, MSPTI_ACTIVITY_KIND_API);
    assert_int_equal(next->correlationId, c_ext);
    struct mssim_stats st;
    mssim_get_stats(&st);
    assert_int_equal(st.records_appended, C.n);
    assert_int_equal(C.n, 11);
}

static void test_lazy_request_and_unsubscribed(void **state)
{
    (void)state;
    struct mssim_stats st;
    start(1 << 20, NULL);
    enable(MSPTI_ACTIVITY_KIND_ACL_API);
    mssim_get_stats(&st);
    assert_int_equal(st.buffers_requested, 0);
    mssim_api("a", MSSIM_LEVEL_RUNTIME, 1);   /* RuntimeAPI not enabled: nothing */
    mssim_get_stats(&st);
    assert_int_equal(st.buffers_requested, 0);
    mssim_api("a", MSSIM_LEVEL_ACL, 1);
    mssim_get_stats(&st);
    assert_int_equal(st.buffers_requested, 1);
    assert_int_equal(msptiUnsubscribe(H), 0);
    mssim_api("b", MSSIM_LEVEL_ACL, 1);
    mssim_launch_kernel(0, "K", "KERNEL_AIVEC", 1);
    finish();
    assert_int_equal(C.n, 1);
    assert_int_equal(C.completions, 1);
    /* Disable then enable keeps working after resubscribing. */
    assert_int_equal(msptiSubscribe(&H, NULL, NULL), 0);
    mssim_api("c", MSSIM_LEVEL_ACL, 1);
    finish();
    assert_int_equal(C.n, 2);
}

static void test_rotation_80_percent(void **state)
{
    (void)state;
    start(8 << 20, "MSSIM_BUFFER_LIMIT=480", NULL);
    enable(MSPTI_ACTIVITY_KIND_ACL_API);
    for (int i = 0; i < 100; i++)
        mssim_api("op", MSSIM_LEVEL_ACL, 1);
    finish();
    assert_int_equal(C.n, 100);
    assert_int_equal(C.completions, 13);   /* 8 records (384 = 80 % of 480) per buffer */
    unsigned full = 0;
    for (unsigned i = 0; i < C.nvalid; i++)
        full += C.valid_sizes[i] == 384;
    assert_int_equal(full, 12);
    struct mssim_stats st;
    mssim_get_stats(&st);
    assert_int_equal(st.buffers_requested, 13);
    assert_int_equal(st.buffers_completed, 13);
    assert_int_equal(st.records_dropped_nofit, 0);
}

static void test_declined_and_null_completions(void **state)
{
    (void)state;
    struct mssim_stats st;
    start(0, NULL);
    enable(MSPTI_ACTIVITY_KIND_ACL_API);
    for (int i = 0; i < 10; i++)
        mssim_api("op", MSSIM_LEVEL_ACL, 1);
    finish();
    mssim_get_stats(&st);
    assert_int_equal(st.records_dropped_declined, 10);
    assert_int_equal(st.buffers_requested, 10);
    assert_int_equal(st.buffers_declined, 10);
    assert_int_equal(C.null_completions, 1);   /* coalesced */
    assert_int_equal(st.null_completions, 1);
    assert_int_equal(C.n, 0);
    /* Clean mode: no NULL completions. */
    start(0, "MSSIM_QUIRKS=0", NULL);
    enable(MSPTI_ACTIVITY_KIND_ACL_API);
    mssim_api("op", MSSIM_LEVEL_ACL, 1);
    finish();
    assert_int_equal(C.null_completions, 0);
}

static void test_nofit_and_empty_partial(void **state)
{
    (void)state;
    struct mssim_stats st;
    start(100, NULL);
    enable(MSPTI_ACTIVITY_KIND_COMMUNICATION);
    mssim_collective(0, "HcclBroadcast", "g", "RING", 0, 1, 1, 1);
    mssim_collective(0, "HcclBroadcast", "g", "RING", 0, 1, 1, 1);
    finish();
    mssim_get_stats(&st);
    assert_int_equal(st.records_appended, 1);
    assert_int_equal(st.records_dropped_nofit, 1);
    /* A buffer too small for anything: FlushAll still completes it with validSize 0. */
    start(16, NULL);
    enable(MSPTI_ACTIVITY_KIND_ACL_API);
    mssim_api("op", MSSIM_LEVEL_ACL, 1);
    finish();
    assert_int_equal(C.completions, 1);
    assert_int_equal(C.zero_valid, 1);
}

static void test_completions_on_foreign_threads(void **state)
{
    (void)state;
    start(1 << 20, "MSSIM_BUFFER_LIMIT=4800", NULL);
    enable(MSPTI_ACTIVITY_KIND_ACL_API);
    assert_int_equal(msptiActivityFlushPeriod(5), 0);
    for (int i = 0; i < 2000; i++)
        mssim_api("op", MSSIM_LEVEL_ACL, 1);
    /* The ActivityManager delivers full buffers on its own; wait for the first one. */
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 30;
    pthread_mutex_lock(&C.lock);
    while (C.foreign_thread_completions == 0 && pthread_cond_timedwait(&C.cv, &C.lock, &dl) == 0)
        ;
    unsigned foreign = C.foreign_thread_completions;
    pthread_mutex_unlock(&C.lock);
    assert_true(foreign > 0);
    finish();
    assert_int_equal(C.n, 2000);
}

static void test_cursor_quirk_vs_pointer(void **state)
{
    (void)state;
    msptiActivityApi a[3], b[2];
    msptiActivity *r = NULL;
    memset(a, 0, sizeof(a));
    memset(b, 0, sizeof(b));
    for (int i = 0; i < 3; i++) {
        a[i].kind = MSPTI_ACTIVITY_KIND_API;
        a[i].correlationId = 10 + (uint64_t)i;
    }
    for (int i = 0; i < 2; i++) {
        b[i].kind = MSPTI_ACTIVITY_KIND_API;
        b[i].correlationId = 20 + (uint64_t)i;
    }
    start(1 << 20, NULL);   /* faithful: cursor */
    assert_int_equal(msptiActivityGetNextRecord((uint8_t *)a, sizeof(a), &r), 0);
    assert_ptr_equal(r, (void *)&a[0]);
    /* Break out early, then read another buffer: the stale cursor skips b[0]. */
    r = NULL;
    assert_int_equal(msptiActivityGetNextRecord((uint8_t *)b, sizeof(b), &r), 0);
    assert_ptr_equal(r, (void *)&b[1]);
    assert_int_equal(msptiActivityGetNextRecord((uint8_t *)b, sizeof(b), &r), MSPTI_ERROR_MAX_LIMIT_REACHED);
    /* The zero-size call resets the cursor. */
    assert_int_equal(msptiActivityGetNextRecord((uint8_t *)a, sizeof(a), &r), 0);
    assert_int_equal(msptiActivityGetNextRecord((uint8_t *)a, 0, &r), MSPTI_ERROR_MAX_LIMIT_REACHED);
    r = NULL;
    assert_int_equal(msptiActivityGetNextRecord((uint8_t *)b, sizeof(b), &r), 0);
    assert_ptr_equal(r, (void *)&b[0]);
    assert_int_equal(msptiActivityGetNextRecord((uint8_t *)b, sizeof(b), &r), 0);
    assert_int_equal(msptiActivityGetNextRecord((uint8_t *)b, sizeof(b), &r), MSPTI_ERROR_MAX_LIMIT_REACHED);
    /* Unknown kind -> INNER. */
    uint8_t junk[56] = {0};
    junk[0] = 77;
    assert_int_equal(msptiActivityGetNextRecord(junk, sizeof(junk), &r), MSPTI_ERROR_INNER);
    assert_int_equal(msptiActivityGetNextRecord(junk, 0, &r), MSPTI_ERROR_MAX_LIMIT_REACHED);

    start(1 << 20, "MSSIM_GETNEXT=pointer", NULL);
    r = NULL;
    assert_int_equal(msptiActivityGetNextRecord((uint8_t *)a, sizeof(a), &r), 0);
    assert_ptr_equal(r, (void *)&a[0]);
    r = NULL;
    assert_int_equal(msptiActivityGetNextRecord((uint8_t *)b, sizeof(b), &r), 0);
    assert_ptr_equal(r, (void *)&b[0]);
    assert_int_equal(msptiActivityGetNextRecord((uint8_t *)b, sizeof(b), &r), 0);
    assert_ptr_equal(r, (void *)&b[1]);
    assert_int_equal(msptiActivityGetNextRecord((uint8_t *)b, sizeof(b), &r), MSPTI_ERROR_MAX_LIMIT_REACHED);
}

static void test_profiles(void **state)
{
    (void)state;
    start(1 << 20, "MSSIM_PROFILE=8.0", NULL);
    assert_int_equal(msptiActivityEnable(MSPTI_ACTIVITY_KIND_HCCL), MSPTI_ERROR_INVALID_PARAMETER);
    enable(MSPTI_ACTIVITY_KIND_API);
    assert_false(msptiActivityIsEnabled(MSPTI_ACTIVITY_KIND_API));   /* not meaningful before 26.1 */
    mssim_api("x", MSSIM_LEVEL_ACL, 1);
    finish();
    assert_int_equal(count_kind(MSPTI_ACTIVITY_KIND_API), 1);   /* all levels are API before 26.0 */

    const char *str = "untouched";
    assert_int_equal(msptiGetResultString(MSPTI_SUCCESS, &str), MSPTI_ERROR_INNER);   /* 26.1 only */
    assert_string_equal(str, "untouched");

    start(1 << 20, "MSSIM_PROFILE=26.0", NULL);
    assert_int_equal(msptiActivityEnable(MSPTI_ACTIVITY_KIND_HCCL), MSPTI_ERROR_WITHOUT_LD_PRELOAD);
    assert_int_equal(msptiActivityDisable(MSPTI_ACTIVITY_KIND_MEMCPY), MSPTI_ERROR_WITHOUT_LD_PRELOAD);
    assert_int_equal(msptiGetResultString(MSPTI_ERROR_WITHOUT_LD_PRELOAD, &str), MSPTI_ERROR_INNER);
    assert_int_equal(msptiEnableDomain(1, H, MSPTI_CB_DOMAIN_RUNTIME), MSPTI_ERROR_WITHOUT_LD_PRELOAD);
    enable(MSPTI_ACTIVITY_KIND_COMMUNICATION);
    start(1 << 20, "MSSIM_PROFILE=26.0", "LD_PRELOAD=/opt/x/libmspti.so", NULL);
    enable(MSPTI_ACTIVITY_KIND_HCCL);
    unsetenv("LD_PRELOAD");

    /* 8.1: Memory enable succeeds but produces nothing without LD_PRELOAD. */
    start(1 << 20, "MSSIM_PROFILE=8.1", NULL);
    enable(MSPTI_ACTIVITY_KIND_MEMORY);
    assert_int_equal(msptiActivityEnable(MSPTI_ACTIVITY_KIND_COMMUNICATION), MSPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(msptiEnableDomain(1, H, MSPTI_CB_DOMAIN_RUNTIME), MSPTI_SUCCESS);   /* no result 6 < 26.0 */
    uint64_t addr;
    mssim_malloc(10, &addr);
    finish();
    assert_int_equal(C.n, 0);
}

static void test_markers(void **state)
{
    (void)state;
    char msg[256];
    struct mssim_stats st;
    start(1 << 20, NULL);
    enable(MSPTI_ACTIVITY_KIND_MARKER);
    uint64_t id1 = mssim_mstx_mark("hello", -1);
    assert_int_equal(id1, 1);
    uint64_t id2 = mssim_mstx_range_start("range", 2);
    mssim_launch_kernel(2, "K", "KERNEL_AIVEC", 1000);
    mssim_mstx_range_end(id2);
    memset(msg, 'm', 255);
    msg[255] = '\0';
    assert_int_equal(mssim_mstx_mark(msg, -1), 0);
    msg[254] = '\0';
    assert_int_not_equal(mssim_mstx_mark(msg, -1), 0);
    assert_int_equal(msptiActivityDisableMarkerDomain("later"), 0);
    void *dom = mssim_mstx_domain_create("later");
    assert_non_null(dom);
    assert_int_not_equal(mssim_mstx_domain_mark(dom, "hidden", -1), 0);
    void *dom2 = mssim_mstx_domain_create("shown");
    mssim_mstx_domain_mark(dom2, "visible", -1);
    finish();
    mssim_get_stats(&st);
    assert_int_equal(st.records_suppressed_domain, 1);
    assert_int_equal(C.n, 7);   /* mark, start+dev, end+dev, long-mark, domain mark */
    const msptiActivityMarker *m = first_kind(MSPTI_ACTIVITY_KIND_MARKER, 0);
    assert_int_equal(m->flag, MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS);
    assert_int_equal(m->sourceKind, MSPTI_ACTIVITY_SOURCE_KIND_HOST);
    assert_string_equal(m->name, "hello");
    assert_string_equal(m->domain, "default");
    assert_int_equal(m->objectId.pt.processId, (uint32_t)getpid());
    int seen_start = 0, seen_end = 0, dev_start = 0, dev_end = 0;
    for (size_t i = 0; i < C.n; i++) {
        const msptiActivityMarker *x = (const void *)C.recs[i].b;
        if (x->id != id2)
            continue;
        if (x->sourceKind == MSPTI_ACTIVITY_SOURCE_KIND_HOST && x->flag == MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE) {
            seen_start++;
            assert_string_equal(x->name, "range");
            assert_string_equal(x->domain, "default");
        } else if (x->sourceKind == MSPTI_ACTIVITY_SOURCE_KIND_HOST && x->flag == MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE) {
            seen_end++;
            assert_string_equal(x->name, "");
            assert_string_equal(x->domain, "");
        } else if (x->sourceKind == MSPTI_ACTIVITY_SOURCE_KIND_DEVICE) {
            assert_string_equal(x->name, "");
            assert_string_equal(x->domain, "");
            assert_int_equal(x->objectId.ds.streamId, 2);
            dev_start += x->flag == MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE;
            dev_end += x->flag == MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE;
        }
    }
    assert_int_equal(seen_start + seen_end + dev_start + dev_end, 4);
    int shown = 0;
    for (size_t i = 0; i < C.n; i++) {
        const msptiActivityMarker *x = (const void *)C.recs[i].b;
        if (strcmp(x->name, "visible") == 0) {
            assert_string_equal(x->domain, "shown");
            shown++;
        }
        assert_true(strcmp(x->name, "hidden") != 0);
    }
    assert_int_equal(shown, 1);
}

/* A range started while Marker was off produces no orphan END once Marker is on. */
static void test_marker_no_orphan_end(void **state)
{
    (void)state;
    start(1 << 20, NULL);
    uint64_t id = mssim_mstx_range_start("r", 0);
    assert_true(id != 0);
    enable(MSPTI_ACTIVITY_KIND_MARKER);
    mssim_mstx_range_end(id);
    uint64_t id2 = mssim_mstx_range_start("r2", -1);
    mssim_mstx_range_end(id2);
    finish();
    assert_int_equal(count_kind(MSPTI_ACTIVITY_KIND_MARKER), 2);   /* r2 START + END only */
    const msptiActivityMarker *m = first_kind(MSPTI_ACTIVITY_KIND_MARKER, 0);
    assert_int_equal(m->id, id2);
}

static void test_callbacks(void **state)
{
    (void)state;
    start(1 << 20, "MSSIM_CHECK_PRELOAD=0", NULL);
    assert_int_equal(msptiEnableCallback(1, H, MSPTI_CB_DOMAIN_RUNTIME, MSPTI_CBID_RUNTIME_LAUNCH), 0);
    assert_int_equal(msptiEnableCallback(1, H, MSPTI_CB_DOMAIN_RUNTIME, MSPTI_CBID_RUNTIME_SIZE),
                     MSPTI_ERROR_INVALID_PARAMETER);
    mssim_launch_kernel(0, "K", "KERNEL_AIVEC", 1);
    mssim_memcpy(0, 2, 10);   /* not enabled */
    assert_int_equal(C.cb_events[MSPTI_CBID_RUNTIME_LAUNCH][0], 1);
    assert_int_equal(C.cb_events[MSPTI_CBID_RUNTIME_LAUNCH][1], 1);
    assert_int_equal(C.cb_events[MSPTI_CBID_RUNTIME_MEMCPY_ASYNC][0], 0);
    assert_int_equal(msptiEnableDomain(1, H, MSPTI_CB_DOMAIN_HCCL), 0);
    mssim_collective(0, "HcclAlltoAllV", "g", "RING", 0, 1, 1, 1);
    mssim_collective(0, "hcclSendRecv", "g", "RING", 0, 1, 1, 1);
    assert_int_equal(C.cb_domain, MSPTI_CB_DOMAIN_HCCL);
    assert_int_equal(C.cb_events[MSPTI_CBID_HCCL_ALL_TO_ALLV][1], 1);
    assert_int_equal(C.cb_events[MSPTI_CBID_HCCL_ALL_TO_ALL][1], 0);
    assert_int_equal(C.cb_events[MSPTI_CBID_HCCL_SENDRECV][0], 1);
    finish();
}

static void test_drop_injection_and_raw(void **state)
{
    (void)state;
    struct mssim_stats st;
    start(1 << 20, "MSSIM_DROP_EVERY=3", NULL);
    enable(MSPTI_ACTIVITY_KIND_ACL_API);
    for (int i = 0; i < 9; i++)
        mssim_api("op", MSSIM_LEVEL_ACL, 1);
    uint8_t raw[64] = {0};
    raw[0] = 42;   /* unknown kind, bypasses enablement */
    assert_int_equal(mssim_emit_raw(raw, sizeof(raw)), 0);
    finish();
    mssim_get_stats(&st);
    assert_int_equal(st.records_dropped_injected, 3);
    assert_int_equal(st.records_appended, 7);
    assert_int_equal(C.n, 6);   /* GetNextRecord stops at the unknown kind with INNER */
}

static void test_bench_fill(void **state)
{
    (void)state;
    start(1 << 20, NULL);
    enable(MSPTI_ACTIVITY_KIND_KERNEL);
    enable(MSPTI_ACTIVITY_KIND_ACL_API);
    assert_int_equal(mssim_bench_fill(1u << 9, 10), -EINVAL);   /* Communication not enabled */
    assert_int_equal(mssim_bench_fill((1u << 2) | (1u << 10), 100000), 100000);
    finish();
    assert_int_equal(C.n, 100000);
    assert_int_equal(count_kind(MSPTI_ACTIVITY_KIND_KERNEL), 50000);
    size_t bmm = 0;   /* names cycle through the 8 workload kernel names */
    for (size_t i = 0; i < C.n; i++) {
        const msptiActivityKernel *k = (const void *)C.recs[i].b;
        if (kind_of(i) == MSPTI_ACTIVITY_KIND_KERNEL && strcmp(k->name, "BatchMatMul") == 0)
            bmm++;
    }
    assert_int_equal(bmm, 50000 / 8);
}

/* FlushAll is synchronous (docs/design/mspti.md#runtime-semantics): when it returns, every buffer handed out has been
 * completed, including full ones the ActivityManager was still starting threads for. */
/* Several producer threads (kernels, markers with device twins, async copies) while the
 * consumer changes FlushPeriod: every record arrives exactly once. Run under TSan too. */
#define PROD_THREADS 4
#define PROD_OPS 300
static void *producer_main(void *arg)
{
    uint32_t dev = (uint32_t)(uintptr_t)arg;
    assert_int_equal(mssim_set_device(dev), 0);
    for (int i = 0; i < PROD_OPS; i++) {
        assert_true(mssim_launch_kernel(0, "MatMul", "KERNEL_AICORE", 1000) != 0);
        assert_true(mssim_mstx_mark("m", 0) != 0);
        assert_true(mssim_memcpy(1, MSPTI_ACTIVITY_MEMCPY_KIND_DTOD, 64) != 0);
    }
    return NULL;
}

static void test_concurrent_producers(void **state)
{
    (void)state;
    pthread_t t[PROD_THREADS];
    start(1 << 20, "MSSIM_CHECK_PRELOAD=0", "MSSIM_BUFFER_LIMIT=2000", NULL);
    enable(MSPTI_ACTIVITY_KIND_KERNEL);
    enable(MSPTI_ACTIVITY_KIND_MARKER);
    enable(MSPTI_ACTIVITY_KIND_MEMCPY);
    enable(MSPTI_ACTIVITY_KIND_RUNTIME_API);
    for (int i = 0; i < PROD_THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, producer_main, (void *)(uintptr_t)i), 0);
    for (uint32_t p = 1; p <= 5; p++)
        assert_int_equal(msptiActivityFlushPeriod(p), MSPTI_SUCCESS);
    for (int i = 0; i < PROD_THREADS; i++)
        pthread_join(t[i], NULL);
    finish();
    assert_int_equal(msptiActivityFlushPeriod(0), MSPTI_SUCCESS);
    pthread_mutex_lock(&C.lock);
    size_t kernels = count_kind(MSPTI_ACTIVITY_KIND_KERNEL), markers = count_kind(MSPTI_ACTIVITY_KIND_MARKER);
    size_t copies = count_kind(MSPTI_ACTIVITY_KIND_MEMCPY), apis = count_kind(MSPTI_ACTIVITY_KIND_RUNTIME_API);
    pthread_mutex_unlock(&C.lock);
    assert_int_equal(kernels, PROD_THREADS * PROD_OPS);
    assert_int_equal(apis, PROD_THREADS * PROD_OPS);
    assert_int_equal(markers, 2 * PROD_THREADS * PROD_OPS);   /* host + device twin */
    assert_int_equal(copies, PROD_THREADS * PROD_OPS);
}

/* What is raced is FlushAll against the manager's rotations, not the buffer size: the
 * consumer hands out one page and the limit cuts it to 16 records. (Fresh 1 MiB buffers made
 * every round an mmap/munmap pair, which took minutes under ASan and TSan.) Each round ends
 * about 40 buffers, each completed on a thread of its own, and thread starts are far costlier
 * under the sanitizers: they run a tenth of the rounds. Every round is the same race; the
 * release build keeps the long run. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SIM_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SIM_TEST_SANITIZED 1
#endif
#endif
#ifdef SIM_TEST_SANITIZED
#define ITERS_FLUSH 300
#else
#define ITERS_FLUSH 3000
#endif
static void test_flushall_returns_every_buffer(void **state)
{
    (void)state;
    struct mssim_stats st;
    start(4096, "MSSIM_BUFFER_LIMIT=1120", NULL);   /* 16 kernel records per buffer */
    enable(MSPTI_ACTIVITY_KIND_KERNEL);
    for (int iter = 0; iter < ITERS_FLUSH; iter++) {
        /* bench_fill holds the lock across many rotations: the manager takes a long batch. */
        assert_int_equal(mssim_bench_fill(1u << MSPTI_ACTIVITY_KIND_KERNEL, 16 * 40), 16 * 40);
        assert_int_equal(msptiActivityFlushAll(1), MSPTI_SUCCESS);
        mssim_get_stats(&st);
        if (st.buffers_completed != st.buffers_requested)
            fail_msg("iteration %d: FlushAll returned with %llu of %llu buffers completed", iter,
                     (unsigned long long)st.buffers_completed, (unsigned long long)st.buffers_requested);
    }
    pthread_mutex_lock(&C.lock);
    unsigned completions = C.completions;
    pthread_mutex_unlock(&C.lock);
    assert_int_equal(completions, st.buffers_requested);
    assert_int_equal(st.records_appended, (uint64_t)ITERS_FLUSH * 16 * 40);
}

/* A FlushPeriod set after the manager started applies at once, not after the old 60 s wake:
 * the coalesced (NULL,0,0) completion of a declined request arrives without any FlushAll. */
static void test_flush_period_applies_at_once(void **state)
{
    (void)state;
    start(0, NULL);   /* decline every request; MSSIM_WAKE_MS default 60000 */
    enable(MSPTI_ACTIVITY_KIND_ACL_API);
    mssim_api("op", MSSIM_LEVEL_ACL, 1);
    /* Let the manager settle into its 60 s wait (a settle delay, not a measured threshold). */
    struct timespec settle = {.tv_sec = 0, .tv_nsec = 100000000};
    nanosleep(&settle, NULL);
    assert_int_equal(msptiActivityFlushPeriod(5), MSPTI_SUCCESS);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 30;   /* far beyond 5 ms, far below the 60 s wake */
    pthread_mutex_lock(&C.lock);
    while (C.null_completions == 0 && pthread_cond_timedwait(&C.cv, &C.lock, &dl) == 0)
        ;
    unsigned nulls = C.null_completions;
    pthread_mutex_unlock(&C.lock);
    assert_int_equal(nulls, 1);
    assert_int_equal(msptiActivityFlushPeriod(0), MSPTI_SUCCESS);
    finish();
}

static int g_steps_seen;
static void on_step(uint32_t step, void *arg)
{
    (void)arg;
    g_steps_seen = (int)step;
}

static void test_workload(void **state)
{
    (void)state;
    struct mssim_workload_cfg cfg;
    start(8 << 20, "MSSIM_CHECK_PRELOAD=0", NULL);
    for (int k = 1; k <= 12; k++)
        enable(k);
    assert_int_equal(mssim_workload_default(&cfg), 0);
    cfg.steps = 2;
    cfg.layers = 2;
    cfg.steps_per_s = 0;
    cfg.kernel_scale = 0.01;
    cfg.on_step_end = on_step;
    uint64_t t_before = mssim_now_ns();
    assert_int_equal(mssim_workload_run(&cfg), 2);
    assert_int_equal(g_steps_seen, 2);
    /* Every device record of the workload is appended by now (synchronize per step). */
    assert_int_equal(msptiActivityFlushAll(0), 0);
    size_t nk = count_kind(MSPTI_ACTIVITY_KIND_KERNEL);
    assert_int_equal(nk, 2 * mssim_workload_kernels_per_step(2));
    assert_int_equal(mssim_workload_kernels_per_step(2), 51);
    uint64_t sum = 0, matmul = 0;
    for (size_t i = 0; i < C.n; i++) {
        if (kind_of(i) != MSPTI_ACTIVITY_KIND_KERNEL)
            continue;
        const msptiActivityKernel *k = (const void *)C.recs[i].b;
        sum += k->end - k->start;
        matmul += strcmp(k->name, "MatMul") == 0;
        assert_true(k->start >= t_before);
        assert_true(strncmp(k->type, "KERNEL", 6) == 0);
    }
    assert_int_equal(sum, 2 * (510 + 2885 * 2) * 10);   /* µs x 1000 x 0.01 */
    assert_int_equal(matmul, 2 * 2 * 4);
    assert_int_equal(count_kind(MSPTI_ACTIVITY_KIND_ACL_API), nk);
    assert_int_equal(count_kind(MSPTI_ACTIVITY_KIND_RUNTIME_API), nk);
    assert_int_equal(count_kind(MSPTI_ACTIVITY_KIND_COMMUNICATION), 2);
    assert_int_equal(count_kind(MSPTI_ACTIVITY_KIND_HCCL), 2);
    assert_int_equal(count_kind(MSPTI_ACTIVITY_KIND_MEMORY), 4);
    assert_int_equal(count_kind(MSPTI_ACTIVITY_KIND_MEMCPY), 2);
    assert_int_equal(count_kind(MSPTI_ACTIVITY_KIND_MEMSET), 2);
    assert_int_equal(count_kind(MSPTI_ACTIVITY_KIND_MARKER), 8);   /* START/END host + device, 2 steps */
    const msptiActivityMarker *m = first_kind(MSPTI_ACTIVITY_KIND_MARKER, 0);
    assert_string_equal(m->name, "step 1");
}

/* Rate pacing (docs/design/mspti.md#workload item 9): steps start every 1/rate s; after a step that overran, the
 * next starts at once and the one after is paced again, not squeezed in as catch-up. */
static void on_step_stall(uint32_t step, void *arg)
{
    (void)arg;
    if (step == 1) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 400000000};   /* 4 periods */
        nanosleep(&ts, NULL);
    }
}

static void test_workload_pacing_after_overrun(void **state)
{
    (void)state;
    struct mssim_workload_cfg cfg;
    start(8 << 20, NULL);
    enable(MSPTI_ACTIVITY_KIND_MARKER);
    assert_int_equal(mssim_workload_default(&cfg), 0);
    cfg.steps = 4;
    cfg.layers = 1;
    cfg.steps_per_s = 10;   /* 100 ms period */
    cfg.kernel_scale = 0.01;
    cfg.comm = 0;
    cfg.on_step_end = on_step_stall;
    assert_int_equal(mssim_workload_run(&cfg), 4);
    finish();
    uint64_t starts[5] = {0};
    for (size_t i = 0; i < C.n; i++) {
        const msptiActivityMarker *m = (const void *)C.recs[i].b;
        unsigned n;
        if (kind_of(i) == MSPTI_ACTIVITY_KIND_MARKER && m->sourceKind == MSPTI_ACTIVITY_SOURCE_KIND_HOST &&
            m->flag == MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE && sscanf(m->name, "step %u", &n) == 1 &&
            n >= 1 && n <= 4)
            starts[n] = m->timestamp;
    }
    for (int n = 1; n <= 4; n++)
        assert_true(starts[n] != 0);
    /* Step 3 is paced from step 2's start (>= 100 ms minus the few µs before the marker). */
    assert_true(starts[3] - starts[2] >= 50000000ull);
    assert_true(starts[4] - starts[3] >= 50000000ull);
}

static void test_device_records_after_end(void **state)
{
    (void)state;
    start(1 << 20, "MSSIM_DEVICE_LAG_MS=30", NULL);
    enable(MSPTI_ACTIVITY_KIND_KERNEL);
    mssim_launch_kernel(0, "Slow", "KERNEL_AICORE", 20000000);   /* 20 ms */
    mssim_launch_kernel(0, "Bad", "AICORE", 10);                 /* dropped: type */
    assert_int_equal(msptiActivityFlushAll(0), 0);
    assert_int_equal(C.n, 0);   /* not visible yet: FlushAll does not drain the device */
    assert_int_equal(mssim_synchronize(0), 0);
    uint64_t now = mssim_now_ns();
    assert_int_equal(msptiActivityFlushAll(0), 0);
    assert_int_equal(C.n, 1);
    const msptiActivityKernel *k = first_kind(MSPTI_ACTIVITY_KIND_KERNEL, 0);
    assert_true(k->end + 30000000ull <= now);
}

static void test_dump_matches_consumer(void **state)
{
    (void)state;
    char path[] = "/tmp/mssim_dumpXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char env[64];
    snprintf(env, sizeof(env), "MSSIM_DUMP=%s", path);
    start(1 << 20, env, "MSSIM_CHECK_PRELOAD=0", "MSSIM_DROP_EVERY=5", NULL);
    for (int k = 1; k <= 12; k++)
        enable(k);
    uint64_t addr;
    assert_int_equal(msptiActivityPushExternalCorrelationId(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 5), 0);
    for (int i = 0; i < 20; i++) {
        mssim_api("aclnnMatMul", MSSIM_LEVEL_ACL, 3);
        mssim_launch_kernel(0, "MatMul", "KERNEL_AICORE", 100);
        mssim_collective(1, "HcclAllReduce", "w\"q", "RING", 4, 8, 800, 100);
        mssim_memcpy(0, 2, 64);
        mssim_memset(0, 1, 64);
        mssim_malloc(64, &addr);
        mssim_free(addr);
        mssim_mstx_mark("m", 0);
    }
    uint64_t popped;
    msptiActivityPopExternalCorrelationId(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped);
    finish();   /* one buffer, completed by FlushAll: consumer order = append order */
    static const char *const names[] = {NULL, "Marker", "Kernel", "API", "Hccl", "Memory", "MemSet", "MemCpy",
                                        "ExternalCorrelation", "Communication", "AclAPI", "NodeAPI", "RuntimeAPI"};
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096], want[1024];
    size_t i = 0;
    struct mssim_stats st;
    mssim_get_stats(&st);
    assert_true(st.records_dropped_injected > 0);
    while (fgets(line, sizeof(line), f)) {
        assert_true(i < C.n);
        int32_t kind = kind_of(i);
        snprintf(want, sizeof(want), "\"kind\":\"%s\"", names[kind]);
        assert_non_null(strstr(line, want));
        if (kind == MSPTI_ACTIVITY_KIND_ACL_API) {
            const msptiActivityApi *a = (const void *)C.recs[i].b;
            snprintf(want, sizeof(want),
                     "{\"correlationId\":%llu,\"end\":%llu,\"kind\":\"AclAPI\",\"name\":\"aclnnMatMul\","
                     "\"processId\":%u,\"start\":%llu,\"threadId\":%u}\n",
                     (unsigned long long)a->correlationId, (unsigned long long)a->end, a->pt.processId,
                     (unsigned long long)a->start, a->pt.threadId);
            assert_string_equal(line, want);
        } else if (kind == MSPTI_ACTIVITY_KIND_COMMUNICATION) {
            assert_non_null(strstr(line, "\"commName\":\"w\\\"q\""));
            assert_non_null(strstr(line, "\"dataType\":4,"));
        }
        i++;
    }
    fclose(f);
    unlink(path);
    assert_int_equal(i, C.n);
    assert_int_equal(i, st.records_appended);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_paths),
        cmocka_unit_test(test_roundtrip_all_kinds),
        cmocka_unit_test(test_lazy_request_and_unsubscribed),
        cmocka_unit_test(test_rotation_80_percent),
        cmocka_unit_test(test_declined_and_null_completions),
        cmocka_unit_test(test_nofit_and_empty_partial),
        cmocka_unit_test(test_completions_on_foreign_threads),
        cmocka_unit_test(test_cursor_quirk_vs_pointer),
        cmocka_unit_test(test_profiles),
        cmocka_unit_test(test_markers),
        cmocka_unit_test(test_marker_no_orphan_end),
        cmocka_unit_test(test_callbacks),
        cmocka_unit_test(test_drop_injection_and_raw),
        cmocka_unit_test(test_bench_fill),
        cmocka_unit_test(test_flushall_returns_every_buffer),
        cmocka_unit_test(test_flush_period_applies_at_once),
        cmocka_unit_test(test_concurrent_producers),
        cmocka_unit_test(test_workload),
        cmocka_unit_test(test_workload_pacing_after_overrun),
        cmocka_unit_test(test_device_records_after_end),
        cmocka_unit_test(test_dump_matches_consumer),
    };
    if (getenv("SIM_TEST_FILTER"))   /* run a subset: SIM_TEST_FILTER=test_markers */
        cmocka_set_test_filter(getenv("SIM_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
