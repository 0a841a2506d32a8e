/* Unit tests of the daemon flag parser: syntax forms, booleans, flagfiles, errors. */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/flags.h"

static int parse(struct daemon_flags *f, char *err, int argc, ...)
{
    char *argv[32] = { "dynolog" };
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc; i++)
        argv[i + 1] = va_arg(ap, char *);
    va_end(ap);
    flags_defaults(f);
    return flags_parse(argc + 1, argv, f, err, 256);
}

static void test_defaults(void **state)
{
    struct daemon_flags f;
    (void)state;
    flags_defaults(&f);
    assert_int_equal(f.port, 1778);
    assert_int_equal(f.rpc_max_clients, 256);   /* issue 13: room for a slowloris peer */
    assert_int_equal(f.rpc_max_clients_per_peer, 8);
    assert_int_equal(f.registry_uid_quota, 1024);
    assert_true(f.ipc_peer_pid_check);
    assert_string_equal(f.allowed_log_dirs, "");
    assert_string_equal(f.ipc_allowed_uids, "");
    assert_string_equal(f.certs_dir, "NO_CERTS");
    assert_false(f.enable_ipc_monitor);
    assert_true(f.extended_host_metrics);
    assert_int_equal(f.ipc_socket_mode, 0600);
    assert_string_equal(f.allow_interface_prefixes, "eno,ens,enp,enx,eth");
    assert_int_equal(f.registry_gc_interval_ms, 60000);
}

static void test_forms(void **state)
{
    struct daemon_flags f;
    char err[256];
    (void)state;
    assert_int_equal(parse(&f, err, 5, "--port=1", "-rpc-max-clients", "3", "--enable-ipc-monitor",
                           "--noextended_host_metrics"), 0);
    assert_int_equal(f.port, 1);
    assert_int_equal(f.rpc_max_clients, 3);
    assert_true(f.enable_ipc_monitor);
    assert_false(f.extended_host_metrics);
    const char *yes[] = { "true", "1", "yes", "t", "Y", "TRUE" };
    const char *no[] = { "false", "0", "no", "f", "N" };
    char buf[64];
    for (size_t i = 0; i < 6; i++) {
        snprintf(buf, sizeof(buf), "--use_JSON=%s", yes[i]);
        assert_int_equal(parse(&f, err, 1, buf), 0);
        assert_true(f.use_JSON);
    }
    for (size_t i = 0; i < 5; i++) {
        snprintf(buf, sizeof(buf), "--use-JSON=%s", no[i]);
        assert_int_equal(parse(&f, err, 1, buf), 0);
        assert_false(f.use_JSON);
    }
    assert_int_equal(parse(&f, err, 2, "--ipc_socket_mode", "0660"), 0);
    assert_int_equal(f.ipc_socket_mode, 0660);
    /* later occurrences win; positional arguments are ignored */
    assert_int_equal(parse(&f, err, 3, "--port=5", "stray", "--port=6"), 0);
    assert_int_equal(f.port, 6);
}

static void test_errors(void **state)
{
    struct daemon_flags f;
    char err[256];
    (void)state;
    assert_int_equal(parse(&f, err, 1, "--nosuch"), -EINVAL);
    assert_string_equal(err, "ERROR: unknown command line flag 'nosuch'");
    assert_int_equal(parse(&f, err, 1, "--port=12x"), -EINVAL);
    assert_string_equal(err, "ERROR: illegal value '12x' specified for int32 flag 'port'");
    assert_int_equal(parse(&f, err, 1, "--use_JSON=maybe"), -EINVAL);
    assert_string_equal(err, "ERROR: illegal value 'maybe' specified for bool flag 'use_JSON'");
    /* out of range: a plain message with the range */
    assert_int_equal(parse(&f, err, 1, "--port=70000"), -EINVAL);
    assert_string_equal(err, "ERROR: value '70000' for flag 'port' is out of range 0..65535");
    assert_int_equal(parse(&f, err, 1, "--port=99999999999"), -EINVAL);
    assert_string_equal(err, "ERROR: value '99999999999' for flag 'port' is out of range 0..65535");
    assert_int_equal(parse(&f, err, 1, "--ipc_socket_mode=1777"), -EINVAL);
    assert_string_equal(err, "ERROR: value '1777' for flag 'ipc_socket_mode' is out of range 0..777");
    assert_int_equal(parse(&f, err, 1, "--ipc_socket_mode=0999"), -EINVAL);
    assert_int_equal(parse(&f, err, 1, "--rpc_max_clients=0"), -EINVAL);
    assert_int_equal(parse(&f, err, 1, "--port"), -EINVAL);
    assert_string_equal(err, "ERROR: flag 'port' is missing its argument");
    assert_int_equal(parse(&f, err, 1, "--noport"), -EINVAL);   /* --no only for booleans */
    /* ignored upstream flags: accepted, value swallowed */
    assert_int_equal(parse(&f, err, 4, "--dcgm_fields", "1,2", "--enable_gpu_monitor", "--port=9"), 0);
    assert_int_equal(f.port, 9);
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void test_flagfile(void **state)
{
    struct daemon_flags f;
    char err[256], dir[] = "/tmp/flagsXXXXXX", a[128], b[128], line[200];
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(a, sizeof(a), "%s/a", dir);
    snprintf(b, sizeof(b), "%s/b", dir);
    write_file(b, "# comment\n\n   --port=2000  \n--use_JSON\n");
    snprintf(line, sizeof(line), "--enable-ipc-monitor\n--flagfile=%s\n--rpc_max_clients=4\n", b);
    write_file(a, line);
    assert_int_equal(parse(&f, err, 3, "--port=1", "--flagfile", a), 0);
    assert_int_equal(f.port, 2000);
    assert_true(f.use_JSON && f.enable_ipc_monitor);
    assert_int_equal(f.rpc_max_clients, 4);
    /* argv after the flagfile overrides it */
    snprintf(line, sizeof(line), "--flagfile=%s", a);
    assert_int_equal(parse(&f, err, 2, line, "--port=3"), 0);
    assert_int_equal(f.port, 3);
    /* self-inclusion stops at depth 8 */
    snprintf(line, sizeof(line), "--flagfile=%s\n", a);
    write_file(a, line);
    assert_int_not_equal(parse(&f, err, 2, "--flagfile", a), 0);
    assert_non_null(strstr(err, "nested deeper than 8"));
    assert_int_not_equal(parse(&f, err, 1, "--flagfile=/nonexistent/x"), 0);
    /* /dev/zero used to be read forever at 93 % CPU; a directory or FIFO too */
    assert_int_equal(parse(&f, err, 1, "--flagfile=/dev/zero"), -EINVAL);
    assert_string_equal(err, "ERROR: flagfile '/dev/zero' is not a regular file");
    assert_int_equal(parse(&f, err, 2, "--flagfile", dir), -EINVAL);
    assert_non_null(strstr(err, "is not a regular file"));
    /* a regular file over the 1 MiB cap is refused before it is read */
    FILE *fp = fopen(a, "w");
    assert_non_null(fp);
    for (int i = 0; i < (1 << 20) / 15 + 1; i++)
        fputs("# padding line\n", fp);
    fclose(fp);
    assert_int_equal(parse(&f, err, 2, "--flagfile", a), -EINVAL);
    assert_non_null(strstr(err, "larger than the 1048576-byte cap"));
    unlink(a);
    unlink(b);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_forms),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_flagfile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
