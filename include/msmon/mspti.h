/* mspti: our own declaration of the msPTI ABI (spec docs/design/mspti.md#library-facts, #runtime-semantics), written from the
 * spec, not copied from CANN headers. Used by the plugin's msPTI backend and by the simulated
 * libmspti.so; every record layout is pinned by static assertions below. LP64 only. */
#ifndef MSMON_MSPTI_H
#define MSMON_MSPTI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MSPTI_PACKED __attribute__((__packed__)) __attribute__((aligned(8)))

#define MSPTI_INVALID_DEVICE_ID ((uint32_t)0xFFFFFFFFu)
#define MSPTI_INVALID_STREAM_ID ((uint32_t)0xFFFFFFFFu)
#define MSPTI_INVALID_CORRELATION_ID ((uint64_t)0)

typedef enum {
    MSPTI_SUCCESS = 0,
    MSPTI_ERROR_INVALID_PARAMETER = 1,
    MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 2,
    MSPTI_ERROR_MAX_LIMIT_REACHED = 3,
    MSPTI_ERROR_DEVICE_OFFLINE = 4,
    MSPTI_ERROR_QUEUE_EMPTY = 5,
    MSPTI_ERROR_WITHOUT_LD_PRELOAD = 6,
    MSPTI_ERROR_NOT_INITIALIZED = 7,
    MSPTI_ERROR_INVALID_KIND = 8,
    MSPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT = 9,
    MSPTI_ERROR_INNER = 999,
    MSPTI_ERROR_FORCE_INT = 0x7fffffff
} msptiResult;

typedef enum {
    MSPTI_ACTIVITY_KIND_INVALID = 0,
    MSPTI_ACTIVITY_KIND_MARKER = 1,
    MSPTI_ACTIVITY_KIND_KERNEL = 2,
    MSPTI_ACTIVITY_KIND_API = 3,
    MSPTI_ACTIVITY_KIND_HCCL = 4,
    MSPTI_ACTIVITY_KIND_MEMORY = 5,
    MSPTI_ACTIVITY_KIND_MEMSET = 6,
    MSPTI_ACTIVITY_KIND_MEMCPY = 7,
    MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION = 8,
    MSPTI_ACTIVITY_KIND_COMMUNICATION = 9,
    MSPTI_ACTIVITY_KIND_ACL_API = 10,
    MSPTI_ACTIVITY_KIND_NODE_API = 11,
    MSPTI_ACTIVITY_KIND_RUNTIME_API = 12,
    MSPTI_ACTIVITY_KIND_COUNT = 13,
    MSPTI_ACTIVITY_KIND_FORCE_INT = 0x7fffffff
} msptiActivityKind;

typedef enum {
    MSPTI_ACTIVITY_FLAG_NONE = 0,
    MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS = 1 << 0,
    MSPTI_ACTIVITY_FLAG_MARKER_START = 1 << 1,
    MSPTI_ACTIVITY_FLAG_MARKER_END = 1 << 2,
    MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS_WITH_DEVICE = 1 << 3,
    MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE = 1 << 4,
    MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE = 1 << 5
} msptiActivityFlag;

typedef enum { MSPTI_ACTIVITY_SOURCE_KIND_HOST = 0, MSPTI_ACTIVITY_SOURCE_KIND_DEVICE = 1 } msptiActivitySourceKind;

typedef enum {
    MSPTI_EXTERNAL_CORRELATION_KIND_INVALID = 0,
    MSPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN = 1,
    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 = 2,
    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1 = 3,
    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 = 4,
    MSPTI_EXTERNAL_CORRELATION_KIND_SIZE = 5
} msptiExternalCorrelationKind;

typedef enum { MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION = 0, MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE = 1 } msptiActivityMemoryOperationType;
typedef enum { MSPTI_ACTIVITY_MEMORY_KIND_UNKNOWN = 0, MSPTI_ACTIVITY_MEMORY_KIND_DEVICE = 1 } msptiActivityMemoryKind;
typedef enum {
    MSPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN = 0,
    MSPTI_ACTIVITY_MEMCPY_KIND_HTOH = 1,
    MSPTI_ACTIVITY_MEMCPY_KIND_HTOD = 2,
    MSPTI_ACTIVITY_MEMCPY_KIND_DTOH = 3,
    MSPTI_ACTIVITY_MEMCPY_KIND_DTOD = 4,
    MSPTI_ACTIVITY_MEMCPY_KIND_DEFAULT = 5
} msptiActivityMemcpyKind;

