/* kinds: lookups over kinds.def, the one kind table; the order users see is the order of
 * its rows. */
#include "contract/kinds.h"

#include <errno.h>
#include <string.h>

#include "common/strutil.h"

#define KINDS_TRIM " \t"

static const struct {
    const char *name;
    int value;
    int standalone;
} kinds_table[KINDS_COUNT] = {
#define KIND(name, id, value, standalone) { #name, value, standalone },
#include "contract/kinds.def"
#undef KIND
};

#define KIND(name, id, value, standalone)                                                        \
    _Static_assert(value > 0 && value < KINDS_VALUE_LIMIT && value != KINDS_EXTERNAL_CORRELATION, \
                   #name " has a value per-kind arrays cover");                                   \
    _Static_assert(standalone >= 0 && standalone <= KINDS_STANDALONE_COUNT, #name " standalone position");
#include "contract/kinds.def"
#undef KIND

const char kinds_list_text[] = KINDS_LIST_TEXT;

const char *kinds_name(int v)
{
    /* Indexed by value: processors name a kind per record, so this must not scan. */
    static const char *const by_value[KINDS_VALUE_LIMIT] = {
#define KIND(name, id, value, standalone) [value] = #name,
#include "contract/kinds.def"
#undef KIND
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

bool kinds_standalone(int v)
{
    static const bool by_value[KINDS_VALUE_LIMIT] = {
#define KIND(name, id, value, standalone) [value] = standalone > 0,
#include "contract/kinds.def"
#undef KIND
    };

    return v >= 0 && v < KINDS_VALUE_LIMIT && by_value[v];
}

int kinds_stem(int v, char *buf, size_t cap)
{
    static const char *const ids[KINDS_VALUE_LIMIT] = {
#define KIND(name, id, value, standalone) [value] = #id,
#include "contract/kinds.def"
#undef KIND
    };
    const char *id = v >= 0 && v < KINDS_VALUE_LIMIT ? ids[v] : NULL;
    size_t n;

    if (!id || !buf || !cap)
        return -EINVAL;
    n = strlen(id);
    if (n >= cap)
        return -ENAMETOOLONG;
    for (size_t i = 0; i <= n; i++)
        buf[i] = id[i] >= 'A' && id[i] <= 'Z' ? (char)(id[i] - 'A' + 'a') : id[i];
    return 0;
}

int kinds_standalone_at(size_t i)
{
    for (size_t j = 0; j < KINDS_COUNT; j++)
        if (kinds_table[j].standalone > 0 && (size_t)kinds_table[j].standalone == i + 1)
            return kinds_table[j].value;
    return -EINVAL;
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
