/* bench_kmon: the daemon's cost per kernel-monitor collection cycle, in process, on this
 * machine's real /proc: CPU time of the bare reads of the six files (the baseline: what any
 * collector pays), of a full kmon_sample (parse + deltas), and of the cycle handed to the JSON
 * formatter and the TensorBoard logger. Then `data` records/s through data_handle with the
 * TensorBoard sink against data_handle with no sink. Last, a real dynolog (--use_JSON and
 * --metric_log_dir) at a 1 s cadence against the same daemon at 3600 s (one cycle: the idle
 * baseline), CPU from /proc/<pid>/schedstat (ns). Figures only, no thresholds.
 * Usage: bench_kmon [cycles] [path/to/dynolog] (defaults: 2000, the one built here). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/collectors/kmon.h"
#include "daemon/collectors/kmon_proc.h"
#include "daemon/ipc/data_sink.h"
#include "daemon/sinks/json_logger.h"
#include "daemon/sinks/tb_logger.h"

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *const files[] = { "proc/uptime", "proc/stat", "proc/net/dev",
                                     "proc/meminfo", "proc/loadavg", "proc/diskstats" };

static int port_pick(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t l = sizeof(a);
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

static uint64_t schedstat_ns(pid_t pid)
{
    char path[64], buf[128];
    unsigned long long ns = 0;
    snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (fgets(buf, sizeof(buf), f))
        sscanf(buf, "%llu", &ns);
    fclose(f);
    return ns;
}

/* CPU ns a real dynolog used between 1 s and 1 + secs s after start (start-up excluded). */
static uint64_t daemon_cpu(const char *dynolog, int interval_s, int secs, const char *dir)
{
    char port[16], ival[16], tbdir[128];
    snprintf(port, sizeof(port), "%d", port_pick());
    snprintf(ival, sizeof(ival), "%d", interval_s);
    snprintf(tbdir, sizeof(tbdir), "%s/tb%d", dir, interval_s);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("MSMONITOR_SOCKET_DIR", dir, 1);
        setenv("HOME", dir, 1);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2);
        execl(dynolog, "dynolog", "--port", port, "--use_JSON", "--metric_log_dir", tbdir,
              "--kernel_monitor_reporting_interval_s", ival, (char *)NULL);
        _exit(127);
    }
    if (pid < 0)
        return 0;
    sleep(1);
    uint64_t a = schedstat_ns(pid);
    sleep((unsigned)secs);
    uint64_t b = schedstat_ns(pid);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return b > a ? b - a : 0;
}

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

    const char *dynolog = argc > 2 ? argv[2] : DYNOLOG_PATH;
    enum { SECS = 8 };
    uint64_t busy = daemon_cpu(dynolog, 1, SECS, dir), idle = daemon_cpu(dynolog, 3600, SECS, dir);
    printf("real dynolog, --use_JSON --metric_log_dir, %d s measured:\n", SECS);
    printf("  baseline: --kernel_monitor_reporting_interval_s 3600   %8.1f us CPU/s\n", idle / 1e3 / SECS);
    printf("  --kernel_monitor_reporting_interval_s 1                %8.1f us CPU/s\n", busy / 1e3 / SECS);
    printf("  per collection cycle (difference / %d cycles)          %8.1f us CPU  (%.3f %% of one core at 1 s)\n",
           SECS, busy > idle ? (busy - idle) / 1e3 / SECS : 0.0,
           busy > idle ? (double)(busy - idle) / SECS / 1e9 * 100.0 : 0.0);
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}
