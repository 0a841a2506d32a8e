/* test_contract: the shared contract's text modules — kind table and list rule, config keys,
 * the filter grammar in both modes (the tab case of issue 10 included), the KEY=value text,
 * UTF-8 and the rank reader. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../logcap.h"
#include "contract/cfgkeys.h"
#include "contract/outputs.h"
#include "contract/fgram.h"
#include "contract/kinds.h"
#include "contract/kvtext.h"
#include "contract/rank.h"
#include "common/utf8.h"

static void test_kinds_table(void **state)
{
    (void)state;
    static const char *const names[KINDS_COUNT] = { "Marker", "Kernel", "API", "Hccl", "Memory", "MemSet",
                                                    "MemCpy", "Communication", "AclAPI", "NodeAPI",
                                                    "RuntimeAPI" };
    static const int values[KINDS_COUNT] = { 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12 };
    char list[256] = "";
    for (size_t i = 0; i < KINDS_COUNT; i++) {
        assert_int_equal(kinds_at(i), values[i]);
        assert_string_equal(kinds_name(values[i]), names[i]);
        assert_int_equal(kinds_from_name(names[i], strlen(names[i])), values[i]);
        assert_true(values[i] < KINDS_VALUE_LIMIT);
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "", names[i]);
    }
    assert_string_equal(list, kinds_list_text);
    assert_int_equal(kinds_at(KINDS_COUNT), -EINVAL);
    assert_null(kinds_name(0));
    assert_null(kinds_name(8));
    assert_null(kinds_name(13));
    assert_int_equal(kinds_from_name("kernel", 6), -EINVAL); /* case-sensitive */
    assert_int_equal(kinds_from_name("Kernel ", 7), -EINVAL);
    assert_int_equal(kinds_from_name("", 0), -EINVAL);
    assert_int_equal(kinds_from_name("Kern", 4), -EINVAL);
}

static void test_kinds_list(void **state)
{
    (void)state;
    uint32_t mask = 0;
    const char *bad = NULL;
    size_t bad_len = 0;
    const char *s = " Kernel,\tAPI , Marker";
    assert_int_equal(kinds_parse_list(s, strlen(s), true, &mask, &bad, &bad_len), 0);
    assert_int_equal(mask, (1u << 2) | (1u << 3) | (1u << 1));
    /* empty items: strict refuses, lenient drops */
    s = "Kernel,,API";
    assert_int_equal(kinds_parse_list(s, strlen(s), true, &mask, &bad, &bad_len), -EINVAL);
    assert_int_equal(bad_len, 0);
    assert_int_equal(kinds_parse_list(s, strlen(s), false, &mask, NULL, NULL), 0);
    assert_int_equal(mask, (1u << 2) | (1u << 3));
    assert_int_equal(kinds_parse_list("", 0, false, &mask, NULL, NULL), 0);
    assert_int_equal(mask, 0);
    assert_int_equal(kinds_parse_list("", 0, true, &mask, NULL, NULL), -EINVAL);
    s = "Kernel, Bogus ,API";
    assert_int_equal(kinds_parse_list(s, strlen(s), false, &mask, &bad, &bad_len), -EINVAL);
    assert_int_equal(bad_len, 5);
    assert_memory_equal(bad, "Bogus", 5);
}

