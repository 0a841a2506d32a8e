/* record: names of the normalised record's kinds, communication data types and memcpy kinds.
 * Backends convert their raw records into struct mon_record (backend/mspti_record.c for
 * msPTI); nothing here knows a vendor layout. */
#include <stddef.h>
#include <string.h>

#include "plugin/pipeline/record.h"

static const char *const kind_names[MON_KIND_LIMIT] = {
    [MON_KIND_MARKER] = "Marker",       [MON_KIND_KERNEL] = "Kernel",
    [MON_KIND_API] = "API",             [MON_KIND_HCCL] = "Hccl",
    [MON_KIND_MEMORY] = "Memory",       [MON_KIND_MEMSET] = "MemSet",
    [MON_KIND_MEMCPY] = "MemCpy",       [MON_KIND_COMMUNICATION] = "Communication",
    [MON_KIND_ACL_API] = "AclAPI",      [MON_KIND_NODE_API] = "NodeAPI",
    [MON_KIND_RUNTIME_API] = "RuntimeAPI",
};

const char *mon_kind_name(int kind)
{
    if (kind < 0 || kind >= MON_KIND_LIMIT)
        return NULL;
    return kind_names[kind];
}

int mon_kind_from_name(const char *name, size_t len)
{
    if (!name)
        return -1;
    for (int k = 0; k < MON_KIND_LIMIT; k++) {
        const char *n = kind_names[k];
        if (n && strlen(n) == len && memcmp(n, name, len) == 0)
            return k;
    }
    return -1;
}

const char *mon_comm_dtype_name(int32_t dt)
{
    static const char *const names[] = {
        "INT8", "INT16", "INT32", "FP16", "FP32", "INT64", "UINT64", "UINT8", "UINT16",
        "UINT32", "FP64", "BFP16", "INT128", NULL, "HIF8", "FP8E4M3", "FP8E5M2", "FP8E8M0",
    };
    if (dt >= 0 && (size_t)dt < sizeof(names) / sizeof(names[0]) && names[dt])
        return names[dt];
    return "INVALID_TYPE";
}

const char *mon_memcpy_kind_name(int32_t k)
{
    static const char *const names[] = { "UNKNOWN", "HTOH", "HTOD", "DTOH", "DTOD", "DEFAULT" };
    if (k >= 0 && (size_t)k < sizeof(names) / sizeof(names[0]))
        return names[k];
    return "UNKNOWN";
}
