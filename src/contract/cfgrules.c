/* cfgrules: lookups over cfgrules.def and the one integer range check, which the CLI (strict:
 * refuse) and the plugin (lenient: clamp or fall back, with a WARNING) both apply. */
#include "contract/cfgrules.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "common/strutil.h"
#include "contract/cfgkeys.h"
#include "contract/kvtext.h"

static const struct cfgrules_rule cfgrules_table[] = {
#define RULE(key, type, dflt, min, max, minus_one, command, msg, absent)                         \
    { key, CFGRULES_##type, dflt, min, max, minus_one, command, msg, absent },
#include "contract/cfgrules.def"
#undef RULE
};
#define CFGRULES_COUNT (sizeof(cfgrules_table) / sizeof(cfgrules_table[0]))

const struct cfgrules_rule *cfgrules_of(const char *key)
{
    for (size_t i = 0; key && i < CFGRULES_COUNT; i++)
        if (strcmp(cfgrules_table[i].key, key) == 0)
            return &cfgrules_table[i];
    return NULL;
}

const struct cfgrules_rule *cfgrules_at(size_t i)
{
    return i < CFGRULES_COUNT ? &cfgrules_table[i] : NULL;
}

int cfgrules_int(const struct cfgrules_rule *r, const char *text, int64_t *ret)
{
    int64_t v;
    uint64_t u;

    if (!r || !text || r->type != CFGRULES_INT)
        return -EINVAL;
    if (r->min < 0 || r->minus_one) {
        if (str_to_i64(text, &v) != 0)
            return -EINVAL;
    } else {
        /* digits only where no negative value can be meant */
        if (str_to_u64(text, &u) != 0)
            return -EINVAL;
        v = u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
    }
    *ret = v;
    if (r->minus_one && v == -1)
        return 0;
    return v < r->min || v > r->max ? -ERANGE : 0;
}

bool cfgrules_for(const struct cfgrules_rule *r, const char *command)
{
    return r && command && strcmp(r->command, command) == 0;
}

size_t cfgrules_count(void)
{
    return CFGRULES_COUNT;
}

int cfgrules_pyint(const struct cfgrules_rule *r, const char *text, int32_t *ret)
{
    int32_t v;

    if (!r || !text || r->type != CFGRULES_PYINT || kvtext_int(text, &v) != 0)
        return -EINVAL;
    *ret = v;
    if (r->minus_one && v == -1)
        return 0;
    return v < r->min || v > r->max ? -ERANGE : 0;
}