static void test_cfgkeys(void **state)
{
    (void)state;
    const char *t = CFGKEY_NPU_MONITOR_START "=true\n" CFGKEY_NPU_MONITOR_STOP "=false";
    assert_string_equal(CFGKEY_NPU_MONITOR_START, "NPU_MONITOR_START");
    assert_string_equal(CFGKEY_MSPTI_ACTIVITY_KIND, "MSPTI_ACTIVITY_KIND");
    assert_string_equal(CFGKEY_NPU_MONITOR_FILTER, "NPU_MONITOR_FILTER");
    assert_true(cfgkeys_is_npu_monitor_text(t, strlen(t)));
    assert_false(cfgkeys_is_npu_monitor_text("ACTIVITIES_LOG_FILE=x", 21));
    assert_false(cfgkeys_is_npu_monitor_text("NPU_MONITOR_STAR", 16));
    /* keys, not bytes: the same rule as the plugin's, whatever the key order or padding */
    assert_true(cfgkeys_is_npu_monitor_text(" NPU_MONITOR_START=true", 23));
    assert_true(cfgkeys_is_npu_monitor_text("DURATION=1\nNPU_MONITOR_START=true", 33));
    assert_false(cfgkeys_is_npu_monitor_text("X=NPU_MONITOR_START", 19)); /* a value is no key */
    assert_false(cfgkeys_is_npu_monitor_text(NULL, 0));
    {
        const char *mon[] = { "DURATION", "NPU_MONITOR_START" }, *tr[] = { "PROFILE_START_STEP", "ACTIVITIES_LOG_FILE" },
                   *it[] = { "ACTIVITIES_ITERATIONS" }, *both[] = { "ACTIVITIES_LOG_FILE", "NPU_MONITOR_START" },
                   *gpu[] = { "ACTIVITIES_DURATION_MSECS" };
        bool b = true;
        assert_int_equal(cfgkeys_classify(mon, 2), CFGKEYS_NPU_MONITOR);
        assert_int_equal(cfgkeys_classify(tr, 2), CFGKEYS_NPU_TRACE);
        assert_int_equal(cfgkeys_classify(it, 1), CFGKEYS_NPU_TRACE);
        assert_int_equal(cfgkeys_classify(both, 2), CFGKEYS_NPU_MONITOR);
        assert_int_equal(cfgkeys_classify(gpu, 1), CFGKEYS_OTHER);
        assert_int_equal(cfgkeys_classify_text("ACTIVITIES_ITERATIONS=2\n", 24), CFGKEYS_NPU_TRACE);
        /* the one boolean rule */
        assert_int_equal(cfgkeys_bool("TRUE", &b), 0);
        assert_true(b);
        assert_int_equal(cfgkeys_bool("false", &b), 0);
        assert_false(b);
        assert_int_equal(cfgkeys_bool("1", &b), -EINVAL);
        assert_int_equal(cfgkeys_bool("yes", &b), -EINVAL);
        assert_int_equal(cfgkeys_bool(NULL, &b), -EINVAL);
    }
}

/* The output table: exportable values parse without regard to case, the others never; the
 * CLI's literals and the config rule come from the same rows. */
static void test_outputs_table(void **state)
{
    static const char *const cli[] = { MSMON_OUTPUT_EXPORT_VALUES NULL };
    enum msmon_output o = MSMON_OUTPUT_COUNT;
    char rule[64];
    (void)state;
    assert_string_equal(cli[0], "DB");
    assert_string_equal(cli[1], "Jsonl");
    assert_null(cli[2]);
    assert_string_equal("x:" MSMON_OUTPUT_EXPORT_HELP, "x: DB Jsonl");
    assert_int_equal(outputs_export_parse("db", &o), 0);
    assert_int_equal(o, MSMON_OUTPUT_DB);
    assert_int_equal(outputs_export_parse("JSONL", &o), 0);
    assert_int_equal(o, MSMON_OUTPUT_JSONL);
    assert_int_equal(outputs_export_parse("trace", &o), -EINVAL); /* not selectable by a config */
    assert_int_equal(outputs_export_parse("metric", &o), -EINVAL);
    assert_int_equal(outputs_export_parse(NULL, &o), -EINVAL);
    outputs_export_rule(rule, sizeof(rule));
    assert_string_equal(rule, "db or jsonl");
    outputs_export_rule(rule, 4);
    assert_string_equal(rule, "db ");
    assert_string_equal(outputs_name(MSMON_OUTPUT_TRACE), "trace");
    assert_null(outputs_name(MSMON_OUTPUT_COUNT));
}

/* Collects parse events as text: "K" for a kind-on event, "K=name" per name, '|' separated. */
struct events {
    char buf[4096];
    size_t n;
};

static int collect(void *arg, int kind, const char *name, size_t len)
{
    struct events *e = arg;
    int w = name ? snprintf(e->buf + e->n, sizeof(e->buf) - e->n, "%d=%.*s|", kind, (int)len, name)
                 : snprintf(e->buf + e->n, sizeof(e->buf) - e->n, "%d|", kind);
    e->n += (size_t)w;
    return 0;
}

static int parse(const char *text, enum fgram_mode mode, struct events *e, size_t *items, char *err)
{
    memset(e, 0, sizeof(*e));
    err[0] = '\0';
    return fgram_parse(text, strlen(text), mode, collect, e, items, err, 2048);
}

