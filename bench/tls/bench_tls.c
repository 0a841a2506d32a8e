/* bench_tls: what mutual TLS costs an RPC. Starts two dynologs on loopback (one plain, one
 * with --certs_dir; certificates made by make_certs.sh with the openssl CLI: RSA 3072,
 * SHA-256), then through dyno's own rpc_client (one connection per RPC, as dyno does):
 * getVersion round trip p50/p99 over plain TCP (the baseline, same run) and over TLS (full
 * handshake each time), and TLS handshakes per second with 1 and 4 client threads.
 * Usage: bench_tls [N] (RPCs per series, default 500). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/rpc_client.h"
#include "common/log.h"

#define BODY "{\"fn\":\"getVersion\"}"
#define THREADS 4

static int port_pick(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t l = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) != 0)
        exit(1);
    close(fd);
    return ntohs(a.sin_port);
}

static pid_t start_daemon(int port, const char *dir, const char *certs)
{
    char portstr[16];
    snprintf(portstr, sizeof(portstr), "%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 2);
        dup2(dn, 1);
        execl(DYNOLOG_PATH, "dynolog", "--port", portstr, "--ipc_socket_dir", dir,
              "--rpc_max_clients", "64", "--certs_dir", certs ? certs : "NO_CERTS", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int call(const struct rpc_tls *tls, int port, char *err, size_t cap)
{
    char *reply = NULL;
    size_t len = 0;
    enum rpc_fail fail;
    int r = rpc_call_tls(tls, "localhost", (uint16_t)port, NULL, 10, BODY, strlen(BODY), &reply,
                         &len, &fail, err, cap);
    free(reply);
    return r;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* n sequential RPCs; p50/p99 in microseconds into ret[0], ret[1]; total seconds in ret[2]. */
static int series(const struct rpc_tls *tls, int port, int n, double ret[3])
{
    uint64_t *t = calloc((size_t)n, sizeof(*t));
    char err[512];
    uint64_t t0 = clock_mono_ns();
    for (int i = 0; i < n; i++) {
        uint64_t s = clock_mono_ns();
        if (call(tls, port, err, sizeof(err)) != 0) {
            fprintf(stderr, "bench_tls: RPC failed: %s\n", err);
            free(t);
            return -1;
        }
        t[i] = clock_mono_ns() - s;
    }
    ret[2] = (double)(clock_mono_ns() - t0) / 1e9;
    qsort(t, (size_t)n, sizeof(*t), cmp_u64);
    ret[0] = (double)t[n / 2] / 1e3;
    ret[1] = (double)t[(size_t)n * 99 / 100] / 1e3;
    free(t);
    return 0;
}

struct worker {
    const struct rpc_tls *tls;
    int port, n, failed;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    char err[512];
    for (int i = 0; i < w->n; i++)
        w->failed += call(w->tls, w->port, err, sizeof(err)) != 0;
    return NULL;
}

/* THREADS clients, n RPCs each, at once: calls per second. */
static double parallel(const struct rpc_tls *tls, int port, int n)
{
    pthread_t tid[THREADS];
    struct worker w[THREADS];
    uint64_t t0 = clock_mono_ns();
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){ tls, port, n, 0 };
        pthread_create(&tid[i], NULL, work, &w[i]);
    }
    int failed = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(tid[i], NULL);
        failed += w[i].failed;
    }
    double s = (double)(clock_mono_ns() - t0) / 1e9;
    if (failed)
        fprintf(stderr, "bench_tls: %d parallel RPCs failed\n", failed);
    return (double)(THREADS * n - failed) / s;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 500;
    char dir[] = "/tmp/benchtlsXXXXXX", cmd[512], sdir[128], cdir[128], sock1[160], sock2[160];
    char err[1024];
    struct rpc_tls *tls = NULL;
    int rc = 1;
    if (n < 10 || !mkdtemp(dir))
        return 1;
    snprintf(cmd, sizeof(cmd), "%s %s", MAKE_CERTS, dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_tls: %s failed\n", cmd);
        return 1;
    }
    snprintf(sdir, sizeof(sdir), "%s/server", dir);
    snprintf(cdir, sizeof(cdir), "%s/client", dir);
    snprintf(sock1, sizeof(sock1), "%s/plain", dir);
    snprintf(sock2, sizeof(sock2), "%s/tls", dir);
    mkdir(sock1, 0700);
    mkdir(sock2, 0700);
    int pport = port_pick(), tport = port_pick();
    pid_t pp = start_daemon(pport, sock1, NULL), tp = start_daemon(tport, sock2, sdir);
    FILE *devnull = fopen("/dev/null", "w");
    if (rpc_tls_create(cdir, NULL, devnull, &tls, err, sizeof(err)) != 0) {
        fprintf(stderr, "bench_tls: %s\n", err);
        goto out;
    }
    for (int i = 0; i < 500 && (call(NULL, pport, err, sizeof(err)) != 0 ||
                                call(tls, tport, err, sizeof(err)) != 0); i++)
        usleep(10000);
    double plain[3], sec[3];
    if (series(NULL, pport, n, plain) != 0 || series(tls, tport, n, sec) != 0)
        goto out;
    double ppar = parallel(NULL, pport, n / 2), tpar = parallel(tls, tport, n / 2);
    printf("bench_tls: getVersion round trip, one connection per RPC (as dyno), %d RPCs each\n", n);
    printf("  plain TCP (baseline): p50 %8.1f us  p99 %8.1f us  %7.0f RPC/s sequential  %7.0f RPC/s with %d threads\n",
           plain[0], plain[1], n / plain[2], ppar, THREADS);
    printf("  mutual TLS          : p50 %8.1f us  p99 %8.1f us  %7.0f handshakes/s sequential  %7.0f handshakes/s with %d threads\n",
           sec[0], sec[1], n / sec[2], tpar, THREADS);
    printf("  TLS / plain p50: %.1fx (RSA 3072, %s)\n", sec[0] / plain[0], "TLS 1.3 as negotiated");
    rc = 0;
out:
    if (devnull)
        fclose(devnull);
    rpc_tls_destroy(tls);
    kill(pp, SIGTERM);
    kill(tp, SIGTERM);
    waitpid(pp, NULL, 0);
    waitpid(tp, NULL, 0);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    (void)!system(cmd);
    return rc;
}
