/* rpc_server: RPC connections served on the daemon loop without blocking: each connection
 * reads a 4-byte native length then the body under one deadline armed at accept (and a
 * shorter one for the first byte), runs the handler, writes the framed reply under a 3 s send
 * deadline, closes. All I/O goes through struct conn (conn.h); the listeners only accept(2)
 * and hand the socket to a conn factory. Caps that hold under attack without locking out the
 * clients they protect (docs/security.md, "Remote and local resource limits"): each listener
 * has its own client budget (a saturated TCP port never starves dyno.sock); at that budget, or
 * at one address's max_per_peer, the newcomer is served and the OLDEST INCOMPLETE connection
 * (of the listener, or of that address; one that has sent nothing at all first) is evicted,
 * so dribbling and idle connections only ever push each other out; a TLS handshake is charged
 * to its source's budget when its crypto starts (a whole ClientHello), never at accept, and
 * paced in total; accept pauses instead of spinning at EMFILE. */
#include "daemon/rpc/rpc_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/strutil.h"
#include "daemon/rpc/conn.h"

#define BACKLOG 128
#define ACCEPT_PAUSE_MS 100      /* out of fds: retry accept(2) this much later, not at once */
#define SRC_SLOTS 256            /* per-source handshake buckets (direct-mapped by address) */

enum rpc_phase { PHASE_SETUP, PHASE_LEN, PHASE_BODY, PHASE_WRITE };

struct rpc_listener;

struct rpc_conn {
    struct rpc_server *srv;
    struct rpc_listener *ls;
    struct conn *conn;
    struct loop_event *timer;    /* the one deadline: set-up + length + body, then the send */
    enum rpc_phase phase;
    uint64_t t_accept_ms;        /* the whole-request deadline counts from here */
    bool started;                /* its set-up's costly part began (TLS: ClientHello charged) */
    uint64_t t_ready_ms;         /* set-up done: the first-byte deadline counts from here */
    struct in6_addr peer;        /* TCP peer (IPv4 as ::ffff:a.b.c.d), for the per-peer cap */
    uint8_t lenbuf[4];
    size_t got;
    int32_t expected;
    char body[RPC_MAX_MSG];
    char *out;                   /* framed reply */
    size_t out_len, out_off;
    struct rpc_conn *prev, *next;
};

struct rpc_listener {
    struct rpc_server *srv;
    int fd;
    bool local;                  /* dyno.sock: peer-credential check, peer name "local" */
    struct loop_event *ev;
    struct loop_event *resume;   /* re-enables accept after an EMFILE pause */
    bool paused;
    int active;                  /* connections of this listener in flight */
    const struct conn_factory *wrap;   /* plain sockets, or TLS on the TCP listener */
};

/* GCRA state of one handshake budget: tat = when the bucket is full again */
struct src_bucket {
    struct in6_addr addr;
    uint64_t tat_ns;
};

struct rpc_server {
    struct loop *loop;
    struct rpc_listener tcp, local;
    int max_clients;             /* per listener */
    int max_per_peer;            /* TCP connections from one address */
    struct rpc_server_stats stats;
    struct src_bucket hs_src[SRC_SLOTS];
    int active;
    bool stopping;
    void (*drained)(void *arg);  /* rpc_server_shutdown's callback, run once */
    void *drained_arg;
    struct rpc_conn *conns;      /* in-flight connections */
    const struct rpc_ctx *ctx;
};

static int set_v6only(int fd, int on)
{
    return setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
}

static int bind_listen(int fd, const struct sockaddr *sa, socklen_t len)
{
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
        return -errno;
    if (bind(fd, sa, len) != 0)
        return -errno;
    if (listen(fd, BACKLOG) != 0)
        return -errno;
    return 0;
}