static void test_fgram_tab_case(void **state)
{
    (void)state;
    struct events s, l;
    size_t ni = 0;
    char err[2048];
    /* the CLI accepted it, the plugin stored "\tMatMul" and nothing matched */
    assert_int_equal(parse("Kernel:\tMatMul", FGRAM_STRICT, &s, &ni, err), 0);
    assert_int_equal(ni, 1);
    assert_string_equal(s.buf, "2|2=MatMul|");
    assert_int_equal(parse("Kernel:\tMatMul", FGRAM_LENIENT, &l, &ni, err), 0);
    assert_string_equal(l.buf, "2|2=MatMul|");
    assert_int_equal(parse("\tKernel\t:\t MatMul\t,\tConv2D \t;\tCommunication:AllReduce\t", FGRAM_LENIENT, &l,
                           &ni, err), 0);
    assert_int_equal(ni, 2);
    assert_string_equal(l.buf, "2|2=MatMul|2=Conv2D|9|9=AllReduce|");
}

static void test_fgram_strict_errors(void **state)
{
    (void)state;
    struct events e;
    size_t ni = 0;
    char err[2048], big[1100];
    assert_int_equal(parse("Kernel:MatMul;Bogus:x", FGRAM_STRICT, &e, &ni, err), -EINVAL);
    assert_string_equal(err, "unknown activity kind 'Bogus' (possible values: Marker, Kernel, API, Hccl, Memory, "
                             "MemSet, MemCpy, Communication, AclAPI, NodeAPI, RuntimeAPI)");
    assert_int_equal(e.n, 0); /* nothing reported before the whole text is valid */
    assert_int_equal(parse("Kernel:a:b", FGRAM_STRICT, &e, &ni, err), -EINVAL);
    assert_string_equal(err, "item 'Kernel:a:b' must have the form Kind:Name[,Name...]");
    assert_int_equal(parse(" MatMul ", FGRAM_STRICT, &e, &ni, err), -EINVAL);
    assert_string_equal(err, "item 'MatMul' must have the form Kind:Name[,Name...]");
    assert_int_equal(parse("Kernel:a,\t,b", FGRAM_STRICT, &e, &ni, err), -EINVAL);
    assert_string_equal(err, "empty operator name in item 'Kernel:a,\t,b'");
    assert_int_equal(parse("Kernel:", FGRAM_STRICT, &e, &ni, err), -EINVAL);
    assert_string_equal(err, "empty operator name in item 'Kernel:'");
    assert_int_equal(parse("kernel:x", FGRAM_STRICT, &e, &ni, err), -EINVAL);
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(parse(big, FGRAM_STRICT, &e, &ni, err), -E2BIG);
    assert_string_equal(err, "longer than 1024 bytes");
    assert_int_equal(parse(big, FGRAM_LENIENT, &e, &ni, err), -E2BIG);
    /* accepted: empty text, empty items, Memory kinds */
    assert_int_equal(parse("", FGRAM_STRICT, &e, &ni, err), 0);
    assert_int_equal(ni, 0);
    assert_int_equal(parse(";Kernel:Mat;;\t; Memory:x;", FGRAM_STRICT, &e, &ni, err), 0);
    assert_int_equal(ni, 2);
    assert_string_equal(e.buf, "2|2=Mat|5|5=x|");
}

static void test_fgram_lenient_skips(void **state)
{
    (void)state;
    struct events e;
    size_t ni = 0;
    char err[2048];
    logcap_clear();
    assert_int_equal(parse("Kernel:a,,b;Bogus:x;Kernel:c:d;API: ;Marker:step", FGRAM_LENIENT, &e, &ni, err), 0);
    assert_int_equal(ni, 2);
    assert_string_equal(e.buf, "2|2=a|2=b|1|1=step|");
    const char *log = logcap_text();
    assert_non_null(strstr(log, "filter: unknown activity kind 'Bogus' in item 'Bogus:x'; skipped"));
    assert_non_null(strstr(log, "filter: invalid item 'Kernel:c:d' (expected Kind:Name[,Name...]); skipped"));
    assert_non_null(strstr(log, "filter: invalid item 'API:' (empty kind or name list); skipped"));
    /* a name list of only commas still names the kind (docs/design/contract.md#filter-grammar): kind on, no names */
    assert_int_equal(parse("Kernel: , ", FGRAM_LENIENT, &e, &ni, err), 0);
    assert_int_equal(ni, 1);
    assert_string_equal(e.buf, "2|");
    logcap_clear();
    assert_int_equal(parse(" x ; y ", FGRAM_LENIENT, &e, &ni, err), 0);
    assert_int_equal(ni, 0);
    assert_non_null(strstr(logcap_text(), "filter ' x ; y ' has no valid item; no filtering applied"));
}

