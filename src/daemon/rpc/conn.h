/* conn: one accepted stream connection behind a vtable (Redis connection.h), so the RPC server
 * never touches a socket: conn_tcp.c serves TCP and Unix stream sockets; a TLS connection is one
 * more implementation (conn_tls.c) driving its handshake and want-read/want-write itself. */
#ifndef MSMON_DAEMON_CONN_H
#define MSMON_DAEMON_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "daemon/loop.h"

enum conn_state {
    CONN_STATE_ACCEPTING,    /* set-up (TLS handshake) in progress */
    CONN_STATE_CONNECTED,
    CONN_STATE_ERROR,        /* last_errno says why */
    CONN_STATE_CLOSED,
};

struct conn;

/* Called on the loop thread when the connection can make progress. It may call conn_close(). */
typedef void (*conn_handler)(struct conn *c, void *arg);
/* Asked once per connection by an implementation whose set-up costs real CPU, right before it
 * starts that work (TLS: the whole ClientHello is in and a signature comes next), so that a
 * peer is charged for the work it causes, never for merely connecting. false refuses the
 * connection: its set-up fails (state ERROR, last_errno EBUSY) and the gate has said why. */
typedef bool (*conn_gate)(struct conn *c, void *arg);

struct conn_ops {
    const char *name;   /* "tcp" (TCP and Unix stream sockets), later "tls" */
    /* Finish the server side of the set-up; done() runs once, on or after this call, with the
     * state CONNECTED or ERROR. Plain sockets are connected at once; TLS runs its handshake
     * on the loop (reading and writing as OpenSSL asks), then calls done(). */
    int (*accept)(struct conn *c, conn_handler done, void *arg);
    /* > 0 bytes, 0 at EOF, -EAGAIN when nothing is available now, other -errno on failure.
     * An implementation whose read needs the socket writable (TLS renegotiation) arranges that
     * internally and calls the read handler again when it can go on. */
    ssize_t (*read)(struct conn *c, void *buf, size_t len);
    /* > 0 bytes accepted, -EAGAIN when the peer is not taking data now, other -errno. */
    ssize_t (*write)(struct conn *c, const void *buf, size_t len);
    /* Call fn whenever a read (write) can make progress; NULL removes the handler. */
    int (*set_read_handler)(struct conn *c, conn_handler fn, void *arg);
    int (*set_write_handler)(struct conn *c, conn_handler fn, void *arg);
    /* Unregister, close the socket, free. From inside a handler the free is deferred until
     * the handler returns; either way the caller must not use c afterwards. */
    void (*close)(struct conn *c);
};

/* The part every implementation shares; each embeds it first. */
struct conn {
    const struct conn_ops *ops;
    enum conn_state state;
    int last_errno;          /* positive errno of the last failure, 0 if none */
    conn_gate gate;          /* NULL: every set-up may start (conn_set_gate) */
    void *gate_arg;
};

/* Install the set-up gate before conn_accept(); implementations with a cheap set-up never
 * call it. arg is borrowed for the connection's life. */
static inline void conn_set_gate(struct conn *c, conn_gate fn, void *arg)
{
    c->gate = fn;
    c->gate_arg = arg;
}

static inline int conn_accept(struct conn *c, conn_handler done, void *arg)
{
    return c->ops->accept(c, done, arg);
}
static inline ssize_t conn_read(struct conn *c, void *buf, size_t len)
{
    return c->ops->read(c, buf, len);
}
static inline ssize_t conn_write(struct conn *c, const void *buf, size_t len)
{
    return c->ops->write(c, buf, len);
}
static inline int conn_set_read_handler(struct conn *c, conn_handler fn, void *arg)
{
    return c->ops->set_read_handler(c, fn, arg);
}
static inline int conn_set_write_handler(struct conn *c, conn_handler fn, void *arg)
{
    return c->ops->set_write_handler(c, fn, arg);
}
static inline void conn_close(struct conn *c)
{
    c->ops->close(c);
}

/* Plain stream socket (TCP or AF_UNIX), already non-blocking. Takes ownership of fd (closed
 * even on failure). Caller owns *ret; free with conn_close(). */
int conn_tcp_create(struct loop *l, int fd, struct conn **ret);

/* How a listener turns an accepted socket into a connection: the server is handed one and
 * never names an implementation, so TLS is a factory built by main (arg = the TLS context).
 * create takes ownership of fd (closed even on failure). */
struct conn_factory {
    const char *name;
    int (*create)(struct loop *l, int fd, void *arg, struct conn **ret);
    void *arg;
    /* Set-up costs real CPU (a TLS handshake signs with the server key): the RPC server then
     * installs a gate (conn_set_gate) that charges the source's budget when that work starts. */
    bool costly_setup;
};
extern const struct conn_factory conn_tcp_factory;   /* conn_tcp_create; arg unused */

/* TLS server side (conn_tls.c) over an accepted non-blocking socket: accept() runs the
 * handshake on the loop, so a stalled peer only holds its own connection (the RPC server's
 * deadline, armed at accept, bounds it). The gate is asked when the ClientHello is complete,
 * before any crypto; then the handshake waits for its turn under the daemon-wide pacing.
 * ssl_ctx is an SSL_CTX * built by tls_ctx_create() (borrowed for the connection's life; its
 * client-hello callback is set here). Takes ownership of fd (closed even on failure). */
int conn_tls_create(struct loop *l, int fd, void *ssl_ctx, struct conn **ret);
/* A factory whose connections are TLS over ssl_ctx (borrowed until the factory is dropped). */
void conn_tls_factory_init(struct conn_factory *f, void *ssl_ctx);

#endif
