/* bench_monitor: what npu-monitor costs the monitored process. The real libmsmonitor.so
 * runs in-process in metric mode (1 s report interval, no daemon: the datagrams find no
 * socket) on the simulator's libmspti.so, whose bulk producer mssim_bench_fill drives
 * Kernel records through the real buffer path.
 *
 *   (a) CPU time of every thread but the producer (msPTI completion threads, which run the
 *       monitor's ingestion, and the MsptiMonitor thread) per million records, against the
 *       same path with a trivial consumer: the difference is the monitor's own cost.
 *   (b) step time of a workload doing a fixed amount of CPU work per step while emitting
 *       records at ~1 M records/s: monitoring off (not subscribed), msPTI with a trivial
 *       consumer, and msPTI with the monitor, rounds interleaved.
 *
 * Usage: bench_plugin_core [million_records_for_a] [steps_per_round_for_b]. Prints figures. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "msmon/msmonitor.h"
#include "msmon/mspti.h"
#include "msmon/mssim.h"

#define KERNEL_MASK (1u << MSPTI_ACTIVITY_KIND_KERNEL)
#define CHUNK 1000000ull             /* records per fill; < 32 buffers' worth, so no drops */
#define STEP_RECORDS 10000           /* per 10 ms step: 1 M records/s */
#define STEP_SLICES 20
#define STEP_WORK_NS 10000000ull

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t tv_ns(struct timeval tv)
{
    return (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000ull;
}

/* CPU ns of the whole process (live and exited threads) and of the calling thread. */
static void cpu_ns(uint64_t *ret_all, uint64_t *ret_self)
{
    struct rusage a, s;
    getrusage(RUSAGE_SELF, &a);
    getrusage(RUSAGE_THREAD, &s);
    *ret_all = tv_ns(a.ru_utime) + tv_ns(a.ru_stime);
    *ret_self = tv_ns(s.ru_utime) + tv_ns(s.ru_stime);
}

/* ---- trivial consumer: walk every record, nothing else ---- */

#define TRIV_SIZE (8u << 20)
static pthread_mutex_t triv_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *triv_free[32];     /* reused like the monitor's pool: no page faults per buffer */
static unsigned triv_nfree;
static volatile uint64_t triv_seen;

static void triv_request(uint8_t **buf, size_t *size, size_t *max_records)
{
    *max_records = 0;
    pthread_mutex_lock(&triv_lock);
    *buf = triv_nfree ? triv_free[--triv_nfree] : aligned_alloc(8, TRIV_SIZE);
    pthread_mutex_unlock(&triv_lock);
    *size = *buf ? TRIV_SIZE : 0;
}

static void triv_complete(uint8_t *buf, size_t size, size_t valid)
{
    msptiActivity *rec = NULL;
    uint64_t n = 0;
    (void)size;
    if (!buf)
        return;
    while (valid && msptiActivityGetNextRecord(buf, valid, &rec) == MSPTI_SUCCESS)
        n++;
    __atomic_add_fetch(&triv_seen, n, __ATOMIC_RELAXED);
    pthread_mutex_lock(&triv_lock);
    if (triv_nfree < 32) {
        triv_free[triv_nfree++] = buf;
        buf = NULL;
    }
    pthread_mutex_unlock(&triv_lock);
    free(buf);
}

static msptiSubscriberHandle triv_sub;

static int triv_on(void)
{
    if (msptiSubscribe(&triv_sub, NULL, NULL) != MSPTI_SUCCESS ||
        msptiActivityRegisterCallbacks(triv_request, triv_complete) != MSPTI_SUCCESS ||
        msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL) != MSPTI_SUCCESS)
        return -1;
    return 0;
}

static void triv_off(void)
{
    msptiActivityDisable(MSPTI_ACTIVITY_KIND_KERNEL);
    msptiActivityFlushAll(1);
    msptiUnsubscribe(triv_sub);
}

/* ---- the monitor, driven like the native poller would ---- */

static int mon_cmd(const char *start, const char *stop)
{
    const char *keys[] = { "NPU_MONITOR_START", "NPU_MONITOR_STOP", "REPORT_INTERVAL_S", "DURATION",
                           "MSPTI_ACTIVITY_KIND", "NPU_MONITOR_LOG_FILE", "NPU_MONITOR_EXPORT_TYPE" };
    const char *vals[] = { start, stop, "1", "0", "Kernel", "", "DB" };
    return msmon_enable_npu_monitor(keys, vals, 7);
}

