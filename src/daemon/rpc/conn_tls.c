/* conn_tls: the TLS connection (docs/design/rpc.md#mutual-tls) behind the conn vtable. The server handshake runs
 * on the loop, non-blocking: each step waits for whatever OpenSSL wants (read or write), so a
 * stalled peer costs one fd and never blocks others; the RPC server's deadline bounds it.
 * After the handshake, read/write map SSL_read/SSL_write onto the conn contract, including
 * the case where a read needs the socket writable (and the reverse). The crypto starts only once
 * a whole ClientHello is in (OpenSSL's client-hello callback): there the connection's gate
 * charges its source (the RPC server's per-address budget) and the handshake waits for its turn
 * under the pacing (CONN_TLS_HS_PER_SEC, burst CONN_TLS_HS_BURST, all connections together):
 * each one signs with the server key, and a flood of replayed ClientHellos would otherwise own
 * the loop that also serves dyno.sock and IPC. A connection that never sends a ClientHello
 * costs a descriptor and nothing else, and is charged nothing (docs/security.md, "Remote and
 * local resource limits"). */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/log.h"
#include "daemon/rpc/conn.h"
#include "tls/tls_ctx.h"

#define CONN_TLS_HS_PER_SEC 40   /* handshakes processed per second, all connections together */
#define CONN_TLS_HS_BURST 8      /* ... at once: bounds the loop's longest handshake stretch */

/* The pacing state: one TLS listener per daemon, one loop thread, hence file scope. */
static uint64_t hs_tat_ns;
static uint64_t hs_delayed;
/* Where an SSL keeps its conn_tls for the client-hello callback (set once, on the loop). */
static int conn_idx = -1;

struct conn_tls {
    struct conn base;        /* first: a struct conn * is a struct conn_tls * */
    int fd;
    SSL *ssl;
    struct loop_event *ev;
    conn_handler rfn, wfn, done;
    void *rarg, *warg, *darg;
    bool handshaking;
    unsigned hs_want;        /* LOOP_READ / LOOP_WRITE the handshake waits for */
    bool read_wants_write;   /* SSL_read returned WANT_WRITE */
    bool write_wants_read;   /* SSL_write returned WANT_READ */
    int in_handler;
    bool close_pending;
    bool sniffed;            /* the first byte has been looked at */
    bool admitted;           /* its ClientHello passed the gate (charged once) */
    bool refused;            /* ... or the gate refused it (the gate has logged why) */
    bool paced;              /* this handshake has had its turn under the pacing */
    struct loop *loop;
    struct loop_event *pace; /* wakes a handshake that waits for its turn */
    char peer[64];
};

static void tls_free(struct conn_tls *t)
{
    loop_event_free(t->pace);
    loop_event_free(t->ev);
    SSL_free(t->ssl);
    close(t->fd);
    free(t);
}

static int update_interest(struct conn_tls *t)
{
    unsigned ev = 0;
    if (t->handshaking)
        ev = t->hs_want;
    else {
        if (t->rfn)
            ev |= t->read_wants_write ? LOOP_WRITE : LOOP_READ;
        if (t->wfn)
            ev |= t->write_wants_read ? LOOP_READ : LOOP_WRITE;
    }
    return loop_fd_set(t->ev, ev);
}

static void call_handler(struct conn_tls *t, conn_handler h, void *arg)
{
    t->in_handler++;
    h(&t->base, arg);
    t->in_handler--;
}

/* Why the handshake failed, for one log line: the certificate verdict when verification
 * failed, else OpenSSL's reason (e.g. "wrong version number" for a plain-TCP client). */
static const char *hs_reason(struct conn_tls *t, int ssl_err)
{
    long vr = SSL_get_verify_result(t->ssl);
    unsigned long e = ERR_peek_last_error();
    if (vr == X509_V_ERR_APPLICATION_VERIFICATION && tls_ctx_client_refusal(t->ssl))
        return tls_ctx_client_refusal(t->ssl);
    if (vr != X509_V_OK)
        return X509_verify_cert_error_string(vr);
    if (e && ERR_reason_error_string(e))
        return ERR_reason_error_string(e);
    if (ssl_err == SSL_ERROR_SYSCALL)
        return errno ? strerror(errno) : "the peer closed the connection";
    return "unknown TLS error";
}

