/* test_common: JSON writer escaping/number rules (docs/design/rpc.md#reply-serialisation) and strict parsers. The IPC
 * datagram codec has its own test (tests/unit/ipc/test_ipc_msg.c). */
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
    assert_true(str_printable("mspti /usr/lib/libmspti.so", 64));
    assert_false(str_printable("a\x1b[2Jb", 64));
    assert_false(str_printable("a\x7f", 64));
    assert_false(str_printable("abcd", 4)); /* no NUL within cap */
    assert_true(str_printable("abc", 4));
}

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
        cmocka_unit_test(test_strutil),
        cmocka_unit_test(test_log_escape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
