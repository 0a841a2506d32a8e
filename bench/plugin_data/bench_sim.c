/* bench_sim: records/s of the plugin's metric-mode ingestion path with the msPTI SIMULATOR as
 * the producer: mssim_bench_fill appends into the plugin's buffers, the simulator completes
 * them on its own threads, and the real libmsmonitor completion path (the msPTI backend's completion:
 * GetNextRecord -> convert -> filter -> metric aggregate) consumes them. The backend table is
 * the simulator's functions, with RegisterCallbacks wrapped so each completion is timed in
 * thread CPU time: the figure is records per second of ONE consuming core. Completions wait
 * until the producer has filled the current chunk and then run one at a time, so the producer
 * and other consumers never compete with the one measured. Prints figures, asserts nothing.
 *
 * usage: bench_plugin_sim [million_records_per_run] [runs] */
#include <pthread.h>
#include <ftw.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "msmon/mspti.h"
#include "msmon/mssim.h"
#include "plugin/backend/backend_mspti.h"
#include "plugin/pipeline/filter.h"
#include "plugin/control/mconfig.h"
#include "plugin/control/monitor.h"
#include "plugin/pipeline/output.h"

#define CHUNK 2000000ull /* records per fill; flushed before the next so the pool never runs dry */
#define KINDS ((1u << MSPTI_ACTIVITY_KIND_KERNEL) | (1u << MSPTI_ACTIVITY_KIND_API))

static const char FILTER10[] = "Kernel:MatMul,Conv2D,Softmax,Gelu,Cast,Foo,Bar,Baz;API:LayerNorm,Add";

static msptiBuffersCallbackCompleteFunc real_complete;
static _Atomic uint64_t cpu_ns;
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER; /* held by the one measured consumer */
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool producing;

static void set_producing(bool on)
{
    pthread_mutex_lock(&gate_mu);
    producing = on;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void timed_complete(uint8_t *buf, size_t size, size_t valid)
{
    pthread_mutex_lock(&gate_mu);
    while (producing)
        pthread_cond_wait(&gate_cv, &gate_mu);
    uint64_t t0 = thread_cpu_ns();
    real_complete(buf, size, valid);
    atomic_fetch_add(&cpu_ns, thread_cpu_ns() - t0);
    pthread_mutex_unlock(&gate_mu);
}

static msptiResult wrap_register(msptiBuffersCallbackRequestFunc req, msptiBuffersCallbackCompleteFunc done)
{
    real_complete = done;
    return msptiActivityRegisterCallbacks(req, timed_complete);
}

/* GetNextRecord alone: the floor the simulator's msPTI call sets. */
static void walk_request(uint8_t **buf, size_t *size, size_t *max_records)
{
    *size = 8u << 20;
    *buf = aligned_alloc(8, *size);
    *max_records = 0;
}

static volatile uint64_t walk_sink;

static void walk_buffer(uint8_t *buf, size_t size, size_t valid)
{
    (void)size;
    uint64_t n = 0;
    msptiActivity *r = NULL;
    while (msptiActivityGetNextRecord(buf, valid, &r) == MSPTI_SUCCESS)
        n++;
    walk_sink += n;
}

static void walk_complete(uint8_t *buf, size_t size, size_t valid)
{
    if (!buf)
        return;
    real_complete = walk_buffer;
    timed_complete(buf, size, valid);
    free(buf);
}

static uint64_t appended(void)
{
    struct mssim_stats st;
    mssim_get_stats(&st);
    return st.records_appended;
}

static uint64_t dropped(void)
{
    struct mssim_stats st;
    mssim_get_stats(&st);
    return st.records_dropped_nofit + st.records_dropped_declined + st.records_dropped_injected;
}

/* Fill total records in chunks, flushing each; returns records consumed per CPU second. */
static double fill_and_time(uint64_t total, uint64_t *ret_dropped)
{
    uint64_t a0 = appended(), d0 = dropped();
    atomic_store(&cpu_ns, 0);
    for (uint64_t done = 0; done < total; done += CHUNK) {
        set_producing(true);
        int64_t rc = mssim_bench_fill(KINDS, total - done < CHUNK ? total - done : CHUNK);
        set_producing(false);
        msptiActivityFlushAll(1);
        if (rc < 0)
            return 0;
    }
    uint64_t n = appended() - a0;
    *ret_dropped = dropped() - d0;
    return (double)n / ((double)atomic_load(&cpu_ns) / 1e9);
}

static double run_getnext(uint64_t total, uint64_t *ret_dropped)
{
    msptiSubscriberHandle sub;
    if (msptiSubscribe(&sub, NULL, NULL) != MSPTI_SUCCESS)
        return 0;
    msptiActivityRegisterCallbacks(walk_request, walk_complete);
    msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL);
    msptiActivityEnable(MSPTI_ACTIVITY_KIND_API);
    double r = fill_and_time(total, ret_dropped);
    msptiActivityDisable(MSPTI_ACTIVITY_KIND_KERNEL);
    msptiActivityDisable(MSPTI_ACTIVITY_KIND_API);
    msptiActivityFlushAll(1);
    msptiUnsubscribe(sub);
    return r;
}