static int mon_on(void)
{
    return mon_cmd("true", "false");
}

static void mon_off(void)
{
    (void)mon_cmd("false", "true");
}

/* ---- (a) ---- */

struct cpu_figure {
    double other_ms_per_m, main_ms_per_m, wall_ms_per_m;
    uint64_t records, dropped;
};

static int measure_cpu(uint64_t millions, struct cpu_figure *ret)
{
    struct mssim_stats s0, s1;
    uint64_t all0, self0, all1, self1, t0, t1, got = 0;

    mssim_get_stats(&s0);
    cpu_ns(&all0, &self0);
    t0 = now_ns();
    for (uint64_t i = 0; i < millions; i++) {
        int64_t n = mssim_bench_fill(KERNEL_MASK, CHUNK);
        if (n < 0)
            return -1;
        got += (uint64_t)n;
        msptiActivityFlushAll(1); /* hand every buffer to the consumer before the next chunk */
    }
    t1 = now_ns();
    cpu_ns(&all1, &self1);
    mssim_get_stats(&s1);
    ret->records = got;
    ret->dropped = (s1.records_dropped_declined - s0.records_dropped_declined) +
                   (s1.records_dropped_nofit - s0.records_dropped_nofit);
    double m = (double)got / 1e6;
    ret->other_ms_per_m = ((double)(all1 - all0) - (double)(self1 - self0)) / 1e6 / m;
    ret->main_ms_per_m = (double)(self1 - self0) / 1e6 / m;
    ret->wall_ms_per_m = (double)(t1 - t0) / 1e6 / m;
    return 0;
}

/* ---- (b) ---- */

static volatile uint64_t sink;

static void spin(uint64_t iters)
{
    uint64_t x = sink + 1;
    for (uint64_t i = 0; i < iters; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
}

/* Iterations of spin() that take STEP_WORK_NS on this machine (best of several tries). */
static uint64_t calibrate(void)
{
    uint64_t best = UINT64_MAX, iters = 1000000;
    for (int i = 0; i < 20; i++) {
        uint64_t t0 = now_ns();
        spin(iters);
        uint64_t dt = now_ns() - t0;
        if (dt < best)
            best = dt;
    }
    return (uint64_t)((double)iters * (double)STEP_WORK_NS / (double)best);
}

static double run_steps(uint64_t work_iters, unsigned steps, uint64_t *ret_records);

/* Scale the first guess so that a step with monitoring off really takes STEP_WORK_NS. */
static uint64_t calibrate_steps(uint64_t guess)
{
    uint64_t r;
    double ms = run_steps(guess, 50, &r);
    return (uint64_t)((double)guess * (STEP_WORK_NS / 1e6) / ms);
}

/* Mean step time (ms) over `steps` steps of fixed work + STEP_RECORDS records. */
static double run_steps(uint64_t work_iters, unsigned steps, uint64_t *ret_records)
{
    uint64_t t0 = now_ns(), recs = 0;
    for (unsigned s = 0; s < steps; s++) {
        for (int k = 0; k < STEP_SLICES; k++) {
            int64_t n = mssim_bench_fill(KERNEL_MASK, STEP_RECORDS / STEP_SLICES); /* <0 when off */
            if (n > 0)
                recs += (uint64_t)n;
            spin(work_iters / STEP_SLICES);
        }
    }
    *ret_records = recs;
    return (double)(now_ns() - t0) / 1e6 / steps;
}

static int reexec_with_private_dirs(char **argv)
{
    char dir[] = "/tmp/bench_plugin_coreXXXXXX";
    if (getenv("MSMONITOR_LOG_PATH"))
        return 0;
    if (!mkdtemp(dir))
        return -1;
    /* The plugin reads its environment once at load time: set it, then start again. */
    setenv("MSMONITOR_LOG_PATH", dir, 1);
    setenv("MSMONITOR_SOCKET_DIR", dir, 1);
    setenv("MSMONITOR_LOG_LEVEL", "WARNING", 0);
    setenv("MSSIM_LOG", "error", 0);
    unsetenv("MSMONITOR_USE_DAEMON");
    execv("/proc/self/exe", argv);
    return -1;
}

/* The plugin logs its ERRORs (no daemon here) to stderr as well: keep them in the log dir. */
static void quiet_stderr(void)
{
    char path[4096];
    int fd;
    snprintf(path, sizeof(path), "%s/stderr.log", getenv("MSMONITOR_LOG_PATH"));
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd >= 0) {
        dup2(fd, 2);
        close(fd);
    }
}

