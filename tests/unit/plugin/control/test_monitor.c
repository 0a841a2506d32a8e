/* test_monitor: the session actor (docs/design/session.md#applying-a-config, #session-life-cycle, #report-ticks, #kind-replacement) over the fake backend
 * (backend_fake.c: emits API records at flush) and a capture processor: start/stop order,
 * nothing lost at stop, start and enable failures, duration expiry, live interval change,
 * nputrace exclusion, drop counters, bounded waits, and a stale daemon socket that must not
 * delay a config. The msPTI buffer protocol itself is tested in backend/test_backend_mspti.c. */
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
#include <sys/socket.h>
#include <sys/un.h>

#include "common/log.h"
#include "plugin/backend/backend_fake.h"
#include "plugin/control/monitor.h"
#include "plugin/outputs/proc_trace.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/pipeline.h"

/* ---- fake backend (backend_fake.c: 'S'tart 'E'nable 'D'isable 'F'lush 'U' detach) ---- */
static struct backend_fake fk;

/* ---- capture processor ---- */
struct output {
    int unused;
};
static struct {
    atomic_int created, started, ticks, stops, destroyed;
    atomic_ulong consumed;
    unsigned long consumed_at_tick;
    unsigned long consumed_at_stop;
    atomic_uint kinds;
    uint32_t interval;
    int replace_pgi_at_stop;  /* stop() replaces parallel_group_info while using its argument */
    char pgi_seen[64];        /* the argument's text after that replacement */
} cap;
static struct output the_proc;

static int c_create(const struct output_config *cfg, struct output **ret)
{
    cap.created++;
    cap.interval = cfg->report_interval_s;
    *ret = &the_proc;
    return 0;
}
static int c_start(struct output *p) { (void)p; cap.started++; return 0; }
static void c_consume(struct output *p, const struct pl_batch *b)
{
    const struct mon_record *r = b->recs;
    size_t n = b->nrecs;

    (void)p;
    for (size_t i = 0; i < n; i++)
        assert_string_equal(r[i].u.api.name, "aclnnMatMul");
    cap.consumed += n;
}
static int c_tick(struct output *p) { (void)p; cap.consumed_at_tick = cap.consumed; cap.ticks++; return 0; }
static void c_set_kinds(struct output *p, uint32_t m) { (void)p; cap.kinds = m; }
static int c_stop(struct output *p, const char *pgi)
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
static void c_destroy(struct output *p) { (void)p; cap.destroyed++; }
static const struct output_ops cap_ops = {
    .name = "capture", .create = c_create, .start = c_start, .consume = c_consume, .tick = c_tick,
    .set_kinds = c_set_kinds, .stop = c_stop, .destroy = c_destroy,
};

/* ---- helpers ---- */
static char sockdir[] = "/tmp/pc_monsock_XXXXXX";
#define log_has logcap_has

static void reset(void)
{
    pthread_mutex_lock(&fk.lock);
    memset(fk.enable_rc, 0, sizeof(fk.enable_rc));
    memset(&fk.drops, 0, sizeof(fk.drops));
    fk.start_rc = 0;
    fk.pending = 0;
    fk.order[0] = '\0';
    pthread_mutex_unlock(&fk.lock);
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
    c.output = MSMON_OUTPUT_DB;
    return c;
}

/* Wait for a condition with a generous bound (not a timing assertion: it only avoids a
 * hang if the behaviour is broken). */
#define WAIT_FOR(cond)                                        \
    do {                                                      \
        for (int w_ = 0; w_ < 60000 && !(cond); w_++)         \
            usleep(1000);                                     \
        assert_true(cond);                                    \
    } while (0)

#define API_BIT (1u << MON_KIND_API)
#define KERNEL_BIT (1u << MON_KIND_KERNEL)
#define MEMORY_BIT (1u << MON_KIND_MEMORY)