static double run_monitor(const char *filter, uint64_t total, uint64_t *ret_dropped)
{
    struct mconfig cfg = { .kinds_mask = KINDS, .report_interval_s = 3600, .start = true };
    snprintf(cfg.filter, sizeof(cfg.filter), "%s", filter);
    if (monitor_handle_config(&cfg) != 1) {
        fprintf(stderr, "bench: monitor did not start\n");
        return 0;
    }
    double r = fill_and_time(total, ret_dropped);
    monitor_stop();
    return r;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0; /* descending */
}

static void report(const char *label, double *v, int runs, uint64_t drops)
{
    qsort(v, (size_t)runs, sizeof(*v), cmp_dbl);
    printf("  %-34s best %6.1f  median %6.1f M records/s%s\n", label, v[0] / 1e6, v[runs / 2] / 1e6,
           drops ? "  (records dropped!)" : "");
}

int main(int argc, char **argv)
{
    uint64_t total = (argc > 1 ? strtoull(argv[1], NULL, 10) : 20) * 1000000ull;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    if (runs < 1 || runs > 64 || total == 0)
        return 2;
    char logdir[] = "/tmp/bench_plugin_sim.XXXXXX";
    if (!mkdtemp(logdir))
        return 1;
    setenv("MSMONITOR_LOG_PATH", logdir, 1);
    setenv("MSMONITOR_SOCKET_DIR", logdir, 1);

    static const struct mspti_lib lib = {
        .subscribe = msptiSubscribe, .unsubscribe = msptiUnsubscribe, .register_callbacks = wrap_register,
        .enable = msptiActivityEnable, .disable = msptiActivityDisable,
        .get_next_record = msptiActivityGetNextRecord, .flush_all = msptiActivityFlushAll,
        .flush_period = msptiActivityFlushPeriod, .get_result_string = msptiGetResultString,
    };
    struct backend *be;
    if (backend_mspti_create_from(&lib, &be) != 0)
        return 1;
    monitor_test_set_backend(be);
    /* monitor.c references the processors and the filter weakly: pull them in explicitly. */
    output_test_replace(MSMON_OUTPUT_METRIC, NULL); /* the table's own metric output */
    static int (*volatile keep_filter)(struct filter_state **) = filter_state_create;
    (void)keep_filter;
    monitor_first_use();
    log_set_level(LOG_LVL_ERROR);

    const char *mode = getenv("MSSIM_GETNEXT");
    printf("simulator -> plugin metric ingestion, Kernel+API, %d runs x %llu records, GetNextRecord %s mode\n",
           runs, (unsigned long long)total, mode && *mode ? mode : "default");
    printf("  (records per second of consumer thread CPU time, i.e. one core)\n");
    double v[64];
    uint64_t drops = 0, d;
    for (int i = 0; i < runs; i++, drops += d)
        v[i] = run_getnext(total, &d);
    report("GetNextRecord walk only", v, runs, drops);
    drops = 0;
    for (int i = 0; i < runs; i++, drops += d)
        v[i] = run_monitor("", total, &d);
    report("mon_complete_cb, empty filter", v, runs, drops);
    drops = 0;
    for (int i = 0; i < runs; i++, drops += d)
        v[i] = run_monitor(FILTER10, total, &d);
    report("mon_complete_cb, 10-item filter", v, runs, drops);
    nftw(logdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS); /* the plugin log written there */
    return 0;
}
