/* test_monitor: the MsptiMonitor state machine (04-plugin.md §4, §5, §7.3, §8) over a fake
 * msPTI backend (records API activities into our buffers at FlushAll) and a capture
 * processor: start/stop order, nothing lost at stop, empty buffers returned, subscribe and
 * enable failures, duration expiry, live interval change, nputrace exclusion. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../logcap.h"
#include "common/log.h"
#include "plugin/control/monitor.h"

/* ---- fake backend ---- */
static struct {
    pthread_mutex_t lock;
    msptiBuffersCallbackRequestFunc req;
    msptiBuffersCallbackCompleteFunc comp;
    int subscribe_rc;
    int enable_rc[16];
    int pending;          /* records emitted at the next FlushAll */
    char order[256];      /* "D"isable "F"lush "U"nsubscribe "S"ubscribe "E"nable */
    int subscribed;
    unsigned enable_sleep_ms; /* f_enable blocks this long (a config racing an expiry) */
} fk = { .lock = PTHREAD_MUTEX_INITIALIZER };

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
    fk.subscribed = 1;
    *h = (msptiSubscriberHandle)&fk;
    return MSPTI_SUCCESS;
}
static msptiResult f_unsubscribe(msptiSubscriberHandle h)
{
    (void)h;
    note('U');
    fk.subscribed = 0;
    return MSPTI_SUCCESS;
}
static msptiResult f_register(msptiBuffersCallbackRequestFunc r, msptiBuffersCallbackCompleteFunc c)
{
    fk.req = r;
    fk.comp = c;
    return MSPTI_SUCCESS;
}
static msptiResult f_enable(msptiActivityKind k)
{
    note('E');
    if (fk.enable_sleep_ms)
        usleep(fk.enable_sleep_ms * 1000u);
    return (msptiResult)fk.enable_rc[k];
}
static msptiResult f_disable(msptiActivityKind k)
{
    (void)k;
    note('D');
    return MSPTI_SUCCESS;
}
static msptiResult f_next(uint8_t *buf, size_t valid, msptiActivity **rec)
{
    uint8_t *p;
    if (!buf)
        return MSPTI_ERROR_INVALID_PARAMETER;
    p = *rec ? (uint8_t *)*rec + sizeof(msptiActivityApi) : buf;
    if ((size_t)(p - buf) + sizeof(msptiActivityApi) > valid)
        return MSPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = (msptiActivity *)p;
    return MSPTI_SUCCESS;
}
/* Emits the pending records into one buffer (always requests one: an empty completion
 * must return the buffer too). */
static msptiResult f_flush(uint32_t flag)
{
    uint8_t *buf = NULL;
    size_t size = 0, max = 0, valid = 0;
    (void)flag;
    pthread_mutex_lock(&fk.lock);
    note('F');
    fk.req(&buf, &size, &max);
    for (; buf && fk.pending > 0 && valid + sizeof(msptiActivityApi) <= size; fk.pending--) {
        /* now: records ending before the session start are cut by the pipeline */
        uint64_t now = clock_real_ns();
        msptiActivityApi a = { .kind = MSPTI_ACTIVITY_KIND_API, .start = now - 50, .end = now,
                               .pt = { 1, 2 }, .correlationId = 7, .name = "aclnnMatMul" };
        memcpy(buf + valid, &a, sizeof(a));
        valid += sizeof(a);
    }
    if (buf)
        fk.comp(buf, size, valid);
    pthread_mutex_unlock(&fk.lock);
    return MSPTI_SUCCESS;
}

static const struct backend fake_be = {
    .subscribe = f_subscribe, .unsubscribe = f_unsubscribe, .register_callbacks = f_register,
    .enable = f_enable, .disable = f_disable, .get_next_record = f_next, .flush_all = f_flush,
};

/* ---- capture processor ---- */
struct proc {
    int unused;
};
static struct {
    atomic_int created, started, ticks, stops, destroyed;
    atomic_ulong consumed;
    unsigned long consumed_at_tick;
    unsigned long consumed_at_stop;
    uint32_t kinds;
    uint32_t interval;
    int replace_pgi_at_stop;  /* stop() replaces parallel_group_info while using its argument */
    char pgi_seen[64];        /* the argument's text after that replacement */
} cap;
static struct proc the_proc;

static int c_create(const struct proc_config *cfg, struct proc **ret)
{
    cap.created++;
    cap.interval = cfg->report_interval_s;
    *ret = &the_proc;
    return 0;
}
static int c_start(struct proc *p) { (void)p; cap.started++; return 0; }
static void c_consume(struct proc *p, const struct pl_batch *b)
{
    const struct mon_record *r = b->recs;
    size_t n = b->nrecs;
    (void)p;
    for (size_t i = 0; i < n; i++)
        assert_string_equal(r[i].u.api.name, "aclnnMatMul");
    cap.consumed += n;
}
static int c_tick(struct proc *p) { (void)p; cap.consumed_at_tick = cap.consumed; cap.ticks++; return 0; }
static void c_set_kinds(struct proc *p, uint32_t m) { (void)p; cap.kinds = m; }
static int c_stop(struct proc *p, const char *pgi)
{
    (void)p;
    if (cap.replace_pgi_at_stop) {
        (void)monitor_set_cluster_config("parallel_group_info", "{\"replacement\":\"set during the stop\"}");
        snprintf(cap.pgi_seen, sizeof(cap.pgi_seen), "%s", pgi ? pgi : "(null)");
    }
    cap.consumed_at_stop = cap.consumed;
    cap.stops++;
    return 0;
}
static void c_destroy(struct proc *p) { (void)p; cap.destroyed++; }
static const struct proc_ops cap_ops = {
    .name = "capture", .create = c_create, .start = c_start, .consume = c_consume, .tick = c_tick,
    .set_kinds = c_set_kinds, .stop = c_stop, .destroy = c_destroy,
};

