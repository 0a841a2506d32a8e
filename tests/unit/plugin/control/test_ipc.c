/* test_ipc: the plugin IPC client against real sockets — retry schedule on a refusing
 * socket (through the sleep seam), no retries on a missing one, and DynoMonitor polling
 * that returns the reply to the current request even when the registration ack is queued
 * first (D3), against a fake daemon thread bound at <dir>/dynolog.sock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "ipc/ipc_msg.h"
#include "plugin/control/dyno.h"
#include "plugin/control/ipc_client.h"

static char dir[] = "/tmp/pc_ipc_XXXXXX";

struct sleeps {
    uint64_t ns[32];
    int n;
};

static void record_sleep(void *ctx, uint64_t ns)
{
    struct sleeps *s = ctx;
    if (s->n < 32)
        s->ns[s->n++] = ns;
}

static int bind_path(const char *name)
{
    char path[256];
    struct sockaddr_un a;
    socklen_t len;
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    snprintf(path, sizeof(path), "%s/%s.sock", dir, name);
    unlink(path);
    assert_int_equal(ipc_addr_path(&a, &len, path), 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, len), 0);
    return fd;
}

static void test_retry_schedule(void **state)
{
    struct ipc_client *c;
    struct sleeps s = { 0 };
    (void)state;
    close(bind_path("dynolog")); /* file stays, nobody listens: ECONNREFUSED */
    assert_int_equal(ipc_client_create(dir, &c), 0);
    ipc_client_set_sleep(c, record_sleep, &s);
    assert_int_equal(ipc_client_send(c, IPC_CLIENT_CTRL, "req", "x", 1, IPC_CLIENT_CTRL_RETRIES,
                                     IPC_CLIENT_CTRL_FIRST_SLEEP_NS, 0), -ECONNREFUSED);
    assert_int_equal(s.n, 10);
    for (int i = 0; i < 10; i++)
        assert_int_equal(s.ns[i], 10000000ull << i);
    s.n = 0;
    close(bind_path("dynolog_data"));
    assert_int_equal(ipc_client_send(c, IPC_CLIENT_DATA, "data", "{}", 2, IPC_CLIENT_DATA_RETRIES,
                                     IPC_CLIENT_DATA_FIRST_SLEEP_NS, IPC_CLIENT_QUIET), -ECONNREFUSED);
    assert_int_equal(s.n, 5);
    assert_int_equal(s.ns[4], 16000000ull);
    /* missing file: fails at once */
    s.n = 0;
    char path[256];
    snprintf(path, sizeof(path), "%s/dynolog.sock", dir);
    unlink(path);
    assert_int_equal(ipc_client_send(c, IPC_CLIENT_CTRL, "req", "x", 1, 10, 1000, 0), -ENOENT);
    assert_int_equal(s.n, 0);
    ipc_client_destroy(c);
}

/* Fake daemon: acks ctxt with a 4-byte count, answers req with CFG<n> or "" alternately. */
struct fake {
    int fd;
    int reqs, ctxts, statuses;
    volatile int quit;
};

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    uint8_t buf[70000], out[256];
    while (!f->quit) {
        struct sockaddr_un from;
        socklen_t flen = sizeof(from);
        struct timeval tv = { 0, 20000 };
        setsockopt(f->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        ssize_t n = recvfrom(f->fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
        struct ipc_view v;
        if (n <= 0 || ipc_msg_parse(buf, (size_t)n, (size_t)n, sizeof(buf), &v) != IPC_OK)
            continue;
        if (v.type == IPC_T_CTXT) {
            int32_t cnt = 1;
            long m = ipc_msg_build(out, sizeof(out), "ctxt", &cnt, 4);
            f->ctxts++;
            sendto(f->fd, out, (size_t)m, 0, (struct sockaddr *)&from, flen);
        } else if (v.type == IPC_T_REQ) {
            char cfg[32];
            int len;
            f->reqs++;
            len = (f->reqs % 2) ? snprintf(cfg, sizeof(cfg), "CFG%d\n", f->reqs) : 0;
            long m = ipc_msg_build(out, sizeof(out), "req", cfg, (size_t)len);
            sendto(f->fd, out, (size_t)m, 0, (struct sockaddr *)&from, flen);
        } else {
            f->statuses++;
        }
    }
    return NULL;
}

static void test_poll_no_lag(void **state)
{
    struct fake f = { 0 };
    pthread_t t;
    char buf[128];
    size_t len = 99;
    (void)state;

    f.fd = bind_path("dynolog");
    setenv("MSMONITOR_SOCKET_DIR", dir, 1);
    dyno_reset();
    assert_int_equal(pthread_create(&t, NULL, fake_main, &f), 0);
    assert_int_equal(dyno_init(3), 1);
    assert_int_equal(dyno_init(3), 1); /* second call: warning, still true */
    while (f.ctxts < 1 || f.statuses < 2)
        usleep(1000);
    usleep(20000); /* let the ack reach our queue before the first poll */
    assert_int_equal(dyno_poll(buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 5);
    assert_string_equal(buf, "CFG1\n");
    assert_int_equal(dyno_poll(buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 0);
    /* too small a buffer: -ENOSPC with the needed size, config kept */
    assert_int_equal(dyno_poll(buf, 3, &len), -ENOSPC);
    assert_int_equal(len, 5);
    assert_int_equal(dyno_poll(buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 5);
    assert_string_equal(buf, "CFG3\n");
    f.quit = 1;
    pthread_join(t, NULL);
    close(f.fd);
    dyno_reset();
}

static void test_init_without_daemon(void **state)
{
    char path[256];
    (void)state;
    snprintf(path, sizeof(path), "%s/dynolog.sock", dir);
    unlink(path);
    setenv("MSMONITOR_SOCKET_DIR", dir, 1);
    dyno_reset();
    assert_int_equal(dyno_init(0), 0);
    dyno_reset();
}

static int setup(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(dir));
    log_set_level(LOG_LVL_ERROR);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_schedule),
        cmocka_unit_test(test_poll_no_lag),
        cmocka_unit_test(test_init_without_daemon),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
