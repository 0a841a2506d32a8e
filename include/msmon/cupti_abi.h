/* cupti_abi: the slice of NVIDIA's CUPTI activity ABI that msmonitor uses (docs/design/session.md#cupti-backend), written
 * from the published layouts so nothing here needs the CUDA toolkit at build time. Shared by
 * the plugin's CUPTI backend and our simulated libcupti.so; tests/unit compares every offset
 * with the real cupti_activity.h when that header is installed. Names carry a CUPTI_ABI_ /
 * cupti_abi_ prefix so this header and the real one can meet in one translation unit. */
#ifndef MSMON_CUPTI_ABI_H
#define MSMON_CUPTI_ABI_H

#include <stddef.h>
#include <stdint.h>

/* CUptiResult values we test for. */
enum {
    CUPTI_ABI_SUCCESS = 0,
    CUPTI_ABI_ERROR_INVALID_PARAMETER = 1,
    CUPTI_ABI_ERROR_MAX_LIMIT_REACHED = 12,
    CUPTI_ABI_ERROR_NOT_INITIALIZED = 15,
    CUPTI_ABI_ERROR_INVALID_KIND = 21,
    CUPTI_ABI_ERROR_NOT_SUPPORTED = 27,
    CUPTI_ABI_ERROR_UNKNOWN = 999,
};

/* CUpti_ActivityKind values we enable or read. */
enum {
    CUPTI_ABI_KIND_INVALID = 0,
    CUPTI_ABI_KIND_MEMCPY = 1,
    CUPTI_ABI_KIND_MEMSET = 2,
    CUPTI_ABI_KIND_DRIVER = 4,
    CUPTI_ABI_KIND_RUNTIME = 5,
    CUPTI_ABI_KIND_CONCURRENT_KERNEL = 10,
    CUPTI_ABI_KIND_MARKER = 12,
    CUPTI_ABI_KIND_MEMORY2 = 49,
};

enum { CUPTI_ABI_CB_DOMAIN_DRIVER_API = 1, CUPTI_ABI_CB_DOMAIN_RUNTIME_API = 2 };
enum { CUPTI_ABI_FLUSH_FORCED = 1 };                    /* CUPTI_ACTIVITY_FLAG_FLUSH_FORCED */
enum { CUPTI_ABI_MEMCPY_ASYNC = 1, CUPTI_ABI_MEMSET_ASYNC = 1 };
enum { CUPTI_ABI_MARKER_INSTANT = 1, CUPTI_ABI_MARKER_START = 2, CUPTI_ABI_MARKER_END = 4 };
enum { CUPTI_ABI_OBJECT_PROCESS = 1, CUPTI_ABI_OBJECT_THREAD = 2 };
enum { CUPTI_ABI_MEMOP_ALLOCATION = 1, CUPTI_ABI_MEMOP_RELEASE = 2 };
enum { CUPTI_ABI_MEMORY_KIND_DEVICE = 3 };
enum {
    CUPTI_ABI_MEMCPY_HTOD = 1,
    CUPTI_ABI_MEMCPY_DTOH = 2,
    CUPTI_ABI_MEMCPY_DTOD = 8,
    CUPTI_ABI_MEMCPY_HTOH = 9,
};
/* cuptiGetVersion() from which a request callback may decline with *buffer = NULL (docs/design/session.md#cupti-backend). */
#define CUPTI_ABI_VERSION_DECLINE_OK 27u

/* Every struct below is the CUDA 13.0 one, at its full size; fields we do not read are
 * padding. CUPTI pads its structs explicitly, so natural alignment gives the real offsets. */

/* CUpti_ActivityKernel10 (CONCURRENT_KERNEL); Kernel4..9 share the prefix up to name. */
struct cupti_abi_kernel {
    uint32_t kind;
    uint8_t pad4[12];
    uint64_t start, end;        /* 16, 24 */
    uint8_t pad32[8];
    uint32_t deviceId;          /* 40 */
    uint32_t contextId;         /* 44 */
    uint32_t streamId;          /* 48 */
    uint8_t pad52[40];
    uint32_t correlationId;     /* 92 */
    uint8_t pad96[8];
    const char *name;           /* 104 */
    uint8_t pad112[104];
};

/* CUpti_ActivityAPI (RUNTIME, DRIVER). */
struct cupti_abi_api {
    uint32_t kind;
    uint32_t cbid;              /* 4 */
    uint64_t start, end;        /* 8, 16 */
    uint32_t processId;         /* 24 */
    uint32_t threadId;          /* 28 */
    uint32_t correlationId;     /* 32 */
    uint32_t returnValue;       /* 36 */
};