typedef enum {
    MSPTI_ACTIVITY_COMMUNICATION_INT8 = 0,
    MSPTI_ACTIVITY_COMMUNICATION_INT16 = 1,
    MSPTI_ACTIVITY_COMMUNICATION_INT32 = 2,
    MSPTI_ACTIVITY_COMMUNICATION_FP16 = 3,
    MSPTI_ACTIVITY_COMMUNICATION_FP32 = 4,
    MSPTI_ACTIVITY_COMMUNICATION_INT64 = 5,
    MSPTI_ACTIVITY_COMMUNICATION_UINT64 = 6,
    MSPTI_ACTIVITY_COMMUNICATION_UINT8 = 7,
    MSPTI_ACTIVITY_COMMUNICATION_UINT16 = 8,
    MSPTI_ACTIVITY_COMMUNICATION_UINT32 = 9,
    MSPTI_ACTIVITY_COMMUNICATION_FP64 = 10,
    MSPTI_ACTIVITY_COMMUNICATION_BFP16 = 11,
    MSPTI_ACTIVITY_COMMUNICATION_INT128 = 12,
    MSPTI_ACTIVITY_COMMUNICATION_HIF8 = 14,
    MSPTI_ACTIVITY_COMMUNICATION_FP8E4M3 = 15,
    MSPTI_ACTIVITY_COMMUNICATION_FP8E5M2 = 16,
    MSPTI_ACTIVITY_COMMUNICATION_FP8E8M0 = 17,
    MSPTI_ACTIVITY_COMMUNICATION_INVALID_TYPE = 0xFFFF
} msptiCommunicationDataType;

typedef enum { MSPTI_CB_DOMAIN_INVALID = 0, MSPTI_CB_DOMAIN_RUNTIME = 1, MSPTI_CB_DOMAIN_HCCL = 2, MSPTI_CB_DOMAIN_SIZE = 3 } msptiCallbackDomain;
typedef enum { MSPTI_API_ENTER = 0, MSPTI_API_EXIT = 1 } msptiApiCallbackSite;
typedef uint32_t msptiCallbackId;

enum {
    MSPTI_CBID_RUNTIME_DEVICE_SET = 1, MSPTI_CBID_RUNTIME_DEVICE_RESET = 2,
    MSPTI_CBID_RUNTIME_DEVICE_SET_EX = 3, MSPTI_CBID_RUNTIME_CONTEXT_CREATED_EX = 4,
    MSPTI_CBID_RUNTIME_CONTEXT_CREATED = 5, MSPTI_CBID_RUNTIME_CONTEXT_DESTROY = 6,
    MSPTI_CBID_RUNTIME_STREAM_CREATED = 7, MSPTI_CBID_RUNTIME_STREAM_DESTROY = 8,
    MSPTI_CBID_RUNTIME_STREAM_SYNCHRONIZED = 9, MSPTI_CBID_RUNTIME_LAUNCH = 10,
    MSPTI_CBID_RUNTIME_CPU_LAUNCH = 11, MSPTI_CBID_RUNTIME_AICPU_LAUNCH = 12,
    MSPTI_CBID_RUNTIME_AIV_LAUNCH = 13, MSPTI_CBID_RUNTIME_FFTS_LAUNCH = 14,
    MSPTI_CBID_RUNTIME_MALLOC = 15, MSPTI_CBID_RUNTIME_FREE = 16,
    MSPTI_CBID_RUNTIME_MALLOC_HOST = 17, MSPTI_CBID_RUNTIME_FREE_HOST = 18,
    MSPTI_CBID_RUNTIME_MALLOC_CACHED = 19, MSPTI_CBID_RUNTIME_FLUSH_CACHE = 20,
    MSPTI_CBID_RUNTIME_INVALID_CACHE = 21, MSPTI_CBID_RUNTIME_MEMCPY = 22,
    MSPTI_CBID_RUNTIME_MEMCPY_HOST = 23, MSPTI_CBID_RUNTIME_MEMCPY_ASYNC = 24,
    MSPTI_CBID_RUNTIME_MEM_CPY2D = 25, MSPTI_CBID_RUNTIME_MEM_CPY2D_ASYNC = 26,
    MSPTI_CBID_RUNTIME_MEM_SET = 27, MSPTI_CBID_RUNTIME_MEM_SET_ASYNC = 28,
    MSPTI_CBID_RUNTIME_MEM_GET_INFO = 29, MSPTI_CBID_RUNTIME_RESERVE_MEM_ADDRESS = 30,
    MSPTI_CBID_RUNTIME_RELEASE_MEM_ADDRESS = 31, MSPTI_CBID_RUNTIME_MALLOC_PHYSICAL = 32,
    MSPTI_CBID_RUNTIME_FREE_PHYSICAL = 33, MSPTI_CBID_RUNTIME_MEM_EXPORT_TO_SHAREABLE_HANDLE = 34,
    MSPTI_CBID_RUNTIME_MEM_IMPORT_FROM_SHAREABLE_HANDLE = 35,
    MSPTI_CBID_RUNTIME_MEM_SET_PID_TO_SHAREABLE_HANDLE = 36, MSPTI_CBID_RUNTIME_SIZE = 37,
};
enum {
    MSPTI_CBID_HCCL_ALLREDUCE = 1, MSPTI_CBID_HCCL_BROADCAST = 2, MSPTI_CBID_HCCL_ALLGATHER = 3,
    MSPTI_CBID_HCCL_REDUCE_SCATTER = 4, MSPTI_CBID_HCCL_REDUCE = 5, MSPTI_CBID_HCCL_ALL_TO_ALL = 6,
    MSPTI_CBID_HCCL_ALL_TO_ALLV = 7, MSPTI_CBID_HCCL_BARRIER = 8, MSPTI_CBID_HCCL_SCATTER = 9,
    MSPTI_CBID_HCCL_SEND = 10, MSPTI_CBID_HCCL_RECV = 11, MSPTI_CBID_HCCL_SENDRECV = 12,
    MSPTI_CBID_HCCL_SIZE = 13,
};

