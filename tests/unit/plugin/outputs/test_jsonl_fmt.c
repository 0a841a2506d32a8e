/* test_jsonl_fmt: the JSONL formatter alone (no processor, no file): exact lines of a record,
 * of host and device marker parts, escaping, and the room bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "export_util.h"
#include "plugin/outputs/jsonl_fmt.h"

static void line_of(const struct mon_record *r, char *out)
{
    struct jsonl_strs st;
    jsonl_fmt_strings(r, &st);
    char *end = jsonl_fmt_record(out, r, &st);
    assert_non_null(end);
    assert_true((size_t)(end - out) <= jsonl_fmt_bound(st.total));
    *end = '\0';
}

static void test_record_lines(void **state)
{
    (void)state;
    char buf[4096];
    struct mon_record k = r_kernel(10, 20, 1, 2, 3, "AI_CORE", "Mat\"Mul\n");
    line_of(&k, buf);
    assert_string_equal(buf, "{\"correlationId\":3,\"deviceId\":1,\"endNs\":20,\"kind\":\"Kernel\",\"name\":"
                             "\"Mat\\\"Mul\\n\",\"startNs\":10,\"streamId\":2,\"type\":\"AI_CORE\"}");
    struct mon_record a = r_api(MON_KIND_ACL_API, 1, 2, 7, 8, 9, "aclOp");
    line_of(&a, buf);
    assert_string_equal(buf, "{\"correlationId\":9,\"endNs\":2,\"kind\":\"AclAPI\",\"name\":\"aclOp\","
                             "\"processId\":7,\"startNs\":1,\"threadId\":8}");
    struct mon_record m = r_marker(2, 0, 1, 1, 1, 1, "x", "d");
    struct jsonl_strs st;
    jsonl_fmt_strings(&m, &st);
    assert_null(jsonl_fmt_record(buf, &m, &st)); /* markers are lines of completed parts */
}

/* Every other kind's line, byte for byte: the sorted keys and value forms readers rely on. */
static void test_device_kind_lines(void **state)
{
    (void)state;
    static const struct {
        struct mon_record r;
        const char *line;
    } cases[] = {
        {{.kind = MON_KIND_COMMUNICATION,
          .u.comm = {.data_type = 4, .count = 1024, .device_id = 1, .stream_id = 2, .start = 30, .end = 40,
                     .alg_type = "RING", .name = "allReduce", .comm_name = "g\"0", .correlation_id = 5}},
         "{\"algType\":\"RING\",\"commName\":\"g\\\"0\",\"correlationId\":5,\"count\":1024,"
         "\"dataType\":\"FP32\","
         "\"deviceId\":1,\"endNs\":40,\"kind\":\"Communication\",\"name\":\"allReduce\",\"startNs\":30,"
         "\"streamId\":2}"},
        {{.kind = MON_KIND_HCCL,
          .u.hccl = {.start = 50, .end = 60, .device_id = 3, .stream_id = 4, .bandwidth = 12.5, .name = "hcom",
                     .comm_name = "g1"}},
         "{\"bandWidth\":12.5,\"commName\":\"g1\",\"deviceId\":3,\"endNs\":60,\"kind\":\"Hccl\",\"name\":\"hcom\","
         "\"startNs\":50,\"streamId\":4}"},
        {{.kind = MON_KIND_MEMORY,
          .u.memory = {.op_type = 1, .memory_kind = 1, .correlation_id = 6, .start = 70, .end = 80,
                       .address = 4096, .bytes = 512, .pid = 9, .device_id = 2, .stream_id = 3}},
         "{\"address\":4096,\"bytes\":512,\"correlationId\":6,\"deviceId\":2,\"endNs\":80,\"kind\":\"Memory\","
         "\"memoryKind\":\"DEVICE\",\"operationType\":\"RELEASE\",\"processId\":9,\"startNs\":70,\"streamId\":3}"},
        {{.kind = MON_KIND_MEMORY, .u.memory = {.op_type = 2, .memory_kind = 5}}, /* other values */
         "{\"address\":0,\"bytes\":0,\"correlationId\":0,\"deviceId\":0,\"endNs\":0,\"kind\":\"Memory\","
         "\"memoryKind\":\"UNKNOWN\",\"operationType\":\"ALLOCATION\",\"processId\":0,"
         "\"startNs\":0,\"streamId\":0}"},
        {{.kind = MON_KIND_MEMSET,
          .u.memset = {.value = 7, .is_async = 1, .bytes = 64, .start = 90, .end = 95, .device_id = 1,
                       .stream_id = 2, .correlation_id = 8}},
         "{\"bytes\":64,\"correlationId\":8,\"deviceId\":1,\"endNs\":95,\"isAsync\":true,\"kind\":\"MemSet\","
         "\"startNs\":90,\"streamId\":2,\"value\":7}"},
        {{.kind = MON_KIND_MEMCPY,
          .u.memcpy = {.copy_kind = 2, .bytes = 128, .start = 100, .end = 110, .stream_id = 1,
                       .correlation_id = 10}},
         "{\"bytes\":128,\"copyKind\":\"HTOD\",\"correlationId\":10,\"deviceId\":0,\"endNs\":110,"
         "\"isAsync\":false,\"kind\":\"MemCpy\",\"startNs\":100,\"streamId\":1}"},
    };
    char buf[4096];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        line_of(&cases[i].r, buf);
        assert_string_equal(buf, cases[i].line);
    }
}

static void test_marker_lines(void **state)
{
    (void)state;
    char buf[4096];
    struct pl_range h = {.id = 5, .done = PL_PART_HOST, .parts = PL_PART_HOST, .host_start = 100,
                         .host_end = 200, .pid = 1, .tid = 2, .end_pid = 3, .end_tid = 4,
                         .name = "step 1", .domain = "default"};
    *jsonl_fmt_marker(buf, &h, 6, 7) = '\0';
    assert_string_equal(buf, "{\"domain\":\"default\",\"endNs\":200,\"id\":5,\"kind\":\"Marker\",\"name\":\"step 1\","
                             "\"processId\":3,\"sourceKind\":\"Host\",\"startNs\":100,\"threadId\":4}");
    struct pl_range d = {.id = 5, .done = PL_PART_DEVICE, .parts = PL_PART_DEVICE, .dev_start = 110,
                         .dev_end = 190, .device_id = 6, .stream_id = 7, .name = "step 1", .domain = ""};
    *jsonl_fmt_marker(buf, &d, 6, 0) = '\0';
    assert_string_equal(buf, "{\"deviceId\":6,\"domain\":\"\",\"endNs\":190,\"id\":5,\"kind\":\"Marker\","
                             "\"name\":\"step 1\",\"sourceKind\":\"Device\",\"startNs\":110,\"streamId\":7}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_lines),
        cmocka_unit_test(test_device_kind_lines),
        cmocka_unit_test(test_marker_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