/* CUpti_ActivityMemcpy6. */
struct cupti_abi_memcpy {
    uint32_t kind;
    uint8_t copyKind;           /* 4: CUPTI_ABI_MEMCPY_* */
    uint8_t srcKind, dstKind;   /* 5, 6 */
    uint8_t flags;              /* 7: bit 0 async */
    uint64_t bytes;             /* 8 */
    uint64_t start, end;        /* 16, 24 */
    uint32_t deviceId;          /* 32 */
    uint32_t contextId;         /* 36 */
    uint32_t streamId;          /* 40 */
    uint32_t correlationId;     /* 44 */
    uint8_t pad48[48];
};

/* CUpti_ActivityMemset4. */
struct cupti_abi_memset {
    uint32_t kind;
    uint32_t value;             /* 4 */
    uint64_t bytes;             /* 8 */
    uint64_t start, end;        /* 16, 24 */
    uint32_t deviceId;          /* 32 */
    uint32_t contextId;         /* 36 */
    uint32_t streamId;          /* 40 */
    uint32_t correlationId;     /* 44 */
    uint16_t flags;             /* 48: bit 0 async */
    uint16_t memoryKind;        /* 50 */
    uint8_t pad52[36];
};

/* CUpti_ActivityMemory4 (MEMORY2). */
struct cupti_abi_memory {
    uint32_t kind;
    uint32_t memoryOperationType; /* 4 */
    uint32_t memoryKind;        /* 8 */
    uint32_t correlationId;     /* 12 */
    uint64_t address;           /* 16 */
    uint64_t bytes;             /* 24 */
    uint64_t timestamp;         /* 32 */
    uint64_t PC;                /* 40 */
    uint32_t processId;         /* 48 */
    uint32_t deviceId;          /* 52 */
    uint32_t contextId;         /* 56 */
    uint32_t streamId;          /* 60 */
    const char *name;           /* 64 */
    uint8_t pad72[56];
};

/* CUpti_ActivityMarker2. objectId is a 12-byte union: {processId, threadId} for process and
 * thread objects, {deviceId, contextId, streamId} otherwise. */
struct cupti_abi_marker {
    uint32_t kind;
    uint32_t flags;             /* 4 */
    uint64_t timestamp;         /* 8 */
    uint32_t id;                /* 16 */
    uint32_t objectKind;        /* 20 */
    uint32_t objectId[3];       /* 24 */
    uint8_t pad36[4];
    const char *name;           /* 40: NULL on END */
    const char *domain;         /* 48: NULL = default domain */
};

