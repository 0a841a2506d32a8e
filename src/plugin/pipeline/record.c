/* record: names of the normalised record's kinds, communication data types and memcpy kinds,
 * looked up in the contract's tables (kinds.def, recnames.def).
 * Backends convert their raw records into struct mon_record (backend/mspti_record.c for
 * msPTI); nothing here knows a vendor layout. */
#include <stddef.h>
#include <string.h>

#include "contract/kinds.h"
#include "contract/names.h"
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
    return names_dtype(dt);
}

const char *mon_memcpy_kind_name(int32_t k)
{
    return names_memcpy_kind(k);
}
