/* bench_cupti: records/s and consumer CPU ns/record of the plugin's metric-mode ingestion on
 * the CUPTI path, with our simulated CUPTI as producer: mssimc_bench_fill appends kernels and
 * runtime API records, full buffers are completed on the producing thread (the simulator has
 * no worker), and the real path (GetNextRecord -> cupti_record conversion -> filter -> metric
 * aggregate) consumes them. RegisterCallbacks is wrapped so each completion is timed in thread
 * CPU time: one consuming core, as bench_plugin_sim measures for msPTI. Prints, asserts nothing.
 *
 * usage: bench_cupti [million_records_per_run] [runs] */
#include <ftw.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "msmon/cupti_abi.h"
#include "msmon/mssim_cupti.h"
#include "plugin/backend/backend_cupti.h"
#include "plugin/control/mconfig.h"
#include "plugin/control/monitor.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/filter.h"

/* The simulator's CUPTI entry points (exported by its libcupti.so; no CUDA header). */
cupti_abi_register_callbacks_fn cuptiActivityRegisterCallbacks;
cupti_abi_enable_fn cuptiActivityEnable, cuptiActivityDisable;
cupti_abi_get_next_record_fn cuptiActivityGetNextRecord;
cupti_abi_flush_all_fn cuptiActivityFlushAll;
cupti_abi_get_version_fn cuptiGetVersion;
cupti_abi_get_callback_name_fn cuptiGetCallbackName;
cupti_abi_get_num_dropped_fn cuptiActivityGetNumDroppedRecords;

#define CHUNK 2000000ull
#define KINDS ((1u << 2) | (1u << 10)) /* Kernel, AclAPI (CUPTI runtime records) */

static const char FILTER10[] = "Kernel:gemm,softmax,gelu,layernorm,Cast,Foo,Bar,Baz;AclAPI:cudaLaunchKernel,Add";

static cupti_abi_complete_fn real_complete;
static _Atomic uint64_t cpu_ns;

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void timed_complete(void *ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    uint64_t t0 = thread_cpu_ns();
    real_complete(ctx, stream, buf, size, valid);
    atomic_fetch_add(&cpu_ns, thread_cpu_ns() - t0);
}

static cupti_abi_result wrap_register(cupti_abi_request_fn req, cupti_abi_complete_fn done)
{
    real_complete = done;
    return cuptiActivityRegisterCallbacks(req, timed_complete);
}

/* GetNextRecord alone: the floor the simulator's iterator sets. */
static volatile uint64_t walk_sink;

static void walk_request(uint8_t **buf, size_t *size, size_t *max_records)
{
    *size = 8u << 20;
    *buf = aligned_alloc(8, *size);
    *max_records = 0;
}

static void walk_buffer(void *ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    uint64_t n = 0;
    void *r = NULL;
    (void)ctx;
    (void)stream;
    (void)size;
    while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_ABI_SUCCESS)
        n++;
    walk_sink += n;
    free(buf);
}

static uint64_t appended(void)
{
    struct mssimc_stats st;
    mssimc_get_stats(&st);
    return st.appended;
}

static double fill_and_time(uint64_t total, uint64_t *ret_dropped)
{
    struct mssimc_stats st;
    uint64_t a0 = appended(), d0, n;

    mssimc_get_stats(&st);
    d0 = st.dropped_declined;
    atomic_store(&cpu_ns, 0);
    for (uint64_t done = 0; done < total; done += CHUNK) {
        if (mssimc_bench_fill(total - done < CHUNK ? total - done : CHUNK) < 0)
            return 0;
        cuptiActivityFlushAll(1);
    }
    n = appended() - a0;
    mssimc_get_stats(&st);
    *ret_dropped = st.dropped_declined - d0;
    return (double)n / ((double)atomic_load(&cpu_ns) / 1e9);
}

static double run_getnext(uint64_t total, uint64_t *ret_dropped)
{
    double r;
    real_complete = walk_buffer;
    cuptiActivityRegisterCallbacks(walk_request, timed_complete);
    cuptiActivityEnable(CUPTI_ABI_KIND_CONCURRENT_KERNEL);
    cuptiActivityEnable(CUPTI_ABI_KIND_RUNTIME);
    r = fill_and_time(total, ret_dropped);
    cuptiActivityDisable(CUPTI_ABI_KIND_CONCURRENT_KERNEL);
    cuptiActivityDisable(CUPTI_ABI_KIND_RUNTIME);
    cuptiActivityFlushAll(1);
    return r;
}

static double run_monitor(const char *filter, uint64_t total, uint64_t *ret_dropped)
{
    struct mconfig cfg = { .kinds_mask = KINDS, .report_interval_s = 3600, .start = true };
    double r;
    snprintf(cfg.filter, sizeof(cfg.filter), "%s", filter);
    if (monitor_handle_config(&cfg) != 1) {
        fprintf(stderr, "bench: monitor did not start\n");
        return 0;
    }
    r = fill_and_time(total, ret_dropped);
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
    printf("  %-34s best %6.1f  median %6.1f M records/s  (%5.1f ns/record)%s\n", label, v[0] / 1e6,
           v[runs / 2] / 1e6, v[runs / 2] > 0 ? 1e9 / v[runs / 2] : 0.0, drops ? "  (records dropped!)" : "");
}

int main(int argc, char **argv)
{
    uint64_t total = (argc > 1 ? strtoull(argv[1], NULL, 10) : 20) * 1000000ull;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    char logdir[] = "/tmp/bench_cupti.XXXXXX";
    static const struct cupti_lib lib = {
        .register_callbacks = wrap_register, .enable = cuptiActivityEnable,
        .disable = cuptiActivityDisable, .get_next_record = cuptiActivityGetNextRecord,
        .flush_all = cuptiActivityFlushAll, .get_version = cuptiGetVersion,
        .get_callback_name = cuptiGetCallbackName, .get_num_dropped = cuptiActivityGetNumDroppedRecords,
    };
    static int (*volatile keep_filter)(struct filter_state **) = filter_state_create;
    struct backend *be;
    double v[64];
    uint64_t drops = 0, d;

    if (runs < 1 || runs > 64 || total == 0)
        return 2;
    if (!mkdtemp(logdir))
        return 1;
    setenv("MSMONITOR_LOG_PATH", logdir, 1);
    setenv("MSMONITOR_SOCKET_DIR", logdir, 1);
    if (backend_cupti_create_from(&lib, &be) != 0)
        return 1;
    monitor_test_set_backend(be);
    output_test_replace(MSMON_OUTPUT_METRIC, NULL); /* the table's own metric output */
    (void)keep_filter;
    monitor_first_use();
    log_set_level(LOG_LVL_ERROR);

    printf("simulated CUPTI -> plugin metric ingestion, Kernel+AclAPI, %d runs x %llu records\n", runs,
           (unsigned long long)total);
    printf("  (records per second of consumer thread CPU time, i.e. one core)\n");
    for (int i = 0; i < runs; i++, drops += d)
        v[i] = run_getnext(total, &d);
    report("GetNextRecord walk only", v, runs, drops);
    drops = 0;
    for (int i = 0; i < runs; i++, drops += d)
        v[i] = run_monitor("", total, &d);
    report("CUPTI completion, empty filter", v, runs, drops);
    drops = 0;
    for (int i = 0; i < runs; i++, drops += d)
        v[i] = run_monitor(FILTER10, total, &d);
    report("CUPTI completion, 10-item filter", v, runs, drops);
    nftw(logdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    return 0;
}
