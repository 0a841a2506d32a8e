/* rpc_client: blocking-free client side of the dyno RPC, plain or mutual TLS. The socket is
 * non-blocking and every step (connect, TLS handshake, send, receive) polls against one
 * monotonic deadline, so a silent server costs at most --timeout-s (getaddrinfo itself cannot
 * be bounded and is the one exception). Failures say what the peer did (closed, reset,
 * answered with TLS, refused our certificate) rather than guess. */
#include "cli/rpc_client.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "cli/hosts.h"
#include "common/log.h"
#include "ipc/ipc_msg.h"
#include "tls/tls_ctx.h"

#define CONNECT_MSG "Couldn't connect to the server...: "
#define NO_REPLY_MSG "No reply from the server (the request may be unknown to this dynolog version)"
#define RESET_MSG "The server reset the connection without replying (it may be at its connection " \
                  "limit, refuse this client, or require TLS: dyno --certs-dir DIR)"
#define TLS_SERVER_MSG "The server answered with TLS: it requires mutual TLS (dyno --certs-dir DIR)"

struct rpc_tls {
    SSL_CTX *ctx;
};

/* One connection: plain fd, or fd + TLS session; why the last TLS step failed. */
struct rpc_io {
    int fd;
    SSL *ssl;
    uint64_t deadline_ns;
    char tls_why[256];
};

static const char *err_text(int e, char *buf, size_t cap)
{
    /* GNU strerror_r: thread-safe, returns the message (maybe not in buf). */
    return strerror_r(e, buf, cap);
}

static int remaining_ms(uint64_t deadline_ns)
{
    uint64_t now = clock_mono_ns();
    if (now >= deadline_ns)
        return 0;
    uint64_t ms = (deadline_ns - now + 999999) / 1000000;
    return ms > 3600000 ? 3600000 : (int)ms;
}

