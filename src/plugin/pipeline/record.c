/* record: names of the normalised record's kinds, communication data types and memcpy kinds.
 * Backends convert their raw records into struct mon_record (backend/mspti_record.c for
 * msPTI); nothing here knows a vendor layout. */
#include <stddef.h>
#include <string.h>

#include "contract/kinds.h"
#include "plugin/pipeline/record.h"

/* Kind names live in the contract (one table for CLI, daemon, plugin and extension). */
_Static_assert(MON_KIND_LIMIT == KINDS_VALUE_LIMIT, "per-kind arrays cover every kind value");

const char *mon_kind_name(int kind)
{
    return kinds_name(kind);
}

int mon_kind_from_name(const char *name, size_t len)
{
    int k = kinds_from_name(name, len);

    return k < 0 ? -1 : k;
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