/* ---- helpers ---- */
static char sockdir[] = "/tmp/pc_monsock_XXXXXX";
#define log_has logcap_has

static void reset(void)
{
    memset(fk.enable_rc, 0, sizeof(fk.enable_rc));
    fk.subscribe_rc = 0;
    fk.pending = 0;
    fk.order[0] = '\0';
    cap.created = cap.started = cap.ticks = cap.stops = cap.destroyed = 0;
    cap.consumed = 0;
    cap.kinds = 0;
    logcap_clear();
}

static struct mconfig cfg_of(int start, int stop, uint32_t interval, double duration, uint32_t kinds)
{
    struct mconfig c;
    memset(&c, 0, sizeof(c));
    c.start = start;
    c.stop = stop;
    c.report_interval_s = interval;
    c.duration_s = duration;
    c.kinds_mask = kinds;
    c.export_db = true;
    return c;
}

/* Wait for a condition with a generous bound (not a timing assertion: it only avoids a
 * hang if the behaviour is broken). */
#define WAIT_FOR(cond)                                        \
    do {                                                      \
        for (int w_ = 0; w_ < 10000 && !(cond); w_++)         \
            usleep(1000);                                     \
        assert_true(cond);                                    \
    } while (0)

#define API_BIT (1u << MSPTI_ACTIVITY_KIND_API)

static void test_start_stop_order(void **state)
{
    struct mconfig c = cfg_of(1, 0, 0, 0, API_BIT);
    (void)state;
    reset();
    assert_int_equal(monitor_handle_config(&c), 1);
    assert_true(monitor_running());
    assert_int_equal(cap.created, 1);
    assert_int_equal(cap.started, 1);
    assert_int_equal(cap.kinds, API_BIT);
    assert_int_equal(monitor_enabled_kinds(), API_BIT);
    assert_true(log_has("MsptiMonitor start successfully"));
    assert_true(log_has("Start mspti monitor thread successfully, rankid: "));
    fk.pending = 700; /* more than two batches */
    assert_int_equal(monitor_stop(), 0);
    assert_string_equal(fk.order, "SEDFU");
    assert_int_equal(cap.consumed_at_stop, 700);
    assert_int_equal(cap.stops, 1);
    assert_int_equal(cap.destroyed, 1);
    assert_false(monitor_running());
    assert_true(log_has("MsptiMonitor stop successfully"));
    assert_int_equal(monitor_stop(), -ENOENT);
}

static void test_stop_config_and_idle_interval(void **state)
{
    struct mconfig c = cfg_of(1, 0, 0, 0, API_BIT);
    (void)state;
    reset();
    assert_int_equal(monitor_handle_config(&c), 1);
    /* a second start while running: no new session, kinds/filter replaced */
    c.kinds_mask = (1u << MSPTI_ACTIVITY_KIND_KERNEL);
    assert_int_equal(monitor_handle_config(&c), 1);
    assert_int_equal(cap.created, 1);
    assert_int_equal(cap.kinds, 1u << MSPTI_ACTIVITY_KIND_KERNEL);
    c = cfg_of(0, 1, 0, 0, 0);
    assert_int_equal(monitor_handle_config(&c), 0);
    assert_int_equal(cap.stops, 1);
    /* neither start nor stop while idle: nothing created */
    c = cfg_of(0, 0, 7, 0, API_BIT);
    assert_int_equal(monitor_handle_config(&c), 0);
    assert_int_equal(cap.created, 1);
}

static void test_subscribe_and_enable_failures(void **state)
{
    struct mconfig c = cfg_of(1, 0, 0, 0, API_BIT | (1u << MSPTI_ACTIVITY_KIND_MEMORY));
    (void)state;
    reset();
    fk.subscribe_rc = MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    assert_int_equal(monitor_handle_config(&c), 0);
    assert_true(log_has("MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"));
    assert_int_equal(cap.destroyed, cap.created); /* processor released */
    reset();
    fk.enable_rc[MSPTI_ACTIVITY_KIND_MEMORY] = MSPTI_ERROR_WITHOUT_LD_PRELOAD;
    assert_int_equal(monitor_handle_config(&c), 1);
    assert_int_equal(cap.kinds, API_BIT);
    assert_true(log_has("MsptiMonitor enableActivity failed, kind: Memory (MSPTI_ERROR_WITHOUT_LD_PRELOAD); "
                        "this kind needs libmspti.so in LD_PRELOAD (CANN < 9.0.0, see FAQ)"));
    assert_int_equal(monitor_stop(), 0);
}

