/* test_backend_mspti: the msPTI backend's buffer protocol (docs/design/session.md#session-life-cycle, #kind-replacement) over a
 * hand-built msPTI table whose FlushAll writes scripted records into our buffers: call order
 * at start and stop, batches of converted records at the sink, empty buffers returned, the
 * drop counters (declined requests, unknown kinds, GetNextRecord errors and the cursor reset),
 * subscribe and enable failures with their log lines, no sink call after stop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../logcap.h"
#include "common/log.h"
#include "plugin/backend/backend_mspti.h"
#include "plugin/backend/bufpool.h"
#include "plugin/penv.h"

#define log_has logcap_has
#define KIND_ERROR 99 /* our fake GetNextRecord fails on this kind */
#define SLOT sizeof(msptiActivityApi)

static struct {
    msptiBuffersCallbackRequestFunc req;
    msptiBuffersCallbackCompleteFunc comp;
    int subscribe_rc;
    int enable_rc[16];
    int32_t script[1024]; /* kinds written at the next FlushAll */
    int nscript;
    char order[64];
    int resets;           /* GetNextRecord(buf, 0, ...) calls */
} fk;

static struct {
    size_t records, calls, max_batch;
    int api_ok;
} sk;

static void note(char c)
{
    size_t n = strlen(fk.order);
    if (n + 1 < sizeof(fk.order)) {
        fk.order[n] = c;
        fk.order[n + 1] = '\0';
    }
}

static msptiResult f_subscribe(msptiSubscriberHandle *h, msptiCallbackFunc cb, void *ud)
{
    (void)cb;
    (void)ud;
    note('S');
    if (fk.subscribe_rc)
        return (msptiResult)fk.subscribe_rc;
    *h = (msptiSubscriberHandle)&fk;
    return MSPTI_SUCCESS;
}
static msptiResult f_unsubscribe(msptiSubscriberHandle h)
{
    (void)h;
    note('U');
    return MSPTI_SUCCESS;
}
static msptiResult f_register(msptiBuffersCallbackRequestFunc r, msptiBuffersCallbackCompleteFunc c)
{
    note('R');
    fk.req = r;
    fk.comp = c;
    return MSPTI_SUCCESS;
}
static msptiResult f_enable(msptiActivityKind k)
{
    note('E');
    return (msptiResult)fk.enable_rc[k];
}
static msptiResult f_disable(msptiActivityKind k)
{
    (void)k;
    note('D');
    return MSPTI_SUCCESS;
}
/* Fixed slots of SLOT bytes; kind KIND_ERROR makes the iterator fail. */
static msptiResult f_next(uint8_t *buf, size_t valid, msptiActivity **rec)
{
    uint8_t *p;
    int32_t kind;
    if (!buf)
        return MSPTI_ERROR_INVALID_PARAMETER;
    if (valid == 0) {
        fk.resets++;
        return MSPTI_ERROR_MAX_LIMIT_REACHED;
    }
    p = *rec ? (uint8_t *)*rec + SLOT : buf;
    if ((size_t)(p - buf) + SLOT > valid)
        return MSPTI_ERROR_MAX_LIMIT_REACHED;
    memcpy(&kind, p, sizeof(kind));
    if (kind == KIND_ERROR)
        return MSPTI_ERROR_INNER;
    *rec = (msptiActivity *)p;
    return MSPTI_SUCCESS;
}
static msptiResult f_flush(uint32_t flag)
{
    uint8_t *buf = NULL;
    size_t size = 0, max = 0, valid = 0;
    (void)flag;
    note('F');
    fk.req(&buf, &size, &max);
    for (int i = 0; buf && i < fk.nscript && valid + SLOT <= size; i++) {
        msptiActivityApi a = { .kind = (msptiActivityKind)fk.script[i], .start = 100, .end = 150,
                               .pt = { 1, 2 }, .correlationId = 7, .name = "aclnnMatMul" };
        memcpy(buf + valid, &a, sizeof(a));
        valid += SLOT;
    }
    fk.nscript = 0;
    if (buf)
        fk.comp(buf, size, valid);
    return MSPTI_SUCCESS;
}

static const struct mspti_lib fake_lib = {
    .subscribe = f_subscribe, .unsubscribe = f_unsubscribe, .register_callbacks = f_register,
    .enable = f_enable, .disable = f_disable, .get_next_record = f_next, .flush_all = f_flush,
};

static void sink(void *ctx, struct mon_record *recs, size_t n)
{
    assert_ptr_equal(ctx, &sk);
    sk.calls++;
    sk.records += n;
    sk.max_batch = n > sk.max_batch ? n : sk.max_batch;
    for (size_t i = 0; i < n; i++)
        sk.api_ok += recs[i].kind == MON_KIND_API && strcmp(recs[i].u.api.name, "aclnnMatMul") == 0;
}

static void script(int n, int32_t kind)
{
    for (int i = 0; i < n && fk.nscript < 1024; i++)
        fk.script[fk.nscript++] = kind;
}

static void reset(void)
{
    memset(&fk, 0, sizeof(fk));
    memset(&sk, 0, sizeof(sk));
    logcap_clear();
}

#define API_BIT (1u << MON_KIND_API)
#define MEMORY_BIT (1u << MON_KIND_MEMORY)