/* ---- records (packed, 8-byte aligned; stride = sizeof) ---- */
typedef struct MSPTI_PACKED { int32_t kind; } msptiActivity;

/* Packed without the 8-byte alignment: it is embedded at offset 28 of the marker record. */
typedef union __attribute__((__packed__)) {
    struct { uint32_t processId; uint32_t threadId; } pt;
    struct { uint32_t deviceId; uint32_t streamId; } ds;
} msptiObjectId;

typedef struct MSPTI_PACKED {
    int32_t kind;
    int32_t flag;
    int32_t sourceKind;
    uint64_t timestamp;
    uint64_t id;
    msptiObjectId objectId;
    const char *name;
    const char *domain;
} msptiActivityMarker;

typedef struct MSPTI_PACKED {
    int32_t kind;
    uint64_t start;
    uint64_t end;
    struct { uint32_t processId; uint32_t threadId; } pt;
    uint64_t correlationId;
    const char *name;
} msptiActivityApi;

typedef struct MSPTI_PACKED {
    int32_t kind;
    uint64_t start;
    uint64_t end;
    struct { uint32_t deviceId; uint32_t streamId; } ds;
    uint64_t correlationId;
    const char *type;
    const char *name;
} msptiActivityKernel;

typedef struct MSPTI_PACKED {
    int32_t kind;
    uint64_t start;
    uint64_t end;
    struct { uint32_t deviceId; uint32_t streamId; } ds;
    double bandWidth;
    const char *name;
    const char *commName;
} msptiActivityHccl;

typedef struct MSPTI_PACKED {
    int32_t kind;
    int32_t memoryOperationType;
    int32_t memoryKind;
    uint64_t correlationId;
    uint64_t start;
    uint64_t end;
    uint64_t address;
    uint64_t bytes;
    uint32_t processId;
    uint32_t deviceId;
    uint32_t streamId;
} msptiActivityMemory;

typedef struct MSPTI_PACKED {
    int32_t kind;
    uint32_t value;
    uint64_t bytes;
    uint64_t start;
    uint64_t end;
    uint32_t deviceId;
    uint32_t streamId;
    uint64_t correlationId;
    uint8_t isAsync;
} msptiActivityMemset;

typedef struct MSPTI_PACKED {
    int32_t kind;
    int32_t copyKind;
    uint64_t bytes;
    uint64_t start;
    uint64_t end;
    uint32_t deviceId;
    uint32_t streamId;
    uint64_t correlationId;
    uint8_t isAsync;
} msptiActivityMemcpy;

typedef struct MSPTI_PACKED {
    int32_t kind;
    int32_t externalKind;
    uint64_t externalId;
    uint64_t correlationId;
} msptiActivityExternalCorrelation;

typedef struct MSPTI_PACKED {
    int32_t kind;
    int32_t dataType;
    uint64_t count;
    struct { uint32_t deviceId; uint32_t streamId; } ds;
    uint64_t start;
    uint64_t end;
    const char *algType;
    const char *name;
    const char *commName;
    uint64_t correlationId;
} msptiActivityCommunication;