/* A TLS client's first byte is a handshake record (0x16). Anything else is a plain-TCP dyno
 * (its 4-byte length): answer with a fatal protocol_version alert, a TLS record that dyno
 * recognises ("The server answered with TLS"), after draining what it sent so the close is a
 * FIN, not a reset that could discard the alert. Returns true when the peer was turned away. */
static bool refuse_plain_client(struct conn_tls *t)
{
    static const unsigned char alert[] = { 0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46 };
    unsigned char b;
    ssize_t n = recv(t->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return false;          /* nothing yet: look again when readable */
    t->sniffed = true;
    if (n != 1)
        return false;          /* EOF or an error: OpenSSL reports it */
    if (b == 0x16)
        return false;
    char scratch[4096];
    for (int i = 0; i < 4 && recv(t->fd, scratch, sizeof(scratch), MSG_DONTWAIT) > 0; i++)
        ;
    (void)!send(t->fd, alert, sizeof(alert), MSG_NOSIGNAL | MSG_DONTWAIT);
    static struct log_ratelimit rl;
    LOG_RL(&rl, 1000, LOG_LVL_ERROR, "tls: handshake with %s failed: not TLS (first byte 0x%02x; "
           "a plain-TCP dyno without --certs-dir?)", t->peer, b);
    return true;
}

static void handshake_step(struct conn_tls *t);

static void on_pace(struct loop_event *ev, void *arg)
{
    struct conn_tls *t = arg;
    (void)ev;
    t->in_handler++;
    if (t->handshaking && !t->close_pending)
        handshake_step(t);
    t->in_handler--;
    if (t->close_pending && t->in_handler == 0)
        tls_free(t);
}

/* True when this handshake may run now; else it sleeps (no fd interest) until its turn. */
static bool pace_turn(struct conn_tls *t)
{
    static struct log_ratelimit rl;
    uint64_t now = clock_mono_ns(), step = 1000000000ull / CONN_TLS_HS_PER_SEC;
    uint64_t slack = step * (CONN_TLS_HS_BURST - 1);
    if (t->paced)
        return true;
    if (hs_tat_ns <= now + slack) {
        hs_tat_ns = (hs_tat_ns > now ? hs_tat_ns : now) + step;
        t->paced = true;
        return true;
    }
    uint64_t wait_ms = (hs_tat_ns - now - slack) / 1000000u + 1;
    if (!t->pace && loop_timer_add(t->loop, 0, false, on_pace, t, &t->pace) != 0) {
        t->paced = true;       /* no timer: run it rather than strand it */
        return true;
    }
    hs_delayed++;
    LOG_RL(&rl, 1000, LOG_LVL_WARNING, "tls: more than %d handshakes/s, delaying the one from %s "
           "(%llu delayed so far)", CONN_TLS_HS_PER_SEC, t->peer, (unsigned long long)hs_delayed);
    t->hs_want = 0;
    update_interest(t);
    loop_timer_arm(t->pace, wait_ms);
    return false;
}

/* The handshake is over, either way: the connection says how, and accept's caller hears. */
static void handshake_end(struct conn_tls *t, bool ok)
{
    t->handshaking = false;
    if (ok) {
        t->base.state = CONN_STATE_CONNECTED;
    } else {
        t->base.state = CONN_STATE_ERROR;
        if (!t->base.last_errno)
            t->base.last_errno = EPROTO;
    }
    update_interest(t);
    if (t->done)
        call_handler(t, t->done, t->darg);
}

/* OpenSSL has a whole ClientHello and is about to choose keys and sign: the first point where
 * this connection costs CPU. The gate charges its source once; then the connection waits for
 * its turn under the pacing (the callback runs again when SSL_do_handshake is called again). */
static int on_client_hello(SSL *ssl, int *al, void *arg)
{
    struct conn_tls *t = conn_idx >= 0 ? SSL_get_ex_data(ssl, conn_idx) : NULL;
    (void)arg;
    if (!t)
        return SSL_CLIENT_HELLO_SUCCESS;
    if (!t->admitted) {
        if (t->base.gate && !t->base.gate(&t->base, t->base.gate_arg)) {
            t->refused = true;
            *al = SSL_AD_HANDSHAKE_FAILURE;
            return SSL_CLIENT_HELLO_ERROR;
        }
        t->admitted = true;
    }
    return pace_turn(t) ? SSL_CLIENT_HELLO_SUCCESS : SSL_CLIENT_HELLO_RETRY;
}

static void handshake_step(struct conn_tls *t)
{
    if (!t->sniffed && refuse_plain_client(t)) {
        handshake_end(t, false);
        return;
    }
    if (!t->sniffed) {
        /* nothing arrived yet: wait for the first byte before OpenSSL consumes it */
        t->hs_want = LOOP_READ;
        update_interest(t);
        return;
    }
    ERR_clear_error();
    int r = SSL_do_handshake(t->ssl);
    if (r == 1) {
        LOG_DEBUG("tls: handshake with %s done (%s, %s)", t->peer, SSL_get_version(t->ssl),
                  SSL_get_cipher_name(t->ssl));
        handshake_end(t, true);
        return;
    }
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        t->hs_want = e == SSL_ERROR_WANT_READ ? LOOP_READ : LOOP_WRITE;
        update_interest(t);
        return;
    }
    if (e == SSL_ERROR_WANT_CLIENT_HELLO_CB)
        return;   /* waiting for its turn: pace_turn armed the timer and paused the fd */
    if (t->refused) {
        ERR_clear_error();
        /* over its source's budget: the gate logged it and counted it */
        t->base.last_errno = EBUSY;
        handshake_end(t, false);
        return;
    }
    /* a stranger can trigger this at will: rate-limited */
    static struct log_ratelimit rl;
    LOG_RL(&rl, 1000, LOG_LVL_ERROR, "tls: handshake with %s failed: %s", t->peer, hs_reason(t, e));
    ERR_clear_error();
    handshake_end(t, false);
}