static void test_expiry(void **state)
{
    struct mconfig c = cfg_of(1, 0, 0, 0.2, API_BIT);
    (void)state;
    reset();
    assert_int_equal(monitor_handle_config(&c), 1);
    fk.pending = 5;
    WAIT_FOR(cap.stops == 1);
    WAIT_FOR(!monitor_running());
    assert_int_equal(cap.consumed_at_stop, 5);
    assert_true(log_has("MsptiMonitor run duration: 0.2s expired"));
    assert_string_equal(fk.order, "SEDFU");
    assert_int_equal(monitor_stop(), -ENOENT);
    /* a new start opens a new session */
    c.duration_s = 0;
    assert_int_equal(monitor_handle_config(&c), 1);
    assert_int_equal(cap.created, 2);
    assert_int_equal(monitor_stop(), 0);
}

/* A config whose kind replacement is still running when the duration expires: the expiry
 * waits for it (no teardown under a replace_kinds that still uses the processor), then
 * disables the kind it enabled. */
static void test_expiry_waits_for_config(void **state)
{
    struct mconfig c = cfg_of(1, 0, 0, 0.05, API_BIT);
    (void)state;
    reset();
    fk.enable_sleep_ms = 300; /* the deadline passes while msptiActivityEnable runs */
    assert_int_equal(monitor_handle_config(&c), 1); /* reported before the expiry's Idle */
    fk.enable_sleep_ms = 0;
    WAIT_FOR(cap.stops == 1);
    WAIT_FOR(!monitor_running());
    assert_int_equal(cap.kinds, API_BIT);
    assert_string_equal(fk.order, "SEDFU"); /* the kind enabled by the config is disabled */
    assert_int_equal(cap.destroyed, 1);
}

/* set_cluster_config_data racing an expiry: the processor's stop keeps a valid text. */
static void test_expiry_cluster_config_race(void **state)
{
    static const char orig[] = "{\"group_name_0\":{\"group_name\":\"default_group\",\"global_ranks\":[0]}}";
    struct mconfig c = cfg_of(1, 0, 0, 0.05, API_BIT);
    (void)state;
    reset();
    assert_int_equal(monitor_set_cluster_config("parallel_group_info", orig), 0);
    cap.replace_pgi_at_stop = 1;
    assert_int_equal(monitor_handle_config(&c), 1);
    WAIT_FOR(cap.stops == 1);
    WAIT_FOR(!monitor_running());
    cap.replace_pgi_at_stop = 0;
    assert_true(strncmp(cap.pgi_seen, orig, sizeof(cap.pgi_seen) - 1) == 0);
}

static void test_interval_change_ticks(void **state)
{
    struct mconfig c = cfg_of(1, 0, 1000, 0, API_BIT);
    (void)state;
    reset();
    assert_int_equal(monitor_handle_config(&c), 1);
    assert_int_equal(cap.interval, 1000);
    fk.pending = 10;
    monitor_set_interval(1000); /* same value: no tick */
    monitor_set_interval(2000);
    WAIT_FOR(cap.ticks == 1);
    assert_int_equal(cap.consumed_at_tick, 10); /* FlushAll ran before the report */
    assert_int_equal(monitor_stop(), 0);
    assert_int_equal(cap.ticks, 1);
}

static void test_trace_exclusion(void **state)
{
    struct mconfig c = cfg_of(1, 0, 0, 0, API_BIT);
    (void)state;
    reset();
    monitor_set_trace_status(1);
    assert_int_equal(monitor_handle_config(&c), 0);
    assert_true(log_has("nputrace is running in this process"));
    monitor_set_trace_status(0);
    assert_int_equal(monitor_handle_config(&c), 1);
    monitor_set_trace_status(1);
    assert_true(log_has("nputrace reported Running while an npu-monitor session runs"));
    monitor_set_trace_status(0);
    assert_int_equal(monitor_stop(), 0);
}

static int setup(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(sockdir));
    setenv("MSMONITOR_SOCKET_DIR", sockdir, 1);
    setenv("MSMONITOR_LOG_PATH", sockdir, 1);
    monitor_test_set_backend(&fake_be);
    for (int m = PROC_METRIC; m <= PROC_STANDALONE; m++)
        monitor_test_set_proc((enum proc_mode)m, &cap_ops);
    monitor_first_use();
    log_set_file(-1, LOG_LVL_ERROR);
    log_close_file();
    log_set_level(LOG_LVL_INFO);
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
        cmocka_unit_test(test_start_stop_order),
        cmocka_unit_test(test_stop_config_and_idle_interval),
        cmocka_unit_test(test_subscribe_and_enable_failures),
        cmocka_unit_test(test_expiry),
        cmocka_unit_test(test_expiry_waits_for_config),
        cmocka_unit_test(test_expiry_cluster_config_race),
        cmocka_unit_test(test_interval_change_ticks),
        cmocka_unit_test(test_trace_exclusion),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
