/* Unit tests of issue 13's daemon-side checks: path resolution and the --allowed_log_dirs
 * allow-list (.., symlinks, missing tails), log escaping, the refused-config reply, the
 * registry's per-uid quota and dead-pid rules, and the IPC credential policy. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../logcap.h"
#include "common/logesc.h"
#include "common/pathnorm.h"
#include "daemon/ipc/ipc_server.h"
#include "daemon/ipc/registry.h"
#include "daemon/ipc/status.h"
#include "daemon/rpc/rpc_methods.h"
#include "ipc/ipc_msg.h"

static char tmp[64];

static void mk(const char *rel)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", tmp, rel);
    assert_int_equal(mkdir(p, 0755), 0);
}

static void ln(const char *target, const char *rel)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", tmp, rel);
    assert_int_equal(symlink(target, p), 0);
}

static void expect_resolve(const char *rel, const char *want_rel)
{
    char in[256], want[256], out[PATHNORM_MAX];
    snprintf(in, sizeof(in), "%s/%s", tmp, rel);
    if (want_rel[0] == '/')
        snprintf(want, sizeof(want), "%s", want_rel);
    else
        snprintf(want, sizeof(want), "%s/%s", tmp, want_rel);
    assert_int_equal(pathnorm_resolve(in, out, sizeof(out)), 0);
    assert_string_equal(out, want);
}

static int setup_tree(void **state)
{
    (void)state;
    char real[PATHNORM_MAX];
    snprintf(tmp, sizeof(tmp), "/tmp/msmon_secXXXXXX");
    if (!mkdtemp(tmp) || !realpath(tmp, real))
        return -1;
    size_t rl = strlen(real);
    if (rl >= sizeof(tmp))
        return -1;
    memcpy(tmp, real, rl + 1);   /* /tmp may itself be a symlink */
    mk("ok");
    mk("ok/sub");
    mk("other");
    ln("/etc", "ok/etc_link");
    ln("../other", "ok/rel_link");
    ln("sub", "ok/inner_link");
    return logcap_open();
}

static int teardown_tree(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    logcap_close();
    return system(cmd) == 0 ? 0 : -1;
}

static void test_resolve(void **state)
{
    (void)state;
    char out[PATHNORM_MAX];
    expect_resolve("ok/sub", "ok/sub");
    expect_resolve("ok/./sub//", "ok/sub");
    expect_resolve("ok/../other", "other");
    expect_resolve("ok/new/deeper", "ok/new/deeper");            /* missing tail kept */
    expect_resolve("ok/new/../sub", "ok/sub");                   /* .. over a missing part */
    expect_resolve("ok/new/../etc_link/x", "/etc/x");            /* and back onto a symlink */
    expect_resolve("ok/etc_link/newdir", "/etc/newdir");
    expect_resolve("ok/rel_link/f", "other/f");
    expect_resolve("ok/inner_link/f", "ok/sub/f");
    assert_int_equal(pathnorm_resolve("/../../etc", out, sizeof(out)), 0);
    assert_string_equal(out, "/etc");
    assert_int_equal(pathnorm_resolve("relative/x", out, sizeof(out)), -EINVAL);
    assert_int_equal(pathnorm_resolve("", out, sizeof(out)), -EINVAL);
    assert_true(pathnorm_below("/a/b", "/a"));
    assert_true(pathnorm_below("/a", "/a"));
    assert_false(pathnorm_below("/ab", "/a"));
    assert_true(pathnorm_below("/x", "/"));
}

