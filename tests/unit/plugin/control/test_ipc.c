/* test_ipc: the plugin IPC client against real sockets — retry schedule on a refusing
 * socket (through the sleep seam), no retries on a missing one, and DynoMonitor polling
 * that returns the reply to the current request even when the registration ack is queued
 * first (D3), against a fake daemon thread bound at <dir>/dynolog.sock; the control poller's
 * back-off while the daemon is absent, its one "lost" and one "back" line, re-registration
 * after a daemon restart, and the status hand-off. */
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
#include "../../logcap.h"
#include "plugin/control/poller.h"
#include "plugin/control/dynolog_link.h"
#include "plugin/control/ipc_client.h"
#include "plugin/penv.h"

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
    dynolog_reset();
    assert_int_equal(pthread_create(&t, NULL, fake_main, &f), 0);
    assert_int_equal(dynolog_init(3), 1);
    assert_int_equal(dynolog_init(3), 1); /* second call: warning, still true */
    while (f.ctxts < 1 || f.statuses < 2)
        usleep(1000);
    usleep(20000); /* let the ack reach our queue before the first poll */
    assert_int_equal(dynolog_poll(buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 5);
    assert_string_equal(buf, "CFG1\n");
    assert_int_equal(dynolog_poll(buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 0);
    /* too small a buffer: -ENOSPC with the needed size, config kept */
    assert_int_equal(dynolog_poll(buf, 3, &len), -ENOSPC);
    assert_int_equal(len, 5);
    assert_int_equal(dynolog_poll(buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 5);
    assert_string_equal(buf, "CFG3\n");
    f.quit = 1;
    pthread_join(t, NULL);
    close(f.fd);
    dynolog_reset();
}

static void test_init_without_daemon(void **state)
{
    char path[256];
    (void)state;
    snprintf(path, sizeof(path), "%s/dynolog.sock", dir);
    unlink(path);
    setenv("MSMONITOR_SOCKET_DIR", dir, 1);
    dynolog_reset();
    assert_int_equal(dynolog_init(0), 0);
    dynolog_reset();
}

static void test_backoff_delay(void **state)
{
    struct poller_backoff b = { 1.0, 30.0 };
    (void)state;
    assert_true(poller_backoff_delay(&b, 1) == 1.0);
    assert_true(poller_backoff_delay(&b, 2) == 2.0);
    assert_true(poller_backoff_delay(&b, 5) == 16.0);
    assert_true(poller_backoff_delay(&b, 6) == 30.0);
    assert_true(poller_backoff_delay(&b, 1000) == 30.0);
    b = (struct poller_backoff){ 0.05, 0.2 };
    assert_true(poller_backoff_delay(&b, 3) == 0.2);
    /* defaults and the env overrides (bounded by the 30 s cap) */
    unsetenv("MSMONITOR_RETRY_INITIAL_S");
    unsetenv("MSMONITOR_RETRY_MAX_S");
    penv_reload();
    poller_backoff_from_env(&b);
    assert_true(b.initial_s == 1.0 && b.cap_s == 30.0);
    setenv("MSMONITOR_RETRY_INITIAL_S", "0.1", 1);
    setenv("MSMONITOR_RETRY_MAX_S", "60", 1);
    penv_reload();
    poller_backoff_from_env(&b);
    assert_true(b.initial_s == 0.1 && b.cap_s == 30.0);
    unsetenv("MSMONITOR_RETRY_INITIAL_S");
    unsetenv("MSMONITOR_RETRY_MAX_S");
    penv_reload();
}

static void wait_state(struct poller *p, int (*pred)(const struct poller_state *, int), int arg)
{
    struct poller_state st;
    for (int i = 0; i < 1000; i++) {
        poller_get_state(p, &st);
        if (pred(&st, arg))
            return;
        usleep(10000);
    }
    fail_msg("poller state not reached: registered %d reachable %d failures %u registrations %u", st.registered,
             st.reachable, st.failures, st.registrations);
}

static int failed_at_least(const struct poller_state *st, int n) { return st->failures >= (unsigned)n; }
static int reachable_with(const struct poller_state *st, int regs)
{
    return st->reachable && st->registrations >= (unsigned)regs;
}

static size_t count_of(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

struct cfgs {
    int n;
};

static void count_config(void *ctx, const char *text, size_t len)
{
    (void)text;
    (void)len;
    ((struct cfgs *)ctx)->n++;
}

static void test_poller_never_gives_up(void **state)
{
    struct poller_cfg cfg = { .name = "TestPoll", .rank = 0, .period_s = 0.05,
                                      .backoff = { 0.05, 0.2 }, .on_config = count_config };
    struct poller *p;
    struct cfgs got = { 0 };
    struct fake f = { 0 };
    pthread_t t;
    char path[256];
    (void)state;

    snprintf(path, sizeof(path), "%s/dynolog.sock", dir);
    unlink(path);
    setenv("MSMONITOR_SOCKET_DIR", dir, 1);
    dynolog_reset();
    log_set_level(LOG_LVL_INFO);
    logcap_clear();
    cfg.ctx = &got;
    /* No daemon: the poller keeps retrying, quietly after its first line. */
    assert_int_equal(poller_create(&cfg, &p), 0);
    wait_state(p, failed_at_least, 4);
    assert_int_equal(count_of(logcap_text(), "TestPoll: Init dynolog failed !"), 1);
    /* The daemon appears: registered within one retry period (cap 0.2 s), then polled. */
    f.fd = bind_path("dynolog");
    assert_int_equal(pthread_create(&t, NULL, fake_main, &f), 0);
    wait_state(p, reachable_with, 1);
    assert_true(f.ctxts >= 1);
    while (got.n < 1)
        usleep(1000);
    assert_int_equal(count_of(logcap_text(), "TestPoll: Init dynolog success !"), 1);
    /* Status hand-off: posted from "the training thread", sent by the poller. */
    int before = f.statuses;
    poller_post_status(p, 0, 7, -1, -1);
    while (f.statuses <= before)
        usleep(1000);
    /* The daemon goes away (socket removed): one line, then silent retries. */
    f.quit = 1;
    pthread_join(t, NULL);
    close(f.fd);
    unlink(path);
    wait_state(p, failed_at_least, 4);
    assert_int_equal(count_of(logcap_text(), "TestPoll: lost the daemon"), 1);
    /* A new daemon: registered again, one line. */
    f = (struct fake){ 0 };
    f.fd = bind_path("dynolog");
    assert_int_equal(pthread_create(&t, NULL, fake_main, &f), 0);
    wait_state(p, reachable_with, 2);
    assert_true(f.ctxts >= 1);
    assert_int_equal(count_of(logcap_text(), "TestPoll: the daemon is back"), 1);
    assert_int_equal(count_of(logcap_text(), "TestPoll: lost the daemon"), 1);
    poller_destroy(p);
    f.quit = 1;
    pthread_join(t, NULL);
    close(f.fd);
    unlink(path);
    dynolog_reset();
    log_set_level(LOG_LVL_ERROR);
}

static int setup(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(dir));
    log_set_level(LOG_LVL_ERROR);
    assert_int_equal(logcap_open(), 0);
    return 0;
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
        cmocka_unit_test(test_retry_schedule),
        cmocka_unit_test(test_poll_no_lag),
        cmocka_unit_test(test_init_without_daemon),
        cmocka_unit_test(test_backoff_delay),
        cmocka_unit_test(test_poller_never_gives_up),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