int rpc_listen_tcp(int port, const char *bind_address, int *ret_fd, char *err, size_t errcap)
{
    int fd = -1, rc;
    *ret_fd = -1;
    if (port == 0) {
        snprintf(err, errcap, "RPC listening port is set to 0. Please specify a valid port number!");
        return -EINVAL;
    }
    if (port < 0 || port > 65535) {
        snprintf(err, errcap, "RPC listening port %d is out of range 1-65535", port);
        return -EINVAL;
    }
    if (!bind_address || !*bind_address || strcmp(bind_address, "::") == 0 ||
        strcmp(bind_address, "[::]") == 0) {
        struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
                                   .sin6_addr = in6addr_any };
        fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        rc = fd < 0 ? -errno : 0;
        if (rc == 0 && set_v6only(fd, 0) != 0)
            rc = -errno;
        if (rc == 0)
            rc = bind_listen(fd, (struct sockaddr *)&a6, sizeof(a6));
        if (rc == 0)
            goto out_ok;
        if (fd >= 0)
            close(fd);
        fd = -1;
        if (rc != -EAFNOSUPPORT && rc != -EADDRNOTAVAIL && rc != -EPROTONOSUPPORT) {
            snprintf(err, errcap, "cannot listen on [::]:%d: %s (%s)", port, errno_name(-rc), strerror(-rc));
            return rc;
        }
        LOG_WARN("IPv6 unavailable (%s), falling back to IPv4", errno_name(-rc));
        struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_ANY) };
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        rc = fd < 0 ? -errno : bind_listen(fd, (struct sockaddr *)&a4, sizeof(a4));
        if (rc == 0)
            goto out_ok;
        snprintf(err, errcap, "cannot listen on 0.0.0.0:%d: %s (%s)", port, errno_name(-rc), strerror(-rc));
        goto fail;
    }
    /* literal (IPv6 brackets optional) or host name */
    char host[256];
    size_t hl = strlen(bind_address);
    if (hl >= 2 && bind_address[0] == '[' && bind_address[hl - 1] == ']')
        rc = str_copy(host, sizeof(host), bind_address + 1, hl - 2);
    else
        rc = str_copy(host, sizeof(host), bind_address, hl);
    if (rc) {
        snprintf(err, errcap, "invalid --rpc_bind_address '%s'", bind_address);
        return -EINVAL;
    }
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *res = NULL;
    char portstr[8];
    snprintf(portstr, sizeof(portstr), "%d", port);
    int gai = getaddrinfo(host, portstr, &hints, &res);
    if (gai != 0 || !res) {
        snprintf(err, errcap, "cannot resolve --rpc_bind_address '%s': %s", bind_address, gai_strerror(gai));
        return -EINVAL;
    }
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    rc = fd < 0 ? -errno : 0;
    if (rc == 0 && res->ai_family == AF_INET6 && set_v6only(fd, 1) != 0)
        rc = -errno;
    if (rc == 0)
        rc = bind_listen(fd, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    if (rc) {
        snprintf(err, errcap, "cannot listen on %s port %d: %s (%s)", bind_address, port, errno_name(-rc), strerror(-rc));
        goto fail;
    }
out_ok:
    LOG_INFO("Listening to connections on port %d", port);
    *ret_fd = fd;
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    return rc;
}

