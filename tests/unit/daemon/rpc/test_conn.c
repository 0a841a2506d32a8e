/* Unit tests of the plain-socket connection (conn_tcp.c) on the loop: accept completes at once,
 * read/write/EOF/-EAGAIN, handlers drive the interest set, and a handler may close its own
 * connection (the free is deferred until it returns; ASan checks that). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "daemon/loop.h"
#include "daemon/rpc/conn.h"

struct echo {
    struct loop *loop;
    int accepted, reads, writes;
    char got[64];
    size_t got_len;
    size_t out_off;
    bool eof;
};

static void on_write(struct conn *c, void *arg)
{
    struct echo *e = arg;
    e->writes++;
    while (e->out_off < e->got_len) {
        ssize_t n = conn_write(c, e->got + e->out_off, e->got_len - e->out_off);
        if (n == -EAGAIN)
            return;
        assert_true(n > 0);
        e->out_off += (size_t)n;
    }
    conn_set_write_handler(c, NULL, NULL);
}

static void on_read(struct conn *c, void *arg)
{
    struct echo *e = arg;
    e->reads++;
    for (;;) {
        ssize_t n = conn_read(c, e->got + e->got_len, sizeof(e->got) - e->got_len);
        if (n == -EAGAIN)
            break;
        if (n == 0) {
            /* closing from inside our own handler */
            e->eof = true;
            conn_close(c);
            loop_stop(e->loop);
            return;
        }
        assert_true(n > 0);
        e->got_len += (size_t)n;
    }
    if (e->out_off < e->got_len)
        conn_set_write_handler(c, on_write, e);
}

static void on_accepted(struct conn *c, void *arg)
{
    struct echo *e = arg;
    e->accepted++;
    assert_int_equal(c->state, CONN_STATE_CONNECTED);
    assert_int_equal(conn_set_read_handler(c, on_read, e), 0);
}

static void peer_cb(struct loop_event *ev, int fd, unsigned events, void *arg)
{
    char buf[64];
    (void)ev;
    (void)events;
    (void)arg;
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 5 && memcmp(buf, "hello", 5) == 0)
        shutdown(fd, SHUT_WR);     /* echo came back: end the conversation */
}

static void stop_cb(struct loop_event *ev, void *arg)
{
    (void)ev;
    loop_stop(arg);
}

static void test_echo_and_close_in_handler(void **state)
{
    struct loop *l;
    struct conn *c;
    struct loop_event *peer, *guard;
    struct echo e = { 0 };
    int sv[2];
    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(loop_create(&l), 0);
    e.loop = l;
    assert_int_equal(conn_tcp_create(l, sv[0], &c), 0);
    assert_string_equal(c->ops->name, "tcp");
    assert_int_equal(c->state, CONN_STATE_ACCEPTING);
    assert_int_equal(conn_read(c, e.got, sizeof(e.got)), -EAGAIN);
    assert_int_equal(conn_accept(c, on_accepted, &e), 0);
    assert_int_equal(e.accepted, 1);
    assert_int_equal(loop_fd_add(l, sv[1], LOOP_READ, peer_cb, NULL, &peer), 0);
    assert_int_equal(loop_timer_add(l, 5000, false, stop_cb, l, &guard), 0);
    assert_int_equal(write(sv[1], "hello", 5), 5);
    assert_int_equal(loop_run(l), 0);
    assert_true(e.eof);
    assert_int_equal(e.got_len, 5);
    assert_true(e.reads >= 2);
    assert_true(e.writes >= 1);
    /* the conn closed its socket: the peer sees EOF */
    char b;
    assert_int_equal(read(sv[1], &b, 1), 0);
    loop_event_free(peer);
    loop_event_free(guard);
    loop_destroy(l);
    close(sv[1]);
}

static void close_on_accept(struct conn *c, void *arg)
{
    (void)arg;
    conn_close(c);
}

static void test_errors_and_close(void **state)
{
    struct loop *l;
    struct conn *c;
    int sv[2];
    (void)state;
    assert_int_equal(loop_create(&l), 0);
    /* write to a peer that is gone: -EPIPE (no SIGPIPE), state ERROR with the errno */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(conn_tcp_create(l, sv[0], &c), 0);
    close(sv[1]);
    assert_int_equal(conn_write(c, "x", 1), -EPIPE);
    assert_int_equal(c->state, CONN_STATE_ERROR);
    assert_int_equal(c->last_errno, EPIPE);
    conn_close(c);
    /* closing from the accept callback */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(conn_tcp_create(l, sv[0], &c), 0);
    assert_int_equal(conn_accept(c, close_on_accept, NULL), 0);
    char b;
    assert_int_equal(read(sv[1], &b, 1), 0);
    close(sv[1]);
    /* the factory the RPC server is handed builds the same connection */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_string_equal(conn_tcp_factory.name, "tcp");
    assert_int_equal(conn_tcp_factory.create(l, sv[0], conn_tcp_factory.arg, &c), 0);
    assert_int_equal(write(sv[1], "q", 1), 1);
    assert_int_equal(conn_read(c, &b, 1), 1);
    assert_int_equal(b, 'q');
    assert_int_equal(conn_read(c, &b, 1), -EAGAIN);
    conn_close(c);
    close(sv[1]);
    loop_destroy(l);
}

int main(void)
{
    log_set_level(LOG_LVL_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_echo_and_close_in_handler),
        cmocka_unit_test(test_errors_and_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
