/* test_cli_val: f32 formatting/parsing (docs/design/contract.md#value-rules), JSON string escaping of the request
 * body, and the list/filter validators with their exact reasons. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli_buf.h"
#include "cli/cli_val.h"

static void fmt_case(float v, const char *want)
{
    char out[CLI_VAL_F32_LEN];
    assert_int_equal(cli_val_fmt_f32(v, out, sizeof(out)), 0);
    assert_string_equal(out, want);
}

static void test_f32_table(void **state)
{
    (void)state;
    fmt_case(0.0f, "0");
    fmt_case(-0.0f, "0");
    fmt_case(0.5f, "0.5");
    fmt_case(10.0f, "10");
    fmt_case(0.1f, "0.1");
    fmt_case(1e-7f, "0.0000001");
    fmt_case(1.0f / 3.0f, "0.33333334");
    fmt_case(100.25f, "100.25");
    fmt_case(16777216.0f, "16777216");
    fmt_case(1.5e10f, "15000000000");
    fmt_case(3.4028235e38f, "340282350000000000000000000000000000000");
    fmt_case(1e-45f, "0.000000000000000000000000000000000000000000001");
    fmt_case(-2.5f, "-2.5");
    fmt_case(123456.79f, "123456.79");
}

static void test_f32_parse(void **state)
{
    (void)state;
    float v;
    assert_int_equal(cli_val_parse_f32("0.5", &v), 0);
    assert_true(v == 0.5f);
    assert_int_equal(cli_val_parse_f32("1e-7", &v), 0);
    assert_true(v == 1e-7f);
    assert_int_equal(cli_val_parse_f32("+3", &v), 0);
    const char *bad[] = {"", " 1", "1 ", "nan", "inf", "-inf", "0x10", "1e39", "abc", "1,5", "."};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_not_equal(cli_val_parse_f32(bad[i], &v), 0);
}

static void test_json_escape(void **state)
{
    (void)state;
    struct cli_buf b;
    cli_buf_init(&b, 1024);
    const char in[] = "a\"b\\c\nd\te\x01\x7f/";
    cli_buf_json_str(&b, in, sizeof(in) - 1);
    assert_string_equal(cli_buf_str(&b), "a\\\"b\\\\c\\nd\\te\\u0001\x7f/");
    cli_buf_fini(&b);
    /* invalid UTF-8 becomes U+FFFD, as in every JSON the tree writes (jw_escape) */
    cli_buf_init(&b, 1024);
    cli_buf_json_str(&b, "x\xff\xc3\xa9", 4);
    assert_string_equal(cli_buf_str(&b), "x\xEF\xBF\xBD\xc3\xa9");
    cli_buf_fini(&b);
    /* over the cap: the buffer's error, not a cut string */
    cli_buf_init(&b, 4);
    cli_buf_json_str(&b, "\n\n\n", 3);
    assert_int_equal(b.err, -ENOSPC);
    cli_buf_fini(&b);
}

static void test_buf_cap(void **state)
{
    (void)state;
    struct cli_buf b;
    cli_buf_init(&b, 8);
    cli_buf_puts(&b, "12345678");
    assert_int_equal(b.err, 0);
    cli_buf_puts(&b, "9");
    assert_int_equal(b.err, -ENOSPC);
    assert_string_equal(cli_buf_str(&b), "12345678");
    cli_buf_fini(&b);
}

static void test_int_list(void **state)
{
    (void)state;
    char err[512];
    struct cli_buf b;
    cli_buf_init(&b, 4096);
    assert_int_equal(cli_val_int_list("pids", " 1, 2 ,3", 0, INT32_MAX, &b, err, sizeof(err)), 0);
    assert_string_equal(cli_buf_str(&b), "1,2,3");
    const char *bad[] = {"", "1,", ",1", "1,,2", "a", "1.5", "2147483648", "-1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        b.len = 0;
        assert_int_equal(cli_val_int_list("pids", bad[i], 0, INT32_MAX, &b, err, sizeof(err)), -EINVAL);
        char want[256];
        snprintf(want, sizeof(want),
                 "error: invalid value '%s' for '--pids': Must be a comma-separated list of integers",
                 bad[i]);
        assert_string_equal(err, want);
    }
    cli_buf_fini(&b);
}