bool rpc_listen_is_loopback(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (fd < 0)
        return true;    /* no TCP listener: nothing reachable from the network */
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return false;
    if (ss.ss_family == AF_INET)
        return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss.ss_family == AF_INET6) {
        const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

static void maybe_finish(struct rpc_server *s)
{
    if (s->stopping && s->active == 0 && s->drained) {
        void (*fn)(void *) = s->drained;
        s->drained = NULL;
        fn(s->drained_arg);
    }
}

static uint64_t now_ms(void)
{
    return clock_mono_ns() / 1000000u;
}

static void rpc_conn_free(struct rpc_conn *c)
{
    struct rpc_server *s = c->srv;
    c->ls->active--;
    loop_event_free(c->timer);
    conn_close(c->conn);          /* deferred by the conn when we are inside its handler */
    free(c->out);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    free(c);
    s->active--;
    maybe_finish(s);
}

/* Outsiders trigger every one of these, so each kind is logged at most once a second. */
static struct log_ratelimit rl_timeout, rl_partial, rl_write, rl_size, rl_cap, rl_peer, rl_setup,
    rl_evict, rl_hs;
/* ... and "Received connection" also comes from every legitimate client: a burst, then a rate */
static struct log_burst lb_conn;

static void on_timeout(struct loop_event *ev, void *arg)
{
    struct rpc_conn *c = arg;
    (void)ev;
    uint64_t now = now_ms();
    /* the timer first fires at the first-byte deadline; a client that has sent something by
     * then keeps the rest of the whole-request deadline */
    bool started = (c->phase == PHASE_LEN && c->got > 0) || c->phase == PHASE_BODY;
    if (started && now < c->t_accept_ms + RPC_DEADLINE_MS) {
        loop_timer_arm(c->timer, c->t_accept_ms + RPC_DEADLINE_MS - now);
        return;
    }
    if (c->phase == PHASE_SETUP || c->phase == PHASE_LEN)
        LOG_RL(&rl_timeout, 1000, LOG_LVL_ERROR, "Timeout! Message received size is %zu", c->got);
    else if (c->phase == PHASE_BODY)
        LOG_RL(&rl_partial, 1000, LOG_LVL_ERROR, "Received partial message, expected size %d found : %zu",
               c->expected, c->got);
    else
        LOG_RL(&rl_write, 1000, LOG_LVL_ERROR, "Unable to write full response");
    rpc_conn_free(c);
}

/* Returns true when the connection is done (freed). */
static bool try_write(struct rpc_conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = conn_write(c->conn, c->out + c->out_off, c->out_len - c->out_off);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n == -EAGAIN)
            return false;
        LOG_RL(&rl_write, 1000, LOG_LVL_ERROR, "Unable to write full response");
        rpc_conn_free(c);
        return true;
    }
    rpc_conn_free(c);
    return true;
}

static void on_writable(struct conn *conn, void *arg)
{
    (void)conn;
    try_write(arg);
}

static void handle_request(struct rpc_conn *c)
{
    char *reply = NULL;
    size_t rlen = 0;
    int rc = rpc_handle(c->srv->ctx, c->body, (size_t)c->expected, &reply, &rlen);
    if (rc || !reply) {
        free(reply);
        rpc_conn_free(c);
        return;
    }
    c->out = malloc(rlen + 4);
    if (!c->out) {
        free(reply);
        rpc_conn_free(c);
        return;
    }
    int32_t len = (int32_t)rlen;
    memcpy(c->out, &len, 4);
    memcpy(c->out + 4, reply, rlen);
    free(reply);
    c->out_len = rlen + 4;
    c->phase = PHASE_WRITE;
    conn_set_read_handler(c->conn, NULL, NULL);
    loop_timer_disarm(c->timer);
    if (try_write(c))
        return;
    if (conn_set_write_handler(c->conn, on_writable, c) != 0) {
        LOG_ERROR("Unable to write full response");
        rpc_conn_free(c);
        return;
    }
    loop_timer_arm(c->timer, RPC_DEADLINE_MS);   /* 3 s send timeout */
}

static void on_readable(struct conn *conn, void *arg)
{
    struct rpc_conn *c = arg;
    for (;;) {
        uint8_t *dst;
        size_t want;
        if (c->phase == PHASE_LEN) {
            dst = c->lenbuf + c->got;
            want = 4 - c->got;
        } else {
            dst = (uint8_t *)c->body + c->got;
            want = (size_t)c->expected - c->got;
        }
        ssize_t n = conn_read(conn, dst, want);
        if (n == -EAGAIN)
            return;
        if (n <= 0) {
            if (c->phase == PHASE_LEN)
                LOG_RL(&rl_size, 1000, LOG_LVL_ERROR, "Invalid message size = %zu", c->got);
            else
                LOG_RL(&rl_partial, 1000, LOG_LVL_ERROR,
                       "Received partial message, expected size %d found : %zu", c->expected, c->got);
            rpc_conn_free(c);
            return;
        }
        c->got += (size_t)n;
        if (c->phase == PHASE_LEN && c->got == 4) {
            memcpy(&c->expected, c->lenbuf, 4);
            if (c->expected <= 0 || c->expected >= RPC_MAX_MSG) {
                LOG_RL(&rl_size, 1000, LOG_LVL_ERROR, "Invalid message size = %d", c->expected);
                rpc_conn_free(c);
                return;
            }
            c->phase = PHASE_BODY;
            c->got = 0;
        } else if (c->phase == PHASE_BODY && c->got == (size_t)c->expected) {
            handle_request(c);
            return;
        }
    }
}