/* Wait for `events` on fd; 0 ready, -ETIMEDOUT, or -errno. */
static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
    for (;;) {
        int ms = remaining_ms(deadline_ns);
        if (ms == 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, ms);
        if (n > 0)
            return 0;
        if (n == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

static int connect_addr(const struct sockaddr *sa, socklen_t salen, int family,
                        uint64_t deadline_ns, int *ret_fd)
{
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int r = 0;
    if (family != AF_UNIX) {
        /* TLS 1.3 ends the handshake with our Finished and then our request, two writes: with
         * Nagle the request waits for the daemon's delayed ACK (40 ms per RPC, measured) */
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    if (connect(fd, sa, salen) < 0) {
        if (errno != EINPROGRESS && errno != EAGAIN) {
            r = -errno;
            goto fail;
        }
        r = wait_fd(fd, POLLOUT, deadline_ns);
        if (r < 0)
            goto fail;
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
            soerr = errno;
        if (soerr) {
            r = -soerr;
            goto fail;
        }
    }
    *ret_fd = fd;
    return 0;
fail:
    close(fd);
    return r;
}

static int connect_target(const char *target, uint16_t port, const char *sock_dir,
                          uint64_t deadline_ns, int timeout_s, int *ret_fd, char *err,
                          size_t errcap)
{
    char ebuf[128];
    int r;
    if (strncmp(target, HOSTS_UNIX_PREFIX, 5) == 0) {
        char dir[256], path[512];
        const char *p = target + 5;
        if (*p == '\0') {
            r = ipc_socket_dir(sock_dir, dir, sizeof(dir));
            if (r == 0)
                r = ipc_socket_path(dir, "dyno", path, sizeof(path));
            if (r < 0) {
                snprintf(err, errcap, CONNECT_MSG "cannot locate dyno.sock: %s",
                         err_text(-r, ebuf, sizeof(ebuf)));
                return r;
            }
            p = path;
        }
        struct sockaddr_un sa;
        socklen_t salen;
        r = ipc_addr_path(&sa, &salen, p);
        if (r == 0)
            r = connect_addr((struct sockaddr *)&sa, salen, AF_UNIX, deadline_ns, ret_fd);
        if (r == -ETIMEDOUT)
            snprintf(err, errcap, CONNECT_MSG "%s: timed out after %d s", p, timeout_s);
        else if (r < 0)
            snprintf(err, errcap, CONNECT_MSG "%s: %s", p, err_text(-r, ebuf, sizeof(ebuf)));
        return r;
    }
    /* "[v6]" -> "v6" for getaddrinfo; the text as given stays the display name. */
    char host[1024];
    size_t n = strlen(target);
    if (n >= 2 && target[0] == '[' && target[n - 1] == ']') {
        target++;
        n -= 2;
    }
    if (n >= sizeof(host)) {
        snprintf(err, errcap, CONNECT_MSG "host name too long");
        return -ENAMETOOLONG;
    }
    memcpy(host, target, n);
    host[n] = '\0';
    char portstr[8];
    snprintf(portstr, sizeof(portstr), "%u", (unsigned)port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int g = getaddrinfo(host, portstr, &hints, &ai);
    if (g != 0 || !ai) {
        snprintf(err, errcap, CONNECT_MSG "failed to resolve '%s': %s", host,
                 g == EAI_SYSTEM ? err_text(errno, ebuf, sizeof(ebuf)) : gai_strerror(g));
        if (ai)
            freeaddrinfo(ai);
        return -EHOSTUNREACH;
    }
    /* Upstream uses the first address only. */
    r = connect_addr(ai->ai_addr, ai->ai_addrlen, ai->ai_family, deadline_ns, ret_fd);
    freeaddrinfo(ai);
    if (r == -ETIMEDOUT)
        snprintf(err, errcap, CONNECT_MSG "timed out after %d s", timeout_s);
    else if (r < 0)
        snprintf(err, errcap, CONNECT_MSG "%s", err_text(-r, ebuf, sizeof(ebuf)));
    return r;
}

/* OpenSSL's reason for the last failure, cleared afterwards. */
static void tls_reason(struct rpc_io *io, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(io->tls_why, sizeof(io->tls_why), "%s", r ? r : fallback);
    ERR_clear_error();
}

/* Waits for what SSL wants after a WANT_* result; other results map to -errno. */
static int tls_wait(struct rpc_io *io, int r)
{
    int e = SSL_get_error(io->ssl, r);
    if (e == SSL_ERROR_WANT_READ)
        return wait_fd(io->fd, POLLIN, io->deadline_ns);
    if (e == SSL_ERROR_WANT_WRITE)
        return wait_fd(io->fd, POLLOUT, io->deadline_ns);
    if (e == SSL_ERROR_ZERO_RETURN)
        return -ENODATA;
    if (e == SSL_ERROR_SYSCALL) {
        int en = errno;
        ERR_clear_error();
        return en == ECONNRESET || en == EPIPE ? -ECONNRESET : -ENODATA;
    }
    unsigned long le = ERR_peek_last_error();
    if (ERR_GET_REASON(le) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
        ERR_clear_error();
        return -ENODATA;
    }
    tls_reason(io, "TLS protocol error");
    return -EPROTO;
}

static int io_send(struct rpc_io *io, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n;
        if (io->ssl) {
            ERR_clear_error();
            int r = SSL_write(io->ssl, p, len > 1u << 30 ? 1 << 30 : (int)len);
            if (r > 0) {
                p += r;
                len -= (size_t)r;
                continue;
            }
            int w = tls_wait(io, r);
            if (w < 0)
                return w;
            continue;
        }
        n = send(io->fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN)
            return -errno;
        int r = wait_fd(io->fd, POLLOUT, io->deadline_ns);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Read exactly len bytes; *ret_got says how many arrived before EOF/error (-ENODATA: clean
 * end, -ECONNRESET: reset, -EPROTO: TLS failure with io->tls_why). */
static int io_recv(struct rpc_io *io, void *buf, size_t len, size_t *ret_got)
{
    char *p = buf;
    size_t got = 0;
    int r = 0;
    while (got < len) {
        if (io->ssl) {
            ERR_clear_error();
            size_t want = len - got;
            int n = SSL_read(io->ssl, p + got, want > 1u << 30 ? 1 << 30 : (int)want);
            if (n > 0) {
                got += (size_t)n;
                continue;
            }
            r = tls_wait(io, n);
            if (r < 0)
                break;
            continue;
        }
        ssize_t n = recv(io->fd, p + got, len - got, 0);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n == 0) {
            r = -ENODATA;
            break;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN) {
            r = errno == ECONNRESET ? -ECONNRESET : -errno;
            break;
        }
        r = wait_fd(io->fd, POLLIN, io->deadline_ns);
        if (r < 0)
            break;
    }
    *ret_got = got;
    return r;
}

/* The client handshake under the deadline; on failure a message saying what went wrong: our
 * verdict on the server's certificate, the server's alert about ours, or the server hanging
 * up (a plain-TCP daemon reads our ClientHello as a bad length and closes). */
static int tls_handshake(const struct rpc_tls *tls, struct rpc_io *io, const char *target,
                         int timeout_s, char *err, size_t errcap)
{
    int r = tls_ctx_client_ssl(tls->ctx, target, &io->ssl, err, errcap);
    if (r < 0)
        return r;
    if (SSL_set_fd(io->ssl, io->fd) != 1) {
        snprintf(err, errcap, "TLS set-up failed for %s", target);
        return -ENOMEM;
    }
    for (;;) {
        ERR_clear_error();
        int c = SSL_connect(io->ssl);
        if (c == 1)
            return 0;
        long vr = SSL_get_verify_result(io->ssl);
        r = tls_wait(io, c);
        if (r == 0)
            continue;
        if (r == -ETIMEDOUT)
            snprintf(err, errcap, "TLS handshake with %s timed out after %d s", target, timeout_s);
        else if (vr != X509_V_OK)
            snprintf(err, errcap, "TLS handshake with %s failed: server certificate rejected: %s",
                     target, X509_verify_cert_error_string(vr));
        else if (r == -EPROTO)
            snprintf(err, errcap, "TLS handshake with %s failed: %s", target, io->tls_why);
        else
            snprintf(err, errcap, "TLS handshake with %s failed: the server closed the connection "
                     "(is it a plain-TCP dynolog without --certs_dir?)", target);
        return r < 0 ? r : -EPROTO;
    }
}

int rpc_tls_create(const char *dir, const char *passphrase_file, FILE *progress,
                   struct rpc_tls **ret, char *err, size_t errcap)
{
    struct rpc_tls *t = calloc(1, sizeof(*t));
    struct tls_ctx_cfg cfg = { .dir = dir, .server = false, .passphrase_file = passphrase_file,
                               .progress = progress };
    *ret = NULL;
    if (!t) {
        snprintf(err, errcap, "out of memory");
        return -ENOMEM;
    }
    int r = tls_ctx_create(&cfg, &t->ctx, err, errcap);
    if (r < 0) {
        free(t);
        return r;
    }
    *ret = t;
    return 0;
}

void rpc_tls_destroy(struct rpc_tls *t)
{
    if (!t)
        return;
    SSL_CTX_free(t->ctx);
    free(t);
}

/* A reply that starts with a TLS record header (alert 0x15 or handshake 0x16, record version
 * 3.1-3.4, record length below 64 KiB) came from a TLS daemon answering our plain request.
 * The version and length bytes matter: a plain reply of 789 bytes starts 15 03 00 00 (its
 * little-endian length), which the first two bytes alone took for a TLS alert. */
static bool looks_like_tls(const unsigned char *h, size_t got)
{
    if (got < 2 || (h[0] != 0x15 && h[0] != 0x16) || h[1] != 0x03)
        return false;
    return got < 4 || (h[2] >= 0x01 && h[2] <= 0x04 && h[3] == 0x00);
}

/* One-line message for a failed read of the reply (length or body). */
static void recv_fail_msg(struct rpc_io *io, int r, size_t got, size_t want, bool head,
                          int timeout_s, enum rpc_fail *ret_fail, char *err, size_t errcap)
{
    if (r == -ETIMEDOUT) {
        *ret_fail = RPC_FAIL_TIMEOUT;
        snprintf(err, errcap, "Timed out after %d s waiting for the reply", timeout_s);
    } else if (r == -EPROTO) {
        *ret_fail = RPC_FAIL_TLS;
        snprintf(err, errcap, "The server refused the TLS session: %s", io->tls_why);
    } else if (head && got == 0 && r == -ENODATA) {
        *ret_fail = RPC_FAIL_NO_REPLY;
        snprintf(err, errcap, NO_REPLY_MSG);
    } else if (head && got == 0 && r == -ECONNRESET) {
        *ret_fail = RPC_FAIL_NO_REPLY;
        snprintf(err, errcap, RESET_MSG);
    } else {
        *ret_fail = RPC_FAIL_BAD_REPLY;
        snprintf(err, errcap, "Truncated reply from the server (%zu of %zu %s)", got, want,
                 head ? "length bytes" : "bytes");
    }
}

/* OpenSSL writes with write(2), not send(MSG_NOSIGNAL): a daemon that hung up would kill dyno
 * with SIGPIPE. Block it on this thread for the call and swallow one that we raised; the
 * process-wide disposition stays the caller's (dyno | head still ends quietly). */
struct sigpipe_guard {
    sigset_t old;
    bool was_pending;
};

static void sigpipe_block(struct sigpipe_guard *g)
{
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &set, &g->old);
}

static void sigpipe_restore(struct sigpipe_guard *g)
{
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pending);
    if (!g->was_pending && sigismember(&pending, SIGPIPE) == 1) {
        struct timespec zero = { 0, 0 };
        (void)sigtimedwait(&set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

static uint64_t overall_deadline_ns; /* written before the workers start, then only read */

void rpc_set_overall_deadline(uint64_t deadline_ns)
{
    overall_deadline_ns = deadline_ns;
}

uint64_t rpc_overall_deadline(void)
{
    return overall_deadline_ns;
}

static const struct rpc_transport *transport; /* NULL: the network */

void rpc_set_transport(const struct rpc_transport *t)
{
    transport = t;
}

static int call_once(const struct rpc_tls *tls, const char *target, uint16_t port,
                     const char *sock_dir, int timeout_s, const char *body, size_t body_len,
                     char **ret_reply, size_t *ret_len, enum rpc_fail *ret_fail, char *err,
                     size_t errcap);

int rpc_call_tls(const struct rpc_tls *tls, const char *target, uint16_t port,
                 const char *sock_dir, int timeout_s, const char *body, size_t body_len,
                 char **ret_reply, size_t *ret_len, enum rpc_fail *ret_fail, char *err,
                 size_t errcap)
{
    struct sigpipe_guard g;
    if (transport)
        return transport->call(transport->arg, target, body, body_len, ret_reply, ret_len, ret_fail,
                               err, errcap);
    if (!tls)
        return call_once(NULL, target, port, sock_dir, timeout_s, body, body_len, ret_reply,
                         ret_len, ret_fail, err, errcap);
    sigpipe_block(&g);
    int r = call_once(tls, target, port, sock_dir, timeout_s, body, body_len, ret_reply,
                      ret_len, ret_fail, err, errcap);
    sigpipe_restore(&g);
    return r;
}

static int call_once(const struct rpc_tls *tls, const char *target, uint16_t port,
                     const char *sock_dir, int timeout_s, const char *body, size_t body_len,
                     char **ret_reply, size_t *ret_len, enum rpc_fail *ret_fail, char *err,
                     size_t errcap)
{
    struct rpc_io io = { .fd = -1, .deadline_ns = clock_mono_ns() + (uint64_t)timeout_s * 1000000000ull };
    if (overall_deadline_ns && overall_deadline_ns < io.deadline_ns)
        io.deadline_ns = overall_deadline_ns;
    char ebuf[128];
    char *reply = NULL;
    size_t got = 0;
    int r;

    *ret_fail = RPC_OK;
    /* past the command's deadline: no connection at all, rather than one that is opened and
     * closed before a byte is sent (the daemon would log each as a bad frame) */
    if (overall_deadline_ns && clock_mono_ns() >= overall_deadline_ns) {
        snprintf(err, errcap, "--timeout-s reached before this request was sent");
        *ret_fail = RPC_FAIL_TIMEOUT;
        return -ETIMEDOUT;
    }
    if (body_len == 0 || body_len > RPC_REQ_MAX) {
        snprintf(err, errcap, "request too large (%zu bytes, limit %d)", body_len, RPC_REQ_MAX);
        *ret_fail = RPC_FAIL_SEND;
        return -EMSGSIZE;
    }
    r = connect_target(target, port, sock_dir, io.deadline_ns, timeout_s, &io.fd, err, errcap);
    if (r < 0) {
        *ret_fail = RPC_FAIL_CONNECT;
        return r;
    }
    /* dyno.sock is never TLS (docs/design/rpc.md#local-socket) */
    if (tls && strncmp(target, HOSTS_UNIX_PREFIX, 5) != 0) {
        r = tls_handshake(tls, &io, target, timeout_s, err, errcap);
        if (r < 0) {
            *ret_fail = r == -ETIMEDOUT ? RPC_FAIL_TIMEOUT : RPC_FAIL_TLS;
            goto out;
        }
    }
    uint32_t len32 = (uint32_t)body_len;
    unsigned char head[4];
    /* length and body in one write: one segment (one TLS record), so Nagle never holds the
     * body back waiting for the ACK of a 4-byte segment (a 40 ms delayed-ACK stall per RPC) */
    char frame[4 + RPC_REQ_MAX];
    memcpy(frame, &len32, 4); /* native byte order, as upstream */
    memcpy(frame + 4, body, body_len);
    r = io_send(&io, frame, 4 + body_len);
    if (r < 0 && io.ssl && r != -ETIMEDOUT) {
        /* TLS 1.3: the server judges our certificate after our handshake is done, so its
         * refusal (an alert, then close) surfaces as a failed send: read the alert. */
        int rr = io_recv(&io, head, 1, &got);
        if (rr == -EPROTO) {
            recv_fail_msg(&io, rr, 0, 4, true, timeout_s, ret_fail, err, errcap);
            goto out;
        }
    }
    if (r < 0) {
        *ret_fail = r == -ETIMEDOUT ? RPC_FAIL_TIMEOUT : RPC_FAIL_SEND;
        if (r == -ETIMEDOUT)
            snprintf(err, errcap, "Timed out after %d s sending the request", timeout_s);
        else if (r == -EPROTO)
            snprintf(err, errcap, "Failed to send the request over TLS: %s", io.tls_why);
        else if (r == -ECONNRESET || r == -EPIPE)
            snprintf(err, errcap, "Failed to send the request: the server closed the connection "
                     "(it may be at its connection limit or refuse this client)");
        else
            snprintf(err, errcap, "Failed to send the request: %s", err_text(-r, ebuf, sizeof(ebuf)));
        goto out;
    }
    r = io_recv(&io, head, 4, &got);
    if (!io.ssl && looks_like_tls(head, got)) {
        *ret_fail = RPC_FAIL_TLS;
        snprintf(err, errcap, TLS_SERVER_MSG);
        r = -EPROTO;
        goto out;
    }
    if (r < 0) {
        recv_fail_msg(&io, r, got, 4, true, timeout_s, ret_fail, err, errcap);
        goto out;
    }
    memcpy(&len32, head, 4);
    if (len32 == 0 || len32 > RPC_REPLY_MAX) {
        *ret_fail = RPC_FAIL_BAD_REPLY;
        /* The frame length is an int32 on the wire (docs/design/rpc.md#framing): show it signed. */
        snprintf(err, errcap, "Invalid reply length %" PRId32 " from the server (limit %u)",
                 (int32_t)len32, RPC_REPLY_MAX);
        r = -EBADMSG;
        goto out;
    }
    reply = malloc((size_t)len32 + 1);
    if (!reply) {
        *ret_fail = RPC_FAIL_BAD_REPLY;
        snprintf(err, errcap, "Out of memory for a %u-byte reply", len32);
        r = -ENOMEM;
        goto out;
    }
    r = io_recv(&io, reply, len32, &got);
    if (r < 0) {
        recv_fail_msg(&io, r, got, len32, false, timeout_s, ret_fail, err, errcap);
        free(reply);
        reply = NULL;
        goto out;
    }
    reply[len32] = '\0';
    *ret_reply = reply;
    *ret_len = len32;
out:
    if (io.ssl) {
        if (r == 0)
            (void)SSL_shutdown(io.ssl);   /* close_notify, not waited for */
        SSL_free(io.ssl);
        ERR_clear_error();
    }
    close(io.fd);
    return r;
}

int rpc_call(const char *target, uint16_t port, const char *sock_dir, int timeout_s,
             const char *body, size_t body_len, char **ret_reply, size_t *ret_len,
             enum rpc_fail *ret_fail, char *err, size_t errcap)
{
    return rpc_call_tls(NULL, target, port, sock_dir, timeout_s, body, body_len, ret_reply,
                        ret_len, ret_fail, err, errcap);
}
