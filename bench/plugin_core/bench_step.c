/* bench_step: how long a training step waits when it applies an npu-monitor config, for each
 * state of the daemon's sockets, in one run. A step that finds a new config in the shared
 * segment calls msmon_enable_npu_monitor() (shm_mode.c sm_apply, the Python poller path the
 * same), so that call is the step's cost. Configs alternate start/stop (metric mode, Kernel)
 * on the real libmsmonitor.so over the simulator's libmspti.so, no records.
 *
 *   none     MSMONITOR_SOCKET_DIR names a directory that does not exist (no daemon set up)
 *   missing  the directory exists, dynolog.sock / dynolog_data.sock do not (daemon gone)
 *   stale    both socket files exist, nobody reads them (daemon killed -9): every send
 *            is refused and retried (control: 10 retries from 10 ms, ~10 s)
 *   up       an in-process receiver drains both sockets (a healthy daemon)
 *
 * Usage: bench_plugin_step [steps_per_phase] [max_seconds_per_phase]. Prints p50/p99/max. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "msmon/msmonitor.h"
#include "msmon/mspti.h"

static char base[] = "/tmp/bench_step.XXXXXX"; /* plugin log, stderr and the socket dir */
static char sockdir[64]; /* short: a socket path holds 108 bytes */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int apply(int start)
{
    const char *keys[] = { "NPU_MONITOR_START", "NPU_MONITOR_STOP", "REPORT_INTERVAL_S", "DURATION",
                           "MSPTI_ACTIVITY_KIND", "NPU_MONITOR_LOG_FILE", "NPU_MONITOR_EXPORT_TYPE" };
    const char *vals[] = { start ? "true" : "false", start ? "false" : "true", "1", "0", "Kernel", "", "DB" };
    return msmon_enable_npu_monitor(keys, vals, 7);
}

static void sock_path(const char *name, char *out, size_t cap)
{
    if (snprintf(out, cap, "%.63s/%.16s.sock", sockdir, name) >= (int)cap)
        exit(2);
}

/* Bind a datagram socket at <sockdir>/<name>.sock; returns the fd (caller closes). */
static int bind_sock(const char *name)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    sock_path(name, a.sun_path, sizeof(a.sun_path));
    unlink(a.sun_path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        perror("bench: bind");
        exit(1);
    }
    return fd;
}

/* ---- the "up" daemon: drains both sockets ---- */
static atomic_bool rx_stop;
static int rx_fds[2];

static void *rx_thread(void *arg)
{
    char buf[65536];
    (void)arg;
    while (!atomic_load(&rx_stop))
        for (int i = 0; i < 2; i++)
            while (recv(rx_fds[i], buf, sizeof(buf), MSG_DONTWAIT) > 0)
                ;
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void phase(const char *label, int steps, double max_s)
{
    uint64_t *lat = calloc((size_t)steps, sizeof(*lat));
    uint64_t t_end = now_ns() + (uint64_t)(max_s * 1e9);
    int n = 0;

    for (; n < steps && (n < 4 || now_ns() < t_end); n++) {
        uint64_t t0 = now_ns();
        (void)apply(n % 2 == 0);
        lat[n] = now_ns() - t0;
    }
    if (n % 2)
        (void)apply(0); /* leave the session stopped (not timed) */
    qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
    printf("  %-8s n=%4d  p50 %10.3f ms  p99 %10.3f ms  max %10.3f ms\n", label, n, lat[n / 2] / 1e6,
           lat[(size_t)((n - 1) * 0.99)] / 1e6, lat[n - 1] / 1e6);
    fflush(stdout);
    free(lat);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 200;
    double max_s = argc > 2 ? atof(argv[2]) : 30;
    char p[108];
    pthread_t rx;
    int fd;

    if (steps < 4)
        return 2;
    if (!getenv("BENCH_STEP_DIR")) {
        /* The plugin reads its environment once, at load: set it, then run again. */
        Dl_info info;
        if (!mkdtemp(base) || !dladdr((void *)msptiSubscribe, &info) || !info.dli_fname)
            return 1;
        snprintf(sockdir, sizeof(sockdir), "%s/sock", base);
        setenv("BENCH_STEP_DIR", base, 1);
        setenv("MSMONITOR_SOCKET_DIR", sockdir, 1);
        setenv("MSMONITOR_LOG_PATH", base, 1);
        setenv("MSMONITOR_MSPTI_LIB", info.dli_fname, 1); /* the simulator this binary links */
        execv("/proc/self/exe", argv);
        return 1;
    }
    snprintf(base, sizeof(base), "%s", getenv("BENCH_STEP_DIR"));
    snprintf(sockdir, sizeof(sockdir), "%s/sock", base);
    snprintf(p, sizeof(p), "%s/stderr", base);
    fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600); /* the plugin's ERROR lines (send failures) */
    if (fd >= 0) {
        fflush(stderr);
        dup2(fd, 2);
        close(fd);
    }
    printf("logs in %s\n", base);
    printf("step latency while applying npu-monitor configs (msmon_enable_npu_monitor), start/stop "
           "alternating, %d steps or %.0f s per phase\n", steps, max_s);

    phase("none", steps, max_s);

    mkdir(sockdir, 0700);
    phase("missing", steps, max_s);

    close(bind_sock("dynolog"));      /* the files stay, nobody reads: ECONNREFUSED */
    close(bind_sock("dynolog_data"));
    phase("stale", steps, max_s);

    rx_fds[0] = bind_sock("dynolog");
    rx_fds[1] = bind_sock("dynolog_data");
    pthread_create(&rx, NULL, rx_thread, NULL);
    phase("up", steps, max_s);
    atomic_store(&rx_stop, true);
    pthread_join(rx, NULL);

    for (int i = 0; i < 2; i++)
        close(rx_fds[i]);
    sock_path("dynolog", p, sizeof(p));
    unlink(p);
    sock_path("dynolog_data", p, sizeof(p));
    unlink(p);
    return 0;
}
