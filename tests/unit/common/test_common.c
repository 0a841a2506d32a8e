/* test_common: JSON writer escaping/number rules (01-rpc.md §3), strict parsers, and the
 * IPC datagram codec (03-ipc.md §2, §8 items 1 and 4). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <stdlib.h>
#include <unistd.h>

#include "common/jw.h"
#include "common/log.h"
#include "common/strutil.h"
#include "ipc/ipc_msg.h"

static void test_jw_sorted_compact(void **state)
{
    (void)state;
    char buf[256];
    struct jw w;
    jw_init(&w, buf, sizeof(buf));
    jw_obj_begin(&w);
    jw_key(&w, "a");
    jw_arr_begin(&w);
    jw_int(&w, -1);
    jw_uint(&w, 18446744073709551615ull);
    jw_arr_end(&w);
    jw_key(&w, "b");
    jw_bool(&w, true);
    jw_key(&w, "c");
    jw_obj_begin(&w);
    jw_obj_end(&w);
    jw_key(&w, "d");
    jw_arr_begin(&w);
    jw_arr_end(&w);
    jw_obj_end(&w);
    assert_int_equal(w.err, 0);
    assert_string_equal(buf, "{\"a\":[-1,18446744073709551615],\"b\":true,\"c\":{},\"d\":[]}");
}

static void test_jw_escape(void **state)
{
    (void)state;
    char buf[256];
    struct jw w;
    jw_init(&w, buf, sizeof(buf));
    jw_str(&w, "q\"b\\\b\f\n\r\t\x01\x1f\x7f\xc3\xa9\xff");
    assert_int_equal(w.err, 0);
    assert_string_equal(buf, "\"q\\\"b\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\xc3\xa9\xef\xbf\xbd\"");
}

static void test_jw_overflow(void **state)
{
    (void)state;
    char buf[8];
    struct jw w;
    jw_init(&w, buf, sizeof(buf));
    jw_str(&w, "0123456789");
    assert_int_equal(w.err, -ENOSPC);
    struct jw d;
    jw_init_dyn(&d, 64);
    for (int i = 0; i < 100; i++)
        jw_int(&d, 12345);
    assert_int_equal(d.err, -ENOSPC);
    jw_fini(&d);
}

static void test_jw_double(void **state)
{
    (void)state;
    char b[40];
    jw_fmt_double(b, sizeof(b), 0.1);
    assert_string_equal(b, "0.1");
    jw_fmt_double(b, sizeof(b), 2.0);
    assert_string_equal(b, "2.0");
    jw_fmt_double(b, sizeof(b), 1.5e300);
    assert_string_equal(b, "1.5e+300");
    jw_fmt_double(b, sizeof(b), 100.0);
    assert_string_equal(b, "100.0");
    jw_fmt_double(b, sizeof(b), 1e14);
    assert_string_equal(b, "100000000000000.0");
    jw_fmt_double(b, sizeof(b), 1e15);
    assert_string_equal(b, "1e+15");
    jw_fmt_double(b, sizeof(b), 0.001);
    assert_string_equal(b, "0.001");
    jw_fmt_double(b, sizeof(b), 0.0001);
    assert_string_equal(b, "0.0001");
    jw_fmt_double(b, sizeof(b), 0.00001);
    assert_string_equal(b, "1e-05");
    jw_fmt_double(b, sizeof(b), -12.5);
    assert_string_equal(b, "-12.5");
    jw_fmt_double(b, sizeof(b), 0.0);
    assert_string_equal(b, "0.0");
    jw_fmt_double(b, sizeof(b), 123456.789);
    assert_string_equal(b, "123456.789");
}

static void test_strutil(void **state)
{
    (void)state;
    int64_t i;
    uint32_t u;
    double d;
    assert_int_equal(str_to_i64("-9223372036854775808", &i), 0);
    assert_true(i == INT64_MIN);
    assert_int_equal(str_to_i64("9223372036854775808", &i), -ERANGE);
    assert_int_equal(str_to_i64("12a", &i), -EINVAL);
    assert_int_equal(str_to_i64("", &i), -EINVAL);
    assert_int_equal(str_to_u32("4294967295", &u), 0);
    assert_int_equal(str_to_u32("4294967296", &u), -ERANGE);
    assert_int_equal(str_to_u32("-1", &u), -EINVAL);
    assert_int_equal(str_to_decimal("0.5", &d), 0);
    assert_true(d == 0.5);
    assert_int_equal(str_to_decimal("-3", &d), 0);
    assert_int_equal(str_to_decimal(".5", &d), 0);
    assert_int_equal(str_to_decimal("1e3", &d), -EINVAL);
    assert_int_equal(str_to_decimal("-", &d), -EINVAL);
    assert_int_equal(str_to_decimal("1.", &d), 0);
    assert_string_equal(errno_name(ECONNREFUSED), "ECONNREFUSED");
    assert_string_equal(errno_name(9999), "E9999");
}

static void test_ipc_worked_example(void **state)
{
    (void)state;
    /* 03-ipc.md §2 worked example: req from 1234 with ancestors 1000 and 900 */
    uint8_t payload[28];
    struct ipc_req r = {.type = 3, .n = 3, .job_id = 0};
    int32_t pids[3] = {1234, 1000, 900};
    memcpy(payload, &r, 16);
    memcpy(payload + 16, pids, 12);
    uint8_t out[IPC_MAX_DATAGRAM];
    long n = ipc_msg_build(out, sizeof(out), "req", payload, sizeof(payload));
    assert_int_equal(n, 68);
    static const uint8_t expect_hdr[12] = {0x1c, 0, 0, 0, 0, 0, 0, 0, 'r', 'e', 'q', 0};
    assert_memory_equal(out, expect_hdr, 12);
    for (int k = 12; k < 40; k++)
        assert_int_equal(out[k], 0);
    static const uint8_t expect_pl[28] = {3, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                          0xd2, 4, 0, 0, 0xe8, 3, 0, 0, 0x84, 3, 0, 0};
    assert_memory_equal(out + 40, expect_pl, 28);

    struct ipc_view v;
    assert_int_equal(ipc_msg_parse(out, 68, 68, IPC_MAX_DATAGRAM, &v), IPC_OK);
    assert_int_equal(v.type, IPC_T_REQ);
    struct ipc_req h;
    int32_t got[IPC_REQ_MAX_PIDS];
    int used;
    assert_int_equal(ipc_parse_req(&v, &h, got, &used), 0);
    assert_int_equal(used, 3);
    assert_int_equal(got[2], 900);
}

