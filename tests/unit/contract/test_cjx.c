/* test_cjx: the JSON reader over cJSON — exact integers, strictness cJSON lacks (RFC numbers,
 * UTF-8, control bytes, \u0000), depth, last-wins lookup and the nlohmann-style dump. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "contract/cjx.h"

static void test_roundtrip(void **state)
{
    (void)state;
    static const struct { const char *in, *out; } cases[] = {
        { "{\"b\":1,\"a\":[true,false,null],\"a\":2}", "{\"a\":2,\"b\":1}" },
        { "\"\\u0001\\u001f\\b\\f\\n\\r\\t\\\"\\\\\\/\"", "\"\\u0001\\u001f\\b\\f\\n\\r\\t\\\"\\\\/\"" },
        { "\"\\u00e9\\ud83d\\ude00\x7f\"", "\"\xc3\xa9\xf0\x9f\x98\x80\x7f\"" },
        { "[18446744073709551615,-9223372036854775808,1749889801120000000,1.5,25e-1]",
          "[18446744073709551615,-9223372036854775808,1749889801120000000,1.5,2.5]" },
        { "{\"\\u00ff\":1,\"z\":2,\"A\":3}", "{\"A\":3,\"z\":2,\"\xc3\xbf\":1}" },
        { " \t\n{ \"k\" : [ ] , \"j\" : { } }\r\n", "{\"j\":{},\"k\":[]}" },
        { "[0,-0,1e2,9223372036854775807]", "[0,0,100.0,9223372036854775807]" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *v = NULL;
        char buf[256];
        struct jw w;
        assert_int_equal(cjx_parse(cases[i].in, strlen(cases[i].in), 10, &v), 0);
        jw_init(&w, buf, sizeof(buf));
        cjx_write(&w, v);
        assert_int_equal(w.err, 0);
        assert_string_equal(buf, cases[i].out);
        cJSON_Delete(v);
    }
}

static void test_rejects(void **state)
{
    (void)state;
    static const char *const bad[] = { "", "01", "1.", "[1,]", "{\"a\"}", "\"\\ud800\"", "tru", "\"a\x01\"",
                                       "\"\xc0\xaf\"", "{\"a\":1,}", "-", "+1", ".5", "[1-2]", "\"\\x\"",
                                       "\"\\u0000\"", "{\x01\"a\":1}", "[1] x", "\"abc", "[1e]",
                                       "\"\xed\xa0\x80\"", "[[[[[[[[[[[]]]]]]]]]]]", "\xef\xbb\xbf{}",
                                       "[1234567890123456789012345678901234567890123456789012345678901234]" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cJSON *v = NULL;
        assert_int_equal(cjx_parse(bad[i], strlen(bad[i]), 10, &v), -EINVAL);
        assert_null(v);
    }
    cJSON *v = NULL;
    /* depth: {"a":[1]} is 2 */
    assert_int_equal(cjx_parse("{\"a\":[1]}", 9, 1, &v), -EINVAL);
    assert_int_equal(cjx_parse("{\"a\":[1]}", 9, 2, &v), 0);
    cJSON_Delete(v);
    /* the length bounds the input, no NUL needed after it */
    assert_int_equal(cjx_parse("[1]]", 3, 10, &v), 0);
    cJSON_Delete(v);
}

static void test_numbers_and_lookup(void **state)
{
    (void)state;
    const char *t = "{\"t\":1749889801120000001,\"u\":18446744073709551615,\"d\":2.75,\"b\":true,"
                    "\"s\":\"x\",\"k\":1,\"k\":2,\"neg\":-5,\"n\":null}";
    cJSON *v = NULL;
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    assert_int_equal(cjx_parse(t, strlen(t), 10, &v), 0);
    assert_int_equal(cjx_number(cjx_get(v, "t"), &i, &u, &d), CJX_INT);
    assert_int_equal(i, 1749889801120000001LL); /* beyond a double's 53 bits, exact */
    assert_int_equal(cjx_number(cjx_get(v, "u"), &i, &u, &d), CJX_UINT);
    assert_true(u == UINT64_MAX);
    assert_int_equal(cjx_number(cjx_get(v, "d"), &i, &u, &d), CJX_DOUBLE);
    assert_true(d == 2.75);
    assert_int_equal(cjx_number(cjx_get(v, "s"), &i, &u, &d), CJX_NAN);
    assert_int_equal(cjx_to_i64(cjx_get(v, "k"), INT64_MIN, INT64_MAX, &i), 0);
    assert_int_equal(i, 2); /* last wins */
    assert_int_equal(cjx_to_i64(cjx_get(v, "b"), 0, 1, &i), 0);
    assert_int_equal(i, 1);
    assert_int_equal(cjx_to_i64(cjx_get(v, "d"), 0, 10, &i), 0);
    assert_int_equal(i, 2); /* truncated */
    assert_int_equal(cjx_to_i64(cjx_get(v, "u"), INT64_MIN, INT64_MAX, &i), -ERANGE);
    assert_int_equal(cjx_to_i64(cjx_get(v, "neg"), 0, 10, &i), -ERANGE);
    assert_int_equal(cjx_to_i64(cjx_get(v, "s"), 0, 10, &i), -EINVAL);
    assert_string_equal(cjx_type_name(cjx_get(v, "n")), "null");
    assert_string_equal(cjx_type_name(cjx_get(v, "b")), "boolean");
    assert_string_equal(cjx_type_name(cjx_get(v, "d")), "number");
    assert_string_equal(cjx_type_name(cjx_get(v, "s")), "string");
    assert_string_equal(cjx_type_name(v), "object");
    assert_null(cjx_get(v, "missing"));
    assert_null(cjx_get(cjx_get(v, "s"), "x"));
    cJSON_Delete(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_numbers_and_lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
