/* cfgrules: lookups over cfgrules.def and the one integer range check, which the CLI (strict:
 * refuse) and the plugin (lenient: clamp or fall back, with a WARNING) both apply. */
#include "contract/cfgrules.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include <stdarg.h>
#include <stdio.h>

#include "common/strutil.h"
#include "contract/cfgkeys.h"
#include "contract/outputs.h"

static const struct cfgrules_rule cfgrules_table[] = {
#define RULE(key, type, dflt, min, max, minus_one, command, flag, help)                          \
    { key, CFGRULES_##type, dflt, min, max, minus_one, CFGRULES_COMMAND_##command, flag, help },
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

/* Appends to buf[cap] at *off like snprintf; *off counts what would have been written. */
static void put(char *buf, size_t cap, size_t *off, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t cap, size_t *off, const char *fmt, ...)
{
    va_list ap;
    int w;

    va_start(ap, fmt);
    w = vsnprintf(buf + (*off < cap ? *off : cap - 1), *off < cap ? cap - *off : 1, fmt, ap);
    va_end(ap);
    *off += w > 0 ? (size_t)w : 0;
}

size_t cfgrules_reason(const struct cfgrules_rule *r, char *buf, size_t cap)
{
    static const char *const exportable[] = { MSMON_OUTPUT_EXPORT_VALUES NULL };
    size_t off = 0;

    if (!buf || !cap)
        return 0;
    buf[0] = '\0';
    if (!r)
        return 0;
    switch (r->type) {
    case CFGRULES_BOOL:
        put(buf, cap, &off, "Must be true or false");
        break;
    case CFGRULES_INT:
        if (r->minus_one)
            put(buf, cap, &off, "Must be -1 or an integer greater than or equal to %lld", (long long)r->min);
        else
            put(buf, cap, &off, "Must be an integer in [%lld, %lld]", (long long)r->min, (long long)r->max);
        break;
    case CFGRULES_EXPORT:
        put(buf, cap, &off, "possible values: ");
        for (size_t i = 0; exportable[i]; i++)
            put(buf, cap, &off, "%s%s", i ? ", " : "", exportable[i]);
        break;
    default:
        break;
    }
    return off;
}
