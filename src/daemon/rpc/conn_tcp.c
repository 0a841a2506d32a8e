/* conn_tcp: the plain-socket connection (TCP and Unix stream): one fd event whose interest set
 * follows the handlers installed, recv/send with EINTR retried, and a close that is deferred
 * while one of its own handlers runs so a handler may close the connection it serves. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/rpc/conn.h"

struct conn_tcp {
    struct conn base;        /* first: a struct conn * is a struct conn_tcp * */
    int fd;
    struct loop_event *ev;
    conn_handler rfn, wfn;
    void *rarg, *warg;
    int in_handler;          /* > 0 while a handler of this connection runs */
    bool close_pending;
};

static void tcp_free(struct conn_tcp *t)
{
    loop_event_free(t->ev);
    close(t->fd);
    free(t);
}

static int update_interest(struct conn_tcp *t)
{
    return loop_fd_set(t->ev, (t->rfn ? LOOP_READ : 0u) | (t->wfn ? LOOP_WRITE : 0u));
}

/* Runs h with conn_close deferred; the caller frees t afterwards if h closed it. */
static void call_handler(struct conn_tcp *t, conn_handler h, void *arg)
{
    t->in_handler++;
    h(&t->base, arg);
    t->in_handler--;
}

static void on_fd(struct loop_event *ev, int fd, unsigned events, void *arg)
{
    struct conn_tcp *t = arg;
    (void)ev;
    (void)fd;
    t->in_handler++;
    if ((events & LOOP_READ) && t->rfn && !t->close_pending)
        call_handler(t, t->rfn, t->rarg);
    if ((events & LOOP_WRITE) && t->wfn && !t->close_pending)
        call_handler(t, t->wfn, t->warg);
    t->in_handler--;
    if (t->close_pending && t->in_handler == 0)
        tcp_free(t);
}

static int tcp_accept(struct conn *c, conn_handler done, void *arg)
{
    struct conn_tcp *t = (struct conn_tcp *)c;
    /* a plain socket is connected once accept(2) returned it */
    c->state = CONN_STATE_CONNECTED;
    if (done) {
        call_handler(t, done, arg);
        if (t->close_pending && t->in_handler == 0)
            tcp_free(t);
    }
    return 0;
}

/* One recv (rbuf) or send (wbuf): bytes moved, -EAGAIN when the socket is not ready, or
 * -errno with the connection in the error state. */
static ssize_t tcp_io(struct conn *c, void *rbuf, const void *wbuf, size_t len)
{
    struct conn_tcp *t = (struct conn_tcp *)c;
    for (;;) {
        ssize_t n = rbuf ? recv(t->fd, rbuf, len, 0) : send(t->fd, wbuf, len, MSG_NOSIGNAL);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return -EAGAIN;
        c->last_errno = errno;
        c->state = CONN_STATE_ERROR;
        return -c->last_errno;
    }
}

static ssize_t tcp_read(struct conn *c, void *buf, size_t len) { return tcp_io(c, buf, NULL, len); }

static ssize_t tcp_write(struct conn *c, const void *buf, size_t len) { return tcp_io(c, NULL, buf, len); }

static int tcp_set_read_handler(struct conn *c, conn_handler fn, void *arg)
{
    struct conn_tcp *t = (struct conn_tcp *)c;
    t->rfn = fn;
    t->rarg = arg;
    return update_interest(t);
}

static int tcp_set_write_handler(struct conn *c, conn_handler fn, void *arg)
{
    struct conn_tcp *t = (struct conn_tcp *)c;
    t->wfn = fn;
    t->warg = arg;
    return update_interest(t);
}

static void tcp_close(struct conn *c)
{
    struct conn_tcp *t = (struct conn_tcp *)c;
    c->state = CONN_STATE_CLOSED;
    if (t->in_handler > 0) {
        /* the handler on the stack still holds t: on_fd/tcp_accept free it on the way out */
        t->close_pending = true;
        t->rfn = t->wfn = NULL;
        loop_fd_set(t->ev, 0);
        return;
    }
    tcp_free(t);
}

static const struct conn_ops tcp_ops = {
    .name = "tcp",
    .accept = tcp_accept,
    .read = tcp_read,
    .write = tcp_write,
    .set_read_handler = tcp_set_read_handler,
    .set_write_handler = tcp_set_write_handler,
    .close = tcp_close,
};

int conn_tcp_create(struct loop *l, int fd, struct conn **ret)
{
    int rc;
    struct conn_tcp *t = calloc(1, sizeof(*t));
    *ret = NULL;
    if (!t) {
        rc = -ENOMEM;
        goto out_close;
    }
    t->base.ops = &tcp_ops;
    t->base.state = CONN_STATE_ACCEPTING;
    t->fd = fd;
    rc = loop_fd_add(l, fd, 0, on_fd, t, &t->ev);   /* paused until a handler is set */
    if (rc)
        goto out_free;
    *ret = &t->base;
    return 0;
out_free:
    free(t);
out_close:
    close(fd);
    return rc;
}

static int tcp_factory_create(struct loop *l, int fd, void *arg, struct conn **ret)
{
    (void)arg;
    return conn_tcp_create(l, fd, ret);
}

const struct conn_factory conn_tcp_factory = { .name = "tcp", .create = tcp_factory_create };
