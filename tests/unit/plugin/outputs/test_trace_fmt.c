/* test_trace_fmt: the nputrace formatter alone (no file): relative microsecond text, exact
 * events of a kernel, an API call, a memcpy, marker parts and instants, the ac2g flow halves,
 * metadata rows and the header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "export_util.h"
#include "plugin/outputs/trace_fmt.h"

static char *one(struct jw *w)
{
    assert_int_equal(w->err, 0);
    w->buf[w->len] = '\0';
    return w->buf;
}

static void test_us_text(void **state)
{
    char b[48];
    (void)state;
    assert_int_equal(trace_fmt_us(b, sizeof(b), 1012345, 1000000), 6);
    assert_string_equal(b, "12.345");
    trace_fmt_us(b, sizeof(b), 1000000, 1000000);
    assert_string_equal(b, "0.000");
    trace_fmt_us(b, sizeof(b), 999500, 1000000);
    assert_string_equal(b, "-0.500");
    /* Nanosecond order survives a double: 1 ns apart after an hour. */
    trace_fmt_us(b, sizeof(b), 3600000000001ull + 7, 7);
    assert_string_equal(b, "3600000000.001");
}

static void test_record_events(void **state)
{
    char buf[4096];
    struct jw w;
    (void)state;
    jw_init(&w, buf, sizeof(buf));
    struct mon_record k = r_kernel(2000, 5500, 1, 2, 3, "AI_CORE", "Mat\"Mul");
    assert_int_equal(trace_fmt_record(&w, &k, 1000), 0);
    assert_string_equal(one(&w), "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"Mat\\\"Mul\",\"pid\":1,\"tid\":2,"
                                 "\"ts\":1.000,\"dur\":3.500,\"args\":{\"kind\":\"Kernel\",\"correlation\":3,"
                                 "\"device\":1,\"stream\":2,\"type\":\"AI_CORE\"}}");
    jw_reset(&w);
    struct mon_record a = r_api(MON_KIND_RUNTIME_API, 1500, 1600, 7, 8, 3, "aclrtLaunchKernel");
    assert_int_equal(trace_fmt_record(&w, &a, 1000), 0);
    assert_string_equal(one(&w), "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"aclrtLaunchKernel\",\"pid\":7,"
                                 "\"tid\":8,\"ts\":0.500,\"dur\":0.100,\"args\":{\"kind\":\"RuntimeAPI\","
                                 "\"correlation\":3}}");
    jw_reset(&w);
    struct mon_record c = r_memcpy(2, 1, 4096, 3000, 4000, 0, 5, 9);
    assert_int_equal(trace_fmt_record(&w, &c, 1000), 0);
    assert_non_null(strstr(one(&w), "\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy HTOD\",\"pid\":0,\"tid\":5"));
    assert_non_null(strstr(one(&w), "\"bytes\":4096"));
    jw_reset(&w);
    struct mon_record m = r_marker(2, 0, 10, 1, 1, 1, "x", "d");
    assert_int_equal(trace_fmt_record(&w, &m, 0), -ENOENT); /* markers come as ranges */
    uint32_t pid, tid;
    assert_true(trace_fmt_track(&k, &pid, &tid));
    assert_int_equal(pid, 1);
    assert_int_equal(tid, 2);
    assert_false(trace_fmt_track(&a, &pid, &tid));
    assert_int_equal(pid, 7);
    assert_int_equal(trace_fmt_correlation(&c), 9);
    assert_int_equal(trace_fmt_start(&k), 2000);
}

static void test_ranges_flows_meta(void **state)
{
    char buf[4096];
    struct jw w;
    (void)state;
    jw_init(&w, buf, sizeof(buf));
    struct pl_range g = { .id = 4, .done = PL_PART_HOST, .parts = PL_PART_HOST, .host_start = 2000,
                          .host_end = 9000, .pid = 7, .tid = 8, .name = "step 5", .domain = "default" };
    assert_int_equal(trace_fmt_range(&w, &g, 1000), 0);
    assert_string_equal(one(&w), "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"step 5\",\"pid\":7,"
                                 "\"tid\":8,\"ts\":1.000,\"dur\":7.000,\"args\":{\"kind\":\"Marker\","
                                 "\"domain\":\"default\",\"id\":4}}");
    jw_reset(&w);
    g.done = PL_PART_DEVICE;
    g.dev_start = 3000;
    g.dev_end = 4000;
    g.device_id = 2;
    g.stream_id = 6;
    assert_int_equal(trace_fmt_range(&w, &g, 1000), 0);
    assert_non_null(strstr(one(&w), "\"cat\":\"gpu_user_annotation\",\"name\":\"step 5\",\"pid\":2,\"tid\":6,"
                                    "\"ts\":2.000,\"dur\":1.000"));
    jw_reset(&w);
    struct pl_range i = { .id = 5, .done = PL_PART_HOST, .instant = true, .host_start = 1500, .host_end = 1500,
                          .pid = 7, .tid = 8, .name = "mark", .domain = "" };
    assert_int_equal(trace_fmt_range(&w, &i, 1000), 0);
    assert_non_null(strstr(one(&w), "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"user_annotation\",\"name\":\"mark\""));
    jw_reset(&w);
    trace_fmt_flow(&w, true, 3, 7, 8, 1500, 1000);
    assert_string_equal(one(&w), "{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":3,\"pid\":7,\"tid\":8,"
                                 "\"ts\":0.500}");
    jw_reset(&w);
    trace_fmt_flow(&w, false, 3, 1, 2, 2000, 1000);
    assert_string_equal(one(&w), "{\"ph\":\"f\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":3,\"pid\":1,\"tid\":2,"
                                 "\"ts\":1.000,\"bp\":\"e\"}");
    jw_reset(&w);
    trace_fmt_meta(&w, "thread_name", 1, 2, "stream 2", 0);
    assert_string_equal(one(&w), "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":2,\"ts\":0,"
                                 "\"args\":{\"name\":\"stream 2\"}}");
    jw_reset(&w);
    trace_fmt_meta(&w, "process_sort_index", 1, 0, NULL, 1001);
    assert_non_null(strstr(one(&w), "\"args\":{\"sort_index\":1001}"));
}

static void test_header(void **state)
{
    char buf[4096];
    struct jw w;
    uint32_t devs[2] = { 0, 3 };
    struct trace_fmt_header h = { .rank = 1, .world_size = 2, .backend = "cupti", .pid = 42, .base_ns = 5000,
                                  .start_step = 5, .stop_step = 7, .devices = devs, .ndevices = 2 };
    (void)state;
    jw_init(&w, buf, sizeof(buf));
    trace_fmt_header(&w, &h);
    assert_string_equal(one(&w), "{\"schemaVersion\":1,\"distributedInfo\":{\"backend\":\"nccl\",\"rank\":1,"
                                 "\"rankKnown\":true,\"world_size\":2},\"deviceProperties\":[{\"id\":0,\"name\":"
                                 "\"CUDA device 0\"},{\"id\":3,\"name\":\"CUDA device 3\"}],"
                                 "\"baseTimeNanoseconds\":5000,\"msmonitor\":{\"activityBackend\":\"cupti\","
                                 "\"afterWindow\":0,\"pid\":42,\"startStep\":5,\"stopStep\":7,"
                                 "\"windowEndNanoseconds\":0},\"traceEvents\":[");
    assert_string_equal(trace_fmt_footer(), "],\"displayTimeUnit\":\"ms\"}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_us_text),
        cmocka_unit_test(test_record_events),
        cmocka_unit_test(test_ranges_flows_meta),
        cmocka_unit_test(test_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
