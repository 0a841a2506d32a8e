/* bench_loop: the config loop's cost (docs/benchmarks.md), each figure next to a baseline
 * measured in the same run:
 *   1. `dyno npu-monitor` process start to exit, waiting for every outcome, for 1 host and for
 *      H loopback hosts (127.0.0.2..) x P processes: p50/p99 vs the same with --no-wait;
 *   2. daemon CPU (schedstat) per acknowledged delivery vs per idle poll.
 * The processes are minimal clients speaking the real protocol (ctxt, status, PluginInfo with
 * acks, req polls every poll period, a ConfigAck for every config): the plugin's own work is
 * not what is measured, and 512 plugin processes would not fit a small machine.
 * Usage: bench_loop DYNOLOG DYNO [hosts=64] [procs=8] [reps=10] [poll_s=2] */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ipc/ipc_msg.h"
#include "msmon/ipc_wire.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int send_to(int fd, const char *dir, const char *name, const char *tag, const void *p, size_t n)
{
    uint8_t buf[IPC_MAX_DATAGRAM];
    struct sockaddr_un a;
    socklen_t alen;
    char path[256];
    long len = ipc_msg_build(buf, sizeof(buf), tag, p, n);
    if (len < 0 || ipc_socket_path(dir, name, path, sizeof(path)) != 0 || ipc_addr_path(&a, &alen, path) != 0)
        return -EINVAL;
    return sendto(fd, buf, (size_t)len, 0, (struct sockaddr *)&a, alen) < 0 ? -errno : 0;
}

/* One acknowledging process: registers, reports Idle, polls every poll_s (random phase). */
static void client_main(const char *dir, int npu, double poll_s)
{
    char name[64], msg[512];
    struct sockaddr_un a;
    socklen_t alen;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int32_t pid = getpid();
    struct timeval tv = { 1, 0 };

    if (fd < 0 || ipc_client_name(name, sizeof(name)) != 0 || ipc_addr_abstract(&a, &alen, name, false) != 0 ||
        bind(fd, (struct sockaddr *)&a, alen) != 0)
        _exit(1);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    struct ipc_ctxt c = { npu, pid, 0 };
    send_to(fd, dir, "dynolog", IPC_TYPE_CTXT, &c, sizeof(c));
    {
        uint8_t rep[IPC_MAX_DATAGRAM]; /* the ctxt reply: unread, it would shift every poll's reply */
        (void)recv(fd, rep, sizeof(rep), 0);
    }
    struct ipc_status st = { 0, -1, -1, -1, pid, 0, 0 };
    send_to(fd, dir, "dynolog", IPC_TYPE_TRACE_STATUS, &st, sizeof(st));
    send_to(fd, dir, "dynolog", IPC_TYPE_MONITOR_STATUS, &st, sizeof(st));
    int n = snprintf(msg, sizeof(msg), "{\"acks\":true,\"backend\":\"mspti\",\"deviceId\":-1,\"duration\":0,"
                     "\"kind\":\"PluginInfo\",\"library\":\"bench\",\"pid\":%d,\"timestamp\":1}", pid);
    srand((unsigned)pid);
    sleep_s(poll_s * (double)(rand() % 1000) / 1000.0);
    bool info = false;
    for (;;) {
        uint8_t req[sizeof(struct ipc_req) + 4];
        struct ipc_req *r = (struct ipc_req *)req;
        uint8_t rep[IPC_MAX_DATAGRAM];
        r->type = 3;
        r->n = 1;
        r->job_id = 0;
        memcpy(req + sizeof(*r), &pid, 4);
        send_to(fd, dir, "dynolog", IPC_TYPE_REQ, req, sizeof(req));
        if (!info && send_to(fd, dir, "dynolog_data", IPC_TYPE_DATA, msg, (size_t)n) == 0)
            info = true; /* after the first poll: the daemon knows the process by then */
        ssize_t got = recv(fd, rep, sizeof(rep) - 1, 0);
        if (got > IPC_HDR_SIZE) {
            rep[got] = '\0';
            const char *id = strstr((const char *)rep + IPC_HDR_SIZE, "REQUEST_TRACE_ID=");
            if (id) {
                char ack[512];
                int k = snprintf(ack, sizeof(ack), "{\"deviceId\":-1,\"duration\":0,\"id\":\"%llu\",\"kind\":"
                                 "\"ConfigAck\",\"outcome\":\"applied\",\"pid\":%d,\"rank\":%d,\"reason\":\"\","
                                 "\"state\":\"Idle\",\"timestamp\":1}",
                                 strtoull(id + 17, NULL, 10), pid, npu);
                send_to(fd, dir, "dynolog_data", IPC_TYPE_DATA, ack, (size_t)k);
            }
        }
        sleep_s(poll_s);
    }
}

