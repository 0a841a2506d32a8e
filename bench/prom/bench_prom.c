/* bench_prom: measures a live dynolog (started here, private socket dir) fed 10,000 op series
 * over its data socket (2,000 ops x 5 npu_op_* families, as the plugin's OpStats send them):
 *  1. /metrics scrape latency p50/p99 — re-rendered after an update, and repeated (cached) —
 *     baseline: the same scrape with only the daemon's own series;
 *  2. remote write at a 1 s interval to a receiver in this process: samples/s accepted and the
 *     daemon's CPU (% of one core) — baseline: the same daemon with the series but no remote write;
 *  3. peak RSS (VmHWM) after a receiver outage of --outage-s (default 60) — baseline: VmHWM of the
 *     daemon without remote write.
 * Usage: bench_prom [--outage-s N] [--run-s N] [path/to/dynolog]. Figures only, no thresholds. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "ipc/ipc_msg.h"

#define NOPS 2000          /* x 5 families = 10,000 series */
/* all of them from this one process: above the default per-process bound (2,000 series) */
#define PER_PROCESS_FLAGS "--prometheus_max_series_per_process", "20000"
#define SCRAPES 40

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

static int tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* GET /metrics; returns the body size, or -1; the whole response goes to *buf (grown). */
static long http_get(int port, char **buf, size_t *cap)
{
    int fd = tcp_connect(port);
    const char *req = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    size_t got = 0;
    ssize_t r;
    if (fd < 0)
        return -1;
    if (write(fd, req, strlen(req)) < 0) {
        close(fd);
        return -1;
    }
    for (;;) {
        if (got + 65536 > *cap) {
            *cap = (*cap ? *cap * 2 : 1 << 20);
            *buf = realloc(*buf, *cap);
        }
        r = read(fd, *buf + got, *cap - got - 1);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    (*buf)[got] = '\0';
    char *body = strstr(*buf, "\r\n\r\n");
    return body ? (long)(got - (size_t)(body + 4 - *buf)) : -1;
}

static double metric(int port, const char *line_prefix)
{
    static char *buf;
    static size_t cap;
    if (http_get(port, &buf, &cap) < 0)
        return -1;
    char *p = strstr(buf, line_prefix);
    return p ? strtod(p + strlen(line_prefix), NULL) : -1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static long proc_kb(pid_t pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *fp = fopen(path, "r");
    long v = -1;
    while (fp && fgets(line, sizeof(line), fp))
        if (strncmp(line, key, strlen(key)) == 0)
            v = strtol(line + strlen(key), NULL, 10);
    if (fp)
        fclose(fp);
    return v;
}

static double cpu_secs(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
        return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    return -1;
}

struct daemon {
    pid_t pid;
    int port, prom_port;
    char dir[64];
};

static int daemon_start(struct daemon *d, const char *dynolog, const char *rw_url)
{
    char portstr[16], promstr[16];
    snprintf(d->dir, sizeof(d->dir), "/tmp/benchpXXXXXX");
    if (!mkdtemp(d->dir))
        return -1;
    d->port = port_pick();
    d->prom_port = port_pick();
    snprintf(portstr, sizeof(portstr), "%d", d->port);
    snprintf(promstr, sizeof(promstr), "%d", d->prom_port);
    d->pid = fork();
    if (d->pid == 0) {
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 2);
        if (rw_url)
            execl(dynolog, "dynolog", "--port", portstr, "--enable_ipc_monitor", "--ipc_socket_dir", d->dir,
                  "--use_prometheus", "--prometheus_port", promstr, "--remote_write_url", rw_url,
                  "--remote_write_interval_s", "1", PER_PROCESS_FLAGS, (char *)NULL);
        else
            execl(dynolog, "dynolog", "--port", portstr, "--enable_ipc_monitor", "--ipc_socket_dir", d->dir,
                  "--use_prometheus", "--prometheus_port", promstr, PER_PROCESS_FLAGS, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500; i++) {
        if (metric(d->prom_port, "msmonitor_prometheus_series{") >= 0)
            return 0;
        usleep(10000);
    }
    return -1;
}

static void daemon_stop(struct daemon *d)
{
    kill(d->pid, SIGTERM);
    waitpid(d->pid, NULL, 0);
}

/* One OpStats report of NOPS ops (datagrams <= 4096 bytes of JSON), timestamp ts. */
static void feed(const struct daemon *d, uint64_t ts, uint64_t salt)
{
    char path[128], json[4096];
    uint8_t dg[IPC_MAX_DATAGRAM];
    struct sockaddr_un dst;
    socklen_t dl;
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    snprintf(path, sizeof(path), "%s/dynolog_data.sock", d->dir);
    ipc_addr_path(&dst, &dl, path);
    int op = 0;
    while (op < NOPS) {
        int n = snprintf(json, sizeof(json), "{\"activity\":\"Kernel\",\"deviceId\":0,\"duration\":1,"
                                             "\"interval_ns\":1000000000,\"kind\":\"OpStats\",\"ops\":[");
        bool first = true;
        while (op < NOPS && n < 3900) {
            n += snprintf(json + n, sizeof(json) - (size_t)n,
                          "%s{\"avg\":%d,\"count\":%d,\"max\":%d,\"min\":%d,\"name\":\"aclnnKernel_%05d\",\"total\":%llu}",
                          first ? "" : ",", op + 1, 3, op + 2, op, op, (unsigned long long)(op * 3 + salt));
            first = false;
            op++;
        }
        n += snprintf(json + n, sizeof(json) - (size_t)n, "],\"timestamp\":%llu}", (unsigned long long)ts);
        long len = ipc_msg_build(dg, sizeof(dg), "data", json, (size_t)n);
        for (int tries = 0; tries < 100 && sendto(fd, dg, (size_t)len, 0, (struct sockaddr *)&dst, dl) < 0; tries++)
            usleep(1000);
    }
    close(fd);
}

/* ---- a remote-write receiver: answers 200 to every POST (keep-alive) */
struct recv_srv {
    int lfd, port;
    atomic_bool stop;
    atomic_ulong requests, bytes;
    pthread_t th;
};

static void *recv_conn(void *arg)
{
    struct recv_srv *s = ((void **)arg)[0];
    int fd = (int)(intptr_t)((void **)arg)[1];
    free(arg);
    char *buf = malloc(1 << 22);
    size_t got = 0;
    while (!atomic_load(&s->stop)) {
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll(&p, 1, 200) <= 0)
            continue;
        ssize_t r = read(fd, buf + got, (1 << 22) - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        for (;;) {
            buf[got < (1 << 22) ? got : (1 << 22) - 1] = '\0';
            char *he = memmem(buf, got, "\r\n\r\n", 4);
            if (!he)
                break;
            char *cl = strcasestr(buf, "Content-Length:");
            size_t n = cl && cl < he ? strtoul(cl + 15, NULL, 10) : 0;
            size_t total = (size_t)(he + 4 - buf) + n;
            if (got < total)
                break;
            atomic_fetch_add(&s->requests, 1);
            atomic_fetch_add(&s->bytes, n);
            const char *ok = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
            if (write(fd, ok, strlen(ok)) < 0)
                break;
            memmove(buf, buf + total, got - total);
            got -= total;
        }
    }
    free(buf);
    close(fd);
    return NULL;
}

static void *recv_main(void *arg)
{
    struct recv_srv *s = arg;
    while (!atomic_load(&s->stop)) {
        struct pollfd p = { s->lfd, POLLIN, 0 };
        if (poll(&p, 1, 200) <= 0)
            continue;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        void **a = malloc(2 * sizeof(void *));
        a[0] = s;
        a[1] = (void *)(intptr_t)fd;
        pthread_t t;
        pthread_create(&t, NULL, recv_conn, a);
        pthread_detach(t);
    }
    return NULL;
}

static int recv_start(struct recv_srv *s)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t l = sizeof(a);
    int one = 1;
    memset(s, 0, sizeof(*s));
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(s->lfd, 16) != 0)
        return -1;
    getsockname(s->lfd, (struct sockaddr *)&a, &l);
    s->port = ntohs(a.sin_port);
    return pthread_create(&s->th, NULL, recv_main, s);
}