static void test_order_batches_and_stop(void **state)
{
    struct backend *be;
    uint32_t on = 0;
    (void)state;
    reset();
    assert_int_equal(backend_mspti_create_from(&fake_lib, &be), 0);
    assert_string_equal(be->ops->name, "mspti");
    assert_int_equal(be->ops->set_kinds(be, API_BIT, &on), -ENOENT); /* no session yet */
    assert_int_equal(be->ops->start(be, sink, &sk), 0);
    assert_int_equal(be->ops->set_kinds(be, API_BIT, &on), 0);
    assert_int_equal(on, API_BIT);
    script(700, MON_KIND_API);
    assert_int_equal(be->ops->flush(be), 0);
    assert_int_equal(sk.records, 700);
    assert_int_equal(sk.api_ok, 700);
    assert_int_equal(sk.max_batch, 256);
    assert_int_equal(sk.calls, 3);
    script(5, MON_KIND_API);
    be->ops->stop(be);
    assert_int_equal(sk.records, 705); /* the final flush still reaches the sink */
    assert_string_equal(fk.order, "SREFDFU");
    /* a late completion after stop: discarded, and its buffer goes back to the pool */
    script(3, MON_KIND_API);
    (void)f_flush(1);
    assert_int_equal(sk.records, 705);
    be->ops->destroy(be);
}

static void test_empty_buffers_and_declines(void **state)
{
    struct backend *be;
    struct backend_drops d;
    uint8_t *held[BUFPOOL_CAP + 1];
    size_t size, max;
    (void)state;
    reset();
    assert_int_equal(backend_mspti_create_from(&fake_lib, &be), 0);
    assert_int_equal(be->ops->start(be, sink, &sk), 0);
    /* more empty completions than the cap: each one returned its buffer (D4) */
    for (int i = 0; i < 3 * BUFPOOL_CAP; i++)
        assert_int_equal(be->ops->flush(be), 0);
    be->ops->drops(be, &d);
    assert_int_equal(d.buffers_declined, 0);
    assert_int_equal(sk.calls, 0); /* empty buffers are not delivered */
    /* hold the whole pool: the next request is declined and counted */
    for (int i = 0; i <= BUFPOOL_CAP; i++)
        fk.req(&held[i], &size, &max);
    assert_null(held[BUFPOOL_CAP]);
    assert_true(log_has("Buffer allocation exhausted, allocCnt: 32"));
    be->ops->drops(be, &d);
    assert_int_equal(d.buffers_declined, 1);
    for (int i = 0; i <= BUFPOOL_CAP; i++)
        fk.comp(held[i], size, 0);
    be->ops->stop(be);
    be->ops->destroy(be);
}

static void test_unknown_kinds_and_read_errors(void **state)
{
    struct backend *be;
    struct backend_drops d;
    (void)state;
    reset();
    assert_int_equal(backend_mspti_create_from(&fake_lib, &be), 0);
    assert_int_equal(be->ops->start(be, sink, &sk), 0);
    script(2, MON_KIND_API);
    script(3, 8); /* external correlation: not converted */
    script(1, MON_KIND_API);
    script(1, KIND_ERROR);
    script(4, MON_KIND_API); /* lost with the rest of the buffer */
    assert_int_equal(be->ops->flush(be), 0);
    assert_int_equal(sk.records, 3);
    assert_int_equal(fk.resets, 1); /* the thread-local cursor was reset */
    assert_true(log_has("MsptiMonitor GetNextRecord failed: MSPTI_ERROR_INNER"));
    be->ops->drops(be, &d);
    assert_int_equal(d.unknown_kind, 3);
    assert_int_equal(d.read_errors, 1);
    be->ops->stop(be);
    /* counters are per session */
    assert_int_equal(be->ops->start(be, sink, &sk), 0);
    be->ops->drops(be, &d);
    assert_int_equal(d.unknown_kind + d.read_errors + d.buffers_declined, 0);
    be->ops->stop(be);
    be->ops->destroy(be);
}

static void test_subscribe_and_enable_failures(void **state)
{
    struct backend *be;
    uint32_t on = 0;
    (void)state;
    reset();
    assert_int_equal(backend_mspti_create_from(&fake_lib, &be), 0);
    fk.subscribe_rc = MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    assert_int_equal(be->ops->start(be, sink, &sk), -EBUSY);
    assert_true(log_has("MsptiMonitor start failed: msptiSubscribe returned "
                        "MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"));
    fk.subscribe_rc = 0;
    fk.enable_rc[MSPTI_ACTIVITY_KIND_MEMORY] = MSPTI_ERROR_WITHOUT_LD_PRELOAD;
    assert_int_equal(be->ops->start(be, sink, &sk), 0);
    assert_int_equal(be->ops->start(be, sink, &sk), -EBUSY); /* one subscriber */
    assert_int_equal(be->ops->set_kinds(be, API_BIT | MEMORY_BIT, &on), 0);
    assert_int_equal(on, API_BIT);
    assert_true(log_has("MsptiMonitor enableActivity failed, kind: Memory (MSPTI_ERROR_WITHOUT_LD_PRELOAD); "
                        "this kind needs libmspti.so in LD_PRELOAD (CANN < 9.0.0, see FAQ)"));
    /* replacing the set disables what is no longer wanted */
    fk.order[0] = '\0';
    assert_int_equal(be->ops->set_kinds(be, 0, &on), 0);
    assert_int_equal(on, 0);
    assert_string_equal(fk.order, "D");
    be->ops->stop(be);
    be->ops->destroy(be);
}

static int setup(void **state)
{
    (void)state;
    setenv("MSMONITOR_TEST_BUFFER_SIZE", "65536", 1); /* 32 small buffers, not 256 MiB */
    penv_reload();
    return logcap_open();
}

static int teardown(void **state)
{
    (void)state;
    logcap_close();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_batches_and_stop),
        cmocka_unit_test(test_empty_buffers_and_declines),
        cmocka_unit_test(test_unknown_kinds_and_read_errors),
        cmocka_unit_test(test_subscribe_and_enable_failures),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