static void test_roots(void **state)
{
    (void)state;
    struct pathnorm_roots r;
    char err[512], list[600], why[PATHNORM_MAX * 2];
    snprintf(list, sizeof(list), "%s/ok,,%s/ok/../other", tmp, tmp);
    assert_int_equal(pathnorm_roots_parse(list, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n, 2);
    char p[256];
    snprintf(p, sizeof(p), "%s/ok/sub/run1", tmp);
    assert_true(pathnorm_roots_allow(&r, p, why, sizeof(why)));
    snprintf(p, sizeof(p), "%s/other/x", tmp);
    assert_true(pathnorm_roots_allow(&r, p, why, sizeof(why)));
    snprintf(p, sizeof(p), "%s/ok/../../../etc/cron.d", tmp);
    assert_false(pathnorm_roots_allow(&r, p, why, sizeof(why)));
    assert_non_null(strstr(why, "resolves to '/etc/cron.d', outside every allowed directory"));
    snprintf(p, sizeof(p), "%s/ok/etc_link/sub", tmp);
    assert_false(pathnorm_roots_allow(&r, p, why, sizeof(why)));
    assert_non_null(strstr(why, "resolves to '/etc/sub'"));
    assert_false(pathnorm_roots_allow(&r, "out/rel", why, sizeof(why)));
    assert_string_equal(why, "'out/rel' is not an absolute path");
    /* start-up errors name the item */
    assert_int_equal(pathnorm_roots_parse("rel/dir", &r, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "--allowed_log_dirs: 'rel/dir' is not an absolute path");
    assert_int_equal(pathnorm_roots_parse("/nonexistent/dir", &r, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "'/nonexistent/dir' is not an existing directory"));
}

static void test_logesc(void **state)
{
    (void)state;
    char out[128];
    const char in[] = "a\nE1201 forged\r\t\\\x01\x7f";
    assert_string_equal(logesc(in, sizeof(in) - 1, out, sizeof(out)),
                        "a\\nE1201 forged\\r\\t\\\\\\x01\\x7f");
    /* valid UTF-8 stays, invalid bytes are shown */
    assert_string_equal(logesc("\xc3\xa9\xff\xc3", 4, out, sizeof(out)), "\xc3\xa9\\xff\\xc3");
    /* cut on a whole unit, with "..." */
    assert_string_equal(logesc("abcdefgh", 8, out, 8), "abcd...");
    assert_string_equal(logesc("abc", 3, out, 4), "abc");
    assert_string_equal(logesc("\n\n\n", 3, out, 7), "\\n\\n\\n");
    assert_string_equal(logesc("\n\n\n", 3, out, 6), "\\n...");
}

static void test_refused_config(void **state)
{
    (void)state;
    struct pathnorm_roots r;
    char err[256], list[128], why[PATHNORM_MAX * 2], cfg[512];
    snprintf(list, sizeof(list), "%s/ok", tmp);
    assert_int_equal(pathnorm_roots_parse(list, &r, err, sizeof(err)), 0);
    snprintf(cfg, sizeof(cfg), "NPU_MONITOR_START=true\nNPU_MONITOR_LOG_FILE=%s/ok/run\n", tmp);
    assert_int_equal(rpc_check_log_dirs(&r, cfg, strlen(cfg), false, why, sizeof(why)), 0);
    /* kvtext's last-wins: the value the plugin will use is the one checked */
    snprintf(cfg, sizeof(cfg), "NPU_MONITOR_LOG_FILE=%s/ok/run\n  NPU_MONITOR_LOG_FILE = /etc/x \n", tmp);
    assert_int_equal(rpc_check_log_dirs(&r, cfg, strlen(cfg), false, why, sizeof(why)), -EACCES);
    assert_non_null(strstr(why, "NPU_MONITOR_LOG_FILE '/etc/x' is outside every allowed directory"));
    /* empty npu-monitor log file = metrics to the daemon: fine; a trace must name a file */
    assert_int_equal(rpc_check_log_dirs(&r, "NPU_MONITOR_LOG_FILE=\n", 22, false, why, sizeof(why)), 0);
    assert_int_equal(rpc_check_log_dirs(&r, "PROFILE_START_STEP=1\n", 21, true, why, sizeof(why)),
                     -EACCES);
    assert_non_null(strstr(why, "must name its ACTIVITIES_LOG_FILE"));
    assert_int_equal(rpc_check_log_dirs(NULL, "ACTIVITIES_LOG_FILE=/etc\n", 25, true, why, sizeof(why)), 0);

    /* through rpc_handle: the reply says why; the registered process's mailbox stays empty */
    struct registry *reg = NULL;
    assert_int_equal(registry_create("n", &reg), 0);
    struct status_table *st = NULL;
    assert_int_equal(status_create(&st), 0);
    struct rpc_ctx ctx = { .reg = reg, .st = st, .version = "0" };
    int32_t me = (int32_t)getpid();
    char *got = NULL, body[1024];
    size_t len;
    assert_int_equal(registry_poll(reg, 0, &me, 1, 3, REG_ORIGIN_KINETO, 1, &got, &len), 0);
    rpc_set_allowed_log_dirs(&r);
    snprintf(body, sizeof(body),
             "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"ACTIVITIES_LOG_FILE=%s/ok/../other/t.json\","
             "\"pids\":[0]}", tmp);
    char *reply = NULL;
    assert_int_equal(rpc_handle(&ctx, body, strlen(body), &reply, &len), 0);
    assert_non_null(reply);
    assert_non_null(strstr(reply, "{\"commandStatus\":\"refused\",\"reason\":\"ACTIVITIES_LOG_FILE '"));
    assert_non_null(strstr(reply, "outside every allowed directory (--allowed_log_dirs="));
    free(reply);
    assert_int_equal(registry_poll(reg, 0, &me, 1, 3, REG_ORIGIN_KINETO, 2, &got, &len), 0);
    assert_null(got);
    /* inside: delivered */
    snprintf(body, sizeof(body),
             "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"ACTIVITIES_LOG_FILE=%s/ok/t.json\","
             "\"pids\":[0]}", tmp);
    assert_int_equal(rpc_handle(&ctx, body, strlen(body), &reply, &len), 0);
    assert_non_null(strstr(reply, "\"activityProfilersTriggered\":["));
    free(reply);
    assert_int_equal(registry_poll(reg, 0, &me, 1, 3, REG_ORIGIN_KINETO, 3, &got, &len), 0);
    assert_non_null(got);
    free(got);
    rpc_set_allowed_log_dirs(NULL);
    /* a newline in the body is logged escaped, on one line */
    logcap_clear();
    const char inj[] = "{\"fn\":\"getVersion\",\"x\":\"\nE1201 00:00:00.000000 1 forged] pwned\"}";
    assert_int_equal(rpc_handle(&ctx, inj, sizeof(inj) - 1, &reply, &len), 0);
    free(reply);
    assert_true(logcap_has("\\nE1201 00:00:00.000000 1 forged] pwned"));
    status_destroy(st);
    registry_destroy(reg);
}

static pid_t dead_pid(void)
{
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0)
        _exit(0);
    assert_int_equal(waitpid(c, NULL, 0), c);
    return c;
}

static void test_registry_policy(void **state)
{
    (void)state;
    struct registry *r = NULL;
    assert_int_equal(registry_create("n", &r), 0);
    char *cfg;
    size_t len;
    registry_set_policy(r, 2, true);
    int32_t me = (int32_t)getpid(), parent = (int32_t)getppid(), dead = (int32_t)dead_pid();
    /* quota 2 for uid 1000: a third distinct process is refused, another uid still fits */
    int32_t a[] = { me, 1 }, b[] = { me, 2 }, c[] = { me, 3 };
    assert_int_equal(registry_poll_uid(r, 1000, 0, a, 2, 3, REG_ORIGIN_MSMON, 1, &cfg, &len), 0);
    assert_int_equal(registry_poll_uid(r, 1000, 0, b, 2, 3, REG_ORIGIN_MSMON, 1, &cfg, &len), 0);
    assert_int_equal(registry_poll_uid(r, 1000, 0, c, 2, 3, REG_ORIGIN_MSMON, 1, &cfg, &len), -EDQUOT);
    assert_int_equal(registry_poll_uid(r, 1001, 0, c, 2, 3, REG_ORIGIN_MSMON, 1, &cfg, &len), 0);
    assert_int_equal(registry_poll_uid(r, 1000, 0, a, 2, 3, REG_ORIGIN_MSMON, 1, &cfg, &len), 0); /* known */
    assert_true(logcap_has("uid 1000 holds its quota of 2 registry entries"));
    /* a dead pid is never registered */
    assert_int_equal(registry_poll_uid(r, 1002, 0, &dead, 1, 3, REG_ORIGIN_MSMON, 1, &cfg, &len), -ESRCH);
    assert_int_equal(registry_count(r), 3);
    registry_destroy(r);

    /* a process that died after registering takes no process_limit slot */
    assert_int_equal(registry_create("n", &r), 0);
    registry_set_policy(r, 0, false);
    int32_t d1 = (int32_t)dead_pid();
    assert_int_equal(registry_poll(r, 0, &d1, 1, 3, REG_ORIGIN_MSMON, 1, &cfg, &len), 0);
    assert_int_equal(registry_poll(r, 0, &parent, 1, 3, REG_ORIGIN_MSMON, 1, &cfg, &len), 0);
    registry_set_policy(r, 0, true);
    struct reg_set_result res;
    assert_int_equal(registry_set_config(r, 0, NULL, 0, "A=1", 3, 1, NULL, NULL, NULL, &res), 0);
    assert_int_equal(res.n_triggered, 1);
    assert_int_equal(res.triggered[0], parent);
    reg_set_result_fini(&res);
    registry_destroy(r);
}

static void send_ctxt(struct ipc_server *s, pid_t cred_pid, uid_t uid, int32_t claimed, bool kineto)
{
    uint8_t buf[IPC_HDR_SIZE + sizeof(struct ipc_ctxt)];
    struct ipc_ctxt c = { .npu = 0, .pid = claimed, .job_id = 7 };
    long n = ipc_msg_build(buf, sizeof(buf), IPC_TYPE_CTXT, &c, sizeof(c));
    struct ucred cr = { .pid = cred_pid, .uid = uid, .gid = 0 };
    struct sockaddr_un peer = { .sun_family = AF_UNIX };
    ipc_server_dispatch_cred(s, -1, kineto, false, buf, (size_t)n, (size_t)n, &peer,
                             sizeof(sa_family_t), &cr);
}

static void test_ipc_peers(void **state)
{
    (void)state;
    char kdir[128];
    snprintf(kdir, sizeof(kdir), "%s/k", tmp);
    mkdir(kdir, 0700);
    struct registry *reg = NULL;
    assert_int_equal(registry_create("n", &reg), 0);
    struct status_table *st = NULL;
    assert_int_equal(status_create(&st), 0);
    struct ipc_server_cfg cfg = { tmp, 0600, kdir, reg, st, NULL, NULL };
    bool conflict;
    struct ipc_server *s = NULL;
    assert_int_equal(ipc_server_create(&cfg, &conflict, &s), 0);
    assert_non_null(s);
    pid_t me = getpid();
    logcap_clear();
    send_ctxt(s, me, 65534, me, true);                   /* another uid: dropped */
    assert_int_equal(registry_ctxt_count(reg), 0);
    assert_true(logcap_has("ipc: dropped datagram on Kineto endpoint from uid 65534"));
    send_ctxt(s, me, geteuid(), 1, false);               /* speaks for pid 1: dropped */
    assert_int_equal(registry_ctxt_count(reg), 0);
    assert_true(logcap_has("it speaks for pid 1, which is neither the sender nor its descendant"));
    send_ctxt(s, me, geteuid(), 0, false);               /* pid 0 is a claim too: dropped */
    assert_int_equal(registry_ctxt_count(reg), 0);       /* (its line is rate-limited away) */
    send_ctxt(s, getppid(), geteuid(), me, false);       /* the parent speaks for us: fine */
    assert_int_equal(registry_ctxt_count(reg), 1);
    uid_t extra = 65534;
    assert_int_equal(ipc_server_set_peers(s, &extra, 1, true), 0);
    send_ctxt(s, me, 65534, me, false);                  /* allowed by the flag now */
    assert_int_equal(registry_ctxt_count(reg), 1);       /* same (job, pid, npu): no new entry */
    assert_false(logcap_has("uid not allowed (2 so far)"));
    uid_t u[IPC_MAX_ALLOWED_UIDS];
    size_t n;
    char err[128];
    assert_int_equal(ipc_parse_uids("1000,,65534", u, IPC_MAX_ALLOWED_UIDS, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ipc_parse_uids("1000,bob", u, IPC_MAX_ALLOWED_UIDS, &n, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "--ipc_allowed_uids: 'bob' is not a uid");
    ipc_server_destroy(s);
    status_destroy(st);
    registry_destroy(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_roots),
        cmocka_unit_test(test_logesc),
        cmocka_unit_test(test_refused_config),
        cmocka_unit_test(test_registry_policy),
        cmocka_unit_test(test_ipc_peers),
    };
    return cmocka_run_group_tests(tests, setup_tree, teardown_tree);
}