static void test_ipc_drops(void **state)
{
    (void)state;
    uint8_t out[IPC_MAX_DATAGRAM + 100];
    struct ipc_view v;
    memset(out, 0, sizeof(out));
    assert_int_equal(ipc_msg_parse(out, 39, 39, IPC_MAX_DATAGRAM, &v), IPC_DROP_TOO_SMALL);
    assert_int_equal(ipc_msg_parse(out, 4136, 5000, IPC_MAX_DATAGRAM, &v), IPC_DROP_TOO_BIG);
    memset(out + 8, 'x', 32);
    assert_int_equal(ipc_msg_parse(out, 40, 40, IPC_MAX_DATAGRAM, &v), IPC_DROP_NO_NUL);
    long n = ipc_msg_build(out, sizeof(out), "ctxt", "abcd", 4);
    assert_int_equal(n, 44);
    uint64_t big = 100;
    memcpy(out, &big, 8);
    assert_int_equal(ipc_msg_parse(out, 44, 44, IPC_MAX_DATAGRAM, &v), IPC_DROP_TRUNCATED);
    /* size smaller than received: the first `size` bytes are used */
    uint64_t small = 2;
    memcpy(out, &small, 8);
    assert_int_equal(ipc_msg_parse(out, 44, 44, IPC_MAX_DATAGRAM, &v), IPC_OK);
    assert_int_equal(v.len, 2);
    /* exact tag match, not prefix (A14) */
    n = ipc_msg_build(out, sizeof(out), "reqx", NULL, 0);
    assert_int_equal(ipc_msg_parse(out, (size_t)n, (size_t)n, IPC_MAX_DATAGRAM, &v), IPC_OK);
    assert_int_equal(v.type, IPC_T_UNKNOWN);
    struct ipc_ctxt c;
    assert_int_equal(ipc_parse_ctxt(&v, &c), -EMSGSIZE);
}

static void test_ipc_addr(void **state)
{
    (void)state;
    struct sockaddr_un a;
    socklen_t len;
    assert_int_equal(ipc_addr_abstract(&a, &len, "dynolog", true), 0);
    assert_int_equal(len, 11);
    char name[64];
    assert_int_equal(ipc_client_name(name, sizeof(name)), 0);
    assert_int_equal(strlen(name), 52);
    assert_int_equal(name[16 + 14], '4');
    assert_true(strchr("89ab", name[16 + 19]) != NULL);
    char path[200];
    assert_int_equal(ipc_socket_path("/tmp/x/", "dynolog", path, sizeof(path)), 0);
    assert_string_equal(path, "/tmp/x/dynolog.sock");
    char longdir[120];
    memset(longdir, 'a', 100);
    longdir[0] = '/';
    longdir[100] = 0;
    assert_int_equal(ipc_socket_path(longdir, "dynolog", path, sizeof(path)), -ENAMETOOLONG);
}

/* log_set_escape: a message carrying CR, ESC, a newline and invalid UTF-8 is one line with
 * visible escapes, on the stderr stream and in long lines alike; off, lines are unchanged. */
static void test_log_escape(void **state)
{
    char path[] = "/tmp/msmon_logesc_XXXXXX", buf[4096];
    int fd = mkstemp(path);
    ssize_t n;

    (void)state;
    assert_true(fd >= 0);
    log_set_stderr_fd(fd);
    log_set_escape(1);
    log_write(LOG_LVL_ERROR, "x.c", 1, "value '%s'", "1\rE1204 forged\x1b[2J\n\xff\xc3\xa9\\");
    log_write_long(LOG_LVL_ERROR, "x.c", 2, "long\x07", 5);
    log_set_escape(0);
    log_write(LOG_LVL_ERROR, "x.c", 3, "raw\t");
    log_set_stderr_fd(-1);
    n = pread(fd, buf, sizeof(buf) - 1, 0);
    assert_true(n > 0);
    buf[n] = '\0';
    close(fd);
    unlink(path);
    assert_non_null(strstr(buf, "] value '1\\rE1204 forged\\x1b[2J\\n\\xff\xc3\xa9\\\\'\n"));
    assert_non_null(strstr(buf, "] long\\x07\n"));
    assert_non_null(strstr(buf, "] raw\t\n"));
    assert_null(strchr(buf, '\r'));
    assert_null(strchr(buf, '\x1b'));
    {
        int lines = 0;
        for (const char *p = buf; *p; p++)
            lines += *p == '\n';
        assert_int_equal(lines, 3);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jw_sorted_compact), cmocka_unit_test(test_jw_escape),
        cmocka_unit_test(test_jw_overflow),       cmocka_unit_test(test_jw_double),
        cmocka_unit_test(test_strutil),           cmocka_unit_test(test_ipc_worked_example),
        cmocka_unit_test(test_ipc_drops),         cmocka_unit_test(test_ipc_addr),
        cmocka_unit_test(test_log_escape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