/* The connection is set up (at once for plain sockets, after the handshake for TLS). */
static void on_ready(struct conn *conn, void *arg)
{
    struct rpc_conn *c = arg;
    if (conn->state != CONN_STATE_CONNECTED) {
        /* TLS has already said why in its own line (peer and OpenSSL reason) */
        if (strcmp(conn->ops->name, "tls") != 0)
            LOG_RL(&rl_setup, 1000, LOG_LVL_ERROR, "RPC connection set-up failed: %s",
                   errno_name(conn->last_errno));
        rpc_conn_free(c);
        return;
    }
    c->phase = PHASE_LEN;
    /* first byte within RPC_FIRST_BYTE_MS of set-up, never past the whole deadline */
    c->t_ready_ms = now_ms();
    uint64_t end = c->t_accept_ms + RPC_DEADLINE_MS;
    uint64_t first = c->t_ready_ms + RPC_FIRST_BYTE_MS;
    uint64_t at = first < end ? first : end;
    loop_timer_arm(c->timer, at > c->t_ready_ms ? at - c->t_ready_ms : 1);
    if (conn_set_read_handler(conn, on_readable, c) != 0)
        rpc_conn_free(c);
}

static void peer_name(const struct sockaddr_storage *ss, char *out, size_t cap)
{
    if (ss->ss_family == AF_UNIX) {
        snprintf(out, cap, "local");
        return;
    }
    if (getnameinfo((const struct sockaddr *)ss, sizeof(*ss), out, (socklen_t)cap, NULL, 0,
                    NI_NUMERICHOST) != 0)
        snprintf(out, cap, "(unknown)");
}

static bool hs_gate(struct conn *conn, void *arg);

/* Starts serving an accepted socket; takes ownership of fd. */
static void serve(struct rpc_listener *ls, int fd, const struct in6_addr *peer)
{
    struct rpc_server *s = ls->srv;
    struct conn *conn = NULL;
    struct rpc_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        return;
    }
    if (ls->wrap->create(s->loop, fd, ls->wrap->arg, &conn) != 0)   /* closes fd on failure */
        goto out_free;
    if (loop_timer_add(s->loop, RPC_DEADLINE_MS, false, on_timeout, c, &c->timer) != 0)
        goto out_conn;
    c->srv = s;
    c->ls = ls;
    c->conn = conn;
    c->phase = PHASE_SETUP;
    c->t_accept_ms = now_ms();
    if (peer)
        c->peer = *peer;
    ls->active++;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->active++;
    if (ls->wrap->costly_setup && !ls->local)
        conn_set_gate(conn, hs_gate, c);
    /* one deadline from accept covers set-up + length + body; on_ready may already free c */
    if (conn_accept(conn, on_ready, c) != 0)
        rpc_conn_free(c);
    return;
out_conn:
    conn_close(conn);
out_free:
    free(c);
}

/* The peer address as IPv6 (IPv4 mapped), the key of the per-peer cap. */
static void peer_key(const struct sockaddr_storage *ss, struct in6_addr *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (ss->ss_family == AF_INET6) {
        *ret = ((const struct sockaddr_in6 *)ss)->sin6_addr;
    } else if (ss->ss_family == AF_INET) {
        ret->s6_addr[10] = ret->s6_addr[11] = 0xff;
        memcpy(&ret->s6_addr[12], &((const struct sockaddr_in *)ss)->sin_addr, 4);
    }
}

static int peer_count(const struct rpc_server *s, const struct rpc_listener *ls,
                      const struct in6_addr *peer)
{
    int n = 0;
    /* O(in flight) per accept: the list is capped by max_clients and the scan is a memcmp */
    for (const struct rpc_conn *c = s->conns; c; c = c->next)
        if (c->ls == ls && memcmp(&c->peer, peer, sizeof(*peer)) == 0)
            n++;
    return n;
}