static int last_rc; /* exit code of the last dyno */
static char out_path[64];

static double run_dyno(const char *dyno, const char *hosts, const char *port, bool wait, bool start)
{
    fflush(stdout); /* the child must not inherit (and print again) our buffered lines */
    double t0 = now_s();
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(out_path, "w", stdout) || !freopen("/dev/null", "w", stderr))
            _exit(126);
        execl(dyno, dyno, "--hostname", hosts, "--port", port, "--parallel", "64", "npu-monitor",
              start ? "--npu-monitor-start" : "--npu-monitor-stop", wait ? "--wait-s" : "--no-wait",
              wait ? "30" : NULL, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    last_rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    return last_rc == 0 ? now_s() - t0 : -1;
}

/* The first failed command's non-applied outcome lines, once: why it failed. */
static void show_failure(void)
{
    static bool shown;
    char line[1024];
    int n = 0;
    FILE *f;
    if (shown || !(f = fopen(out_path, "r")))
        return;
    shown = true;
    printf("  first failed command: exit %d\n", last_rc);
    while (fgets(line, sizeof(line), f) && n < 5)
        if (strstr(line, ": no answer") || strstr(line, "could not read") || strstr(line, "ERROR") || strstr(line, "Note: ")) {
            printf("  %s", line);
            n++;
        }
    fclose(f);
}

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof(*v), dcmp);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

/* CPU time of pid in seconds, from schedstat (ns resolution; /proc/<pid>/stat counts ticks). */
static double cpu_s(pid_t pid)
{
    char path[64];
    unsigned long long ns = 0;
    snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (fscanf(f, "%llu", &ns) != 1)
        ns = 0;
    fclose(f);
    return (double)ns / 1e9;
}

static double daemons_cpu(const pid_t *d, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += cpu_s(d[i]);
    return s;
}

