/* rpc_server: one libevent loop serves every RPC connection without blocking: each
 * connection reads a 4-byte native length then the body under one deadline armed at
 * accept, runs the handler, writes the framed reply under a 3 s send deadline, closes. */
#include "daemon/rpc_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/strutil.h"

#define BACKLOG 50

enum conn_state { CONN_LEN, CONN_BODY, CONN_WRITE };

struct rpc_conn {
    struct rpc_server *srv;
    int fd;
    enum conn_state state;
    struct event *io;
    struct event *timer;
    uint8_t lenbuf[4];
    size_t got;
    int32_t expected;
    char body[RPC_MAX_MSG];
    char *out;           /* framed reply */
    size_t out_len, out_off;
};

struct rpc_server {
    struct event_base *base;
    struct event *ev_tcp;
    struct event *ev_local;
    struct event *ev_stop;
    int tcp_fd;
    int local_fd;
    int max_clients;
    int active;
    bool stopping;
    bool started;
    pthread_t thread;
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

static void maybe_finish(struct rpc_server *s)
{
    if (s->stopping && s->active == 0)
        event_base_loopbreak(s->base);
}

static void conn_free(struct rpc_conn *c)
{
    struct rpc_server *s = c->srv;
    event_free(c->io);
    event_free(c->timer);
    close(c->fd);
    free(c->out);
    free(c);
    s->active--;
    maybe_finish(s);
}

static void arm_timer(struct rpc_conn *c)
{
    struct timeval tv = { RPC_DEADLINE_MS / 1000, (RPC_DEADLINE_MS % 1000) * 1000 };
    evtimer_add(c->timer, &tv);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct rpc_conn *c = arg;
    (void)fd;
    (void)what;
    if (c->state == CONN_LEN)
        LOG_ERROR("Timeout! Message received size is %zu", c->got);
    else if (c->state == CONN_BODY)
        LOG_ERROR("Received partial message, expected size %d found : %zu", c->expected, c->got);
    else
        LOG_ERROR("Unable to write full response");
    conn_free(c);
}

/* Returns true when the connection is done (freed). */
static bool try_write(struct rpc_conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return false;
        LOG_ERROR("Unable to write full response");
        conn_free(c);
        return true;
    }
    conn_free(c);
    return true;
}

static void on_io(evutil_socket_t fd, short what, void *arg);

static void handle_request(struct rpc_conn *c)
{
    char *reply = NULL;
    size_t rlen = 0;
    int rc = rpc_handle(c->srv->ctx, c->body, (size_t)c->expected, &reply, &rlen);
    if (rc || !reply) {
        free(reply);
        conn_free(c);
        return;
    }
    c->out = malloc(rlen + 4);
    if (!c->out) {
        free(reply);
        conn_free(c);
        return;
    }
    int32_t len = (int32_t)rlen;
    memcpy(c->out, &len, 4);
    memcpy(c->out + 4, reply, rlen);
    free(reply);
    c->out_len = rlen + 4;
    c->state = CONN_WRITE;
    event_del(c->io);
    evtimer_del(c->timer);
    if (try_write(c))
        return;
    event_assign(c->io, c->srv->base, c->fd, EV_WRITE | EV_PERSIST, on_io, c);
    event_add(c->io, NULL);
    arm_timer(c);   /* 3 s send timeout */
}