static int stop_at_second(void *arg, int kind, const char *name, size_t len)
{
    int *calls = arg;
    (void)kind, (void)name, (void)len;
    return ++*calls == 2 ? -ENOMEM : 0;
}

static void test_fgram_callback_error(void **state)
{
    (void)state;
    int calls = 0;
    const char *t = "Kernel:a,b";
    assert_int_equal(fgram_parse(t, strlen(t), FGRAM_LENIENT, stop_at_second, &calls, NULL, NULL, 0), -ENOMEM);
    assert_int_equal(calls, 2);
}

/* Strict-accepts ⇒ identical events, on a table of inputs (the fuzz target does it at random). */
static void test_fgram_modes_agree(void **state)
{
    (void)state;
    static const char *const inputs[] = {
        "Kernel:MatMul", "Kernel:MatMul,Conv2D;Communication:AllReduce", "Kernel:Mat", " Kernel : Mat ",
        "\tKernel:\tMat\t", "Marker:a;Marker:b", "Hccl:x;Memory:y;MemSet:z;MemCpy:w", ";;", "  ", "",
        "API:x;AclAPI:y;NodeAPI:z;RuntimeAPI:w", "Kernel:a b,c\xff", "Kernel:\x01",
    };
    for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
        struct events s, l;
        size_t ns = 0, nl = 0;
        char err[2048];
        if (parse(inputs[i], FGRAM_STRICT, &s, &ns, err) != 0)
            continue;
        assert_int_equal(parse(inputs[i], FGRAM_LENIENT, &l, &nl, err), 0);
        assert_int_equal(ns, nl);
        assert_string_equal(s.buf, l.buf);
    }
}

static void test_kvtext(void **state)
{
    (void)state;
    struct kvtext kv;
    const char *t = "  A = 1 \nB=x=y\nnoeq\nC=\t\r\nA=2\n=empty key\nD= sp ace ";
    assert_int_equal(kvtext_parse(t, strlen(t), &kv), 0);
    assert_int_equal(kv.n, 4);
    assert_string_equal(kvtext_get(&kv, "A"), "2"); /* last wins */
    assert_null(kvtext_get(&kv, "B"));             /* '=' in the value: line dropped */
    assert_null(kvtext_get(&kv, "noeq"));
    assert_string_equal(kvtext_get(&kv, "C"), "");
    assert_string_equal(kvtext_get(&kv, ""), "empty key");
    assert_string_equal(kvtext_get(&kv, "D"), "sp ace");
    kvtext_fini(&kv);
    assert_int_equal(kvtext_parse("", 0, &kv), 0);
    assert_int_equal(kv.n, 0);
    kvtext_fini(&kv);
    /* the CLI's npu-monitor defaults (docs/design/cli.md item 1) */
    t = "NPU_MONITOR_START=false\nNPU_MONITOR_STOP=false\nREPORT_INTERVAL_S=60\nDURATION=0\nMSPTI_ACTIVITY_KIND=Marker\n"
        "NPU_MONITOR_LOG_FILE=\nNPU_MONITOR_EXPORT_TYPE=DB\nJSONL_ROTATE_LOG_LINES=\nJSONL_ROTATE_LOG_FILES=\n"
        "NPU_MONITOR_FILTER=";
    assert_int_equal(kvtext_parse(t, strlen(t), &kv), 0);
    assert_int_equal(kv.n, 10);
    assert_string_equal(kvtext_get(&kv, CFGKEY_MSPTI_ACTIVITY_KIND), "Marker");
    assert_string_equal(kvtext_get(&kv, CFGKEY_NPU_MONITOR_FILTER), "");
    kvtext_fini(&kv);
    /* key cap */
    char big[KVTEXT_MAX_KEYS * 12 + 64];
    size_t off = 0;
    for (int i = 0; i <= KVTEXT_MAX_KEYS; i++)
        off += (size_t)snprintf(big + off, sizeof(big) - off, "K%d=v\n", i);
    assert_int_equal(kvtext_parse(big, off, &kv), -E2BIG);
    kvtext_fini(&kv);
    kvtext_init(&kv);
    assert_int_equal(kvtext_put(&kv, "x", "1"), 0);
    assert_int_equal(kvtext_put(&kv, "x", "2"), 0);
    assert_int_equal(kv.n, 1);
    assert_string_equal(kvtext_get(&kv, "x"), "2");
    kvtext_fini(&kv);
    /* values read as Python's int(str) */
    int32_t v = 0;
    assert_int_equal(kvtext_int(" \t-12 \n", &v), 0);
    assert_int_equal(v, -12);
    assert_int_not_equal(kvtext_int("1 2", &v), 0);
    assert_int_not_equal(kvtext_int("", &v), 0);
    assert_int_not_equal(kvtext_int("2147483648", &v), 0);
}

