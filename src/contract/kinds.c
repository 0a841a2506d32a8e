/* kinds: the one kind table. Values are msPTI's (8, external correlation, is never user-visible);
 * the R9 order is the order of the table. */
#include "contract/kinds.h"

#include <errno.h>
#include <string.h>

#include "common/strutil.h"

#define KINDS_TRIM " \t"

static const struct {
    const char *name;
    int value;
} kinds_table[KINDS_COUNT] = {
    { "Marker", 1 },  { "Kernel", 2 },         { "API", 3 },     { "Hccl", 4 },
    { "Memory", 5 },  { "MemSet", 6 },         { "MemCpy", 7 },  { "Communication", 9 },
    { "AclAPI", 10 }, { "NodeAPI", 11 },       { "RuntimeAPI", 12 },
};

const char kinds_list_text[] = KINDS_LIST_TEXT;

const char *kinds_name(int v)
{
    /* Indexed by value: processors name a kind per record, so this must not scan. */
    static const char *const by_value[KINDS_VALUE_LIMIT] = {
        [1] = "Marker", [2] = "Kernel",         [3] = "API",     [4] = "Hccl",
        [5] = "Memory", [6] = "MemSet",         [7] = "MemCpy",  [9] = "Communication",
        [10] = "AclAPI", [11] = "NodeAPI",      [12] = "RuntimeAPI",
    };

    return v >= 0 && v < KINDS_VALUE_LIMIT ? by_value[v] : NULL;
}

int kinds_from_name(const char *name, size_t len)
{
    if (!name)
        return -EINVAL;
    for (size_t i = 0; i < KINDS_COUNT; i++)
        if (strlen(kinds_table[i].name) == len && memcmp(kinds_table[i].name, name, len) == 0)
            return kinds_table[i].value;
    return -EINVAL;
}

int kinds_at(size_t i)
{
    return i < KINDS_COUNT ? kinds_table[i].value : -EINVAL;
}

int kinds_parse_list(const char *s, size_t len, bool strict, uint32_t *ret_mask,
                     const char **ret_bad, size_t *ret_bad_len)
{
    const char *p = s, *end = s + len;
    uint32_t mask = 0;
    int rc = 0;

    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *item = p;
        size_t n = (size_t)((comma ? comma : end) - p);
        int k;

        str_trim_view(&item, &n, KINDS_TRIM);
        if (n > 0 || strict) {
            k = kinds_from_name(item, n);
            if (k < 0) {
                if (ret_bad)
                    *ret_bad = item;
                if (ret_bad_len)
                    *ret_bad_len = n;
                rc = -EINVAL;
                goto out;
            }
            mask |= 1u << k;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    *ret_mask = mask;
out:
    return rc;
}
