/* bench_kmon: the daemon's cost per kernel-monitor collection cycle, in process, on this
 * machine's real /proc: CPU time of the bare reads of the six files (the baseline: what any
 * collector pays), of a full kmon_sample (parse + deltas), and of the cycle handed to the JSON
 * formatter and the TensorBoard logger. Then `data` records/s through data_handle with the
 * TensorBoard sink against data_handle with no sink. Figures only, no thresholds.
 * Usage: bench_kmon [cycles] (default 2000). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "daemon/data_sink.h"
#include "daemon/json_logger.h"
#include "daemon/kmon.h"
#include "daemon/kmon_proc.h"
#include "daemon/tb_logger.h"

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *const files[] = { "proc/uptime", "proc/stat", "proc/net/dev",
                                     "proc/meminfo", "proc/loadavg", "proc/diskstats" };

int main(int argc, char **argv)
{
    int cycles = argc > 1 ? atoi(argv[1]) : 2000; /* bench argument, not user input */
    static char buf[KMON_FILE_MAX];
    static char line[65536];
    struct kmon *k = NULL;
    struct kmon_cfg cfg = { "/", true, false, "", 0 };
    struct sink_record rec;
    struct sink tb;
    char dir[] = "/tmp/bench_kmonXXXXXX", err[512];
    size_t keys = 0;

    log_set_level(LOG_LVL_WARNING);
    if (cycles <= 0 || !mkdtemp(dir) || kmon_create(&cfg, &k) != 0)
        return 1;
    struct tb_cfg tcfg = { dir, true };
    if (tb_logger_create(&tcfg, &tb, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }

    double t0 = cpu_s();
    for (int i = 0; i < cycles; i++)
        for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++)
            (void)kmon_proc_read("/", files[f], buf, sizeof(buf));
    double base = (cpu_s() - t0) / cycles;

    t0 = cpu_s();
    for (int i = 0; i < cycles; i++) {
        kmon_sample(k, clock_real_ns(), clock_mono_ns(), &rec);
        keys = rec.n;
    }
    double sample = (cpu_s() - t0) / cycles;

    t0 = cpu_s();
    for (int i = 0; i < cycles; i++) {
        kmon_sample(k, clock_real_ns(), clock_mono_ns(), &rec);
        (void)json_logger_format(&rec, line, sizeof(line));
        tb.ops->write(tb.self, &rec);
    }
    double full = (cpu_s() - t0) / cycles;
    tb.ops->destroy(tb.self);

    printf("kernel monitor cycle (%d cycles, %zu metrics per cycle, real /proc):\n", cycles, keys);
    printf("  baseline: read the 6 /proc files        %8.1f us CPU/cycle\n", base * 1e6);
    printf("  kmon_sample (read + parse + deltas)     %8.1f us CPU/cycle  (%.2fx baseline)\n",
           sample * 1e6, sample / base);
    printf("  + JSON format + TensorBoard write       %8.1f us CPU/cycle  (%.2fx baseline)\n",
           full * 1e6, full / base);
    printf("  daemon share of one core: %.4f %% at the 60 s default, %.3f %% at 1 s\n",
           full / 60.0 * 100.0, full * 100.0);

    /* data records through the router: no sink (baseline) vs the TensorBoard sink */
    const char *msg = "{\"kind\":\"Kernel\",\"duration\":81234567,\"timestamp\":1749889801120000000,\"deviceId\":0}";
    int nrec = cycles * 50;
    struct data_router dr;
    data_router_init(&dr);
    log_set_level(LOG_LVL_ERROR); /* "Received data message" is INFO: keep it out of both runs */
    t0 = cpu_s();
    for (int i = 0; i < nrec; i++)
        data_handle(&dr, msg, strlen(msg), clock_real_ns());
    double d_base = (cpu_s() - t0) / nrec;
    if (tb_logger_create(&tcfg, &tb, err, sizeof(err)) != 0)
        return 1;
    data_router_add(&dr, tb);
    t0 = cpu_s();
    for (int i = 0; i < nrec; i++)
        data_handle(&dr, msg, strlen(msg), clock_real_ns());
    double d_tb = (cpu_s() - t0) / nrec;
    data_router_fini(&dr);
    printf("data records (%d Kernel lines):\n", nrec);
    printf("  baseline: data_handle, no sink          %8.2f us CPU/record  (%.0f records/s)\n",
           d_base * 1e6, 1.0 / d_base);
    printf("  data_handle + TensorBoard sink          %8.2f us CPU/record  (%.0f records/s)\n",
           d_tb * 1e6, 1.0 / d_tb);
    kmon_destroy(k);
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}