static void set_pending(int n)
{
    pthread_mutex_lock(&fk.lock);
    fk.pending = n;
    pthread_mutex_unlock(&fk.lock);
}

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
    set_pending(700); /* more than two batches */
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
    c.kinds_mask = KERNEL_BIT;
    assert_int_equal(monitor_handle_config(&c), 1);
    assert_int_equal(cap.created, 1);
    assert_int_equal(cap.kinds, KERNEL_BIT);
    assert_int_equal(monitor_enabled_kinds(), KERNEL_BIT);
    c = cfg_of(0, 1, 0, 0, 0);
    assert_int_equal(monitor_handle_config(&c), 0);
    assert_int_equal(cap.stops, 1);
    /* neither start nor stop while idle: nothing created */
    c = cfg_of(0, 0, 7, 0, API_BIT);
    assert_int_equal(monitor_handle_config(&c), 0);
    assert_int_equal(cap.created, 1);
}

static void test_start_and_enable_failures(void **state)
{
    struct mconfig c = cfg_of(1, 0, 0, 0, API_BIT | MEMORY_BIT);
    (void)state;
    reset();
    fk.start_rc = -EBUSY; /* another profiler owns the vendor API */
    assert_int_equal(monitor_handle_config(&c), 0);
    assert_false(monitor_running());
    assert_int_equal(cap.destroyed, cap.created); /* processor released */
    assert_string_equal(fk.order, "S");
    reset();
    fk.enable_rc[MON_KIND_MEMORY] = 1;
    assert_int_equal(monitor_handle_config(&c), 1);
    assert_int_equal(cap.kinds, API_BIT);        /* only successful enables count */
    assert_int_equal(monitor_enabled_kinds(), API_BIT);
    assert_int_equal(monitor_stop(), 0);
    assert_int_equal(monitor_enabled_kinds(), 0);
}

static void test_expiry(void **state)
{
    struct mconfig c = cfg_of(1, 0, 0, 0.2, API_BIT);
    (void)state;
    reset();
    assert_int_equal(monitor_handle_config(&c), 1);
    set_pending(5);
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
    set_pending(10);
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
    assert_int_equal(cap.created, 0);
    assert_true(log_has("nputrace is running in this process"));
    monitor_set_trace_status(0);
    assert_int_equal(monitor_handle_config(&c), 1);
    monitor_set_trace_status(1);
    assert_true(log_has("nputrace reported Running while an npu-monitor session runs"));
    monitor_set_trace_status(0);
    assert_int_equal(monitor_stop(), 0);
}

/* A window session's trace file reaches the session through its output's artifact callback:
 * monitor_last_artifact names the file once it is in place, without reading proc_trace. */
static void test_window_artifact(void **state)
{
    struct output_trace_opts to = { .backend = "fake" };
    struct window_opts wo = { .start_step = 3, .stop_step = 5 };
    struct monitor_start_args a = { .output = MSMON_OUTPUT_TRACE, .log_dir = sockdir, .standalone = true,
                                    .kinds_mask = API_BIT, .trace = &to, .window = &wo };
    char got[4096];
    (void)state;
    reset();
    monitor_last_artifact(got, sizeof(got));
    assert_null(strstr(got, "_step3-5.json"));
    assert_int_equal(monitor_start(&a), 0);
    assert_true(monitor_tracing());
    assert_int_equal(monitor_end_window(clock_real_ns(), true), 0);
    monitor_last_artifact(got, sizeof(got));
    assert_int_equal(strncmp(got, sockdir, strlen(sockdir)), 0);
    assert_non_null(strstr(got, "/msmonitor_trace_"));
    assert_non_null(strstr(got, "_step3-5.json"));
    assert_int_equal(access(got, F_OK), 0); /* whole and in place */
    assert_int_equal(unlink(got), 0);
}

/* The backend's loss counters reach the core and the stop line. */
static void test_backend_drops(void **state)
{
    struct mconfig c = cfg_of(1, 0, 0, 0, API_BIT);
    struct backend_drops d;
    (void)state;
    reset();
    assert_int_equal(monitor_handle_config(&c), 1);
    pthread_mutex_lock(&fk.lock);
    fk.drops = (struct backend_drops){ .buffers_declined = 3, .unknown_kind = 4, .read_errors = 5 };
    pthread_mutex_unlock(&fk.lock);
    monitor_backend_drops(&d);
    assert_int_equal(d.buffers_declined, 3);
    assert_int_equal(d.unknown_kind, 4);
    assert_int_equal(d.read_errors, 5);
    assert_int_equal(monitor_stop(), 0);
    assert_true(log_has("MsptiMonitor: backend fake lost data this session: 3 buffer requests declined, 4 "
                        "records of unknown kind, 5 record read errors, 0 records dropped by the library"));
}

