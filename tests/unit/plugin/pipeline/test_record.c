/* test_record: packed msPTI records converted to the pipeline's record (every kind, at
 * misaligned addresses) and the kind/record names (src/plugin/pipeline/record.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "msmon/mspti.h"
#include "plugin/backend/mspti_record.h"
#include "plugin/pipeline/record.h"


/* Copy a packed record to an odd address so every 8-byte field is misaligned. */
static int convert_at_odd(const void *rec, size_t size, struct mon_record *out)
{
    static unsigned char buf[256];
    memcpy(buf + 3, rec, size);
    return mon_record_from_mspti(buf + 3, out);
}

static void test_record_every_kind(void **state)
{
    (void)state;
    struct mon_record r;
    msptiActivityMarker mk = { .kind = 1, .flag = 16, .sourceKind = 1, .timestamp = 0x1122334455667788ull,
                               .id = 42, .name = "step 1", .domain = "dom" };
    mk.objectId.ds.deviceId = 3;
    mk.objectId.ds.streamId = 7;
    assert_int_equal(convert_at_odd(&mk, sizeof(mk), &r), 0);
    assert_int_equal(r.kind, 1);
    assert_int_equal(r.u.marker.flag, 16);
    assert_int_equal(r.u.marker.source_kind, 1);
    assert_true(r.u.marker.timestamp == 0x1122334455667788ull);
    assert_int_equal(r.u.marker.id, 42);
    assert_int_equal(r.u.marker.obj0, 3);
    assert_int_equal(r.u.marker.obj1, 7);
    assert_string_equal(r.u.marker.name, "step 1");
    assert_string_equal(r.u.marker.domain, "dom");

    int api_kinds[] = { 3, 10, 11, 12 };
    for (size_t i = 0; i < 4; i++) {
        msptiActivityApi a = { .kind = api_kinds[i], .start = 100, .end = 250, .pt = { 11, 12 },
                               .correlationId = 99, .name = "aclnnAdd" };
        assert_int_equal(convert_at_odd(&a, sizeof(a), &r), 0);
        assert_int_equal(r.kind, api_kinds[i]);
        assert_int_equal(r.u.api.start, 100);
        assert_int_equal(r.u.api.end, 250);
        assert_int_equal(r.u.api.pid, 11);
        assert_int_equal(r.u.api.tid, 12);
        assert_int_equal(r.u.api.correlation_id, 99);
        assert_string_equal(r.u.api.name, "aclnnAdd");
    }
    msptiActivityKernel k = { .kind = 2, .start = 1ull << 40, .end = (1ull << 40) + 5, .ds = { 1, 2 },
                              .correlationId = 77, .type = "KERNEL_AICORE", .name = "MatMul" };
    assert_int_equal(convert_at_odd(&k, sizeof(k), &r), 0);
    assert_true(r.u.kernel.start == 1ull << 40 && r.u.kernel.end == (1ull << 40) + 5);
    assert_int_equal(r.u.kernel.device_id, 1);
    assert_int_equal(r.u.kernel.stream_id, 2);
    assert_int_equal(r.u.kernel.correlation_id, 77);
    assert_string_equal(r.u.kernel.type, "KERNEL_AICORE");
    assert_string_equal(r.u.kernel.name, "MatMul");

    msptiActivityHccl h = { .kind = 4, .start = 5, .end = 9, .ds = { 4, 5 }, .bandWidth = 12.5,
                            .name = "hcom_allReduce_", .commName = "group0" };
    assert_int_equal(convert_at_odd(&h, sizeof(h), &r), 0);
    assert_int_equal(r.u.hccl.device_id, 4);
    assert_int_equal(r.u.hccl.stream_id, 5);
    assert_true(r.u.hccl.bandwidth == 12.5);
    assert_string_equal(r.u.hccl.comm_name, "group0");

    msptiActivityMemory m = { .kind = 5, .memoryOperationType = 1, .memoryKind = 1, .correlationId = 8,
                              .start = 10, .end = 20, .address = 0xdeadbeef00ull, .bytes = 4096,
                              .processId = 100, .deviceId = 2, .streamId = 0xFFFFFFFFu };
    assert_int_equal(convert_at_odd(&m, sizeof(m), &r), 0);
    assert_int_equal(r.u.memory.op_type, 1);
    assert_int_equal(r.u.memory.memory_kind, 1);
    assert_int_equal(r.u.memory.correlation_id, 8);
    assert_true(r.u.memory.address == 0xdeadbeef00ull);
    assert_int_equal(r.u.memory.bytes, 4096);
    assert_int_equal(r.u.memory.pid, 100);
    assert_int_equal(r.u.memory.device_id, 2);
    assert_true(r.u.memory.stream_id == 0xFFFFFFFFu);

    msptiActivityMemset ms = { .kind = 6, .value = 0xAB, .bytes = 64, .start = 1, .end = 2, .deviceId = 1,
                               .streamId = 3, .correlationId = 4, .isAsync = 1 };
    assert_int_equal(convert_at_odd(&ms, sizeof(ms), &r), 0);
    assert_int_equal(r.u.memset.value, 0xAB);
    assert_int_equal(r.u.memset.bytes, 64);
    assert_int_equal(r.u.memset.is_async, 1);
    assert_int_equal(r.u.memset.stream_id, 3);
    assert_int_equal(r.u.memset.correlation_id, 4);

    msptiActivityMemcpy mc = { .kind = 7, .copyKind = 2, .bytes = 128, .start = 3, .end = 9, .deviceId = 6,
                               .streamId = 1, .correlationId = 5, .isAsync = 0 };
    assert_int_equal(convert_at_odd(&mc, sizeof(mc), &r), 0);
    assert_int_equal(r.u.memcpy.copy_kind, 2);
    assert_int_equal(r.u.memcpy.bytes, 128);
    assert_int_equal(r.u.memcpy.end, 9);
    assert_int_equal(r.u.memcpy.device_id, 6);

    msptiActivityCommunication c = { .kind = 9, .dataType = 4, .count = 1000, .ds = { 2, 9 }, .start = 50,
                                     .end = 80, .algType = "RING", .name = "AllReduce", .commName = "g1",
                                     .correlationId = 31 };
    assert_int_equal(convert_at_odd(&c, sizeof(c), &r), 0);
    assert_int_equal(r.u.comm.data_type, 4);
    assert_int_equal(r.u.comm.count, 1000);
    assert_int_equal(r.u.comm.device_id, 2);
    assert_int_equal(r.u.comm.stream_id, 9);
    assert_int_equal(r.u.comm.start, 50);
    assert_string_equal(r.u.comm.alg_type, "RING");
    assert_string_equal(r.u.comm.name, "AllReduce");
    assert_string_equal(r.u.comm.comm_name, "g1");
    assert_int_equal(r.u.comm.correlation_id, 31);

    msptiActivityExternalCorrelation ec = { .kind = 8 };
    assert_int_equal(convert_at_odd(&ec, sizeof(ec), &r), -ENOENT);
    int32_t bogus = 77;
    assert_int_equal(mon_record_from_mspti(&bogus, &r), -ENOENT);
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(mon_kind_name(1), "Marker");
    assert_string_equal(mon_kind_name(12), "RuntimeAPI");
    assert_null(mon_kind_name(8));
    assert_null(mon_kind_name(13));
    assert_null(mon_kind_name(-1));
    assert_int_equal(mon_kind_from_name("Communication", 13), 9);
    assert_int_equal(mon_kind_from_name("kernel", 6), -1);
    assert_int_equal(mon_kind_from_name("Kernelx", 6), 2);
    assert_string_equal(mon_comm_dtype_name(4), "FP32");
    assert_string_equal(mon_comm_dtype_name(14), "HIF8");
    assert_string_equal(mon_comm_dtype_name(13), "INVALID_TYPE");
    assert_string_equal(mon_comm_dtype_name(17), "FP8E8M0");
    assert_string_equal(mon_comm_dtype_name(0xFFFF), "INVALID_TYPE");
    assert_string_equal(mon_memcpy_kind_name(2), "HTOD");
    assert_string_equal(mon_memcpy_kind_name(5), "DEFAULT");
    assert_string_equal(mon_memcpy_kind_name(9), "UNKNOWN");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_every_kind),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
