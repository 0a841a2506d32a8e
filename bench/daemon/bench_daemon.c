/* bench_daemon: measures a live dynolog (started here in a private socket dir):
 * RPC getVersion round trip p50/p99 over loopback, `req` polls answered per second with
 * 1000 registered processes (4 client sockets, pipelined) and the daemon's CPU per poll, RSS,
 * the daemon's thread count and CPU used while idle. Usage: bench_daemon [path/to/dynolog] (default: the one built here). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "ipc/ipc_msg.h"

#define NPROCS 1000
#define NSOCK 4
#define WINDOW 32

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

static int rpc_once(int port, const char *body, char *out, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char buf[256];
    int32_t n = (int32_t)strlen(body);
    memcpy(buf, &n, 4);
    memcpy(buf + 4, body, (size_t)n);
    if (write(fd, buf, 4 + (size_t)n) < 0) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    ssize_t r;
    while (got < cap && (r = read(fd, out + got, cap - got)) > 0)
        got += (size_t)r;
    close(fd);
    return (int)got;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static long proc_field(pid_t pid, const char *key)
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

/* Entries of /proc/<pid>/task: the daemon's threads. */
static int thread_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    if (d)
        closedir(d);
    return d ? n : -1;
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
    /* fields after ')': state(3) ... utime(14) stime(15) */
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
        return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    return -1;
}

static long build_req(uint8_t *out, int32_t pid)
{
    int32_t pl[6] = { 3, 2, 0, 0, pid, 1 };   /* type 3, n 2, job 0 (8 bytes), pids {pid, 1} */
    return ipc_msg_build(out, IPC_MAX_DATAGRAM, "req", pl, sizeof(pl));
}

int main(int argc, char **argv)
{
    const char *dynolog = argc > 1 ? argv[1] : DYNOLOG_PATH;
    char dir[] = "/tmp/benchdXXXXXX", sock[160], portstr[16];
    if (!mkdtemp(dir))
        return 1;
    int port = port_pick();
    snprintf(portstr, sizeof(portstr), "%d", port);
    snprintf(sock, sizeof(sock), "%s/dynolog.sock", dir);
    pid_t pid = fork();
    if (pid == 0) {
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 2);
        execl(dynolog, "dynolog", "--port", portstr, "--enable_ipc_monitor", "--ipc_socket_dir", dir,
              (char *)NULL);
        _exit(127);
    }
    char out[65536];
    for (int i = 0; i < 500 && (access(sock, F_OK) != 0 || rpc_once(port, "{\"fn\":\"getVersion\"}", out, sizeof(out)) <= 0); i++)
        usleep(10000);

    /* clients: abstract names, pipelined polls */
    int fds[NSOCK];
    struct sockaddr_un dst;
    socklen_t dlen;
    ipc_addr_path(&dst, &dlen, sock);
    for (int s = 0; s < NSOCK; s++) {
        struct sockaddr_un me;
        socklen_t ml;
        char name[64];
        ipc_client_name(name, sizeof(name));
        ipc_addr_abstract(&me, &ml, name, false);
        fds[s] = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        int big = 1 << 20;
        setsockopt(fds[s], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
        bind(fds[s], (struct sockaddr *)&me, ml);
        connect(fds[s], (struct sockaddr *)&dst, dlen);
    }
    uint8_t dg[IPC_MAX_DATAGRAM];
    /* register 1000 processes */
    for (int i = 0; i < NPROCS; i++) {
        long n = build_req(dg, 100000 + i);
        send(fds[0], dg, (size_t)n, 0);
        struct pollfd p = { fds[0], POLLIN, 0 };
        poll(&p, 1, 1000);
        recv(fds[0], out, sizeof(out), 0);
    }
    /* throughput: each socket keeps WINDOW requests in flight for ~2 s */
    uint64_t replies = 0, sent = 0;
    int inflight[NSOCK] = { 0 };
    double cpu0 = cpu_secs(pid);
    uint64_t t0 = clock_mono_ns(), end = t0 + 2000000000ull;
    int next = 0;
    while (clock_mono_ns() < end) {
        for (int s = 0; s < NSOCK; s++) {
            while (inflight[s] < WINDOW) {
                long n = build_req(dg, 100000 + (next++ % NPROCS));
                if (send(fds[s], dg, (size_t)n, 0) < 0)
                    break;
                inflight[s]++;
                sent++;
            }
        }
        struct pollfd p[NSOCK];
        for (int s = 0; s < NSOCK; s++)
            p[s] = (struct pollfd){ fds[s], POLLIN, 0 };
        if (poll(p, NSOCK, 100) <= 0) {
            for (int s = 0; s < NSOCK; s++)
                inflight[s] = 0;   /* lost replies: refill the window */
            continue;
        }
        for (int s = 0; s < NSOCK; s++) {
            while (recv(fds[s], out, sizeof(out), 0) > 0) {
                replies++;
                if (inflight[s] > 0)
                    inflight[s]--;
            }
        }
    }
    double secs = (double)(clock_mono_ns() - t0) / 1e9;
    double cpu1 = cpu_secs(pid);
    printf("ipc_req_polls_per_s %.0f (registered %d, sockets %d, sent %llu, replies %llu)\n",
           (double)replies / secs, NPROCS, NSOCK, (unsigned long long)sent, (unsigned long long)replies);
    /* the daemon's own CPU per answered poll: less sensitive to a noisy machine than polls/s
     * (clock-tick resolution: 10 ms over the ~2 s window) */
    if (replies)
        printf("ipc_daemon_cpu_ns_per_poll %.0f\n", (cpu1 - cpu0) * 1e9 / (double)replies);

    /* RPC round trip */
    enum { N = 2000 };
    static uint64_t lat[N];
    for (int i = 0; i < N; i++) {
        uint64_t a = clock_mono_ns();
        rpc_once(port, "{\"fn\":\"getVersion\"}", out, sizeof(out));
        lat[i] = clock_mono_ns() - a;
    }
    qsort(lat, N, sizeof(lat[0]), cmp_u64);
    printf("rpc_getVersion_rtt_us p50 %.1f p99 %.1f\n", lat[N / 2] / 1e3, lat[N * 99 / 100] / 1e3);
    for (int i = 0; i < 200; i++) {
        uint64_t a = clock_mono_ns();
        rpc_once(port, "{\"fn\":\"getStatus\"}", out, sizeof(out));
        lat[i] = clock_mono_ns() - a;
    }
    qsort(lat, 200, sizeof(lat[0]), cmp_u64);
    printf("rpc_getStatus_1000procs_rtt_us p50 %.1f p99 %.1f\n", lat[100] / 1e3, lat[198] / 1e3);

    printf("rss_kib_with_%d_procs %ld\n", NPROCS, proc_field(pid, "VmRSS:"));
    printf("threads %d\n", thread_count(pid));
    double c0 = cpu_secs(pid);
    sleep(3);
    double c1 = cpu_secs(pid);
    printf("idle_cpu_seconds_over_3s %.3f\n", c1 - c0);

    kill(pid, SIGTERM);
    int status = 0;
    uint64_t k0 = clock_mono_ns();
    waitpid(pid, &status, 0);
    printf("shutdown_ms %.1f exit %d\n", (double)(clock_mono_ns() - k0) / 1e6,
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    for (int s = 0; s < NSOCK; s++)
        close(fds[s]);
    rmdir(dir);
    return 0;
}
