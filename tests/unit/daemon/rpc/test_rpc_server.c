/* Unit tests of the RPC server on the loop, through conn_tcp: a framed getVersion over TCP and
 * over dyno.sock, an invalid length closed without reply, the client cap, and the shutdown
 * drain (the done callback waits for the in-flight connection). The clients run in a helper
 * thread with blocking sockets; the loop runs in the test thread. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../logcap.h"
#include "daemon/ipc/registry.h"
#include "daemon/ipc/sock_file.h"
#include "daemon/ipc/status.h"
#include "daemon/loop.h"
#include "daemon/rpc/rpc_server.h"

struct fixture {
    char dir[64];
    struct loop *loop;
    struct registry *reg;
    struct status_table *st;
    struct rpc_ctx ctx;
    struct sock_file local;
    struct rpc_server *srv;
    int port;
    struct loop_event *watch;
    atomic_int client_done;
    atomic_int want_shutdown;
    bool shutdown_called;
    int drained;
};

static int pick_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t l = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &l), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void on_drained(void *arg)
{
    struct fixture *f = arg;
    f->drained++;
    loop_stop(f->loop);
}

/* The loop's view of the helper thread: stop when it is done, shut down when it asks. */
static void on_watch(struct loop_event *ev, void *arg)
{
    struct fixture *f = arg;
    (void)ev;
    if (atomic_load(&f->want_shutdown) && !f->shutdown_called) {
        f->shutdown_called = true;
        rpc_server_shutdown(f->srv, on_drained, f);
    }
    if (atomic_load(&f->client_done) && !f->shutdown_called)
        loop_stop(f->loop);
}

static struct fixture *fixture_new(int max_clients)
{
    char err[256];
    int tcp_fd;
    struct fixture *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/msmon_rpcsrvXXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_int_equal(loop_create(&f->loop), 0);
    assert_int_equal(registry_create("node", &f->reg), 0);
    assert_int_equal(status_create(&f->st), 0);
    f->ctx = (struct rpc_ctx){ .reg = f->reg, .st = f->st, .version = "9.9.9" };
    f->local.fd = -1;
    assert_int_equal(sock_file_create(&f->local, f->dir, "dyno.sock", SOCK_STREAM, 0600), 0);
    f->port = pick_port();
    assert_int_equal(rpc_listen_tcp(f->port, "127.0.0.1", &tcp_fd, err, sizeof(err)), 0);
    assert_int_equal(rpc_server_create(f->loop, tcp_fd, NULL, f->local.fd, max_clients, &f->ctx, &f->srv), 0);
    assert_non_null(f->srv);
    assert_int_equal(loop_timer_add(f->loop, 5, true, on_watch, f, &f->watch), 0);
    return f;
}

static void fixture_free(struct fixture *f)
{
    rpc_server_destroy(f->srv);
    loop_event_free(f->watch);
    sock_file_close(&f->local);
    loop_destroy(f->loop);
    status_destroy(f->st);
    registry_destroy(f->reg);
    rmdir(f->dir);
    free(f);
}

static int connect_tcp(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = { 5, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static int connect_local(const char *dir)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof(a.sun_path), "%s/dyno.sock", dir);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = { 5, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static void send_frame(int fd, const char *body)
{
    char buf[256];
    int32_t n = (int32_t)strlen(body);
    memcpy(buf, &n, 4);
    memcpy(buf + 4, body, (size_t)n);
    assert_int_equal(send(fd, buf, 4 + (size_t)n, MSG_NOSIGNAL), 4 + n);
}

/* Everything until EOF; returns its length. */
static size_t recv_all(int fd, char *out, size_t cap)
{
    size_t got = 0;
    ssize_t r;
    while (got < cap && (r = recv(fd, out + got, cap - got, 0)) > 0)
        got += (size_t)r;
    return got;
}

static void expect_version(int fd)
{
    char out[256];
    send_frame(fd, "{\"fn\":\"getVersion\"}");
    size_t n = recv_all(fd, out, sizeof(out));
    const char want[] = "{\"version\":\"9.9.9\"}";
    assert_int_equal(n, 4 + strlen(want));
    int32_t len;
    memcpy(&len, out, 4);
    assert_int_equal(len, (int32_t)strlen(want));
    assert_memory_equal(out + 4, want, strlen(want));
}

/* The helper thread waits for the server's log line instead of sleeping a guessed time; the
 * deadline is generous (60 s) because a sanitizer build on a loaded machine is slow. */
static void wait_log(const char *text)
{
    for (int i = 0; i < 12000 && !logcap_has(text); i++)
        usleep(5000);
    assert_true(logcap_has(text));
}

static void *basic_client(void *arg)
{
    struct fixture *f = arg;
    int fd = connect_tcp(f->port);
    expect_version(fd);
    close(fd);
    fd = connect_local(f->dir);
    expect_version(fd);
    close(fd);
    /* length 8192 is over the cap: closed without a reply */
    fd = connect_local(f->dir);
    int32_t big = 8192;
    char out[16];
    assert_int_equal(send(fd, &big, 4, MSG_NOSIGNAL), 4);
    assert_int_equal(recv_all(fd, out, sizeof(out)), 0);
    close(fd);
    atomic_store(&f->client_done, 1);
    return NULL;
}

static void run_with(struct fixture *f, void *(*client)(void *))
{
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, client, f), 0);
    assert_int_equal(loop_run(f->loop), 0);
    pthread_join(t, NULL);
}

