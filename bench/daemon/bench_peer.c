/* bench_peer: the daemon's cost per registration and per poll with the sender identity of
 * docs/deploy.md#identity (SCM_CREDENTIALS pid related to NSpid through the pidfd-pinned cache),
 * next to the same dispatch without it, in one run. The senders are real processes, in a pid
 * namespace of their own (a container, when this runs as root) and in ours; each `req` goes
 * through ipc_server_dispatch_cred exactly as the socket's event hands it over, with the kernel's
 * credentials for that process, and is answered through a real socket.
 *
 *   bench_peer [senders] [polls per sender]     (defaults 200 and 200)
 *
 * Prints ns per registration (first req: cache miss, /proc reads, registry insert) and per poll
 * (a registered process's req: one poll(2) on the cached pidfd), with and without the lookup. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/ipc/ipc_server.h"
#include "daemon/ipc/peer.h"
#include "daemon/ipc/registry.h"
#include "daemon/ipc/status.h"
#include "ipc/ipc_msg.h"

struct sender {
    int32_t node, inner;
};

/* n sleeping processes; in a new pid namespace when `container` (root only). Their pids as the
 * node and as themselves see them. Returns the count made, or -errno. */
static int spawn(struct sender *out, int n, bool container, pid_t *ret_holder)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        return -errno;
    pid_t holder = fork();
    if (holder < 0)
        return -errno;
    if (holder == 0) {
        close(pfd[0]);
        if (container && unshare(CLONE_NEWPID) != 0)
            _exit(2);
        for (int i = 0; i < n; i++) {
            int cp[2];
            if (pipe(cp) != 0)
                _exit(3);
            pid_t c = fork();
            if (c == 0) {
                int32_t me = (int32_t)getpid();
                close(cp[0]);
                (void)!write(cp[1], &me, sizeof(me));
                close(cp[1]);
                for (;;)
                    pause();
            }
            int32_t rec[2] = { (int32_t)c, 0 };
            close(cp[1]);
            if (read(cp[0], &rec[1], sizeof(rec[1])) != sizeof(rec[1]))
                _exit(4);
            close(cp[0]);
            (void)!write(pfd[1], rec, sizeof(rec));
        }
        close(pfd[1]);
        for (;;)
            pause();
    }
    close(pfd[1]);
    int got = 0;
    int32_t rec[2];
    while (got < n && read(pfd[0], rec, sizeof(rec)) == sizeof(rec)) {
        out[got].node = rec[0];
        out[got].inner = rec[1];
        got++;
    }
    close(pfd[0]);
    *ret_holder = holder;
    return got;
}

static void reap(pid_t holder, const struct sender *s, int n)
{
    for (int i = 0; i < n; i++)
        kill(s[i].node, SIGKILL);
    kill(holder, SIGKILL);
    while (waitpid(-1, NULL, WNOHANG) > 0 || (errno != ECHILD && waitpid(holder, NULL, 0) > 0))
        ;
}

static long build_req(uint8_t *out, int32_t pid)
{
    int32_t pl[5] = { 3, 1, 0, 0, pid }; /* type 3, n 1, job 0 (8 bytes), pids {pid} */
    return ipc_msg_build(out, IPC_MAX_DATAGRAM, "req", pl, sizeof(pl));
}

struct run {
    double reg_ns, poll_ns;
    struct peer_counters pc;
};

/* One measurement: a fresh server, registry and sender cache; every sender registers, then polls
 * `polls` times round-robin. The replies go to `rx`, drained as they come. */
static int measure(const char *dir, const struct sender *s, int n, int polls, bool lookup, int rx,
                   const struct sockaddr_un *rx_addr, socklen_t rx_len, struct run *ret)
{
    struct registry *reg = NULL;
    struct status_table *st = NULL;
    struct peer_cache *peers = NULL;
    struct ipc_server *srv = NULL;
    bool conflict;
    uint8_t dg[IPC_MAX_DATAGRAM], sink[256];
    int rc = -ENOMEM;

    if (registry_create("bench", &reg) || status_create(&st) || peer_cache_create("/proc", 0, &peers))
        goto out;
    struct ipc_server_cfg cfg = { dir, 0600, dir, reg, st, NULL, peers };
    if (ipc_server_create(&cfg, &conflict, &srv) != 0)
        goto out;
    ipc_server_set_peers(srv, NULL, 0, lookup);
    registry_set_policy(reg, 0, false);
    uint64_t t0 = clock_mono_ns();
    for (int i = 0; i < n; i++) {
        struct ucred cred = { .pid = s[i].node, .uid = 0, .gid = 0 };
        long len = build_req(dg, lookup ? s[i].inner : s[i].node);
        ipc_server_dispatch_cred(srv, rx, false, false, dg, (size_t)len, (size_t)len, rx_addr, rx_len, &cred);
        while (recv(rx, sink, sizeof(sink), MSG_DONTWAIT) > 0)
            ;
    }
    uint64_t t1 = clock_mono_ns();
    for (int k = 0; k < polls; k++) {
        for (int i = 0; i < n; i++) {
            struct ucred cred = { .pid = s[i].node, .uid = 0, .gid = 0 };
            long len = build_req(dg, lookup ? s[i].inner : s[i].node);
            ipc_server_dispatch_cred(srv, rx, false, false, dg, (size_t)len, (size_t)len, rx_addr, rx_len, &cred);
        }
        while (recv(rx, sink, sizeof(sink), MSG_DONTWAIT) > 0)
            ;
    }
    uint64_t t2 = clock_mono_ns();
    ret->reg_ns = (double)(t1 - t0) / n;
    ret->poll_ns = (double)(t2 - t1) / ((double)n * polls);
    peer_get_counters(peers, &ret->pc);
    rc = registry_count(reg) == (size_t)n ? 0 : -EPROTO;
out:
    ipc_server_destroy(srv);
    peer_cache_destroy(peers);
    status_destroy(st);
    registry_destroy(reg);
    return rc;
}