/* p50/p99 over reps start/stop pairs of `hosts`, waiting and not; every command must exit 0. */
static void round_trip(const char *dyno, const char *hosts, const char *port, int reps, const char *what,
                       const pid_t *d, int nd, int acks_per_cmd)
{
    double *w = calloc((size_t)reps * 2, sizeof(double)), *nw = calloc((size_t)reps * 2, sizeof(double));
    double cpu_w = 0;
    int bad = 0;
    for (int i = 0; i < reps * 2; i++) {
        nw[i] = run_dyno(dyno, hosts, port, false, i % 2 == 0);
        sleep_s(0.1);
        double c0 = daemons_cpu(d, nd);
        w[i] = run_dyno(dyno, hosts, port, true, i % 2 == 0);
        cpu_w += daemons_cpu(d, nd) - c0;
        if (w[i] < 0)
            show_failure();
        bad += w[i] < 0 || nw[i] < 0;
    }
    printf("dyno npu-monitor, %s, waiting for every outcome: p50 %.0f ms, p99 %.0f ms "
           "(baseline --no-wait: p50 %.0f ms, p99 %.0f ms; %d commands failed)\n",
           what, pct(w, reps * 2, 0.5) * 1e3, pct(w, reps * 2, 0.99) * 1e3, pct(nw, reps * 2, 0.5) * 1e3,
           pct(nw, reps * 2, 0.99) * 1e3, bad);
    printf("daemon CPU per acknowledged delivery (%s, whole waiting command / its acks): %.1f us\n", what,
           cpu_w / (double)(reps * 2 * acks_per_cmd) * 1e6);
    free(w);
    free(nw);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_loop DYNOLOG DYNO [hosts=64] [procs=8] [reps=10] [poll_s=2]\n");
        return 2;
    }
    int H = argc > 3 ? atoi(argv[3]) : 64, P = argc > 4 ? atoi(argv[4]) : 8, reps = argc > 5 ? atoi(argv[5]) : 10;
    double poll_s = argc > 6 ? atof(argv[6]) : 2.0;
    if (H < 1 || H > 250 || P < 1 || P > 64 || reps < 1)
        return 2;
    pid_t *d = calloc((size_t)H, sizeof(pid_t)), *cl = calloc((size_t)(H * P), sizeof(pid_t));
    char (*dirs)[64] = calloc((size_t)H, 64), (*addr)[32] = calloc((size_t)H, 32);
    char port[16];
    snprintf(port, sizeof(port), "%d", 20000 + (int)(getpid() % 20000));
    snprintf(out_path, sizeof(out_path), "/tmp/bloop-dyno.%d.txt", (int)getpid());
    fflush(stdout);
    for (int i = 0; i < H; i++) {
        snprintf(addr[i], 32, "127.0.0.%d", i + 2);
        snprintf(dirs[i], 64, "/tmp/bloop.XXXXXX");
        if (!mkdtemp(dirs[i]))
            return 1;
        d[i] = fork();
        if (d[i] == 0) {
            setenv("HOME", dirs[i], 1);
            setenv("MSMONITOR_SOCKET_DIR", dirs[i], 1);
            if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
                _exit(126);
            execl(argv[1], argv[1], "--port", port, "--rpc_bind_address", addr[i], "--enable_ipc_monitor",
                  (char *)NULL);
            _exit(127);
        }
    }
    /* the daemons are up when their control socket exists */
    for (int i = 0; i < H; i++) {
        char path[128];
        snprintf(path, sizeof(path), "%s/dynolog.sock", dirs[i]);
        for (int t = 0; t < 400 && access(path, F_OK) != 0; t++)
            sleep_s(0.05);
    }
    sleep_s(0.5);
    for (int i = 0; i < H; i++)
        for (int k = 0; k < P; k++) {
            fflush(stdout);
            pid_t c = fork();
            if (c == 0)
                client_main(dirs[i], k, poll_s);
            cl[i * P + k] = c;
        }
    sleep_s(poll_s + 1.5); /* every client registered and polled once */
    double c0 = daemons_cpu(d, H);
    sleep_s(poll_s * 3);
    double idle = daemons_cpu(d, H) - c0;
    printf("daemon CPU per idle poll (baseline, %d hosts x %d processes polling every %.1f s): %.1f us\n", H, P,
           poll_s, idle / ((double)H * P * 3) * 1e6);
    char one[64];
    snprintf(one, sizeof(one), "1 host x %d processes", P);
    round_trip(argv[2], addr[0], port, reps, one, d, 1, P);
    char all[64];
    snprintf(all, sizeof(all), "127.0.0.[2-%d]", H + 1);
    char what[64];
    snprintf(what, sizeof(what), "%d hosts x %d processes", H, P);
    round_trip(argv[2], all, port, reps, what, d, H, H * P);
    printf("(poll period %.1f s: the wait adds at most one poll period plus the ack's way back)\n", poll_s);
    for (int i = 0; i < H * P; i++)
        kill(cl[i], SIGKILL);
    for (int i = 0; i < H * P; i++)
        waitpid(cl[i], NULL, 0);
    for (int i = 0; i < H; i++)
        kill(d[i], SIGTERM);
    for (int i = 0; i < H; i++) {
        waitpid(d[i], NULL, 0);
        char cmd[200];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dirs[i]);
        if (system(cmd) != 0)
            break;
    }
    unlink(out_path);
    free(d);
    free(cl);
    free(dirs);
    free(addr);
    return 0;
}