static void on_fd(struct loop_event *ev, int fd, unsigned events, void *arg)
{
    struct conn_tls *t = arg;
    (void)ev;
    (void)fd;
    t->in_handler++;
    if (t->handshaking) {
        handshake_step(t);
    } else {
        bool r_ready = t->rfn && (events & (t->read_wants_write ? LOOP_WRITE : LOOP_READ));
        bool w_ready = t->wfn && (events & (t->write_wants_read ? LOOP_READ : LOOP_WRITE));
        if (r_ready && t->rfn && !t->close_pending)
            call_handler(t, t->rfn, t->rarg);
        if (w_ready && t->wfn && !t->close_pending)
            call_handler(t, t->wfn, t->warg);
    }
    t->in_handler--;
    if (t->close_pending && t->in_handler == 0)
        tls_free(t);
}

static int tls_accept(struct conn *c, conn_handler done, void *arg)
{
    struct conn_tls *t = (struct conn_tls *)c;
    t->done = done;
    t->darg = arg;
    t->handshaking = true;
    t->in_handler++;
    handshake_step(t);   /* a ClientHello already queued is answered at once */
    t->in_handler--;
    if (t->close_pending && t->in_handler == 0)
        tls_free(t);
    return 0;
}

/* Maps one SSL_read/SSL_write result onto the conn contract. */
static ssize_t io_result(struct conn_tls *t, int r, bool reading)
{
    if (r > 0) {
        bool *flag = reading ? &t->read_wants_write : &t->write_wants_read;
        if (*flag) {
            *flag = false;
            update_interest(t);
        }
        return r;
    }
    int e = SSL_get_error(t->ssl, r);
    switch (e) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE: {
        bool cross = reading ? e == SSL_ERROR_WANT_WRITE : e == SSL_ERROR_WANT_READ;
        bool *flag = reading ? &t->read_wants_write : &t->write_wants_read;
        if (*flag != cross) {
            *flag = cross;
            update_interest(t);
        }
        return -EAGAIN;
    }
    case SSL_ERROR_ZERO_RETURN:   /* close_notify: a clean end of stream */
        return 0;
    default:
        t->base.last_errno = e == SSL_ERROR_SYSCALL && errno ? errno : EPROTO;
        t->base.state = CONN_STATE_ERROR;
        ERR_clear_error();
        return -t->base.last_errno;
    }
}

static ssize_t tls_read(struct conn *c, void *buf, size_t len)
{
    struct conn_tls *t = (struct conn_tls *)c;
    if (t->handshaking)
        return -EAGAIN;
    ERR_clear_error();
    return io_result(t, SSL_read(t->ssl, buf, len > INT_MAX ? INT_MAX : (int)len), true);
}

