/* Unit test of the registration log levels (docs/design/ipc.md#registration, issue 10): a ctxt flood from one
 * (pid, job) through the IPC dispatch writes the FAQ's INFO line once, repeats go to DEBUG, and
 * every new (pid, job) gets its own INFO line; refusals at the cap are rate-limited. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
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
#include "daemon/ipc/ipc_server.h"
#include "daemon/ipc/registry.h"
#include "daemon/ipc/status.h"
#include "ipc/ipc_msg.h"

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Lines whose glog letter is lvl and that contain needle. */
static int count_lines(const char *text, char lvl, const char *needle)
{
    int n = 0;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof(buf), "%.*s", (int)len, line);
        if (buf[0] == lvl && strstr(buf, needle))
            n++;
        line += len + (end ? 1 : 0);
    }
    return n;
}

static void send_ctxt(struct ipc_server *s, int32_t npu, int32_t pid, int64_t job)
{
    uint8_t dg[IPC_MAX_DATAGRAM];
    struct ipc_ctxt c = { npu, pid, job };
    long n = ipc_msg_build(dg, sizeof(dg), "ctxt", &c, sizeof(c));
    assert_true(n > 0);
    /* an unnamed peer: the reply is skipped (rate-limited WARNING), the registration happens */
    struct sockaddr_un peer = { .sun_family = AF_UNIX };
    ipc_server_dispatch(s, -1, true, false, dg, (size_t)n, (size_t)n, &peer, sizeof(sa_family_t));
}

static void test_repeat_registrations(void **state)
{
    char dir[] = "/tmp/msmon_reglogXXXXXX";
    bool conflict;
    (void)state;
    assert_non_null(mkdtemp(dir));
    struct registry *reg = NULL;
    assert_int_equal(registry_create("node", &reg), 0);
    struct status_table *st = NULL;
    assert_int_equal(status_create(&st), 0);
    struct ipc_server_cfg cfg = { dir, 0600, dir, reg, st, NULL, NULL };
    struct ipc_server *s = NULL;
    assert_int_equal(ipc_server_create(&cfg, &conflict, &s), 0);
    assert_non_null(s);
    assert_false(conflict);

    log_set_level(LOG_LVL_INFO);
    logcap_clear();
    for (int i = 0; i < 5000; i++)
        send_ctxt(s, 0, 4242, 7);
    const char *text = logcap_text();
    assert_int_equal(count_lines(text, 'I', "Registered process (4242) for job 7."), 1);
    assert_int_equal(count(text, "Registered process"), 1);
    assert_int_equal(registry_ctxt_count(reg), 1);

    /* new (pid, job) pairs: one INFO line each; the same pid on another npu is a repeat */
    logcap_clear();
    send_ctxt(s, 0, 4243, 7);
    send_ctxt(s, 0, 4242, 8);
    send_ctxt(s, 1, 4242, 7);
    text = logcap_text();
    assert_int_equal(count_lines(text, 'I', "Registered process (4243) for job 7."), 1);
    assert_int_equal(count_lines(text, 'I', "Registered process (4242) for job 8."), 1);
    assert_int_equal(count(text, "Registered process (4242) for job 7."), 0);
    assert_int_equal(registry_ctxt_count(reg), 4);

    /* with --v the repeats are visible at DEBUG */
    log_set_level(LOG_LVL_DEBUG);
    logcap_clear();
    for (int i = 0; i < 3; i++)
        send_ctxt(s, 0, 4242, 7);
    text = logcap_text();
    /* (glog has no debug letter: debug lines are 'I' too, told apart by their text) */
    assert_int_equal(count(text, "Registered process (4242) for job 7. (already registered)"), 3);
    assert_int_equal(count(text, "Registered process"), 3);
    log_set_level(LOG_LVL_INFO);

    /* at the 50 cap, a flood of refused registrations writes the ERROR once a second at most */
    for (int i = 0; registry_ctxt_count(reg) < REGISTRY_MAX_CTXT; i++)
        send_ctxt(s, 0, 5000 + i, 9);
    logcap_clear();
    for (int i = 0; i < 1000; i++)
        send_ctxt(s, 0, 6000 + i, 9);
    text = logcap_text();
    assert_int_equal(count(text, "Max register count reached, can not register more libkineto contexts."), 1);
    assert_int_equal(registry_ctxt_count(reg), REGISTRY_MAX_CTXT);

    ipc_server_destroy(s);
    status_destroy(st);
    registry_destroy(reg);
    rmdir(dir);
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
        cmocka_unit_test(test_repeat_registrations),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
