/* test_cfgcanon: the daemon's one strict reading of a config text — the attacks of issue 23
 * item 3 are refused with a reason naming the bad bytes, and accepted texts come back in their
 * canonical form, which is a fixed point. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "contract/cfgcanon.h"
#include "contract/kvtext.h"

static int canon(const char *in, size_t n, char **out, char *why)
{
    size_t len;
    return cfgcanon_text(in, n, out, &len, why, CFGCANON_WHY_MAX);
}

static void refused(const char *in, size_t n, const char *needle)
{
    char why[CFGCANON_WHY_MAX], *out = (char *)1;
    assert_int_equal(canon(in, n, &out, why), -EINVAL);
    assert_null(out);
    if (!strstr(why, needle))
        fail_msg("reason '%s' lacks '%s'", why, needle);
}

#define R(lit, needle) refused(lit, sizeof(lit) - 1, needle)

static void test_attacks_refused(void **state)
{
    (void)state;
    static const char hash[] = "ACTIVITIES_LOG_FILE=/ok/a\nACTIVITIES_LOG_FILE=/etc/x.json#=";
    refused(hash, sizeof(hash) - 1, "config line 2: '#'");
    R("ACTIVITIES_LOG_FILE\r=/etc/x", "control character U+000D");
    R("ACTIVITIES_LOG_FILE\xe3\x80\x80=/etc/x", "non-ASCII whitespace U+3000");
    R("ACTIVITIES_LOG_FILE\xc2\xa0=/etc/x", "U+00A0");
    R("ACTIVITIES_LOG_FILE\xe2\x80\xa8=/etc/x", "U+2028");
    R("ACTIVITIES_LOG_FILE\xc2\x85=/etc/x", "U+0085");
    R("A=/ok/x\xc2\x85" "ACTIVITIES_LOG_FILE=/etc", "U+0085");
    R("A=1\nB=2\nactivities_log_file=/etc", "config line 3: key byte 0x61");
    R("A=1\nA=2", "key repeated");
    R("A=1=2", "a second '='");
    R("A=\x1b[31m", "U+001B");
    R("A=x\vB", "U+000B");   /* a line break to Python's splitlines */
    R("A=x\fB", "U+000C");
    R("A\x00=1", "U+0000");
    R("A=\xff", "invalid UTF-8");
    R("=1", "an empty key");
    R("A.B=1", "key byte 0x2e");
    R("JUSTTEXT", "no '='");
    R("A=\xc2\x9b" "1", "U+009B");
}

static void test_canonical_form(void **state)
{
    (void)state;
    char why[CFGCANON_WHY_MAX], *out;
    size_t len;
    static const char in[] = "  A = 1 \n\n B=/tmp/\xc3\xa9t\xc3\xa9 x\nC=\t\nF=Kernel:\tMatMul\n";
    assert_int_equal(cfgcanon_text(in, sizeof(in) - 1, &out, &len, why, sizeof(why)), 0);
    assert_string_equal(out, "A=1\nB=/tmp/\xc3\xa9t\xc3\xa9 x\nC=\nF=Kernel:\tMatMul\n");
    assert_int_equal(len, strlen(out));
    char *again;
    size_t len2;
    assert_int_equal(cfgcanon_text(out, len, &again, &len2, why, sizeof(why)), 0);
    assert_string_equal(again, out);
    /* the daemon's reading of the canonical text is the dict it checked */
    struct kvtext kv;
    assert_int_equal(kvtext_parse(out, len, &kv), 0);
    assert_int_equal(kv.n, 4);
    assert_string_equal(kvtext_get(&kv, "B"), "/tmp/\xc3\xa9t\xc3\xa9 x");
    kvtext_fini(&kv);
    free(again);
    free(out);
    /* what dyno sends is already canonical: handed out byte for byte */
    static const char dyno[] = "NPU_MONITOR_START=true\nNPU_MONITOR_STOP=false\nNPU_MONITOR_FILTER=";
    assert_int_equal(cfgcanon_text(dyno, sizeof(dyno) - 1, &out, &len, why, sizeof(why)), 0);
    assert_string_equal(out, dyno);
    free(out);
    assert_int_equal(cfgcanon_text("", 0, &out, &len, why, sizeof(why)), 0);
    assert_string_equal(out, "");
    free(out);
}

static void test_long_line_reason_is_cut(void **state)
{
    (void)state;
    char in[4000], why[CFGCANON_WHY_MAX], *out;
    memset(in, 'A', sizeof(in));
    in[sizeof(in) - 1] = '\r';
    assert_int_equal(canon(in, sizeof(in), &out, why), -EINVAL);
    assert_true(strlen(why) < sizeof(why));
    assert_non_null(strstr(why, "...'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attacks_refused),
        cmocka_unit_test(test_canonical_form),
        cmocka_unit_test(test_long_line_reason_is_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