/* Nothing of its request and no ClientHello yet: a connection that has only connected. */
static bool idle(const struct rpc_conn *c)
{
    return !c->started && c->got == 0 && c->phase != PHASE_BODY;
}

/* The oldest connection of ls (of one peer when peer is set) still waiting for its request,
 * preferring one that has sent nothing yet: the list is newest first, so the last match.
 * Idle connections go first so that a client already in its TLS handshake (a real dyno from
 * the address that also opens the idle ones) is not pushed out by connections that cost the
 * attacker nothing. Connections writing a reply have been served and are never evicted
 * (their own send deadline bounds them). */
static struct rpc_conn *oldest_incomplete(const struct rpc_server *s, const struct rpc_listener *ls,
                                          const struct in6_addr *peer)
{
    struct rpc_conn *found = NULL, *found_idle = NULL;
    for (struct rpc_conn *c = s->conns; c; c = c->next)
        if (c->ls == ls && c->phase != PHASE_WRITE &&
            (!peer || memcmp(&c->peer, peer, sizeof(*peer)) == 0)) {
            found = c;
            if (idle(c))
                found_idle = c;
        }
    return found_idle ? found_idle : found;
}

/* Makes room for a newcomer at a cap by evicting the oldest incomplete connection; false when
 * every connection in the way is already being answered (the newcomer is refused then). */
static bool evict_for(struct rpc_server *s, struct rpc_listener *ls, const struct in6_addr *peer,
                      const char *newcomer, const char *why)
{
    struct rpc_conn *victim = oldest_incomplete(s, ls, peer);
    if (!victim)
        return false;
    s->stats.evicted++;
    LOG_RL(&rl_evict, 1000, LOG_LVL_WARNING,
           "%s: closed the oldest incomplete connection (%llu ms old, %zu bytes received) to serve %s "
           "(%llu evicted so far)",
           why, (unsigned long long)(now_ms() - victim->t_accept_ms),
           victim->phase == PHASE_BODY ? 4 + victim->got : victim->got, newcomer,
           (unsigned long long)s->stats.evicted);
    rpc_conn_free(victim);
    return true;
}

/* GCRA: take one token from a bucket of `burst` refilled `per_sec` a second. */
static bool gcra_take(uint64_t *tat, uint64_t now, uint32_t per_sec, uint32_t burst)
{
    uint64_t step = 1000000000ull / per_sec;
    if (*tat > now + step * (burst - 1))
        return false;
    *tat = (*tat > now ? *tat : now) + step;
    return true;
}

static size_t src_slot(const struct in6_addr *a)
{
    uint32_t h = 2166136261u;                 /* FNV-1a over the 16 bytes */
    for (int i = 0; i < 16; i++)
        h = (h ^ a->s6_addr[i]) * 16777619u;
    return h % SRC_SLOTS;
}

/* A TLS handshake costs the daemon a private-key signature, and a replayed ClientHello costs
 * the sender nothing: each source may start RPC_HS_PER_SRC_PER_SEC (burst
 * RPC_HS_PER_SRC_BURST) handshakes; beyond, the connection is closed before any crypto. Only a
 * whole ClientHello is charged (hs_gate): connections that never send one cost no crypto and
 * are bounded by the per-address cap instead, so they cannot spend the budget of a real
 * client from the same address. All sources together are paced by conn_tls
 * (CONN_TLS_HS_PER_SEC), which delays rather than refuses. Two addresses sharing a slot start
 * from a full bucket each time; the pacing still holds them. */
static bool handshake_budget(struct rpc_server *s, const struct in6_addr *peer)
{
    struct src_bucket *b = &s->hs_src[src_slot(peer)];
    if (memcmp(&b->addr, peer, sizeof(*peer)) != 0) {
        b->addr = *peer;
        b->tat_ns = 0;
    }
    if (!gcra_take(&b->tat_ns, clock_mono_ns(), RPC_HS_PER_SRC_PER_SEC, RPC_HS_PER_SRC_BURST)) {
        s->stats.hs_refused++;
        return false;
    }
    return true;
}