typedef struct {
    msptiApiCallbackSite callbackSite;  /* @0 */
    const char *functionName;           /* @8 */
    const void *functionParams;         /* @16 */
    const void *functionReturnValue;    /* @24 */
    const char *symbolName;             /* @32 */
    uint64_t correlationId;             /* @40 */
    uint64_t reserved1;                 /* @48 */
    uint64_t reserved2;                 /* @56 */
    uint64_t *correlationData;          /* @64 */
} msptiCallbackData;

#define MSPTI_ASSERT_OFF(T, f, o) _Static_assert(offsetof(T, f) == (o), #T "." #f)
_Static_assert(sizeof(msptiActivity) == 8, "msptiActivity");
_Static_assert(sizeof(msptiObjectId) == 8, "msptiObjectId");
_Static_assert(sizeof(msptiActivityMarker) == 56, "msptiActivityMarker");
MSPTI_ASSERT_OFF(msptiActivityMarker, flag, 4);
MSPTI_ASSERT_OFF(msptiActivityMarker, sourceKind, 8);
MSPTI_ASSERT_OFF(msptiActivityMarker, timestamp, 12);
MSPTI_ASSERT_OFF(msptiActivityMarker, id, 20);
MSPTI_ASSERT_OFF(msptiActivityMarker, objectId, 28);
MSPTI_ASSERT_OFF(msptiActivityMarker, name, 36);
MSPTI_ASSERT_OFF(msptiActivityMarker, domain, 44);
_Static_assert(sizeof(msptiActivityApi) == 48, "msptiActivityApi");
MSPTI_ASSERT_OFF(msptiActivityApi, start, 4);
MSPTI_ASSERT_OFF(msptiActivityApi, end, 12);
MSPTI_ASSERT_OFF(msptiActivityApi, pt, 20);
MSPTI_ASSERT_OFF(msptiActivityApi, correlationId, 28);
MSPTI_ASSERT_OFF(msptiActivityApi, name, 36);
_Static_assert(sizeof(msptiActivityKernel) == 56, "msptiActivityKernel");
MSPTI_ASSERT_OFF(msptiActivityKernel, start, 4);
MSPTI_ASSERT_OFF(msptiActivityKernel, end, 12);
MSPTI_ASSERT_OFF(msptiActivityKernel, ds, 20);
MSPTI_ASSERT_OFF(msptiActivityKernel, correlationId, 28);
MSPTI_ASSERT_OFF(msptiActivityKernel, type, 36);
MSPTI_ASSERT_OFF(msptiActivityKernel, name, 44);
_Static_assert(sizeof(msptiActivityHccl) == 56, "msptiActivityHccl");
MSPTI_ASSERT_OFF(msptiActivityHccl, start, 4);
MSPTI_ASSERT_OFF(msptiActivityHccl, end, 12);
MSPTI_ASSERT_OFF(msptiActivityHccl, ds, 20);
MSPTI_ASSERT_OFF(msptiActivityHccl, bandWidth, 28);
MSPTI_ASSERT_OFF(msptiActivityHccl, name, 36);
MSPTI_ASSERT_OFF(msptiActivityHccl, commName, 44);
_Static_assert(sizeof(msptiActivityMemory) == 64, "msptiActivityMemory");
MSPTI_ASSERT_OFF(msptiActivityMemory, memoryOperationType, 4);
MSPTI_ASSERT_OFF(msptiActivityMemory, memoryKind, 8);
MSPTI_ASSERT_OFF(msptiActivityMemory, correlationId, 12);
MSPTI_ASSERT_OFF(msptiActivityMemory, start, 20);
MSPTI_ASSERT_OFF(msptiActivityMemory, end, 28);
MSPTI_ASSERT_OFF(msptiActivityMemory, address, 36);
MSPTI_ASSERT_OFF(msptiActivityMemory, bytes, 44);
MSPTI_ASSERT_OFF(msptiActivityMemory, processId, 52);
MSPTI_ASSERT_OFF(msptiActivityMemory, deviceId, 56);
MSPTI_ASSERT_OFF(msptiActivityMemory, streamId, 60);
_Static_assert(sizeof(msptiActivityMemset) == 56, "msptiActivityMemset");
MSPTI_ASSERT_OFF(msptiActivityMemset, value, 4);
MSPTI_ASSERT_OFF(msptiActivityMemset, bytes, 8);
MSPTI_ASSERT_OFF(msptiActivityMemset, start, 16);
MSPTI_ASSERT_OFF(msptiActivityMemset, end, 24);
MSPTI_ASSERT_OFF(msptiActivityMemset, deviceId, 32);
MSPTI_ASSERT_OFF(msptiActivityMemset, streamId, 36);
MSPTI_ASSERT_OFF(msptiActivityMemset, correlationId, 40);
MSPTI_ASSERT_OFF(msptiActivityMemset, isAsync, 48);
_Static_assert(sizeof(msptiActivityMemcpy) == 56, "msptiActivityMemcpy");
MSPTI_ASSERT_OFF(msptiActivityMemcpy, copyKind, 4);
MSPTI_ASSERT_OFF(msptiActivityMemcpy, bytes, 8);
MSPTI_ASSERT_OFF(msptiActivityMemcpy, start, 16);
MSPTI_ASSERT_OFF(msptiActivityMemcpy, end, 24);
MSPTI_ASSERT_OFF(msptiActivityMemcpy, deviceId, 32);
MSPTI_ASSERT_OFF(msptiActivityMemcpy, streamId, 36);
MSPTI_ASSERT_OFF(msptiActivityMemcpy, correlationId, 40);
MSPTI_ASSERT_OFF(msptiActivityMemcpy, isAsync, 48);
_Static_assert(sizeof(msptiActivityExternalCorrelation) == 24, "msptiActivityExternalCorrelation");
MSPTI_ASSERT_OFF(msptiActivityExternalCorrelation, externalKind, 4);
MSPTI_ASSERT_OFF(msptiActivityExternalCorrelation, externalId, 8);
MSPTI_ASSERT_OFF(msptiActivityExternalCorrelation, correlationId, 16);
_Static_assert(sizeof(msptiActivityCommunication) == 72, "msptiActivityCommunication");
MSPTI_ASSERT_OFF(msptiActivityCommunication, dataType, 4);
MSPTI_ASSERT_OFF(msptiActivityCommunication, count, 8);
MSPTI_ASSERT_OFF(msptiActivityCommunication, ds, 16);
MSPTI_ASSERT_OFF(msptiActivityCommunication, start, 24);
MSPTI_ASSERT_OFF(msptiActivityCommunication, end, 32);
MSPTI_ASSERT_OFF(msptiActivityCommunication, algType, 40);
MSPTI_ASSERT_OFF(msptiActivityCommunication, name, 48);
MSPTI_ASSERT_OFF(msptiActivityCommunication, commName, 56);
MSPTI_ASSERT_OFF(msptiActivityCommunication, correlationId, 64);
_Static_assert(sizeof(msptiCallbackData) == 72, "msptiCallbackData");
MSPTI_ASSERT_OFF(msptiCallbackData, functionName, 8);
MSPTI_ASSERT_OFF(msptiCallbackData, correlationId, 40);
MSPTI_ASSERT_OFF(msptiCallbackData, correlationData, 64);