static int median_run(const char *dir, const struct sender *s, int n, int polls, bool lookup, int rx,
                      const struct sockaddr_un *a, socklen_t al, struct run *ret)
{
    enum { R = 5 };
    struct run r[R];
    for (int i = 0; i < R; i++)
        if (measure(dir, s, n, polls, lookup, rx, a, al, &r[i]) != 0)
            return -1;
    /* the median by registration cost, and the median poll cost separately */
    double reg[R], poll[R];
    for (int i = 0; i < R; i++) {
        reg[i] = r[i].reg_ns;
        poll[i] = r[i].poll_ns;
    }
    for (int i = 0; i < R; i++)
        for (int j = i + 1; j < R; j++) {
            if (reg[j] < reg[i]) {
                double t = reg[i];
                reg[i] = reg[j];
                reg[j] = t;
            }
            if (poll[j] < poll[i]) {
                double t = poll[i];
                poll[i] = poll[j];
                poll[j] = t;
            }
        }
    *ret = r[R - 1];
    ret->reg_ns = reg[R / 2];
    ret->poll_ns = poll[R / 2];
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200, polls = argc > 2 ? atoi(argv[2]) : 200;
    char dir[] = "/tmp/benchpXXXXXX";
    struct sender *s = calloc((size_t)(n > 0 ? n : 1), sizeof(*s));
    struct sockaddr_un a;
    socklen_t al;
    char name[64];

    if (n <= 0 || polls <= 0 || !s || !mkdtemp(dir))
        return 2;
    log_set_level(LOG_LVL_ERROR); /* one line per registration is the daemon's, not the figure's */
    int rx = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int big = 8 << 20;
    setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    ipc_client_name(name, sizeof(name));
    ipc_addr_abstract(&a, &al, name, false);
    if (bind(rx, (struct sockaddr *)&a, al) != 0)
        return 1;
    printf("bench_peer: %d senders, %d polls each, median of 5 runs\n", n, polls);
    for (int container = 1; container >= 0; container--) {
        pid_t holder = 0;
        int got = spawn(s, n, container, &holder);
        struct run with, without;
        if (got != n) {
            if (holder > 0)
                reap(holder, s, got > 0 ? got : 0);
            printf("%s: cannot make %d senders (%s)\n", container ? "container" : "same namespace", n,
                   container ? "a pid namespace needs root" : "fork failed");
            continue;
        }
        if (median_run(dir, s, n, polls, true, rx, &a, al, &with) != 0 ||
            median_run(dir, s, n, polls, false, rx, &a, al, &without) != 0) {
            printf("%s: a measurement failed (registry count)\n", container ? "container" : "same namespace");
            reap(holder, s, n);
            continue;
        }
        const char *what = container ? "senders in a pid namespace of their own" : "senders in the daemon's pid namespace";
        printf("%s (inner pids %d..%d, node pids %d..):\n", what, s[0].inner, s[n - 1].inner, s[0].node);
        printf("  registration_ns %.0f with the lookup, %.0f without (baseline) : +%.0f ns\n", with.reg_ns,
               without.reg_ns, with.reg_ns - without.reg_ns);
        printf("  poll_ns         %.0f with the lookup, %.0f without (baseline) : +%.0f ns\n", with.poll_ns,
               without.poll_ns, with.poll_ns - without.poll_ns);
        printf("  sender cache: %llu lookups, %llu hits, %llu misses (one per sender: the reads are not per datagram)\n",
               (unsigned long long)with.pc.lookups, (unsigned long long)with.pc.hits,
               (unsigned long long)with.pc.misses);
        reap(holder, s, n);
    }
    close(rx);
    rmdir(dir);
    free(s);
    return 0;
}
