/* test_cli_hosts: target-list expansion (docs/design/cli.md#targets): comma split outside brackets,
 * SLURM ranges, padding, cartesian order, unix: targets, dedupe, errors, hostfiles; the
 * fan-out that serves every host once whatever the parallelism. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "cli/cli_fanout.h"
#include "cli/hosts.h"

/* Expand `text` and compare with the space-separated `want`. */
static void expand_ok(const char *text, const char *want)
{
    struct hosts h;
    char err[512] = "";
    char got[4096] = "";
    size_t off = 0;
    hosts_init(&h);
    int r = hosts_add_list(&h, text, strlen(text), err, sizeof(err));
    if (r != 0)
        fail_msg("'%s' failed: %s", text, err);
    for (size_t i = 0; i < h.n; i++)
        off += (size_t)snprintf(got + off, sizeof(got) - off, "%s%s", i ? " " : "", h.v[i]);
    assert_string_equal(got, want);
    hosts_fini(&h);
}

static void expand_bad(const char *text, const char *reason_part)
{
    struct hosts h;
    char err[512] = "";
    hosts_init(&h);
    assert_int_equal(hosts_add_list(&h, text, strlen(text), err, sizeof(err)), -EINVAL);
    if (!strstr(err, reason_part))
        fail_msg("'%s': reason '%s' lacks '%s'", text, err, reason_part);
    hosts_fini(&h);
}

static void test_expand(void **state)
{
    (void)state;
    expand_ok("localhost", "localhost");
    expand_ok("n[01-03],m[8-10]", "n01 n02 n03 m8 m9 m10");
    expand_ok("r[1-2]n[1-2]", "r1n1 r1n2 r2n1 r2n2");
    expand_ok("node[1,3,5-6]", "node1 node3 node5 node6");
    expand_ok("x[08-11]", "x08 x09 x10 x11");
    expand_ok("[7]", "7");
    expand_ok("n[007]", "n007");
    expand_ok(" a , b ,a", "a b");
    expand_ok("n[1-2],n2,n[1-3]", "n1 n2 n3");
    expand_ok("unix:,unix:/tmp/x.sock", "unix: unix:/tmp/x.sock");
    expand_ok("[::1],::1,127.0.0.1", "[::1] ::1 127.0.0.1");
    expand_ok("a[1-2]-b", "a1-b a2-b");
}

static void test_expand_errors(void **state)
{
    (void)state;
    expand_bad("a,,b", "empty host name");
    expand_bad("a,", "empty host name");
    expand_bad("", "empty host name");
    expand_bad("n[3-1]", "lo > hi");
    expand_bad("n[a]", "invalid range");
    expand_bad("n[1-]", "invalid range");
    expand_bad("n[]", "invalid range");
    expand_bad("n[1,,2]", "invalid range");
    expand_bad("n[[1]]", "nested brackets");
    expand_bad("n[1", "unbalanced brackets");
    expand_bad("n1]", "unbalanced brackets");
    expand_bad("n[0-65536]", "more than 65536 hosts");
    expand_bad("a[0-300]b[0-300]", "more than 65536 hosts");
    expand_bad("unix:relative", "unix:/absolute/path");
}

static void test_cap_total(void **state)
{
    (void)state;
    struct hosts h;
    char err[512];
    hosts_init(&h);
    assert_int_equal(hosts_add_list(&h, "a[0-65535]", 10, err, sizeof(err)), 0);
    assert_int_equal(h.n, 65536);
    assert_string_equal(h.v[65535], "a65535");
    /* A duplicate does not count; one more distinct host does. */
    assert_int_equal(hosts_add_list(&h, "a7", 2, err, sizeof(err)), 0);
    assert_int_equal(hosts_add_list(&h, "b", 1, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "more than 65536 hosts");
    hosts_fini(&h);
}

static void test_hostfile(void **state)
{
    (void)state;
    char path[] = "/tmp/cli_hostsXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char text[] = "# cluster\n\nn[1-2]  # two nodes\n  m1,n1\r\nunix:\n#n9\nlast";
    assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
    close(fd);
    struct hosts h;
    char err[1024];
    hosts_init(&h);
    assert_int_equal(hosts_add_list(&h, "m1", 2, err, sizeof(err)), 0);
    assert_int_equal(hosts_add_file(&h, path, err, sizeof(err)), 0);
    assert_int_equal(h.n, 5);
    assert_string_equal(h.v[0], "m1");
    assert_string_equal(h.v[1], "n1");
    assert_string_equal(h.v[2], "n2");
    assert_string_equal(h.v[3], "unix:");
    assert_string_equal(h.v[4], "last");
    hosts_fini(&h);

    fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "ok\nbad[2-1]\n", 12), 12);
    close(fd);
    hosts_init(&h);
    assert_int_equal(hosts_add_file(&h, path, err, sizeof(err)), -EINVAL);
    char want[1024];
    snprintf(want, sizeof(want),
             "error: invalid value 'bad[2-1]' for '--hostfile' (%s line 2): invalid range '2-1' (lo > hi)",
             path);
    assert_string_equal(err, want);
    hosts_fini(&h);
    unlink(path);

    hosts_init(&h);
    assert_int_equal(hosts_add_file(&h, "/nonexistent/hosts", err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "error: invalid value '/nonexistent/hosts' for '--hostfile': cannot "
                        "read: No such file or directory");
    hosts_fini(&h);
}

struct visits {
    _Atomic int n[64];
};

static void visit(void *ctx, size_t i)
{
    struct visits *v = ctx;
    atomic_fetch_add(&v->n[i], 1);
}

static void test_fanout(void **state)
{
    (void)state;
    static const int par[] = { 1, 3, 64, 1000, 0 }; /* 0: still one thread */
    struct visits v;

    for (size_t k = 0; k < sizeof(par) / sizeof(par[0]); k++) {
        memset(&v, 0, sizeof(v));
        assert_int_equal(cli_fanout(50, par[k], visit, &v), 0);
        for (size_t i = 0; i < 64; i++)
            assert_int_equal(atomic_load(&v.n[i]), i < 50 ? 1 : 0);
    }
    assert_int_equal(cli_fanout(0, 4, visit, &v), 0); /* no host: nothing runs */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expand),
        cmocka_unit_test(test_expand_errors),
        cmocka_unit_test(test_cap_total),
        cmocka_unit_test(test_hostfile),
        cmocka_unit_test(test_fanout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
