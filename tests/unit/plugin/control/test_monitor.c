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
#include "msmon/ipc_wire.h"
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

static struct pconfig_monitor cfg_of(int start, int stop, uint32_t interval, double duration, uint32_t kinds)
{
    struct pconfig_monitor c;
    memset(&c, 0, sizeof(c));
    c.start = start;
    c.stop = stop;
    c.report_interval_s = interval;
    c.duration_s = duration;
    c.kinds_mask = kinds;
    c.output = MSMON_OUTPUT_DB;
    return c;
}

/* The last answer a config got (monitor_done_fn, on the actor). */
static struct {
    pthread_mutex_t lock;
    int n;
    struct monitor_result r;
    char notes[PCONFIG_NOTES_CAP];
} ans = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void on_done(const char *id, const char *notes, const struct monitor_result *r)
{
    (void)id;
    pthread_mutex_lock(&ans.lock);
    ans.n++;
    ans.r = *r;
    snprintf(ans.notes, sizeof(ans.notes), "%s", notes);
    pthread_mutex_unlock(&ans.lock);
}

static int handle(const struct pconfig_monitor *c)
{
    return monitor_handle_config(c, "7", "", on_done);
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
    struct pconfig_monitor c = cfg_of(1, 0, 0, 0, API_BIT);
    (void)state;
    reset();
    assert_int_equal(handle(&c), 1);
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
    struct pconfig_monitor c = cfg_of(1, 0, 0, 0, API_BIT);
    (void)state;
    reset();
    assert_int_equal(handle(&c), 1);
    /* a second start while running: no new session, kinds/filter replaced */
    c.kinds_mask = KERNEL_BIT;
    assert_int_equal(handle(&c), 1);
    assert_int_equal(cap.created, 1);
    assert_int_equal(cap.kinds, KERNEL_BIT);
    assert_int_equal(monitor_enabled_kinds(), KERNEL_BIT);
    c = cfg_of(0, 1, 0, 0, 0);
    assert_int_equal(handle(&c), 0);
    assert_int_equal(cap.stops, 1);
    /* neither start nor stop while idle: nothing created */
    c = cfg_of(0, 0, 7, 0, API_BIT);
    assert_int_equal(handle(&c), 0);
    assert_int_equal(cap.created, 1);
}

static void test_start_and_enable_failures(void **state)
{
    struct pconfig_monitor c = cfg_of(1, 0, 0, 0, API_BIT | MEMORY_BIT);
    (void)state;
    reset();
    fk.start_rc = -EBUSY; /* another profiler owns the vendor API */
    assert_int_equal(handle(&c), 0);
    assert_false(monitor_running());
    assert_int_equal(cap.destroyed, cap.created); /* processor released */
    assert_string_equal(fk.order, "S");
    reset();
    fk.enable_rc[MON_KIND_MEMORY] = 1;
    assert_int_equal(handle(&c), 1);
    assert_int_equal(cap.kinds, API_BIT);        /* only successful enables count */
    assert_int_equal(monitor_enabled_kinds(), API_BIT);
    /* some of the kinds: applied, partly, naming what is missing and why */
    assert_int_equal(ans.r.outcome, MONITOR_PARTLY);
    assert_string_equal(ans.r.state, "Running");
    if (strncmp(ans.r.reason, "Memory not enabled (fake could not enable Memory: ", 50) != 0)
        fail_msg("reason: %s (outcome %d)", ans.r.reason, ans.r.outcome);
    assert_int_equal(monitor_stop(), 0);
    assert_int_equal(monitor_enabled_kinds(), 0);
    /* none of them: rejected, and the session this config started is no session */
    c = cfg_of(1, 0, 0, 0, MEMORY_BIT);
    assert_int_equal(handle(&c), 0);
    assert_int_equal(ans.r.outcome, MONITOR_REJECTED);
    assert_string_equal(ans.r.state, "Idle");
    assert_true(strncmp(ans.r.reason, "fake could not enable Memory: ", 30) == 0);
    assert_false(monitor_running());
    fk.enable_rc[MON_KIND_MEMORY] = 0;
    c = cfg_of(1, 0, 0, 0, API_BIT);
    assert_int_equal(handle(&c), 1);
    assert_int_equal(ans.r.outcome, MONITOR_APPLIED);
    assert_string_equal(ans.r.reason, "");
    assert_int_equal(monitor_stop(), 0);
}

static void test_expiry(void **state)
{
    struct pconfig_monitor c = cfg_of(1, 0, 0, 0.2, API_BIT);
    (void)state;
    reset();
    assert_int_equal(handle(&c), 1);
    set_pending(5);
    WAIT_FOR(cap.stops == 1);
    WAIT_FOR(!monitor_running());
    assert_int_equal(cap.consumed_at_stop, 5);
    assert_true(log_has("MsptiMonitor run duration: 0.2s expired"));
    assert_string_equal(fk.order, "SEDFU");
    assert_int_equal(monitor_stop(), -ENOENT);
    /* a new start opens a new session */
    c.duration_s = 0;
    assert_int_equal(handle(&c), 1);
    assert_int_equal(cap.created, 2);
    assert_int_equal(monitor_stop(), 0);
}