static void test_frames(void **state)
{
    (void)state;
    struct fixture *f = fixture_new(16);
    logcap_clear();
    run_with(f, basic_client);
    assert_true(logcap_has("Received connection from 127.0.0.1"));
    assert_true(logcap_has("Received connection from local"));
    assert_true(logcap_has("Invalid message size = 8192"));
    fixture_free(f);
}

static void *cap_client(void *arg)
{
    struct fixture *f = arg;
    char out[16];
    int hold = connect_local(f->dir);
    int32_t partial = 20;
    assert_int_equal(send(hold, &partial, 4, MSG_NOSIGNAL), 4);   /* occupies the one slot */
    wait_log("Received connection from local");
    /* at the cap the newcomer is served and the oldest incomplete connection goes */
    int extra = connect_local(f->dir);
    expect_version(extra);
    close(extra);
    assert_int_equal(recv_all(hold, out, sizeof(out)), 0);        /* evicted, no reply */
    close(hold);
    wait_log("too many concurrent RPC clients: closed the oldest incomplete connection");
    int again = connect_local(f->dir);                             /* the slot is free again */
    expect_version(again);
    close(again);
    atomic_store(&f->client_done, 1);
    return NULL;
}

static void test_client_cap(void **state)
{
    (void)state;
    struct fixture *f = fixture_new(1);
    logcap_clear();
    run_with(f, cap_client);
    assert_true(logcap_has("4 bytes received) to serve local (1 evicted so far)"));
    fixture_free(f);
}

static void *drain_client(void *arg)
{
    struct fixture *f = arg;
    int fd = connect_local(f->dir);
    int32_t len = (int32_t)strlen("{\"fn\":\"getVersion\"}");
    assert_int_equal(send(fd, &len, 4, MSG_NOSIGNAL), 4);   /* in flight: length only */
    wait_log("Received connection from local");
    atomic_store(&f->want_shutdown, 1);
    usleep(100000);
    /* still served after the shutdown request; the drain waits for us */
    char out[256];
    assert_int_equal(send(fd, "{\"fn\":\"getVersion\"}", (size_t)len, MSG_NOSIGNAL), len);
    assert_int_equal(recv_all(fd, out, sizeof(out)), 4 + 19);
    close(fd);
    atomic_store(&f->client_done, 1);
    return NULL;
}

static void test_shutdown_drains(void **state)
{
    (void)state;
    struct fixture *f = fixture_new(16);
    logcap_clear();
    run_with(f, drain_client);
    assert_int_equal(f->drained, 1);
    /* a second shutdown does nothing; with nothing in flight a fresh server drains at once */
    rpc_server_shutdown(f->srv, on_drained, f);
    assert_int_equal(f->drained, 1);
    fixture_free(f);
    f = fixture_new(16);
    rpc_server_shutdown(f->srv, on_drained, f);
    assert_int_equal(f->drained, 1);
    fixture_free(f);
}

/* a client that sends nothing is closed at the first-byte deadline; one that has
 * started keeps the whole 3 s, even when its body comes after the first-byte deadline. */
static void *deadline_client(void *arg)
{
    struct fixture *f = arg;
    char out[256];
    int silent = connect_local(f->dir);
    int slow = connect_local(f->dir);
    int32_t len = (int32_t)strlen("{\"fn\":\"getVersion\"}");
    assert_int_equal(send(slow, &len, 4, MSG_NOSIGNAL), 4);      /* the length, no body yet */
    assert_int_equal(recv_all(silent, out, sizeof(out)), 0);     /* closed, no reply */
    wait_log("Timeout! Message received size is 0");
    usleep(300000);                                              /* past the first-byte deadline */
    assert_int_equal(send(slow, "{\"fn\":\"getVersion\"}", (size_t)len, MSG_NOSIGNAL), len);
    assert_int_equal(recv_all(slow, out, sizeof(out)), 4 + 19);  /* answered */
    close(silent);
    close(slow);
    atomic_store(&f->client_done, 1);
    return NULL;
}

static void test_first_byte_deadline(void **state)
{
    (void)state;
    struct fixture *f = fixture_new(16);
    logcap_clear();
    run_with(f, deadline_client);
    fixture_free(f);
}

/* one address holds at most max_per_peer TCP slots; dyno.sock has its own budget.
 * beyond them the oldest incomplete connection of that address makes room. */
static void *peer_client(void *arg)
{
    struct fixture *f = arg;
    char out[16];
    int hold = connect_tcp(f->port);
    int32_t partial = 20;
    assert_int_equal(send(hold, &partial, 4, MSG_NOSIGNAL), 4);
    wait_log("Received connection from 127.0.0.1");
    int extra = connect_tcp(f->port);                              /* served; hold evicted */
    expect_version(extra);
    close(extra);
    assert_int_equal(recv_all(hold, out, sizeof(out)), 0);
    wait_log("too many concurrent RPC connections from 127.0.0.1 (limit 1): closed the oldest "
             "incomplete connection");
    int local = connect_local(f->dir);
    expect_version(local);                                         /* not affected */
    close(local);
    close(hold);
    atomic_store(&f->client_done, 1);
    return NULL;
}

static void test_peer_limit(void **state)
{
    (void)state;
    struct fixture *f = fixture_new(16);
    rpc_server_set_peer_limit(f->srv, 1);
    logcap_clear();
    run_with(f, peer_client);
    fixture_free(f);
}

static int setup(void **state)
{
    (void)state;
    return logcap_open();
}

static int teardown(void **state)
{
    (void)state;
    logcap_close();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frames),
        cmocka_unit_test(test_client_cap),
        cmocka_unit_test(test_shutdown_drains),
        cmocka_unit_test(test_first_byte_deadline),
        cmocka_unit_test(test_peer_limit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