/* The conn's set-up gate (conn.h): its ClientHello is in and the crypto would start now. */
static bool hs_gate(struct conn *conn, void *arg)
{
    struct rpc_conn *c = arg;
    struct rpc_server *s = c->srv;
    (void)conn;
    if (!handshake_budget(s, &c->peer)) {
        char peer[INET6_ADDRSTRLEN];
        if (!inet_ntop(AF_INET6, &c->peer, peer, sizeof(peer)))
            snprintf(peer, sizeof(peer), "(unknown)");
        LOG_RL(&rl_hs, 1000, LOG_LVL_WARNING,
               "tls: handshake budget of %s exceeded (%d/s, burst %d), closing connection (%llu "
               "refused so far)", peer, RPC_HS_PER_SRC_PER_SEC, RPC_HS_PER_SRC_BURST,
               (unsigned long long)s->stats.hs_refused);
        return false;
    }
    c->started = true;
    return true;
}

static void on_resume(struct loop_event *ev, void *arg)
{
    struct rpc_listener *ls = arg;
    (void)ev;
    if (ls->paused && ls->ev && loop_fd_set(ls->ev, LOOP_READ) == 0)
        ls->paused = false;
}

/* Out of descriptors (or kernel memory): the pending connection stays in the backlog, and a
 * level-triggered listener would wake us again at once, forever. Stop watching it for a
 * moment; connections that finish meanwhile give their fds back. */
static void pause_accept(struct rpc_listener *ls, int err)
{
    static struct log_ratelimit rl;
    LOG_RL(&rl, 1000, LOG_LVL_ERROR, "accept failed: %s; not accepting for %d ms", errno_name(err),
           ACCEPT_PAUSE_MS);
    if (!ls->resume && loop_timer_add(ls->srv->loop, ACCEPT_PAUSE_MS, false, on_resume, ls,
                                      &ls->resume) != 0)
        return;   /* no timer: keep the listener on rather than lose it */
    if (loop_fd_set(ls->ev, 0) == 0) {
        ls->paused = true;
        loop_timer_arm(ls->resume, ACCEPT_PAUSE_MS);
    }
}

static void on_accept(struct loop_event *ev, int lfd, unsigned events, void *arg)
{
    struct rpc_listener *ls = arg;
    struct rpc_server *s = ls->srv;
    (void)ev;
    (void)events;
    /* a bounded batch per wake-up, so the other listener and the IPC sockets get their turn
     * while a flood of connections arrives */
    for (int batch = 0; batch < 64; batch++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        char peer[INET6_ADDRSTRLEN + 8];
        int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            if (e == EINTR || e == ECONNABORTED)
                continue;
            if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
                pause_accept(ls, e);
            } else if (e != EAGAIN && e != EWOULDBLOCK) {
                static struct log_ratelimit rl;
                LOG_RL(&rl, 1000, LOG_LVL_ERROR, "accept failed: %s", errno_name(e));
            }
            return;
        }
        struct in6_addr key;
        peer_key(&ss, &key);
        if (ls->local)
            ss.ss_family = AF_UNIX;
        peer_name(&ss, peer, sizeof(peer));
        /* a stranger must not get as far as evicting anyone */
        if (ls->local) {
            struct ucred cred = { .pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1 };
            socklen_t cl = sizeof(cred);
            if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
                (cred.uid != geteuid() && cred.uid != 0)) {
                static struct log_ratelimit rl;
                LOG_RL(&rl, 1000, LOG_LVL_WARNING, "rejected local RPC client uid %u", (unsigned)cred.uid);
                close(fd);
                continue;
            }
        }
        if (!ls->local && peer_count(s, ls, &key) >= s->max_per_peer) {
            char why[160];
            snprintf(why, sizeof(why), "too many concurrent RPC connections from %s (limit %d)", peer,
                     s->max_per_peer);
            if (!evict_for(s, ls, &key, peer, why)) {
                s->stats.refused++;
                LOG_RL(&rl_peer, 1000, LOG_LVL_WARNING, "%s, closing connection", why);
                close(fd);
                continue;
            }
        }
        if (ls->active >= s->max_clients &&
            !evict_for(s, ls, NULL, peer, "too many concurrent RPC clients")) {
            s->stats.refused++;
            LOG_RL(&rl_cap, 1000, LOG_LVL_WARNING,
                   "too many concurrent RPC clients, closing connection from %s", peer);
            close(fd);
            continue;
        }
        s->stats.accepted++;
        LOG_BURST(&lb_conn, RPC_LOG_PER_SEC, RPC_LOG_BURST, LOG_LVL_INFO, "Received connection from %s", peer);
        serve(ls, fd, ls->local ? NULL : &key);
    }
}