static ssize_t tls_write(struct conn *c, const void *buf, size_t len)
{
    struct conn_tls *t = (struct conn_tls *)c;
    if (t->handshaking)
        return -EAGAIN;
    if (len == 0)
        return 0;
    ERR_clear_error();
    return io_result(t, SSL_write(t->ssl, buf, len > INT_MAX ? INT_MAX : (int)len), false);
}

/* A direction without a handler no longer waits for the other readiness on its behalf. */
static int set_handler(struct conn_tls *t, conn_handler *slot, void **slot_arg, bool *wants_other,
                       conn_handler fn, void *arg)
{
    *slot = fn;
    *slot_arg = arg;
    if (!fn)
        *wants_other = false;
    return update_interest(t);
}

static int tls_set_read_handler(struct conn *c, conn_handler fn, void *arg)
{
    struct conn_tls *t = (struct conn_tls *)c;
    return set_handler(t, &t->rfn, &t->rarg, &t->read_wants_write, fn, arg);
}

static int tls_set_write_handler(struct conn *c, conn_handler fn, void *arg)
{
    struct conn_tls *t = (struct conn_tls *)c;
    return set_handler(t, &t->wfn, &t->warg, &t->write_wants_read, fn, arg);
}

static void tls_close(struct conn *c)
{
    struct conn_tls *t = (struct conn_tls *)c;
    /* one non-blocking close_notify so the client sees a clean end after the reply; never
     * waited for (the socket closes right after) */
    if (c->state == CONN_STATE_CONNECTED) {
        ERR_clear_error();
        (void)SSL_shutdown(t->ssl);
        ERR_clear_error();
    }
    c->state = CONN_STATE_CLOSED;
    if (t->in_handler > 0) {
        t->close_pending = true;
        t->rfn = t->wfn = t->done = NULL;
        t->handshaking = false;
        loop_fd_set(t->ev, 0);
        return;
    }
    tls_free(t);
}

static const struct conn_ops tls_ops = {
    .name = "tls",
    .accept = tls_accept,
    .read = tls_read,
    .write = tls_write,
    .set_read_handler = tls_set_read_handler,
    .set_write_handler = tls_set_write_handler,
    .close = tls_close,
};

int conn_tls_create(struct loop *l, int fd, void *ssl_ctx, struct conn **ret)
{
    int rc = -ENOMEM;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    struct conn_tls *t = calloc(1, sizeof(*t));
    *ret = NULL;
    if (!t)
        goto out_close;
    t->base.ops = &tls_ops;
    t->base.state = CONN_STATE_ACCEPTING;
    t->fd = fd;
    t->loop = l;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0 ||
        getnameinfo((struct sockaddr *)&ss, sl, t->peer, sizeof(t->peer), NULL, 0, NI_NUMERICHOST) != 0)
        snprintf(t->peer, sizeof(t->peer), "(unknown)");
    if (conn_idx < 0)
        conn_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    /* on the context, so every connection over it has its crypto gated and paced (the
     * callback finds its connection through conn_idx; a set-up pointer, cheap to repeat) */
    SSL_CTX_set_client_hello_cb(ssl_ctx, on_client_hello, NULL);
    t->ssl = SSL_new(ssl_ctx);
    if (conn_idx < 0 || !t->ssl || SSL_set_fd(t->ssl, fd) != 1 || SSL_set_ex_data(t->ssl, conn_idx, t) != 1)
        goto out_free;
    SSL_set_accept_state(t->ssl);
    rc = loop_fd_add(l, fd, 0, on_fd, t, &t->ev);
    if (rc)
        goto out_free;
    *ret = &t->base;
    return 0;
out_free:
    ERR_clear_error();
    if (t) {
        SSL_free(t->ssl);
        free(t);
    }
out_close:
    close(fd);
    return rc;
}

static int tls_factory_create(struct loop *l, int fd, void *arg, struct conn **ret)
{
    return conn_tls_create(l, fd, arg, ret);
}

void conn_tls_factory_init(struct conn_factory *f, void *ssl_ctx)
{
    f->name = "tls";
    f->create = tls_factory_create;
    f->arg = ssl_ctx;
    f->costly_setup = true;
}