static void test_utf8(void **state)
{
    (void)state;
    char out[4];
    assert_true(utf8_valid("abc\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 12));
    assert_true(utf8_valid("", 0));
    assert_false(utf8_valid("\xc0\xaf", 2));         /* overlong */
    assert_false(utf8_valid("\xe0\x80\xaf", 3));     /* overlong */
    assert_false(utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
    assert_false(utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
    assert_false(utf8_valid("\xf0\x80\x80\x80", 4)); /* overlong */
    assert_false(utf8_valid("\xc3", 1));             /* truncated */
    assert_false(utf8_valid("\xff", 1));
    assert_int_equal(utf8_seq_len((const unsigned char *)"\xef\xbf\xbf", 3), 3);
    assert_int_equal(utf8_seq_len((const unsigned char *)"\xf4\x8f\xbf\xbf", 4), 4);
    assert_int_equal(utf8_cut("ab\xc3\xa9", 4, 3), 2);
    assert_int_equal(utf8_cut("ab\xc3\xa9", 4, 4), 4);
    assert_int_equal(utf8_cut("a\xff\xff", 3, 2), 2);
    assert_int_equal(utf8_encode(0x20AC, out), 3);
    assert_memory_equal(out, "\xe2\x82\xac", 3);
    assert_int_equal(utf8_encode(0x1F600, out), 4);
    assert_int_equal(utf8_encode(0xD800, out), 0);
    assert_int_equal(utf8_encode(0x110000, out), 0);
}

static void test_rank(void **state)
{
    (void)state;
    assert_int_equal(rank_resolve(NULL, NULL), RANK_UNKNOWN);
    assert_int_equal(RANK_UNKNOWN, -1);
    assert_int_equal(rank_resolve("3", "5"), 3);
    assert_int_equal(rank_resolve(NULL, "5"), 5);
    assert_int_equal(rank_resolve(" 7\t", NULL), 7);
    assert_int_equal(rank_resolve("x", "5"), 5);  /* garbled RANK falls through */
    assert_int_equal(rank_resolve("-2", "5"), 5); /* so does a negative one */
    assert_int_equal(rank_resolve("-2", "-3"), RANK_UNKNOWN);
    assert_int_equal(rank_resolve("", ""), RANK_UNKNOWN);
    assert_int_equal(rank_resolve("2147483648", "1"), 1);
    setenv("RANK", "11", 1);
    setenv("RANK_ID", "12", 1);
    assert_int_equal(rank_from_env(), 11);
    unsetenv("RANK");
    assert_int_equal(rank_from_env(), 12);
    unsetenv("RANK_ID");
    assert_int_equal(rank_from_env(), RANK_UNKNOWN);
}

static int group_setup(void **state)
{
    (void)state;
    return logcap_open();
}

static int group_teardown(void **state)
{
    (void)state;
    logcap_close();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds_table),        cmocka_unit_test(test_kinds_list),
        cmocka_unit_test(test_cfgkeys),
        cmocka_unit_test(test_outputs_table),
        cmocka_unit_test(test_fgram_tab_case),
        cmocka_unit_test(test_fgram_strict_errors), cmocka_unit_test(test_fgram_lenient_skips),
        cmocka_unit_test(test_fgram_callback_error), cmocka_unit_test(test_fgram_modes_agree),
        cmocka_unit_test(test_kvtext),             cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_rank),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