static void on_io(evutil_socket_t fd, short what, void *arg)
{
    struct rpc_conn *c = arg;
    (void)fd;
    if (c->state == CONN_WRITE) {
        if (what & EV_WRITE)
            try_write(c);
        return;
    }
    for (;;) {
        uint8_t *dst;
        size_t want;
        if (c->state == CONN_LEN) {
            dst = c->lenbuf + c->got;
            want = 4 - c->got;
        } else {
            dst = (uint8_t *)c->body + c->got;
            want = (size_t)c->expected - c->got;
        }
        ssize_t n = recv(c->fd, dst, want, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            if (c->state == CONN_LEN)
                LOG_ERROR("Invalid message size = %zu", c->got);
            else
                LOG_ERROR("Received partial message, expected size %d found : %zu", c->expected, c->got);
            conn_free(c);
            return;
        }
        c->got += (size_t)n;
        if (c->state == CONN_LEN && c->got == 4) {
            memcpy(&c->expected, c->lenbuf, 4);
            if (c->expected <= 0 || c->expected >= RPC_MAX_MSG) {
                LOG_ERROR("Invalid message size = %d", c->expected);
                conn_free(c);
                return;
            }
            c->state = CONN_BODY;
            c->got = 0;
        } else if (c->state == CONN_BODY && c->got == (size_t)c->expected) {
            handle_request(c);
            return;
        }
    }
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

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
    struct rpc_server *s = arg;
    (void)what;
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        char peer[INET6_ADDRSTRLEN + 8];
        int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                static struct log_ratelimit rl;
                LOG_RL(&rl, 1000, LOG_LVL_ERROR, "accept failed: %s", errno_name(errno));
            }
            return;
        }
        if (lfd == s->local_fd)
            ss.ss_family = AF_UNIX;
        peer_name(&ss, peer, sizeof(peer));
        if (s->active >= s->max_clients) {
            LOG_WARN("too many concurrent RPC clients, closing connection from %s", peer);
            close(fd);
            continue;
        }
        if (lfd == s->local_fd) {
            struct ucred cred = { .pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1 };
            socklen_t cl = sizeof(cred);
            if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
                (cred.uid != geteuid() && cred.uid != 0)) {
                LOG_WARN("rejected local RPC client uid %u", (unsigned)cred.uid);
                close(fd);
                continue;
            }
        }
        LOG_INFO("Received connection from %s", peer);
        struct rpc_conn *c = calloc(1, sizeof(*c));
        if (!c) {
            close(fd);
            continue;
        }
        c->srv = s;
        c->fd = fd;
        c->io = event_new(s->base, fd, EV_READ | EV_PERSIST, on_io, c);
        c->timer = evtimer_new(s->base, on_timeout, c);
        if (!c->io || !c->timer) {
            if (c->io)
                event_free(c->io);
            if (c->timer)
                event_free(c->timer);
            close(fd);
            free(c);
            continue;
        }
        s->active++;
        event_add(c->io, NULL);
        arm_timer(c);   /* one deadline from accept covers length + body */
    }
}

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct rpc_server *s = arg;
    (void)fd;
    (void)what;
    s->stopping = true;
    if (s->ev_tcp)
        event_del(s->ev_tcp);
    if (s->ev_local)
        event_del(s->ev_local);
    maybe_finish(s);
}

struct rpc_server *rpc_server_create(int tcp_fd, int local_fd, int max_clients,
                                     const struct rpc_ctx *ctx)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    struct rpc_server *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    /* libevent's thread support makes event_active() from the main thread safe */
    pthread_once(&once, (void (*)(void))evthread_use_pthreads);
    s->tcp_fd = tcp_fd;
    s->local_fd = local_fd;
    s->max_clients = max_clients;
    s->ctx = ctx;
    s->base = event_base_new();
    if (!s->base)
        goto fail;
    if (tcp_fd >= 0) {
        s->ev_tcp = event_new(s->base, tcp_fd, EV_READ | EV_PERSIST, on_accept, s);
        if (!s->ev_tcp || event_add(s->ev_tcp, NULL) != 0)
            goto fail;
    }
    if (local_fd >= 0) {
        s->ev_local = event_new(s->base, local_fd, EV_READ | EV_PERSIST, on_accept, s);
        if (!s->ev_local || event_add(s->ev_local, NULL) != 0)
            goto fail;
    }
    s->ev_stop = event_new(s->base, -1, 0, on_stop, s);
    if (!s->ev_stop)
        goto fail;
    return s;
fail:
    rpc_server_destroy(s);
    return NULL;
}

static void *loop_main(void *arg)
{
    struct rpc_server *s = arg;
    pthread_setname_np(pthread_self(), "rpcServer");
    event_base_dispatch(s->base);
    return NULL;
}

int rpc_server_start(struct rpc_server *s)
{
    int rc = pthread_create(&s->thread, NULL, loop_main, s);
    if (rc)
        return -rc;
    s->started = true;
    return 0;
}

void rpc_server_stop(struct rpc_server *s)
{
    if (!s || !s->started)
        return;
    event_active(s->ev_stop, EV_TIMEOUT, 0);
    pthread_join(s->thread, NULL);
    s->started = false;
}

void rpc_server_destroy(struct rpc_server *s)
{
    if (!s)
        return;
    rpc_server_stop(s);
    if (s->ev_tcp)
        event_free(s->ev_tcp);
    if (s->ev_local)
        event_free(s->ev_local);
    if (s->ev_stop)
        event_free(s->ev_stop);
    if (s->base)
        event_base_free(s->base);
    if (s->tcp_fd >= 0)
        close(s->tcp_fd);
    free(s);
}