int main(int argc, char **argv)
{
    uint64_t millions = argc > 1 ? strtoull(argv[1], NULL, 10) : 20;
    unsigned steps = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 200;
    struct cpu_figure triv, mon;
    double off_ms = 0, triv_ms = 0, mon_ms = 0;
    uint64_t work, r_off = 0, r_triv = 0, r_mon = 0, r;
    const int rounds = 5;

    if (reexec_with_private_dirs(argv) != 0) {
        perror("bench_plugin_core: re-exec");
        return 1;
    }
    if (millions == 0 || steps == 0) {
        fprintf(stderr, "usage: bench_plugin_core [million_records] [steps_per_round]\n");
        return 2;
    }
    quiet_stderr();
    printf("bench_plugin_core: libmsmonitor.so metric mode (1 s interval, Kernel) on the msPTI simulator\n");

    /* (a) */
    if (triv_on() != 0 || measure_cpu(millions, &triv) != 0) {
        fprintf(stderr, "bench_plugin_core: trivial consumer failed\n");
        return 1;
    }
    triv_off();
    if (mon_on() != 0 || measure_cpu(millions, &mon) != 0) {
        fprintf(stderr, "bench_plugin_core: monitor start failed (see the plugin log under %s)\n",
                getenv("MSMONITOR_LOG_PATH"));
        return 1;
    }
    mon_off();
    printf("(a) CPU per million Kernel records (%llu M records, drops: trivial %llu, monitor %llu)\n",
           (unsigned long long)millions, (unsigned long long)triv.dropped, (unsigned long long)mon.dropped);
    printf("    %-34s %10s %10s %10s\n", "", "non-prod", "producer", "wall");
    printf("    %-34s %8.1f ms %8.1f ms %8.1f ms\n", "msPTI + trivial consumer", triv.other_ms_per_m,
           triv.main_ms_per_m, triv.wall_ms_per_m);
    printf("    %-34s %8.1f ms %8.1f ms %8.1f ms\n", "msPTI + monitor (metric mode)", mon.other_ms_per_m,
           mon.main_ms_per_m, mon.wall_ms_per_m);
    printf("    monitor's own cost: %.1f ms CPU per million records (= ns per record)\n",
           mon.other_ms_per_m - triv.other_ms_per_m);

    /* (b) */
    work = calibrate_steps(calibrate());
    for (int i = 0; i < rounds; i++) {
        off_ms += run_steps(work, steps, &r);
        r_off += r;
        if (triv_on() != 0)
            return 1;
        triv_ms += run_steps(work, steps, &r);
        r_triv += r;
        triv_off();
        if (mon_on() != 0)
            return 1;
        mon_ms += run_steps(work, steps, &r);
        r_mon += r;
        mon_off();
    }
    off_ms /= rounds;
    triv_ms /= rounds;
    mon_ms /= rounds;
    printf("    (no daemon: metric datagrams find no socket; plugin log and stderr in %s)\n",
           getenv("MSMONITOR_LOG_PATH"));
    printf("(b) step time, %.0f ms of CPU work + %d records per step, %d rounds x %u steps\n",
           STEP_WORK_NS / 1e6, STEP_RECORDS, rounds, steps);
    printf("    monitoring off                   %8.3f ms/step (%llu records)\n", off_ms,
           (unsigned long long)r_off);
    printf("    msPTI + trivial consumer         %8.3f ms/step (%+.2f %%, %.2f M records/s)\n", triv_ms,
           (triv_ms / off_ms - 1) * 100, (double)r_triv / (triv_ms * rounds * steps / 1e3) / 1e6);
    printf("    msPTI + monitor (metric mode)    %8.3f ms/step (%+.2f %%, %.2f M records/s)\n", mon_ms,
           (mon_ms / off_ms - 1) * 100, (double)r_mon / (mon_ms * rounds * steps / 1e3) / 1e6);
    printf("    monitor vs trivial consumer      %+.2f %%\n", (mon_ms / triv_ms - 1) * 100);
    return 0;
}