/* A config whose work outlasts the caller's bound: the caller returns after ~1 s, the
 * config still takes effect on the actor. */
static void test_config_wait_is_bounded(void **state)
{
    struct mconfig c = cfg_of(1, 0, 0, 0, API_BIT);
    uint64_t t0;
    (void)state;
    reset();
    fk.enable_sleep_ms = 1600;
    t0 = clock_mono_ns();
    assert_int_equal(monitor_handle_config(&c), 0); /* timed out */
    assert_true(clock_mono_ns() - t0 < 1500000000ull);
    assert_true(log_has("the session is busy"));
    WAIT_FOR(cap.kinds == API_BIT);
    fk.enable_sleep_ms = 0;
    assert_true(monitor_running());
    assert_int_equal(monitor_stop(), 0);
    assert_int_equal(cap.stops, 1);
}

/* A processor calling back into the monitor from the actor gets -EDEADLK, not a hang. */
static int reentrant_rc;
static int c_tick_reenter(struct output *p)
{
    (void)p;
    reentrant_rc = monitor_replace_kinds(API_BIT);
    cap.ticks++;
    return 0;
}

static void test_reentry_refused(void **state)
{
    struct output_ops ops = cap_ops;
    struct mconfig c = cfg_of(1, 0, 0, 0, API_BIT);
    (void)state;
    reset();
    ops.tick = c_tick_reenter;
    output_test_replace(MSMON_OUTPUT_METRIC, &ops);
    assert_int_equal(monitor_handle_config(&c), 1);
    monitor_set_interval(4000);
    WAIT_FOR(cap.ticks == 1);
    assert_int_equal(reentrant_rc, -EDEADLK);
    assert_int_equal(monitor_stop(), 0);
    output_test_replace(MSMON_OUTPUT_METRIC, &cap_ops);
}

/* dynolog.sock exists but nobody reads it: each status send retries for ~10 s. Configs (the
 * training step's path) must not wait for that. */
static void test_stale_daemon_does_not_delay_config(void **state)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    struct mconfig on = cfg_of(1, 0, 0, 0, API_BIT), off = cfg_of(0, 1, 0, 0, 0);
    uint64_t worst = 0;
    int fd;
    (void)state;
    reset();
    snprintf(a.sun_path, sizeof(a.sun_path), "%s/dynolog.sock", sockdir);
    fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    close(fd); /* the file stays: connect/send get ECONNREFUSED */
    for (int i = 0; i < 6; i++) {
        uint64_t t0 = clock_mono_ns(), dt;
        assert_int_equal(monitor_handle_config(i % 2 ? &off : &on), i % 2 ? 0 : 1);
        dt = clock_mono_ns() - t0;
        worst = dt > worst ? dt : worst;
    }
    unlink(a.sun_path);
    assert_true(worst < 200000000ull); /* far below one status send's ~10 s of retries */
    assert_false(monitor_running());
}

static int setup(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(sockdir));
    setenv("MSMONITOR_SOCKET_DIR", sockdir, 1);
    setenv("MSMONITOR_LOG_PATH", sockdir, 1);
    backend_fake_init(&fk);
    monitor_test_set_backend(&fk.base);
    for (int m = 0; m < MSMON_OUTPUT_COUNT; m++)
        if (m != MSMON_OUTPUT_TRACE)
            output_test_replace((enum msmon_output)m, &cap_ops);
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
        cmocka_unit_test(test_start_and_enable_failures),
        cmocka_unit_test(test_expiry),
        cmocka_unit_test(test_expiry_waits_for_config),
        cmocka_unit_test(test_expiry_cluster_config_race),
        cmocka_unit_test(test_interval_change_ticks),
        cmocka_unit_test(test_trace_exclusion),
        cmocka_unit_test(test_window_artifact),
        cmocka_unit_test(test_backend_drops),
        cmocka_unit_test(test_config_wait_is_bounded),
        cmocka_unit_test(test_reentry_refused),
        cmocka_unit_test(test_stale_daemon_does_not_delay_config),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
