/* test_backend_cupti: the CUPTI backend (docs/design/session.md#cupti-backend) without CUDA. Hand-built records of every
 * docs/design/session.md#cupti-backend struct at their CUDA 13 sizes (and a longer "newer" kernel record) converted field by
 * field; NCCL kernel-name parsing; callback-name suffix stripping and caching; the backend's
 * buffer protocol over a fake CUPTI table whose iterator uses variable strides and can stop
 * early on INVALID_KIND; kind mapping, drop counters, selection by MSMONITOR_BACKEND. When
 * the real cupti_activity.h is installed, our ABI offsets are compared with NVIDIA's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../logcap.h"
#include "msmon/cupti_abi.h"
#include "msmon/mspti.h"
#include "plugin/backend/backend_cupti.h"
#include "plugin/backend/cupti_record.h"
#include "plugin/penv.h"

#ifdef MSMON_HAVE_CUPTI_H
#include <cupti_activity.h>
#endif

#define log_has logcap_has
#define K(k) (1u << (k))
#define ALL_KINDS 0x1ffeu

static cupti_abi_result f_cbname(int domain, uint32_t cbid, const char **name)
{
    static const char *const rt[] = { "cudaLaunchKernel_v7000", "cudaMalloc_v3020", "cudaFoo_v12", "cudaStreamSynchronize" };
    if (domain == CUPTI_ABI_CB_DOMAIN_DRIVER_API && cbid == 7) {
        *name = "cuLaunchKernel";
        return CUPTI_ABI_SUCCESS;
    }
    if (domain != CUPTI_ABI_CB_DOMAIN_RUNTIME_API || cbid >= 4)
        return CUPTI_ABI_ERROR_INVALID_PARAMETER;
    *name = rt[cbid];
    return CUPTI_ABI_SUCCESS;
}

/* ---- ABI against NVIDIA's header ---- */

