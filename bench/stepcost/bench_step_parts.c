/* bench_step_parts: where the C part of one dyno-mode step goes
 * (docs/benchmarks.md#the-always-on-cost-of-a-step). Joins dyno mode like a rank (the
 * environment of bench_step_cost.py: MSMONITOR_USE_DAEMON=1, the simulator as msPTI, a
 * daemon), times the step whole (the wait-free one the Python module calls, and the one that
 * may wait), then each part of it alone with the same calls, idle and with an npu-monitor session of kind
 * Marker (the step markers' own records). The status post (once a second) and the fork
 * check (a flag) are left out: they cost nothing per step. The whole step and the markers are
 * also timed one call at a time with a step's worth of other work before each ("spaced as
 * steps"): what a loop's step pays, the wake-ups of threads that slept since the last one
 * included.
 * Usage: bench_step_parts [calls per part] */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "contract/cfgkeys.h"
#include "contract/names.h"
#include "plugin/control/health.h"
#include "plugin/control/monitor.h"
#include "plugin/control/shm_mode.h"
#include "plugin/control/shm_segment.h"
#include "msmon/msmonitor.h"

static long n_calls = 200000;

static uint64_t (*sim_start)(const char *, int32_t);
static void (*sim_end)(uint64_t);
static uint8_t segment[64];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int32_t step_no = 1000;
static volatile uint64_t sink;

static void part_step(void) { (void)shm_mode_step(); }
static void part_step_nowait(void) { (void)shm_mode_step_nowait(); }
static void part_lock(void)
{
    if (pthread_mutex_trylock(&lock) == 0)
        pthread_mutex_unlock(&lock);
}
static void part_markers(void)
{
    char msg[32];
    static uint64_t id;

    if (sim_end && id)
        sim_end(id);
    if (names_step_format(msg, sizeof(msg), ++step_no) == 0 && sim_start)
        id = sim_start(msg, 0);
}
static void part_segment(void) { sink += shmseg_time(segment); }
static void part_window(void) { sink += (uint64_t)monitor_window_due(++step_no); }
static void part_health(void) { sink += health_note_step(++step_no); }
static void part_epoch(void) { sink += msmon_dynamic_trace_epoch(); }

/* ns per call: the lowest mean of batches of 1000 calls (n_calls in all), the batch that no
 * other process interrupted (a batch shorter than a scheduler slice has that chance) */
static double per_call(void (*fn)(void))
{
    long batch = n_calls < 1000 ? n_calls : 1000, reps = n_calls / batch < 5 ? 5 : n_calls / batch;
    double best = 0;

    for (long r = 0; r < reps; r++) {
        uint64_t t0 = clock_mono_ns();
        for (long i = 0; i < batch; i++)
            fn();
        double v = (double)(clock_mono_ns() - t0) / (double)batch;
        if (r == 0 || v < best)
            best = v;
    }
    return best;
}

static void part_empty(void) {}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* ns per call when the calls come as a loop's steps do: SPACE_NS of busy work before each, so
 * the threads a call wakes (the simulator's device thread, the consumers) have gone to sleep
 * again, as between two steps; a tight loop keeps them awake and hides that wake-up. The
 * median of single calls, less that of an empty call (the two clock reads). */
#define SPACE_NS 200000u
static double spaced_median(void (*fn)(void), long n, uint64_t *v)
{
    for (long i = 0; i < n; i++) {
        uint64_t until = clock_mono_ns() + SPACE_NS;
        while (clock_mono_ns() < until)
            ;
        uint64_t t0 = clock_mono_ns();
        fn();
        v[i] = clock_mono_ns() - t0;
    }
    qsort(v, (size_t)n, sizeof(*v), cmp_u64);
    return (double)v[n / 2];
}

static double per_call_spaced(void (*fn)(void))
{
    long n = n_calls / 100 < 200 ? 200 : n_calls / 100;
    uint64_t *v = malloc((size_t)n * sizeof(*v));
    double r = -1;

    if (!v)
        return r;
    r = spaced_median(fn, n, v) - spaced_median(part_empty, n, v);
    free(v);
    return r;
}

static void report(const char *what)
{
    printf("C step parts, %s (ns per call, each part timed alone):\n", what);
    printf("  %-52s %8.0f\n", "msmon_dynamic_step_nowait() whole (Python's step)", per_call(part_step_nowait));
    printf("  %-52s %8.0f\n", "msmon_dynamic_step() whole (may wait)", per_call(part_step));
    printf("  %-52s %8.0f\n", "lock (the state's mutex, trylock)", per_call(part_lock));
    printf("  %-52s %8.0f\n", "markers (\"step <N>\" text, range end + start)", per_call(part_markers));
    printf("  %-52s %8.0f\n", "segment (publish time read)", per_call(part_segment));
    printf("  %-52s %8.0f\n", "window (monitor_window_due, none armed)", per_call(part_window));
    printf("  %-52s %8.0f\n", "health (health_note_step: clock read, stores)", per_call(part_health));
    printf("  %-52s %8.0f\n", "window epoch read (msmon_dynamic_trace_epoch)", per_call(part_epoch));
    printf("  %-52s %8.0f\n", "spaced as steps: msmon_dynamic_step_nowait() whole", per_call_spaced(part_step_nowait));
    printf("  %-52s %8.0f\n", "spaced as steps: markers", per_call_spaced(part_markers));
}

int main(int argc, char **argv)
{
    const char *keys[] = { CFGKEY_NPU_MONITOR_START, CFGKEY_MSPTI_ACTIVITY_KIND, CFGKEY_REPORT_INTERVAL_S };
    const char *start[] = { "true", "Marker", "1" };
    const char *stopkey[] = { CFGKEY_NPU_MONITOR_STOP }, *stop[] = { "true" };
    const char *lib = getenv("MSMONITOR_MSPTI_LIB");
    int rc;

    if (argc > 1) {
        char *end;
        n_calls = strtol(argv[1], &end, 10);
        if (*end || n_calls < 1) {
            fprintf(stderr, "bench_step_parts: calls per part '%s' is not a positive number\n", argv[1]);
            return 2;
        }
    }
    rc = msmon_dynamic_init_ex(0, 0); /* as a program does: the API loads the msPTI library first */
    if (rc != 0) {
        fprintf(stderr, "bench_step_parts: dyno mode did not start (%s); set MSMONITOR_USE_DAEMON=1\n",
                strerror(-rc));
        return 1;
    }
    if (lib) {
        void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            h = dlopen(lib, RTLD_LAZY);
        if (h) {
            *(void **)&sim_start = dlsym(h, "mssim_mstx_range_start");
            *(void **)&sim_end = dlsym(h, "mssim_mstx_range_end");
        }
    }
    report("idle");
    rc = msmon_enable_npu_monitor(keys, start, 3);
    if (rc != 0 || !monitor_running()) {
        fprintf(stderr, "bench_step_parts: the npu-monitor session did not start (%d)\n", rc);
        msmon_dynamic_finalize();
        return 1;
    }
    report("session (kind Marker)");
    (void)msmon_enable_npu_monitor(stopkey, stop, 1);
    msmon_dynamic_finalize();
    return 0;
}