static void recv_stop(struct recv_srv *s)
{
    atomic_store(&s->stop, true);
    pthread_join(s->th, NULL);
    close(s->lfd);
    usleep(300000); /* connection threads see the flag */
}

static void scrape_stats(int port, const struct daemon *d, bool update, double *p50, double *p99, long *size)
{
    uint64_t lat[SCRAPES];
    char *buf = NULL;
    size_t cap = 0;
    for (int i = 0; i < SCRAPES; i++) {
        if (update && d)
            feed(d, 1000 + (uint64_t)i, (uint64_t)i + 1);   /* a new report: every op changes */
        if (update && d)
            usleep(20000);   /* let the daemon take the datagrams in before the clock starts */
        uint64_t t0 = clock_mono_ns();
        *size = http_get(port, &buf, &cap);
        lat[i] = clock_mono_ns() - t0;
    }
    free(buf);
    qsort(lat, SCRAPES, sizeof(lat[0]), cmp_u64);
    *p50 = (double)lat[SCRAPES / 2] / 1e6;
    *p99 = (double)lat[SCRAPES * 99 / 100] / 1e6;
}

int main(int argc, char **argv)
{
    const char *dynolog = DYNOLOG_PATH;
    int outage_s = 60, run_s = 20;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--outage-s") == 0 && i + 1 < argc)
            outage_s = atoi(argv[++i]);
        else if (strcmp(argv[i], "--run-s") == 0 && i + 1 < argc)
            run_s = atoi(argv[++i]);
        else
            dynolog = argv[i];
    }
    signal(SIGPIPE, SIG_IGN);

    /* 1. scrape latency, baseline daemon (no remote write) */
    struct daemon a;
    if (daemon_start(&a, dynolog, NULL) != 0) {
        fprintf(stderr, "cannot start %s\n", dynolog);
        return 1;
    }
    double b50, b99, c50, c99, w50, w99;
    long bsz, csz, wsz;
    scrape_stats(a.prom_port, NULL, false, &b50, &b99, &bsz);
    feed(&a, 999, 0);
    usleep(200000);
    scrape_stats(a.prom_port, &a, true, &c50, &c99, &csz);
    scrape_stats(a.prom_port, NULL, false, &w50, &w99, &wsz);
    double series = metric(a.prom_port, "msmonitor_prometheus_series{host_name=");
    if (series < 0)
        series = 0;
    {
        /* metric() read "...{host_name=\"h\"} N": parse past the closing brace */
        char *buf = NULL;
        size_t cap = 0;
        http_get(a.prom_port, &buf, &cap);
        char *p = strstr(buf, "msmonitor_prometheus_series{");
        p = p ? strstr(p, "} ") : NULL;
        series = p ? strtod(p + 2, NULL) : -1;
        free(buf);
    }
    printf("bench_prom: %.0f series in the daemon's store (%d ops x 5 npu_op_* families + its own)\n", series, NOPS);
    printf("/metrics scrape, re-rendered after each report: p50 %.2f ms  p99 %.2f ms  (%ld bytes)\n", c50, c99, csz);
    printf("/metrics scrape, repeated (render cache):       p50 %.2f ms  p99 %.2f ms\n", w50, w99);
    printf("  baseline, only the daemon's own series:       p50 %.2f ms  p99 %.2f ms  (%ld bytes)\n", b50, b99, bsz);

    /* baseline CPU: the series held, no remote write, over run_s */
    double cpu0 = cpu_secs(a.pid);
    uint64_t t0 = clock_mono_ns();
    sleep((unsigned)run_s);
    double base_cpu = 100.0 * (cpu_secs(a.pid) - cpu0) / ((double)(clock_mono_ns() - t0) / 1e9);
    long base_hwm = proc_kb(a.pid, "VmHWM:");
    daemon_stop(&a);

    /* 2. remote write sustained at 1 s */
    struct recv_srv rs;
    char url[96];
    if (recv_start(&rs) != 0)
        return 1;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/api/v1/write", rs.port);
    struct daemon b;
    if (daemon_start(&b, dynolog, url) != 0)
        return 1;
    feed(&b, 999, 0);
    sleep(3); /* a few snapshots before measuring */
    double sent0 = -1, sent1 = -1;
    {
        char *buf = NULL;
        size_t cap = 0;
        http_get(b.prom_port, &buf, &cap);
        char *p = strstr(buf, "msmonitor_remote_write_sent_samples{");
        p = p ? strstr(p, "} ") : NULL;
        sent0 = p ? strtod(p + 2, NULL) : -1;
        cpu0 = cpu_secs(b.pid);
        t0 = clock_mono_ns();
        unsigned long req0 = atomic_load(&rs.requests), by0 = atomic_load(&rs.bytes);
        sleep((unsigned)run_s);
        double secs = (double)(clock_mono_ns() - t0) / 1e9;
        double cpu = 100.0 * (cpu_secs(b.pid) - cpu0) / secs;
        http_get(b.prom_port, &buf, &cap);
        p = strstr(buf, "msmonitor_remote_write_sent_samples{");
        p = p ? strstr(p, "} ") : NULL;
        sent1 = p ? strtod(p + 2, NULL) : -1;
        unsigned long req1 = atomic_load(&rs.requests), by1 = atomic_load(&rs.bytes);
        printf("remote write at 1 s: %.0f samples/s accepted, %.1f requests/s, %.0f compressed bytes/s\n",
               (sent1 - sent0) / secs, (double)(req1 - req0) / secs, (double)(by1 - by0) / secs);
        printf("  daemon CPU with remote write: %.2f %% of one core   baseline (series held, no remote write): %.2f %%\n",
               cpu, base_cpu);
        free(buf);
    }
    daemon_stop(&b);
    recv_stop(&rs);

    /* 3. receiver outage: a URL that refuses, outage_s seconds of 1 s snapshots */
    char dead[96];
    snprintf(dead, sizeof(dead), "http://127.0.0.1:%d/api/v1/write", port_pick());
    struct daemon c;
    if (daemon_start(&c, dynolog, dead) != 0)
        return 1;
    feed(&c, 999, 0);
    sleep((unsigned)outage_s);
    long hwm = proc_kb(c.pid, "VmHWM:");
    {
        char *buf = NULL;
        size_t cap = 0;
        http_get(c.prom_port, &buf, &cap);
        char *q = strstr(buf, "msmonitor_remote_write_queue_samples{");
        q = q ? strstr(q, "} ") : NULL;
        char *dr = strstr(buf, "msmonitor_remote_write_dropped_samples{host_name=");
        dr = dr ? strstr(dr, "reason=\"queue_full\"} ") : NULL;
        printf("peak RSS after a %d s receiver outage: %ld kB (queue %.0f samples, %.0f dropped; bound 200000 samples / 64 MiB)\n",
               outage_s, hwm, q ? strtod(q + 2, NULL) : -1, dr ? strtod(dr + 21, NULL) : -1);
        printf("  baseline, same series without remote write: %ld kB\n", base_hwm);
        free(buf);
    }
    daemon_stop(&c);
    return 0;
}