static void test_abi_matches_cuda_headers(void **state)
{
    (void)state;
#ifdef MSMON_HAVE_CUPTI_H
#define SAME(ours, theirs, f) assert_int_equal(offsetof(ours, f), offsetof(theirs, f))
    assert_int_equal(sizeof(struct cupti_abi_kernel), sizeof(CUpti_ActivityKernel10));
    SAME(struct cupti_abi_kernel, CUpti_ActivityKernel10, start);
    SAME(struct cupti_abi_kernel, CUpti_ActivityKernel10, end);
    SAME(struct cupti_abi_kernel, CUpti_ActivityKernel10, deviceId);
    SAME(struct cupti_abi_kernel, CUpti_ActivityKernel10, contextId);
    SAME(struct cupti_abi_kernel, CUpti_ActivityKernel10, streamId);
    SAME(struct cupti_abi_kernel, CUpti_ActivityKernel10, correlationId);
    SAME(struct cupti_abi_kernel, CUpti_ActivityKernel10, name);
    SAME(struct cupti_abi_kernel, CUpti_ActivityKernel4, correlationId); /* the prefix holds */
    SAME(struct cupti_abi_kernel, CUpti_ActivityKernel4, name);
    assert_int_equal(sizeof(struct cupti_abi_api), sizeof(CUpti_ActivityAPI));
    SAME(struct cupti_abi_api, CUpti_ActivityAPI, cbid);
    SAME(struct cupti_abi_api, CUpti_ActivityAPI, start);
    SAME(struct cupti_abi_api, CUpti_ActivityAPI, end);
    SAME(struct cupti_abi_api, CUpti_ActivityAPI, processId);
    SAME(struct cupti_abi_api, CUpti_ActivityAPI, threadId);
    SAME(struct cupti_abi_api, CUpti_ActivityAPI, correlationId);
    SAME(struct cupti_abi_api, CUpti_ActivityAPI, returnValue);
    assert_int_equal(sizeof(struct cupti_abi_memcpy), sizeof(CUpti_ActivityMemcpy6));
    SAME(struct cupti_abi_memcpy, CUpti_ActivityMemcpy6, copyKind);
    SAME(struct cupti_abi_memcpy, CUpti_ActivityMemcpy6, srcKind);
    SAME(struct cupti_abi_memcpy, CUpti_ActivityMemcpy6, dstKind);
    SAME(struct cupti_abi_memcpy, CUpti_ActivityMemcpy6, flags);
    SAME(struct cupti_abi_memcpy, CUpti_ActivityMemcpy6, bytes);
    SAME(struct cupti_abi_memcpy, CUpti_ActivityMemcpy6, start);
    SAME(struct cupti_abi_memcpy, CUpti_ActivityMemcpy6, end);
    SAME(struct cupti_abi_memcpy, CUpti_ActivityMemcpy6, deviceId);
    SAME(struct cupti_abi_memcpy, CUpti_ActivityMemcpy6, contextId);
    SAME(struct cupti_abi_memcpy, CUpti_ActivityMemcpy6, streamId);
    SAME(struct cupti_abi_memcpy, CUpti_ActivityMemcpy6, correlationId);
    assert_int_equal(sizeof(struct cupti_abi_memset), sizeof(CUpti_ActivityMemset4));
    SAME(struct cupti_abi_memset, CUpti_ActivityMemset4, value);
    SAME(struct cupti_abi_memset, CUpti_ActivityMemset4, bytes);
    SAME(struct cupti_abi_memset, CUpti_ActivityMemset4, start);
    SAME(struct cupti_abi_memset, CUpti_ActivityMemset4, end);
    SAME(struct cupti_abi_memset, CUpti_ActivityMemset4, deviceId);
    SAME(struct cupti_abi_memset, CUpti_ActivityMemset4, contextId);
    SAME(struct cupti_abi_memset, CUpti_ActivityMemset4, streamId);
    SAME(struct cupti_abi_memset, CUpti_ActivityMemset4, correlationId);
    SAME(struct cupti_abi_memset, CUpti_ActivityMemset4, flags);
    SAME(struct cupti_abi_memset, CUpti_ActivityMemset4, memoryKind);
    assert_int_equal(sizeof(struct cupti_abi_memory), sizeof(CUpti_ActivityMemory4));
    SAME(struct cupti_abi_memory, CUpti_ActivityMemory4, memoryOperationType);
    SAME(struct cupti_abi_memory, CUpti_ActivityMemory4, memoryKind);
    SAME(struct cupti_abi_memory, CUpti_ActivityMemory4, correlationId);
    SAME(struct cupti_abi_memory, CUpti_ActivityMemory4, address);
    SAME(struct cupti_abi_memory, CUpti_ActivityMemory4, bytes);
    SAME(struct cupti_abi_memory, CUpti_ActivityMemory4, timestamp);
    SAME(struct cupti_abi_memory, CUpti_ActivityMemory4, PC);
    SAME(struct cupti_abi_memory, CUpti_ActivityMemory4, processId);
    SAME(struct cupti_abi_memory, CUpti_ActivityMemory4, deviceId);
    SAME(struct cupti_abi_memory, CUpti_ActivityMemory4, contextId);
    SAME(struct cupti_abi_memory, CUpti_ActivityMemory4, streamId);
    SAME(struct cupti_abi_memory, CUpti_ActivityMemory4, name);
    assert_int_equal(sizeof(struct cupti_abi_marker), sizeof(CUpti_ActivityMarker2));
    SAME(struct cupti_abi_marker, CUpti_ActivityMarker2, flags);
    SAME(struct cupti_abi_marker, CUpti_ActivityMarker2, timestamp);
    SAME(struct cupti_abi_marker, CUpti_ActivityMarker2, id);
    SAME(struct cupti_abi_marker, CUpti_ActivityMarker2, objectKind);
    SAME(struct cupti_abi_marker, CUpti_ActivityMarker2, objectId);
    SAME(struct cupti_abi_marker, CUpti_ActivityMarker2, name);
    SAME(struct cupti_abi_marker, CUpti_ActivityMarker2, domain);
    assert_int_equal(sizeof(((CUpti_ActivityMarker2 *)0)->objectId), 12);
    assert_int_equal(CUPTI_ABI_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    assert_int_equal(CUPTI_ABI_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_RUNTIME);
    assert_int_equal(CUPTI_ABI_KIND_DRIVER, CUPTI_ACTIVITY_KIND_DRIVER);
    assert_int_equal(CUPTI_ABI_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY);
    assert_int_equal(CUPTI_ABI_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMSET);
    assert_int_equal(CUPTI_ABI_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMORY2);
    assert_int_equal(CUPTI_ABI_KIND_MARKER, CUPTI_ACTIVITY_KIND_MARKER);
    assert_int_equal(CUPTI_ABI_ERROR_MAX_LIMIT_REACHED, CUPTI_ERROR_MAX_LIMIT_REACHED);
    assert_int_equal(CUPTI_ABI_ERROR_INVALID_KIND, CUPTI_ERROR_INVALID_KIND);
    assert_int_equal(CUPTI_ABI_MEMCPY_HTOD, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
    assert_int_equal(CUPTI_ABI_MEMCPY_DTOH, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH);
    assert_int_equal(CUPTI_ABI_MEMCPY_DTOD, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD);
    assert_int_equal(CUPTI_ABI_MEMCPY_HTOH, CUPTI_ACTIVITY_MEMCPY_KIND_HTOH);
    assert_int_equal(CUPTI_ABI_MEMOP_ALLOCATION, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
    assert_int_equal(CUPTI_ABI_MEMOP_RELEASE, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
    assert_int_equal(CUPTI_ABI_MEMORY_KIND_DEVICE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
    assert_int_equal(CUPTI_ABI_OBJECT_PROCESS, CUPTI_ACTIVITY_OBJECT_PROCESS);
    assert_int_equal(CUPTI_ABI_OBJECT_THREAD, CUPTI_ACTIVITY_OBJECT_THREAD);
    assert_int_equal(CUPTI_ABI_MARKER_START, CUPTI_ACTIVITY_FLAG_MARKER_START);
    assert_int_equal(CUPTI_ABI_FLUSH_FORCED, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    assert_int_equal(CUPTI_ABI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_RUNTIME_API);
#else
    skip(); /* no CUDA toolkit headers on this machine: the _Static_asserts still hold */
#endif
}

/* ---- conversion, field by field ---- */

static const struct cupti_conv conv_all = { .enabled = ALL_KINDS, .callback_name = f_cbname, .pid = 4242 };

static void test_kernel_and_longer_record(void **state)
{
    /* a "newer, longer" Kernel record: our 216 bytes followed by fields we do not know */
    struct {
        struct cupti_abi_kernel k;
        uint64_t newer[5];
    } big;
    struct mon_record out[CUPTI_RECORD_MAX_OUT];
    struct cupti_conv cv = conv_all;
    (void)state;
    memset(&big, 0xa5, sizeof(big));
    big.k.kind = CUPTI_ABI_KIND_CONCURRENT_KERNEL;
    big.k.start = 1000;
    big.k.end = 1500;
    big.k.deviceId = 3;
    big.k.contextId = 9;
    big.k.streamId = 17;
    big.k.correlationId = 0xfffffff0u;
    big.k.name = "_Z6matmulPfS_";
    assert_int_equal(cupti_record_convert(&big, &cv, out), 1);
    assert_int_equal(out[0].kind, MON_KIND_KERNEL);
    assert_int_equal(out[0].u.kernel.start, 1000);
    assert_int_equal(out[0].u.kernel.end, 1500);
    assert_int_equal(out[0].u.kernel.device_id, 3);
    assert_int_equal(out[0].u.kernel.stream_id, 17);
    assert_int_equal(out[0].u.kernel.correlation_id, 0xfffffff0ull); /* u32 → u64, no sign */
    assert_string_equal(out[0].u.kernel.type, "KERNEL_CUDA");
    assert_ptr_equal(out[0].u.kernel.name, big.k.name); /* CUPTI's string, borrowed */
    /* Kernel off: a plain kernel gives nothing */
    cv.enabled = K(MON_KIND_COMMUNICATION) | K(MON_KIND_HCCL);
    assert_int_equal(cupti_record_convert(&big, &cv, out), 0);
}

static void test_nccl_kernel_records(void **state)
{
    struct cupti_abi_kernel k = { .kind = CUPTI_ABI_KIND_CONCURRENT_KERNEL, .start = 10, .end = 30,
                                  .deviceId = 1, .streamId = 5, .correlationId = 77,
                                  .name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)" };
    struct mon_record out[CUPTI_RECORD_MAX_OUT];
    struct cupti_conv cv = conv_all;
    (void)state;
    assert_int_equal(cupti_record_convert(&k, &cv, out), 3);
    assert_int_equal(out[0].kind, MON_KIND_KERNEL);
    assert_int_equal(out[1].kind, MON_KIND_COMMUNICATION);
    assert_string_equal(out[1].u.comm.name, "AllReduce");
    assert_int_equal(out[1].u.comm.data_type, MSPTI_ACTIVITY_COMMUNICATION_FP32);
    assert_string_equal(out[1].u.comm.alg_type, "RING");
    assert_int_equal(out[1].u.comm.count, 0);
    assert_string_equal(out[1].u.comm.comm_name, "");
    assert_int_equal(out[1].u.comm.device_id, 1);
    assert_int_equal(out[1].u.comm.stream_id, 5);
    assert_int_equal(out[1].u.comm.start, 10);
    assert_int_equal(out[1].u.comm.end, 30);
    assert_int_equal(out[1].u.comm.correlation_id, 77);
    assert_int_equal(out[2].kind, MON_KIND_HCCL);
    assert_string_equal(out[2].u.hccl.name, "AllReduce");
    assert_string_equal(out[2].u.hccl.comm_name, "");
    assert_true(out[2].u.hccl.bandwidth == 0.0);
    assert_int_equal(out[2].u.hccl.device_id, 1);
    assert_int_equal(out[2].u.hccl.stream_id, 5);
    assert_int_equal(out[2].u.hccl.start, 10);
    assert_int_equal(out[2].u.hccl.end, 30);
    cv.enabled = K(MON_KIND_HCCL);
    assert_int_equal(cupti_record_convert(&k, &cv, out), 1);
    assert_int_equal(out[0].kind, MON_KIND_HCCL);
}

static void test_nccl_name_parsing(void **state)
{
    static const struct {
        const char *name, *coll, *alg;
        int32_t dt;
    } cases[] = {
        { "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "AllReduce", "RING", MSPTI_ACTIVITY_COMMUNICATION_FP32 },
        { "ncclDevKernel_AllGather_RING_LL(x)", "AllGather", "RING", MSPTI_ACTIVITY_COMMUNICATION_INVALID_TYPE },
        { "ncclDevKernel_ReduceScatter_Sum_bf16_NVLS_SIMPLE", "ReduceScatter", "NVLS", MSPTI_ACTIVITY_COMMUNICATION_BFP16 },
        { "ncclDevKernel_AllReduce_Sum_f16_TREE_LL128", "AllReduce", "TREE", MSPTI_ACTIVITY_COMMUNICATION_FP16 },
        { "ncclDevKernel_AllReduce_Sum_u8_COLLNET_DIRECT_SIMPLE", "AllReduce", "COLLNET_DIRECT", MSPTI_ACTIVITY_COMMUNICATION_UINT8 },
        { "ncclDevKernel_AllReduce_Sum_i64_COLLNET_CHAIN_SIMPLE", "AllReduce", "COLLNET_CHAIN", MSPTI_ACTIVITY_COMMUNICATION_INT64 },
        { "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "SendRecv", "", MSPTI_ACTIVITY_COMMUNICATION_INVALID_TYPE },
        { "ncclDevKernel_Generic", "Generic", "", MSPTI_ACTIVITY_COMMUNICATION_INVALID_TYPE },
        { "ncclKernel_AllToAll_RING_LL_Sum_f64", "AllToAll", "RING", MSPTI_ACTIVITY_COMMUNICATION_FP64 },
        { "ncclDevKernel_Broadcast_PAT_SIMPLE_i8", "Broadcast", "PAT", MSPTI_ACTIVITY_COMMUNICATION_INT8 },
        { "ncclDevKernel_AllReduce_Sum_i32_RING", "AllReduce", "RING", MSPTI_ACTIVITY_COMMUNICATION_INT32 },
        { "ncclDevKernel_AllReduce_Sum_u32_RING", "AllReduce", "RING", MSPTI_ACTIVITY_COMMUNICATION_UINT32 },
        { "ncclDevKernel_AllReduce_Sum_u64_RING", "AllReduce", "RING", MSPTI_ACTIVITY_COMMUNICATION_UINT64 },
        { "ncclDevKernel_AllReduce_Sum_f8e4m3_RING", "AllReduce", "RING", MSPTI_ACTIVITY_COMMUNICATION_INVALID_TYPE },
    };
    const char *coll, *alg, *again;
    int32_t dt;
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(cupti_record_parse_nccl(cases[i].name, &coll, &dt, &alg), 0);
        assert_string_equal(coll, cases[i].coll);
        assert_string_equal(alg, cases[i].alg);
        assert_int_equal(dt, cases[i].dt);
    }
    /* interned: one pointer per collective, whatever kernel it came from */
    assert_int_equal(cupti_record_parse_nccl(cases[0].name, &coll, &dt, &alg), 0);
    assert_int_equal(cupti_record_parse_nccl(cases[3].name, &again, &dt, &alg), 0);
    assert_ptr_equal(coll, again);
    assert_int_equal(cupti_record_parse_nccl("_Z6matmulPfS_", &coll, &dt, &alg), -ENOENT);
    assert_int_equal(cupti_record_parse_nccl("nccl_AllReduce", &coll, &dt, &alg), -ENOENT);
    assert_int_equal(cupti_record_parse_nccl(NULL, &coll, &dt, &alg), -ENOENT);
}

static void test_suffix_stripping(void **state)
{
    static const struct {
        const char *in;
        size_t keep;
    } cases[] = {
        { "cudaLaunchKernel_v7000", 16 }, { "cudaMalloc_v3020", 10 }, { "cuMemcpy_v12000", 8 },
        { "cudaFoo_v12", 11 },            { "cudaFree", 8 },          { "_v1234", 0 },
        { "cudaX_1234", 10 },             { "cudaXv1234", 10 },       { "", 0 },
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_int_equal(cupti_record_strip_version(cases[i].in, strlen(cases[i].in)), cases[i].keep);
}

static void test_api_records(void **state)
{
    struct cupti_abi_api a = { .kind = CUPTI_ABI_KIND_RUNTIME, .cbid = 0, .start = 5, .end = 9,
                               .processId = 100, .threadId = 101, .correlationId = 0x80000001u,
                               .returnValue = 0 };
    struct mon_record out[CUPTI_RECORD_MAX_OUT];
    struct cupti_conv cv = conv_all;
    const char *first;
    (void)state;
    assert_int_equal(cupti_record_convert(&a, &cv, out), 1);
    assert_int_equal(out[0].kind, MON_KIND_ACL_API); /* runtime → AclAPI when on */
    assert_int_equal(out[0].u.api.start, 5);
    assert_int_equal(out[0].u.api.end, 9);
    assert_int_equal(out[0].u.api.pid, 100);
    assert_int_equal(out[0].u.api.tid, 101);
    assert_int_equal(out[0].u.api.correlation_id, 0x80000001ull);
    assert_string_equal(out[0].u.api.name, "cudaLaunchKernel");
    first = out[0].u.api.name;
    assert_int_equal(cupti_record_convert(&a, &cv, out), 1);
    assert_ptr_equal(out[0].u.api.name, first); /* cached per (domain, cbid) */
    cv.enabled = K(MON_KIND_API) | K(MON_KIND_RUNTIME_API);
    assert_int_equal(cupti_record_convert(&a, &cv, out), 1);
    assert_int_equal(out[0].kind, MON_KIND_API); /* AclAPI off → API */
    a.cbid = 2;
    assert_int_equal(cupti_record_convert(&a, &cv, out), 1);
    assert_string_equal(out[0].u.api.name, "cudaFoo_v12"); /* fewer than 4 digits stay */
    a.cbid = 3;
    assert_int_equal(cupti_record_convert(&a, &cv, out), 1);
    assert_string_equal(out[0].u.api.name, "cudaStreamSynchronize");
    a.cbid = 99;
    assert_int_equal(cupti_record_convert(&a, &cv, out), 1);
    assert_string_equal(out[0].u.api.name, "cbid_99"); /* CUPTI cannot name it */
    /* driver: RuntimeAPI when on, else API, else nothing */
    a.kind = CUPTI_ABI_KIND_DRIVER;
    a.cbid = 7;
    assert_int_equal(cupti_record_convert(&a, &cv, out), 1);
    assert_int_equal(out[0].kind, MON_KIND_RUNTIME_API);
    assert_string_equal(out[0].u.api.name, "cuLaunchKernel");
    cv.enabled = K(MON_KIND_API);
    assert_int_equal(cupti_record_convert(&a, &cv, out), 1);
    assert_int_equal(out[0].kind, MON_KIND_API);
    cv.enabled = K(MON_KIND_ACL_API);
    assert_int_equal(cupti_record_convert(&a, &cv, out), 0);
    /* no cuptiGetCallbackName at all */
    cv.enabled = K(MON_KIND_RUNTIME_API);
    cv.callback_name = NULL;
    a.cbid = 4000;
    assert_int_equal(cupti_record_convert(&a, &cv, out), 1);
    assert_string_equal(out[0].u.api.name, "cbid_4000");
    a.cbid = 100000; /* beyond the cache: interned each time, still one pointer */
    assert_int_equal(cupti_record_convert(&a, &cv, out), 1);
    first = out[0].u.api.name;
    assert_int_equal(cupti_record_convert(&a, &cv, out), 1);
    assert_ptr_equal(out[0].u.api.name, first);
    assert_string_equal(first, "cbid_100000");
}

static void test_memcpy_records(void **state)
{
    static const struct {
        uint8_t in;
        int32_t out;
    } kinds[] = {
        { 1, MSPTI_ACTIVITY_MEMCPY_KIND_HTOD }, { 2, MSPTI_ACTIVITY_MEMCPY_KIND_DTOH },
        { 8, MSPTI_ACTIVITY_MEMCPY_KIND_DTOD }, { 9, MSPTI_ACTIVITY_MEMCPY_KIND_HTOH },
        { 3, MSPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN }, { 10, MSPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN },
        { 0, MSPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN },
    };
    struct cupti_abi_memcpy c;
    struct mon_record out[CUPTI_RECORD_MAX_OUT];
    struct cupti_conv cv = conv_all;
    (void)state;
    memset(&c, 0x5a, sizeof(c));
    c.kind = CUPTI_ABI_KIND_MEMCPY;
    c.flags = 0xff; /* only bit 0 is async */
    c.bytes = 1ull << 33;
    c.start = 200;
    c.end = 260;
    c.deviceId = 2;
    c.streamId = 14;
    c.correlationId = 31;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        c.copyKind = kinds[i].in;
        assert_int_equal(cupti_record_convert(&c, &cv, out), 1);
        assert_int_equal(out[0].kind, MON_KIND_MEMCPY);
        assert_int_equal(out[0].u.memcpy.copy_kind, kinds[i].out);
    }
    assert_int_equal(out[0].u.memcpy.is_async, 1);
    assert_int_equal(out[0].u.memcpy.bytes, 1ull << 33);
    assert_int_equal(out[0].u.memcpy.start, 200);
    assert_int_equal(out[0].u.memcpy.end, 260);
    assert_int_equal(out[0].u.memcpy.device_id, 2);
    assert_int_equal(out[0].u.memcpy.stream_id, 14);
    assert_int_equal(out[0].u.memcpy.correlation_id, 31);
    c.flags = 0xfe;
    assert_int_equal(cupti_record_convert(&c, &cv, out), 1);
    assert_int_equal(out[0].u.memcpy.is_async, 0);
    cv.enabled = K(MON_KIND_MEMSET);
    assert_int_equal(cupti_record_convert(&c, &cv, out), 0);
}

static void test_memset_records(void **state)
{
    struct cupti_abi_memset s;
    struct mon_record out[CUPTI_RECORD_MAX_OUT];
    (void)state;
    memset(&s, 0x33, sizeof(s));
    s.kind = CUPTI_ABI_KIND_MEMSET;
    s.value = 0xdeadbeef;
    s.bytes = 4096;
    s.start = 7;
    s.end = 8;
    s.deviceId = 6;
    s.streamId = 60;
    s.correlationId = 600;
    s.flags = 0x0003;
    s.memoryKind = 3;
    assert_int_equal(cupti_record_convert(&s, &conv_all, out), 1);
    assert_int_equal(out[0].kind, MON_KIND_MEMSET);
    assert_int_equal(out[0].u.memset.value, 0xdeadbeef);
    assert_int_equal(out[0].u.memset.is_async, 1);
    assert_int_equal(out[0].u.memset.bytes, 4096);
    assert_int_equal(out[0].u.memset.start, 7);
    assert_int_equal(out[0].u.memset.end, 8);
    assert_int_equal(out[0].u.memset.device_id, 6);
    assert_int_equal(out[0].u.memset.stream_id, 60);
    assert_int_equal(out[0].u.memset.correlation_id, 600);
    s.flags = 0x0100;
    assert_int_equal(cupti_record_convert(&s, &conv_all, out), 1);
    assert_int_equal(out[0].u.memset.is_async, 0);
}

static void test_memory_records(void **state)
{
    struct cupti_abi_memory m;
    struct mon_record out[CUPTI_RECORD_MAX_OUT];
    (void)state;
    memset(&m, 0x11, sizeof(m));
    m.kind = CUPTI_ABI_KIND_MEMORY2;
    m.memoryOperationType = CUPTI_ABI_MEMOP_ALLOCATION;
    m.memoryKind = CUPTI_ABI_MEMORY_KIND_DEVICE;
    m.correlationId = 12;
    m.address = 0x7f0000001000ull;
    m.bytes = 1 << 20;
    m.timestamp = 999;
    m.processId = 321;
    m.deviceId = 4;
    m.streamId = 44;
    m.name = NULL;
    assert_int_equal(cupti_record_convert(&m, &conv_all, out), 1);
    assert_int_equal(out[0].kind, MON_KIND_MEMORY);
    assert_int_equal(out[0].u.memory.op_type, MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
    assert_int_equal(out[0].u.memory.memory_kind, MSPTI_ACTIVITY_MEMORY_KIND_DEVICE);
    assert_int_equal(out[0].u.memory.correlation_id, 12);
    assert_int_equal(out[0].u.memory.start, 999);
    assert_int_equal(out[0].u.memory.end, 999);
    assert_int_equal(out[0].u.memory.address, 0x7f0000001000ull);
    assert_int_equal(out[0].u.memory.bytes, 1 << 20);
    assert_int_equal(out[0].u.memory.pid, 321);
    assert_int_equal(out[0].u.memory.device_id, 4);
    assert_int_equal(out[0].u.memory.stream_id, 44);
    m.memoryOperationType = CUPTI_ABI_MEMOP_RELEASE;
    m.memoryKind = 2; /* pinned host: not DEVICE */
    assert_int_equal(cupti_record_convert(&m, &conv_all, out), 1);
    assert_int_equal(out[0].u.memory.op_type, MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
    assert_int_equal(out[0].u.memory.memory_kind, MSPTI_ACTIVITY_MEMORY_KIND_UNKNOWN);
    m.memoryOperationType = 3; /* a pool operation: skipped */
    assert_int_equal(cupti_record_convert(&m, &conv_all, out), 0);
}

static void test_marker_records(void **state)
{
    struct cupti_abi_marker k;
    struct mon_record out[CUPTI_RECORD_MAX_OUT];
    (void)state;
    memset(&k, 0x77, sizeof(k));
    k.kind = CUPTI_ABI_KIND_MARKER;
    k.flags = CUPTI_ABI_MARKER_START;
    k.timestamp = 123456;
    k.id = 0xffffffffu;
    k.objectKind = CUPTI_ABI_OBJECT_THREAD;
    k.objectId[0] = 55;
    k.objectId[1] = 56;
    k.objectId[2] = 57;
    k.name = "step";
    k.domain = NULL;
    assert_int_equal(cupti_record_convert(&k, &conv_all, out), 1);
    assert_int_equal(out[0].kind, MON_KIND_MARKER);
    assert_int_equal(out[0].u.marker.flag, MSPTI_ACTIVITY_FLAG_MARKER_START);
    assert_int_equal(out[0].u.marker.source_kind, MSPTI_ACTIVITY_SOURCE_KIND_HOST);
    assert_int_equal(out[0].u.marker.timestamp, 123456);
    assert_int_equal(out[0].u.marker.id, 0xffffffffull);
    assert_int_equal(out[0].u.marker.obj0, 55);
    assert_int_equal(out[0].u.marker.obj1, 56);
    assert_string_equal(out[0].u.marker.name, "step");
    assert_string_equal(out[0].u.marker.domain, "default");
    k.flags = CUPTI_ABI_MARKER_INSTANT;
    k.domain = "NCCL";
    k.objectKind = 3; /* a device object: {getpid(), 0} */
    assert_int_equal(cupti_record_convert(&k, &conv_all, out), 1);
    assert_int_equal(out[0].u.marker.flag, MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS);
    assert_string_equal(out[0].u.marker.domain, "NCCL");
    assert_int_equal(out[0].u.marker.obj0, 4242);
    assert_int_equal(out[0].u.marker.obj1, 0);
    k.flags = CUPTI_ABI_MARKER_END;
    k.name = NULL;
    k.objectKind = CUPTI_ABI_OBJECT_PROCESS;
    assert_int_equal(cupti_record_convert(&k, &conv_all, out), 1);
    assert_int_equal(out[0].u.marker.flag, MSPTI_ACTIVITY_FLAG_MARKER_END);
    assert_string_equal(out[0].u.marker.name, "");
    assert_string_equal(out[0].u.marker.domain, "");
    assert_int_equal(out[0].u.marker.obj0, 55);
    k.flags = CUPTI_ABI_MARKER_INSTANT;
    k.name = NULL;
    assert_int_equal(cupti_record_convert(&k, &conv_all, out), 1);
    assert_string_equal(out[0].u.marker.name, "");
    k.flags = 8; /* SYNC_ACQUIRE and friends: not kept */
    assert_int_equal(cupti_record_convert(&k, &conv_all, out), 0);
    k.flags = CUPTI_ABI_MARKER_START | CUPTI_ABI_MARKER_END;
    assert_int_equal(cupti_record_convert(&k, &conv_all, out), 0);
}

static void test_unknown_kind(void **state)
{
    uint32_t raw[16] = { 22 /* MEMCPY2 */ };
    struct mon_record out[CUPTI_RECORD_MAX_OUT];
    (void)state;
    assert_int_equal(cupti_record_convert(raw, &conv_all, out), -ENOENT);
    raw[0] = 0;
    assert_int_equal(cupti_record_convert(raw, &conv_all, out), -ENOENT);
}

/* ---- the backend over a fake CUPTI ---- */

#define FK_MAX 64

static struct {
    cupti_abi_request_fn req;
    cupti_abi_complete_fn comp;
    uint32_t version;
    int enable_rc[64];
    int on[64];
    char order[128];
    /* the records of the next flush: raw bytes written at offs[i], strides vary */
    uint8_t rec[FK_MAX][256];
    size_t size[FK_MAX];
    int n;
    size_t offs[FK_MAX];
    uint8_t *buf;
    int err_at;                 /* GetNextRecord fails with UNKNOWN before record err_at (-1 none) */
    size_t dropped;
    uint32_t last_flush_flag;
} fc;

static struct {
    size_t records;
    int kinds[MON_KIND_LIMIT];
    const char *last_name;
} sc;

static void fnote(char c)
{
    size_t n = strlen(fc.order);
    if (n + 1 < sizeof(fc.order)) {
        fc.order[n] = c;
        fc.order[n + 1] = '\0';
    }
}

static cupti_abi_result f_register(cupti_abi_request_fn r, cupti_abi_complete_fn c)
{
    fnote('R');
    fc.req = r;
    fc.comp = c;
    return CUPTI_ABI_SUCCESS;
}
static cupti_abi_result f_enable(int k)
{
    fnote('E');
    if (fc.enable_rc[k])
        return fc.enable_rc[k];
    fc.on[k] = 1;
    return CUPTI_ABI_SUCCESS;
}
static cupti_abi_result f_disable(int k)
{
    fnote('D');
    fc.on[k] = 0;
    return CUPTI_ABI_SUCCESS;
}
/* The stride of each record is the fake's business (fc.offs); a record whose kind is 0 makes
 * it answer INVALID_KIND, as CUPTI does for an unused tail. */
static cupti_abi_result f_next(uint8_t *buf, size_t valid, void **rec)
{
    int i = 0;
    uint32_t kind;
    if (*rec) {
        while (i < fc.n && buf + fc.offs[i] != (uint8_t *)*rec)
            i++;
        i++;
    }
    if (i >= fc.n || fc.offs[i] >= valid)
        return CUPTI_ABI_ERROR_MAX_LIMIT_REACHED;
    if (i == fc.err_at)
        return CUPTI_ABI_ERROR_UNKNOWN;
    memcpy(&kind, buf + fc.offs[i], sizeof(kind));
    if (kind == CUPTI_ABI_KIND_INVALID)
        return CUPTI_ABI_ERROR_INVALID_KIND;
    *rec = buf + fc.offs[i];
    return CUPTI_ABI_SUCCESS;
}
static cupti_abi_result f_flush(uint32_t flag)
{
    uint8_t *buf = NULL;
    size_t size = 0, max = 0, valid = 0;
    fnote('F');
    fc.last_flush_flag = flag;
    if (fc.n == 0)
        return CUPTI_ABI_SUCCESS;
    fc.req(&buf, &size, &max);
    for (int i = 0; buf && i < fc.n; i++) {
        fc.offs[i] = valid;
        memcpy(buf + valid, fc.rec[i], fc.size[i]);
        valid += (fc.size[i] + 7) / 8 * 8 + (size_t)(i % 3) * 8; /* strides vary */
    }
    if (buf)
        fc.comp(NULL, 0, buf, size, valid);
    fc.n = 0;
    return CUPTI_ABI_SUCCESS;
}
static cupti_abi_result f_version(uint32_t *v)
{
    *v = fc.version;
    return CUPTI_ABI_SUCCESS;
}
static cupti_abi_result f_dropped(void *ctx, uint32_t stream, size_t *n)
{
    (void)ctx;
    (void)stream;
    *n = fc.dropped;
    fc.dropped = 0; /* CUPTI resets its count on every call */
    return CUPTI_ABI_SUCCESS;
}

static const struct cupti_lib fake_lib = {
    .register_callbacks = f_register, .enable = f_enable, .disable = f_disable,
    .get_next_record = f_next, .flush_all = f_flush, .get_version = f_version,
    .get_callback_name = f_cbname, .get_num_dropped = f_dropped,
};

static void fsink(void *ctx, struct mon_record *recs, size_t n)
{
    assert_ptr_equal(ctx, &sc);
    for (size_t i = 0; i < n; i++) {
        sc.records++;
        sc.kinds[recs[i].kind]++;
        if (recs[i].kind == MON_KIND_KERNEL)
            sc.last_name = recs[i].u.kernel.name;
    }
}

static void add(const void *rec, size_t size)
{
    memcpy(fc.rec[fc.n], rec, size);
    fc.size[fc.n++] = size;
}

static void freset(void)
{
    memset(&fc, 0, sizeof(fc));
    memset(&sc, 0, sizeof(sc));
    fc.version = 130001;
    fc.err_at = -1;
    logcap_clear();
}

static void add_mix(void)
{
    struct cupti_abi_kernel k = { .kind = CUPTI_ABI_KIND_CONCURRENT_KERNEL, .start = 1, .end = 2, .name = "gemm" };
    struct cupti_abi_kernel nk = { .kind = CUPTI_ABI_KIND_CONCURRENT_KERNEL, .start = 1, .end = 2,
                                   .name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)" };
    struct cupti_abi_api rt = { .kind = CUPTI_ABI_KIND_RUNTIME, .cbid = 1, .start = 1, .end = 2 };
    struct cupti_abi_api drv = { .kind = CUPTI_ABI_KIND_DRIVER, .cbid = 7, .start = 1, .end = 2 };
    struct cupti_abi_memcpy mc = { .kind = CUPTI_ABI_KIND_MEMCPY, .copyKind = 1, .end = 2 };
    struct cupti_abi_memset ms = { .kind = CUPTI_ABI_KIND_MEMSET, .end = 2 };
    struct cupti_abi_memory mem = { .kind = CUPTI_ABI_KIND_MEMORY2, .memoryOperationType = 1, .timestamp = 2 };
    struct cupti_abi_marker mk = { .kind = CUPTI_ABI_KIND_MARKER, .flags = 1, .timestamp = 2, .name = "m" };
    uint32_t p2p[32] = { 22 };
    add(&k, sizeof(k));
    add(&nk, sizeof(nk));
    add(&rt, sizeof(rt));
    add(&drv, sizeof(drv));
    add(&mc, sizeof(mc));
    add(&ms, sizeof(ms));
    add(&mem, sizeof(mem));
    add(&mk, sizeof(mk));
    add(p2p, sizeof(p2p)); /* MEMCPY2: a kind we do not convert */
}

static void test_backend_kinds_strides_and_stop(void **state)
{
    struct backend *be;
    struct backend_drops d;
    uint32_t on = 0;
    (void)state;
    freset();
    assert_int_equal(backend_cupti_create_from(&fake_lib, &be), 0);
    assert_string_equal(be->ops->name, "cupti");
    assert_int_equal(be->ops->set_kinds(be, K(MON_KIND_KERNEL), &on), -ENOENT);
    assert_int_equal(be->ops->start(be, fsink, &sc), 0);
    /* API needs both RUNTIME and DRIVER; Communication and Kernel share CONCURRENT_KERNEL */
    assert_int_equal(be->ops->set_kinds(be, K(MON_KIND_API) | K(MON_KIND_COMMUNICATION), &on), 0);
    assert_int_equal(on, K(MON_KIND_API) | K(MON_KIND_COMMUNICATION));
    assert_true(fc.on[CUPTI_ABI_KIND_RUNTIME] && fc.on[CUPTI_ABI_KIND_DRIVER] && fc.on[CUPTI_ABI_KIND_CONCURRENT_KERNEL]);
    assert_false(fc.on[CUPTI_ABI_KIND_MEMCPY]);
    assert_int_equal(be->ops->set_kinds(be, ALL_KINDS & ~K(8), &on), 0);
    assert_int_equal(on, ALL_KINDS & ~K(8)); /* NodeAPI: on, without a source */
    assert_true(log_has("NodeAPI has no source on CUDA"));
    add_mix();
    fc.dropped = 5;
    assert_int_equal(be->ops->flush(be), 0);
    assert_int_equal(fc.last_flush_flag, 0); /* a tick flush is not forced */
    /* gemm: Kernel; nccl: Kernel + Communication + Hccl; runtime → AclAPI; driver → RuntimeAPI */
    assert_int_equal(sc.kinds[MON_KIND_KERNEL], 2);
    assert_int_equal(sc.kinds[MON_KIND_COMMUNICATION], 1);
    assert_int_equal(sc.kinds[MON_KIND_HCCL], 1);
    assert_int_equal(sc.kinds[MON_KIND_ACL_API], 1);
    assert_int_equal(sc.kinds[MON_KIND_RUNTIME_API], 1);
    assert_int_equal(sc.kinds[MON_KIND_API], 0);
    assert_int_equal(sc.kinds[MON_KIND_MEMCPY], 1);
    assert_int_equal(sc.kinds[MON_KIND_MEMSET], 1);
    assert_int_equal(sc.kinds[MON_KIND_MEMORY], 1);
    assert_int_equal(sc.kinds[MON_KIND_MARKER], 1);
    assert_int_equal(sc.records, 10);
    be->ops->drops(be, &d);
    assert_int_equal(d.unknown_kind, 1);
    assert_int_equal(d.vendor_dropped, 5);
    assert_int_equal(d.read_errors, 0);
    assert_true(log_has("CUPTI dropped 5 records"));
    /* narrowing: Memcpy off disables MEMCPY; the rest stay */
    assert_int_equal(be->ops->set_kinds(be, K(MON_KIND_KERNEL), &on), 0);
    assert_int_equal(on, K(MON_KIND_KERNEL));
    assert_false(fc.on[CUPTI_ABI_KIND_MEMCPY]);
    assert_false(fc.on[CUPTI_ABI_KIND_RUNTIME]);
    assert_true(fc.on[CUPTI_ABI_KIND_CONCURRENT_KERNEL]);
    memset(&sc, 0, sizeof(sc));
    add_mix();
    be->ops->stop(be); /* disable, forced flush, detach */
    assert_int_equal(fc.last_flush_flag, CUPTI_ABI_FLUSH_FORCED);
    assert_int_equal(sc.kinds[MON_KIND_KERNEL], 2);
    assert_int_equal(sc.records, 2);
    assert_false(fc.on[CUPTI_ABI_KIND_CONCURRENT_KERNEL]);
    /* a late completion after stop is discarded */
    add_mix();
    (void)f_flush(1);
    assert_int_equal(sc.records, 2);
    be->ops->destroy(be);
}

static void test_backend_early_invalid_and_errors(void **state)
{
    struct backend *be;
    struct backend_drops d;
    uint32_t on = 0, zero[8] = { 0 };
    struct cupti_abi_kernel k = { .kind = CUPTI_ABI_KIND_CONCURRENT_KERNEL, .name = "k" };
    (void)state;
    freset();
    assert_int_equal(backend_cupti_create_from(&fake_lib, &be), 0);
    assert_int_equal(be->ops->start(be, fsink, &sc), 0);
    assert_int_equal(be->ops->set_kinds(be, K(MON_KIND_KERNEL), &on), 0);
    add(&k, sizeof(k));
    add(&k, sizeof(k));
    add(zero, sizeof(zero)); /* INVALID kind: the walk ends here, normally */
    add(&k, sizeof(k));
    assert_int_equal(be->ops->flush(be), 0);
    assert_int_equal(sc.records, 2);
    be->ops->drops(be, &d);
    assert_int_equal(d.read_errors, 0);
    /* an iterator error: counted, logged, the rest of the buffer lost */
    for (int i = 0; i < 5; i++)
        add(&k, sizeof(k));
    fc.err_at = 3;
    assert_int_equal(be->ops->flush(be), 0);
    assert_int_equal(sc.records, 5);
    be->ops->drops(be, &d);
    assert_int_equal(d.read_errors, 1);
    assert_true(log_has("CUPTI GetNextRecord failed: CUPTI_ERROR_UNKNOWN (999)"));
    /* an enable failure is logged and the kind reported off */
    fc.enable_rc[CUPTI_ABI_KIND_MEMCPY] = CUPTI_ABI_ERROR_NOT_SUPPORTED;
    assert_int_equal(be->ops->set_kinds(be, K(MON_KIND_KERNEL) | K(MON_KIND_MEMCPY), &on), 0);
    assert_int_equal(on, K(MON_KIND_KERNEL));
    assert_true(log_has("CUPTI cuptiActivityEnable(1) failed: CUPTI_ERROR_NOT_SUPPORTED (27)"));
    be->ops->destroy(be);
}

static void test_backend_old_cupti_cap(void **state)
{
    struct backend *be;
    struct backend_drops d;
    uint8_t *held[40];
    size_t size, max;
    uint32_t on = 0;
    (void)state;
    freset();
    fc.version = 20; /* CUDA 12.x before 12.9: may not decline */
    assert_int_equal(backend_cupti_create_from(&fake_lib, &be), 0);
    assert_int_equal(be->ops->start(be, fsink, &sc), 0);
    assert_int_equal(be->ops->set_kinds(be, K(MON_KIND_KERNEL), &on), 0);
    for (int i = 0; i < 32; i++) {
        fc.req(&held[i], &size, &max);
        assert_non_null(held[i]);
    }
    fc.req(&held[32], &size, &max); /* cap reached: collection stops, one more buffer */
    assert_non_null(held[32]);
    assert_true(log_has("CUPTI buffer cap reached; collection stopped"));
    assert_false(fc.on[CUPTI_ABI_KIND_CONCURRENT_KERNEL]);
    for (int i = 0; i <= 32; i++)
        fc.comp(NULL, 0, held[i], size, 0);
    be->ops->drops(be, &d);
    assert_int_equal(d.buffers_declined, 1);
    be->ops->destroy(be);
    /* new CUPTI: the request beyond the cap is declined with NULL */
    freset();
    assert_int_equal(backend_cupti_create_from(&fake_lib, &be), 0);
    assert_int_equal(be->ops->start(be, fsink, &sc), 0);
    for (int i = 0; i < 32; i++)
        fc.req(&held[i], &size, &max);
    fc.req(&held[32], &size, &max);
    assert_null(held[32]);
    for (int i = 0; i < 32; i++)
        fc.comp(NULL, 0, held[i], size, 0);
    be->ops->destroy(be);
}

static int fake_id_of(const struct cupti_lib *lib)
{
    int (*f)(void);
    *(void **)&f = dlsym(lib->dl, "fake_cupti_id");
    return f ? f() : -1;
}

/* docs/design/session.md#cupti-backend order over fake libraries: $CUDA_HOME, then explicit and authoritative, then an already
 * mapped copy wins over every path. */
static void test_library_search(void **state)
{
    struct cupti_lib lib;
    (void)state;
    logcap_clear();
    unsetenv("MSMONITOR_CUPTI_LIB");
    setenv("CUDA_HOME", FAKE_DIR "/fake_cuda_home", 1);
    penv_reload();
    assert_int_equal(cupti_lib_load(&lib, false), 0);
    assert_int_equal(fake_id_of(&lib), 2);
    assert_string_equal(lib.path, FAKE_DIR "/fake_cuda_home/lib64/libcupti.so");
    assert_null(lib.get_callback_name); /* optional, absent */
    assert_true(log_has("Loaded CUPTI library from " FAKE_DIR "/fake_cuda_home/lib64/libcupti.so"));
    /* explicit and incomplete: no fallback to the already mapped or CUDA_HOME copies */
    setenv("MSMONITOR_CUPTI_LIB", FAKE_DIR "/fake_cupti_c/libcupti.so", 1);
    penv_reload();
    assert_int_equal(cupti_lib_load(&lib, false), -ENOENT);
    assert_true(log_has("libcupti.so at " FAKE_DIR "/fake_cupti_c/libcupti.so lacks mandatory symbol cuptiGetVersion"));
    assert_true(log_has("CUPTI library not found (searched: MSMONITOR_CUPTI_LIB=" FAKE_DIR "/fake_cupti_c/libcupti.so)"));
    setenv("MSMONITOR_CUPTI_LIB", FAKE_DIR "/fake_cupti_a/libcupti.so", 1);
    penv_reload();
    assert_int_equal(cupti_lib_load(&lib, false), 0);
    assert_int_equal(fake_id_of(&lib), 1);
    /* nothing set: the copy already mapped (RTLD_NOLOAD of the soname) comes first */
    unsetenv("MSMONITOR_CUPTI_LIB");
    unsetenv("CUDA_HOME");
    penv_reload();
    logcap_clear();
    assert_int_equal(cupti_lib_load(&lib, true), 0);
    assert_true(fake_id_of(&lib) == 1 || fake_id_of(&lib) == 2);
    assert_non_null(strstr(lib.path, FAKE_DIR));
    assert_string_equal(cupti_lib_result_name(21), "CUPTI_ERROR_INVALID_KIND");
    assert_string_equal(cupti_lib_result_name(12345), "CUPTI_ERROR_UNKNOWN");
}

static void test_selection(void **state)
{
    struct backend *be = NULL;
    (void)state;
    logcap_clear();
    setenv("MSMONITOR_BACKEND", "cupti", 1);
    setenv("MSMONITOR_CUPTI_LIB", "/nonexistent/libcupti.so", 1);
    penv_reload();
    assert_int_equal(backend_create(&be), -ENOENT);
    assert_true(log_has("CUPTI library not found (searched: MSMONITOR_CUPTI_LIB=/nonexistent/libcupti.so)"));
    /* injected by the CUDA driver: CUPTI without being asked */
    unsetenv("MSMONITOR_BACKEND");
    setenv("CUDA_INJECTION64_PATH", "/x/libmsmonitor.so", 1);
    penv_reload();
    logcap_clear();
    assert_int_equal(backend_create(&be), -ENOENT);
    assert_true(log_has("CUPTI library not found"));
    assert_false(log_has("msPTI library not found"));
    /* pinned msPTI that is missing: no fallback to CUPTI */
    unsetenv("CUDA_INJECTION64_PATH");
    setenv("MSMONITOR_MSPTI_LIB", "/nonexistent/libmspti.so", 1);
    penv_reload();
    logcap_clear();
    assert_int_equal(backend_create(&be), -ENOENT);
    assert_true(log_has("msPTI library not found"));
    assert_false(log_has("CUPTI library not found"));
    unsetenv("MSMONITOR_MSPTI_LIB");
    unsetenv("MSMONITOR_CUPTI_LIB");
    penv_reload();
}

static int setup(void **state)
{
    (void)state;
    return logcap_open();
}

static int teardown(void **state)
{
    (void)state;
    logcap_close();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_abi_matches_cuda_headers),
        cmocka_unit_test(test_kernel_and_longer_record),
        cmocka_unit_test(test_nccl_kernel_records),
        cmocka_unit_test(test_nccl_name_parsing),
        cmocka_unit_test(test_suffix_stripping),
        cmocka_unit_test(test_api_records),
        cmocka_unit_test(test_memcpy_records),
        cmocka_unit_test(test_memset_records),
        cmocka_unit_test(test_memory_records),
        cmocka_unit_test(test_marker_records),
        cmocka_unit_test(test_unknown_kind),
        cmocka_unit_test(test_backend_kinds_strides_and_stop),
        cmocka_unit_test(test_backend_early_invalid_and_errors),
        cmocka_unit_test(test_backend_old_cupti_cap),
        cmocka_unit_test(test_selection),
        cmocka_unit_test(test_library_search),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