static void filter_bad(const char *value, const char *reason)
{
    char err[4096], want[4096];
    assert_int_equal(cli_val_filter("filter", value, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "error: invalid value '%s' for '--filter': %s", value, reason);
    assert_string_equal(err, want);
}

static void test_filter(void **state)
{
    (void)state;
    char err[4096];
    const char *good[] = {"", "Kernel:MatMul", "Kernel:MatMul,Conv2D;Communication:AllReduce",
                          "Kernel:Mat;", " Kernel : A , B ; ;Memory:x", "MemCpy:x"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        assert_int_equal(cli_val_filter("filter", good[i], err, sizeof(err)), 0);
    filter_bad("Kernel", "item 'Kernel' must have the form Kind:Name[,Name...]");
    filter_bad("Kernel:a:b", "item 'Kernel:a:b' must have the form Kind:Name[,Name...]");
    filter_bad("Foo:Bar", "unknown activity kind 'Foo' (possible values: Marker, Kernel, API, "
               "Hccl, Memory, MemSet, MemCpy, Communication, AclAPI, NodeAPI, RuntimeAPI)");
    filter_bad("kernel:x", "unknown activity kind 'kernel' (possible values: Marker, Kernel, API, "
               "Hccl, Memory, MemSet, MemCpy, Communication, AclAPI, NodeAPI, RuntimeAPI)");
    filter_bad("Kernel:A,,B", "empty operator name in item 'Kernel:A,,B'");
    filter_bad("Kernel:", "empty operator name in item 'Kernel:'");
    filter_bad("Kernel:a=b", "must not contain '=' or line breaks");
    char big[1100];
    memset(big, 'x', 1025);
    memcpy(big, "Kernel:", 7);
    big[1025] = '\0';
    filter_bad(big, "longer than 1024 bytes");
    big[1024] = '\0';
    assert_int_equal(cli_val_filter("filter", big, err, sizeof(err)), 0);
}

static void test_kinds_and_host_sys(void **state)
{
    (void)state;
    char err[4096];
    assert_int_equal(cli_val_kinds("k", "Marker, Kernel,API,Hccl,Memory,MemSet,MemCpy,"
                                   "Communication,AclAPI,NodeAPI,RuntimeAPI", err, sizeof(err)), 0);
    assert_int_equal(cli_val_kinds("mspti-activity-kind", "Marker,", err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "error: invalid value 'Marker,' for '--mspti-activity-kind': Invalid "
                        "MSPTI activity kind: , possible values: Marker, Kernel, API, Hccl, Memory, "
                        "MemSet, MemCpy, Communication, AclAPI, NodeAPI, RuntimeAPI");
    struct cli_buf b;
    cli_buf_init(&b, 1024);
    assert_int_equal(cli_val_host_sys("host-sys", " cpu, mem ,osrt", &b, err, sizeof(err)), 0);
    assert_string_equal(cli_buf_str(&b), "cpu,mem,osrt");
    b.len = 0;
    assert_int_equal(cli_val_host_sys("host-sys", "cpu,gpu", &b, err, sizeof(err)), -EINVAL);
    cli_buf_fini(&b);
}

static void test_path_warnings(void **state)
{
    (void)state;
    struct cli_buf b;
    cli_buf_init(&b, 4096);
    cli_val_path_warnings("/nonexistent/a$b%c$", &b);
    assert_string_equal(cli_buf_str(&b), "WARNING: The path contains invalid character: $\n"
                        "WARNING: The path contains invalid character: %\n");
    b.len = 0;
    char link[] = "/tmp/cli_val_linkXXXXXX";
    assert_non_null(mkdtemp(link));
    char lp[64];
    snprintf(lp, sizeof(lp), "%s/l", link);
    assert_int_equal(symlink("/tmp", lp), 0);
    cli_val_path_warnings(lp, &b);
    char want[128];
    snprintf(want, sizeof(want), "WARNING: The path is a soft link: %s\n", lp);
    assert_string_equal(cli_buf_str(&b), want);
    unlink(lp);
    rmdir(link);
    cli_buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_table),  cmocka_unit_test(test_f32_parse),
        cmocka_unit_test(test_json_escape), cmocka_unit_test(test_buf_cap),
        cmocka_unit_test(test_int_list),   cmocka_unit_test(test_filter),
        cmocka_unit_test(test_kinds_and_host_sys), cmocka_unit_test(test_path_warnings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