/* A config whose kind replacement is still running when the duration expires: the expiry
 * waits for it (no teardown under a replace_kinds that still uses the processor), then
 * disables the kind it enabled. */
static void test_expiry_waits_for_config(void **state)
{
    struct pconfig_monitor c = cfg_of(1, 0, 0, 0.05, API_BIT);
    (void)state;
    reset();
    fk.enable_sleep_ms = 300; /* the deadline passes while msptiActivityEnable runs */
    assert_int_equal(handle(&c), 1); /* reported before the expiry's Idle */
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
    struct pconfig_monitor c = cfg_of(1, 0, 0, 0.05, API_BIT);
    (void)state;
    reset();
    assert_int_equal(monitor_set_cluster_config("parallel_group_info", orig), 0);
    cap.replace_pgi_at_stop = 1;
    assert_int_equal(handle(&c), 1);
    WAIT_FOR(cap.stops == 1);
    WAIT_FOR(!monitor_running());
    cap.replace_pgi_at_stop = 0;
    assert_true(strncmp(cap.pgi_seen, orig, sizeof(cap.pgi_seen) - 1) == 0);
}

static void test_interval_change_ticks(void **state)
{
    struct pconfig_monitor c = cfg_of(1, 0, 1000, 0, API_BIT);
    (void)state;
    reset();
    assert_int_equal(handle(&c), 1);
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
    struct pconfig_monitor c = cfg_of(1, 0, 0, 0, API_BIT);
    (void)state;
    reset();
    monitor_set_trace_status(1);
    assert_int_equal(handle(&c), 0);
    assert_int_equal(cap.created, 0);
    assert_true(log_has("nputrace is running in this process"));
    assert_int_equal(ans.r.outcome, MONITOR_REJECTED);
    monitor_set_trace_status(0);
    assert_int_equal(handle(&c), 1);
    monitor_set_trace_status(1);
    WAIT_FOR(log_has("nputrace reported Running while an npu-monitor session runs")); /* queued, not waited for */
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

/* ---- the nputrace window, the actor's ---- */

static struct pconfig_trace trace_of(const char *dir, uint32_t flags, int32_t start, int32_t iters)
{
    struct pconfig_trace t;

    memset(&t, 0, sizeof(t));
    snprintf(t.log_file, sizeof(t.log_file), "%s", dir);
    t.flags = flags;
    t.start_step = start;
    t.iterations = iters;
    return t;
}

static int arm(const struct pconfig_trace *t, int32_t rank, int32_t step, int32_t aligned)
{
    struct monitor_arm a = { .opts = *t, .rank = rank, .step = step, .aligned = aligned };

    return monitor_window_arm(&a, "8", "", on_done);
}

static void expect_window(int32_t state, int32_t start, int32_t stop)
{
    struct monitor_window_view v;

    monitor_window_view(&v);
    assert_int_equal(v.state, state);
    assert_int_equal(v.start, start);
    assert_int_equal(v.stop, stop);
}

/* The commands of a window without NPU activities: every phase, no collection session. */
static void test_window_commands(void **state)
{
    char dir[256];
    struct pconfig_trace t;
    struct monitor_window_view v;
    uint32_t windows, epoch;

    (void)state;
    reset();
    snprintf(dir, sizeof(dir), "%s/win", sockdir);
    monitor_window_view(&v);
    windows = v.windows;
    /* arm at step 5 for [7, 9): Ready; the options are the window's */
    t = trace_of(dir, PCONFIG_TRACE_CPU, 7, 2);
    epoch = monitor_window_epoch();
    assert_int_equal(arm(&t, 0, 5, -1), 0);
    assert_true(monitor_window_epoch() != epoch);
    assert_int_equal(ans.r.outcome, MONITOR_APPLIED);
    assert_string_equal(ans.r.state, "Ready");
    assert_true(log_has("dynamic_profile: nputrace ready: steps [7, 9)"));
    expect_window(IPC_STATUS_READY, 7, 9);
    monitor_window_view(&v);
    assert_int_equal(v.flags, PCONFIG_TRACE_CPU);
    assert_string_equal(v.log_dir, dir); /* created */
    /* a second config while armed is refused, and the armed window stays (the epoch too) */
    epoch = monitor_window_epoch();
    assert_int_equal(arm(&t, 0, 5, -1), 0);
    assert_int_equal(ans.r.outcome, MONITOR_REJECTED);
    assert_string_equal(ans.r.reason, "nputrace config ignored on rank 0: a window [7, 9) is already armed");
    expect_window(IPC_STATUS_READY, 7, 9);
    assert_int_equal(monitor_window_epoch(), epoch);
    /* the step boundaries: open at 7 (no NPU: no session, said once), close at 9; only the
     * boundaries are due (the steps between them post nothing) and move the epoch */
    assert_false(monitor_window_due(6));
    assert_false(monitor_window_step(6));
    expect_window(IPC_STATUS_READY, 7, 9);
    assert_true(monitor_window_due(7));
    assert_int_equal(monitor_window_epoch(), epoch);
    logcap_clear();
    assert_true(monitor_window_step(7));
    expect_window(IPC_STATUS_RUNNING, 7, 9);
    assert_true(monitor_window_epoch() != epoch);
    epoch = monitor_window_epoch();
    assert_true(log_has("nputrace: steps [7, 9): PROFILE_ACTIVITIES has no NPU"));
    assert_false(monitor_window_due(8));
    assert_false(monitor_window_step(8));
    assert_true(monitor_window_due(9));
    assert_int_equal(monitor_window_epoch(), epoch);
    assert_true(monitor_window_step(9));
    assert_false(monitor_window_due(9)); /* posted: not posted again */
    WAIT_FOR((monitor_window_view(&v), v.state == IPC_STATUS_IDLE)); /* the close is not waited for */
    assert_true(monitor_window_epoch() != epoch);
    assert_false(monitor_window_due(10)); /* closed: nothing moves any more */
    assert_int_equal(v.start, 7);
    assert_int_equal(v.stop, 9);
    assert_int_equal(v.windows, windows + 1);
    /* a start step that has passed is refused; the window stays Idle, its epoch too */
    epoch = monitor_window_epoch();
    assert_int_equal(arm(&t, 0, 9, -1), 0);
    assert_int_equal(ans.r.outcome, MONITOR_REJECTED);
    assert_string_equal(ans.r.reason,
                        "dynamic_profile: nputrace config ignored on rank 0: start step 7 already passed (now at step 9)");
    expect_window(IPC_STATUS_IDLE, 7, 9);
    assert_int_equal(monitor_window_epoch(), epoch);
    /* not for this rank: taken, and nothing armed */
    t = trace_of(dir, PCONFIG_TRACE_CPU, -1, 1);
    t.rank_select = true;
    snprintf(t.rank_list, sizeof(t.rank_list), "3");
    assert_int_equal(arm(&t, 0, 9, -1), 0);
    assert_int_equal(ans.r.outcome, MONITOR_APPLIED);
    assert_string_equal(ans.r.reason, "not for rank 0 (PROFILE_RANK_LIST '3')");
    expect_window(IPC_STATUS_IDLE, 7, 9);
    /* start -1: the creator's aligned step, else the next step */
    t = trace_of(dir, PCONFIG_TRACE_CPU, -1, 3);
    assert_int_equal(arm(&t, 0, 10, 40), 0);
    expect_window(IPC_STATUS_READY, 40, 43);
    assert_true(log_has("start step -1 aligned for every rank to step 40"));
    /* the job leaves inside a window: Idle at once */
    assert_true(monitor_window_step(41));
    expect_window(IPC_STATUS_RUNNING, 40, 43);
    epoch = monitor_window_epoch();
    monitor_window_leave(42);
    expect_window(IPC_STATUS_IDLE, 40, 43);
    assert_true(monitor_window_epoch() != epoch);
    assert_false(monitor_window_step(43)); /* a left window stays closed */
    t = trace_of(dir, PCONFIG_TRACE_CPU, -1, 1);
    assert_int_equal(arm(&t, 0, 50, -1), 0);
    expect_window(IPC_STATUS_READY, 51, 52);
    assert_true(monitor_window_step(51));
    assert_true(monitor_window_step(52));
    WAIT_FOR((monitor_window_view(&v), v.state == IPC_STATUS_IDLE));
}

/* ACTIVITIES_LOG_FILE: created when missing; a symlink or a file is refused. */
static void test_window_dirs(void **state)
{
    char p[256], link[256], file[256];
    struct pconfig_trace t;
    FILE *f;

    (void)state;
    reset();
    snprintf(p, sizeof(p), "%s/new/sub", sockdir);
    snprintf(link, sizeof(link), "%s/link", sockdir);
    snprintf(file, sizeof(file), "%s/file", sockdir);
    assert_int_equal(symlink(p, link), 0);
    f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    t = trace_of(link, PCONFIG_TRACE_CPU, -1, 1);
    assert_int_equal(arm(&t, 0, 1, -1), 0);
    assert_int_equal(ans.r.outcome, MONITOR_REJECTED);
    assert_true(strstr(ans.r.reason, "is a symbolic link") != NULL);
    t = trace_of(file, PCONFIG_TRACE_CPU, -1, 1);
    assert_int_equal(arm(&t, 0, 1, -1), 0);
    assert_true(strstr(ans.r.reason, "exists and is not a directory") != NULL);
    expect_window(IPC_STATUS_IDLE, 51, 52); /* the last window stays as it was */
    unlink(link);
    unlink(file);
}

/* One activity subscriber: an armed window refuses an npu-monitor start (a stop is fine), a
 * running npu-monitor refuses a window, and the standalone Monitor waits for the window too. */
static void test_window_exclusion(void **state)
{
    char dir[256];
    struct pconfig_monitor on = cfg_of(1, 0, 0, 0, API_BIT), off = cfg_of(0, 1, 0, 0, 0);
    struct pconfig_trace t;
    struct monitor_start_args sa = { .output = MSMON_OUTPUT_MEMORY, .standalone = true };
    struct monitor_window_view v;

    (void)state;
    reset();
    snprintf(dir, sizeof(dir), "%s/win2", sockdir);
    t = trace_of(dir, PCONFIG_TRACE_CPU | PCONFIG_TRACE_NPU, 105, 2);
    assert_int_equal(arm(&t, 0, 100, -1), 0);
    expect_window(IPC_STATUS_READY, 105, 107);
    assert_int_equal(handle(&on), 0);
    assert_int_equal(ans.r.outcome, MONITOR_REJECTED);
    assert_string_equal(ans.r.state, "Ready");
    assert_string_equal(ans.r.reason, "npu-monitor start refused: an nputrace window for steps [105, 107) is armed "
                                      "in this process (one activity subscriber); start npu-monitor after the window");
    assert_false(monitor_running());
    assert_int_equal(handle(&off), 0);
    assert_int_equal(ans.r.outcome, MONITOR_APPLIED);
    assert_int_equal(monitor_start(&sa), -EBUSY);
    assert_true(log_has("Monitor start refused: an nputrace window for steps [105, 107) is armed"));
    /* the window opens with a session of its own (the trace output over the fake backend) */
    assert_true(monitor_window_step(105));
    assert_true(monitor_tracing());
    assert_int_equal(handle(&on), 0);
    assert_string_equal(ans.r.state, "Tracing");
    assert_true(monitor_window_step(107));
    WAIT_FOR((monitor_window_view(&v), v.state == IPC_STATUS_IDLE && !monitor_running()));
    /* npu-monitor first: the window is refused when it is armed, with the reason */
    assert_int_equal(handle(&on), 1);
    t = trace_of(dir, PCONFIG_TRACE_CPU | PCONFIG_TRACE_NPU, -1, 2);
    assert_int_equal(arm(&t, 2, 200, -1), 0);
    assert_int_equal(ans.r.outcome, MONITOR_REJECTED);
    assert_string_equal(ans.r.reason, "nputrace refused on rank 2: npu-monitor is running in this process (one "
                                      "activity subscriber); stop it with dyno npu-monitor --npu-monitor-stop first");
    assert_int_equal(monitor_stop(), 0);
    monitor_last_artifact(dir, sizeof(dir));
    if (dir[0])
        unlink(dir);
}

/* The backend's loss counters reach the core and the stop line. */
static void test_backend_drops(void **state)
{
    struct pconfig_monitor c = cfg_of(1, 0, 0, 0, API_BIT);
    struct backend_drops d;
    (void)state;
    reset();
    assert_int_equal(handle(&c), 1);
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
    struct pconfig_monitor c = cfg_of(1, 0, 0, 0, API_BIT);
    uint64_t t0;
    (void)state;
    reset();
    fk.enable_sleep_ms = 1600;
    t0 = clock_mono_ns();
    assert_int_equal(handle(&c), 0); /* timed out */
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
    struct pconfig_monitor c = cfg_of(1, 0, 0, 0, API_BIT);
    (void)state;
    reset();
    ops.tick = c_tick_reenter;
    output_test_replace(MSMON_OUTPUT_METRIC, &ops);
    assert_int_equal(handle(&c), 1);
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
    struct pconfig_monitor on = cfg_of(1, 0, 0, 0, API_BIT), off = cfg_of(0, 1, 0, 0, 0);
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
        assert_int_equal(handle(i % 2 ? &off : &on), i % 2 ? 0 : 1);
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
        cmocka_unit_test(test_window_commands),
        cmocka_unit_test(test_window_dirs),
        cmocka_unit_test(test_window_exclusion),
        cmocka_unit_test(test_backend_drops),
        cmocka_unit_test(test_config_wait_is_bounded),
        cmocka_unit_test(test_reentry_refused),
        cmocka_unit_test(test_stale_daemon_does_not_delay_config),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