static int listener_init(struct rpc_server *s, struct rpc_listener *ls, int fd, bool local,
                         const struct conn_factory *wrap)
{
    ls->srv = s;
    ls->fd = fd;
    ls->local = local;
    ls->wrap = wrap;
    if (fd < 0)
        return 0;
    return loop_fd_add(s->loop, fd, LOOP_READ, on_accept, ls, &ls->ev);
}

int rpc_server_create(struct loop *l, int tcp_fd, const struct conn_factory *tcp_conn, int local_fd,
                      int max_clients, const struct rpc_ctx *ctx, struct rpc_server **ret)
{
    struct rpc_server *s = calloc(1, sizeof(*s));
    int rc;
    if (!s) {
        if (tcp_fd >= 0)
            close(tcp_fd);
        return -ENOMEM;
    }
    s->loop = l;
    s->max_clients = max_clients;
    s->max_per_peer = max_clients;   /* no per-peer cap until rpc_server_set_peer_limit */
    s->ctx = ctx;
    s->tcp.fd = s->local.fd = -1;
    /* dyno.sock is never TLS (docs/design/rpc.md#local-socket) */
    if ((rc = listener_init(s, &s->tcp, tcp_fd, false, tcp_conn ? tcp_conn : &conn_tcp_factory)) != 0 ||
        (rc = listener_init(s, &s->local, local_fd, true, &conn_tcp_factory)) != 0)
        goto fail;
    *ret = s;
    return 0;
fail:
    rpc_server_destroy(s);
    return rc < 0 ? rc : -EIO;
}

void rpc_server_set_peer_limit(struct rpc_server *s, int max_per_peer)
{
    s->max_per_peer = max_per_peer > 0 ? max_per_peer : s->max_clients;
}

void rpc_server_stats(const struct rpc_server *s, struct rpc_server_stats *ret)
{
    *ret = s->stats;
}

void rpc_server_shutdown(struct rpc_server *s, void (*done)(void *arg), void *arg)
{
    if (!s) {
        if (done)
            done(arg);
        return;
    }
    if (s->stopping)
        return;
    s->stopping = true;
    s->drained = done;
    s->drained_arg = arg;
    loop_event_free(s->tcp.ev);
    loop_event_free(s->local.ev);
    loop_event_free(s->tcp.resume);
    loop_event_free(s->local.resume);
    s->tcp.ev = s->local.ev = NULL;
    s->tcp.resume = s->local.resume = NULL;
    maybe_finish(s);
}

void rpc_server_destroy(struct rpc_server *s)
{
    if (!s)
        return;
    s->stopping = true;
    s->drained = NULL;
    if (s->stats.evicted || s->stats.refused || s->stats.hs_refused)
        LOG_INFO("rpc: %llu connections served, %llu evicted at a cap, %llu refused at a cap, %llu refused "
                 "over the TLS handshake budget", (unsigned long long)s->stats.accepted,
                 (unsigned long long)s->stats.evicted, (unsigned long long)s->stats.refused,
                 (unsigned long long)s->stats.hs_refused);
    while (s->conns)
        rpc_conn_free(s->conns);
    loop_event_free(s->tcp.ev);
    loop_event_free(s->local.ev);
    loop_event_free(s->tcp.resume);
    loop_event_free(s->local.resume);
    if (s->tcp.fd >= 0)
        close(s->tcp.fd);
    free(s);
}