/* ---- functions ---- */
typedef void (*msptiBuffersCallbackRequestFunc)(uint8_t **buffer, size_t *size, size_t *maxNumRecords);
typedef void (*msptiBuffersCallbackCompleteFunc)(uint8_t *buffer, size_t size, size_t validSize);
typedef void (*msptiCallbackFunc)(void *userdata, msptiCallbackDomain domain, msptiCallbackId cbid,
                                  const msptiCallbackData *cbdata);
typedef struct msptiSubscriber_st *msptiSubscriberHandle;

msptiResult msptiSubscribe(msptiSubscriberHandle *subscriber, msptiCallbackFunc callback, void *userdata);
msptiResult msptiUnsubscribe(msptiSubscriberHandle subscriber);
msptiResult msptiActivityRegisterCallbacks(msptiBuffersCallbackRequestFunc funcBufferRequested,
                                           msptiBuffersCallbackCompleteFunc funcBufferCompleted);
msptiResult msptiActivityEnable(msptiActivityKind kind);
msptiResult msptiActivityDisable(msptiActivityKind kind);
msptiResult msptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes, msptiActivity **record);
msptiResult msptiActivityFlushAll(uint32_t flag);
msptiResult msptiActivityFlushPeriod(uint32_t time);
msptiResult msptiActivityPushExternalCorrelationId(msptiExternalCorrelationKind kind, uint64_t id);
msptiResult msptiActivityPopExternalCorrelationId(msptiExternalCorrelationKind kind, uint64_t *lastId);
msptiResult msptiActivityEnableMarkerDomain(const char *name);
msptiResult msptiActivityDisableMarkerDomain(const char *name);
bool msptiActivityIsEnabled(msptiActivityKind kind);
msptiResult msptiEnableCallback(uint32_t enable, msptiSubscriberHandle subscriber, msptiCallbackDomain domain,
                                msptiCallbackId cbid);
msptiResult msptiEnableDomain(uint32_t enable, msptiSubscriberHandle subscriber, msptiCallbackDomain domain);
msptiResult msptiGetResultString(msptiResult result, const char **str);

#ifdef __cplusplus
}
#endif
#endif