#define CUPTI_ABI_CHECK(type, field, off) _Static_assert(offsetof(type, field) == (off), #type "." #field)
_Static_assert(sizeof(struct cupti_abi_kernel) == 216, "Kernel10 is 216 bytes");
CUPTI_ABI_CHECK(struct cupti_abi_kernel, start, 16);
CUPTI_ABI_CHECK(struct cupti_abi_kernel, end, 24);
CUPTI_ABI_CHECK(struct cupti_abi_kernel, deviceId, 40);
CUPTI_ABI_CHECK(struct cupti_abi_kernel, contextId, 44);
CUPTI_ABI_CHECK(struct cupti_abi_kernel, streamId, 48);
CUPTI_ABI_CHECK(struct cupti_abi_kernel, correlationId, 92);
CUPTI_ABI_CHECK(struct cupti_abi_kernel, name, 104);
_Static_assert(sizeof(struct cupti_abi_api) == 40, "API is 40 bytes");
CUPTI_ABI_CHECK(struct cupti_abi_api, cbid, 4);
CUPTI_ABI_CHECK(struct cupti_abi_api, start, 8);
CUPTI_ABI_CHECK(struct cupti_abi_api, end, 16);
CUPTI_ABI_CHECK(struct cupti_abi_api, processId, 24);
CUPTI_ABI_CHECK(struct cupti_abi_api, threadId, 28);
CUPTI_ABI_CHECK(struct cupti_abi_api, correlationId, 32);
CUPTI_ABI_CHECK(struct cupti_abi_api, returnValue, 36);
_Static_assert(sizeof(struct cupti_abi_memcpy) == 96, "Memcpy6 is 96 bytes");
CUPTI_ABI_CHECK(struct cupti_abi_memcpy, copyKind, 4);
CUPTI_ABI_CHECK(struct cupti_abi_memcpy, srcKind, 5);
CUPTI_ABI_CHECK(struct cupti_abi_memcpy, dstKind, 6);
CUPTI_ABI_CHECK(struct cupti_abi_memcpy, flags, 7);
CUPTI_ABI_CHECK(struct cupti_abi_memcpy, bytes, 8);
CUPTI_ABI_CHECK(struct cupti_abi_memcpy, start, 16);
CUPTI_ABI_CHECK(struct cupti_abi_memcpy, end, 24);
CUPTI_ABI_CHECK(struct cupti_abi_memcpy, deviceId, 32);
CUPTI_ABI_CHECK(struct cupti_abi_memcpy, contextId, 36);
CUPTI_ABI_CHECK(struct cupti_abi_memcpy, streamId, 40);
CUPTI_ABI_CHECK(struct cupti_abi_memcpy, correlationId, 44);
_Static_assert(sizeof(struct cupti_abi_memset) == 88, "Memset4 is 88 bytes");
CUPTI_ABI_CHECK(struct cupti_abi_memset, value, 4);
CUPTI_ABI_CHECK(struct cupti_abi_memset, bytes, 8);
CUPTI_ABI_CHECK(struct cupti_abi_memset, start, 16);
CUPTI_ABI_CHECK(struct cupti_abi_memset, end, 24);
CUPTI_ABI_CHECK(struct cupti_abi_memset, deviceId, 32);
CUPTI_ABI_CHECK(struct cupti_abi_memset, contextId, 36);
CUPTI_ABI_CHECK(struct cupti_abi_memset, streamId, 40);
CUPTI_ABI_CHECK(struct cupti_abi_memset, correlationId, 44);
CUPTI_ABI_CHECK(struct cupti_abi_memset, flags, 48);
CUPTI_ABI_CHECK(struct cupti_abi_memset, memoryKind, 50);
_Static_assert(sizeof(struct cupti_abi_memory) == 128, "Memory4 is 128 bytes");
CUPTI_ABI_CHECK(struct cupti_abi_memory, memoryOperationType, 4);
CUPTI_ABI_CHECK(struct cupti_abi_memory, memoryKind, 8);
CUPTI_ABI_CHECK(struct cupti_abi_memory, correlationId, 12);
CUPTI_ABI_CHECK(struct cupti_abi_memory, address, 16);
CUPTI_ABI_CHECK(struct cupti_abi_memory, bytes, 24);
CUPTI_ABI_CHECK(struct cupti_abi_memory, timestamp, 32);
CUPTI_ABI_CHECK(struct cupti_abi_memory, PC, 40);
CUPTI_ABI_CHECK(struct cupti_abi_memory, processId, 48);
CUPTI_ABI_CHECK(struct cupti_abi_memory, deviceId, 52);
CUPTI_ABI_CHECK(struct cupti_abi_memory, contextId, 56);
CUPTI_ABI_CHECK(struct cupti_abi_memory, streamId, 60);
CUPTI_ABI_CHECK(struct cupti_abi_memory, name, 64);
_Static_assert(sizeof(struct cupti_abi_marker) == 56, "Marker2 is 56 bytes");
CUPTI_ABI_CHECK(struct cupti_abi_marker, flags, 4);
CUPTI_ABI_CHECK(struct cupti_abi_marker, timestamp, 8);
CUPTI_ABI_CHECK(struct cupti_abi_marker, id, 16);
CUPTI_ABI_CHECK(struct cupti_abi_marker, objectKind, 20);
CUPTI_ABI_CHECK(struct cupti_abi_marker, objectId, 24);
CUPTI_ABI_CHECK(struct cupti_abi_marker, name, 40);
CUPTI_ABI_CHECK(struct cupti_abi_marker, domain, 48);

/* Function types of the symbols we resolve (C ABI: enums are int, handles are pointers). */
typedef int cupti_abi_result;
typedef void (*cupti_abi_request_fn)(uint8_t **buffer, size_t *size, size_t *max_records);
typedef void (*cupti_abi_complete_fn)(void *ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
                                      size_t valid_size);
typedef cupti_abi_result cupti_abi_register_callbacks_fn(cupti_abi_request_fn, cupti_abi_complete_fn);
typedef cupti_abi_result cupti_abi_enable_fn(int kind);
typedef cupti_abi_result cupti_abi_get_next_record_fn(uint8_t *buffer, size_t valid, void **record);
typedef cupti_abi_result cupti_abi_flush_all_fn(uint32_t flag);
typedef cupti_abi_result cupti_abi_get_version_fn(uint32_t *version);
typedef cupti_abi_result cupti_abi_get_callback_name_fn(int domain, uint32_t cbid, const char **name);
typedef cupti_abi_result cupti_abi_get_result_string_fn(cupti_abi_result r, const char **str);
typedef cupti_abi_result cupti_abi_get_num_dropped_fn(void *ctx, uint32_t stream_id, size_t *dropped);
typedef cupti_abi_result cupti_abi_flush_period_fn(uint32_t ms);
typedef cupti_abi_result cupti_abi_finalize_fn(void);

#endif
