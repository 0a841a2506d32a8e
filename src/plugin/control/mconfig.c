/* mconfig: the validation table of docs/design/session.md#applying-a-config. Each required key has one checker
 * that names its rule in the error line, so users see which value was wrong and why. */
#include "plugin/control/mconfig.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/strutil.h"
#include "contract/cfgkeys.h"
#include "contract/kinds.h"
#include "contract/outputs.h"

#define MCONFIG_MAX_VALUE 8192 /* longer than any valid value; longer ones are invalid */

/* Trimmed copy of a value into buf; -ENOSPC when it does not fit. */
static int mconfig_trim(const char *v, char *buf, size_t cap)
{
    size_t n = strlen(v);

    str_trim_view(&v, &n, " \t");
    return str_copy(buf, cap, v, n);
}

static int mconfig_kinds(const char *v, uint32_t *mask)
{
    /* Lenient list rule of the contract: items trimmed, empty ones dropped, names exact. */
    return kinds_parse_list(v, strlen(v), false, mask, NULL, NULL);
}

enum mconfig_key {
    MK_KIND, MK_INTERVAL, MK_DURATION, MK_START, MK_STOP, MK_LOG_FILE, MK_EXPORT, MK_REQUIRED,
    MK_FILTER = MK_REQUIRED, MK_ROT_LINES, MK_ROT_FILES, MK_COUNT
};
static const char *const mconfig_keys[MK_COUNT] = {
    CFGKEY_MSPTI_ACTIVITY_KIND, CFGKEY_REPORT_INTERVAL_S, CFGKEY_DURATION, CFGKEY_NPU_MONITOR_START,
    CFGKEY_NPU_MONITOR_STOP, CFGKEY_NPU_MONITOR_LOG_FILE, CFGKEY_NPU_MONITOR_EXPORT_TYPE,
    CFGKEY_NPU_MONITOR_FILTER, CFGKEY_JSONL_ROTATE_LOG_LINES, CFGKEY_JSONL_ROTATE_LOG_FILES,
};
static const char *const mconfig_rules[MK_REQUIRED] = {
    ("comma list of " KINDS_LIST_TEXT),
    "digits only, at most 4294967295",
    "decimal number of seconds",
    "true or false",
    "true or false",
    "at most 4096 bytes",
    NULL, /* the output table's exportable values (mconfig_rule) */
};

/* The rule text of key k for its error line. */
static const char *mconfig_rule(enum mconfig_key k, char *buf, size_t cap)
{
    if (k != MK_EXPORT)
        return mconfig_rules[k];
    outputs_export_rule(buf, cap);
    return buf;
}

/* What an absent key means (NULL: required). */
static const char *const mconfig_defaults[MK_REQUIRED] = {
    "Marker", "0", "0", NULL, "false", "", "db",
};

static void mconfig_note_unknown(struct mconfig *c, const char *key)
{
    size_t o = strlen(c->notes);
    char shown[48];
    size_t i;

    for (i = 0; key[i] && i < sizeof(shown) - 1; i++)
        shown[i] = (unsigned char)key[i] < 0x20 || (unsigned char)key[i] >= 0x7f ? '?' : key[i];
    shown[i] = '\0';
    if (o < sizeof(c->notes) - 1)
        snprintf(c->notes + o, sizeof(c->notes) - o, "%sunknown key '%s' ignored", o ? "; " : "", shown);
}

static bool mconfig_known(const char *key)
{
    for (int k = 0; k < MK_COUNT; k++)
        if (strcmp(key, mconfig_keys[k]) == 0)
            return true;
    /* the daemon's id line, and the shm handoff's validity flag (dynamic.h) */
    return strcmp(key, CFGKEY_REQUEST_TRACE_ID) == 0 || strcmp(key, "is_valid") == 0;
}

static int mconfig_check(enum mconfig_key k, const char *v, struct mconfig *c)
{
    double d;

    switch (k) {
    case MK_KIND:
        return mconfig_kinds(v, &c->kinds_mask);
    case MK_INTERVAL:
        return str_to_u32(v, &c->report_interval_s);
    case MK_DURATION:
        if (str_to_decimal(v, &d) != 0 || !isfinite(d))
            return -EINVAL;
        c->duration_s = d > 0 ? d : 0;
        return 0;
    case MK_START:
        return cfgkeys_bool(v, &c->start);
    case MK_STOP:
        return cfgkeys_bool(v, &c->stop);
    case MK_LOG_FILE:
        return str_copy(c->log_file, sizeof(c->log_file), v, strlen(v)) == 0 ? 0 : -EINVAL;
    case MK_EXPORT:
        return outputs_export_parse(v, &c->output);
    default:
        return -EINVAL;
    }
}

int mconfig_parse(const char *const *keys, const char *const *values, size_t n, struct mconfig *ret)
{
    const char *found[MK_COUNT] = { 0 };
    char shown[256], rule[128];
    int rc = 0;

    memset(ret, 0, sizeof(*ret));
    if (n > 0 && (!keys || !values))
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        char key[64] = "";
        if (!keys[i] || !values[i])
            continue;
        if (mconfig_trim(keys[i], key, sizeof(key)) != 0 || !mconfig_known(key)) {
            if (key[0] || strlen(keys[i]) >= sizeof(key))
                mconfig_note_unknown(ret, key[0] ? key : keys[i]);
            continue;
        }
        for (int k = 0; k < MK_COUNT; k++)
            if (strcmp(key, mconfig_keys[k]) == 0)
                found[k] = values[i]; /* a repeated key: the last one wins */
    }
    for (int k = 0; k < MK_COUNT; k++) {
        char local[MCONFIG_MAX_VALUE];
        const char *v = local;
        size_t vlen;

        if (!found[k]) {
            if (k < MK_REQUIRED && !mconfig_defaults[k]) {
                LOG_ERROR("Missing required key: %s", mconfig_keys[k]);
                return -EINVAL;
            }
            if (k < MK_REQUIRED)
                (void)mconfig_check((enum mconfig_key)k, mconfig_defaults[k], ret);
            continue;
        }
        vlen = strlen(found[k]);
        /* Values are bounded: anything beyond MCONFIG_MAX_VALUE is invalid for every key. */
        if (mconfig_trim(found[k], local, sizeof(local)) != 0) {
            str_copy(shown, sizeof(shown), found[k], vlen);
            LOG_ERROR("Invalid value for %s = '%s...' (%s)", mconfig_keys[k], shown,
                      k < MK_REQUIRED ? mconfig_rule((enum mconfig_key)k, rule, sizeof(rule)) : "too long");
            return -EINVAL;
        }
        if (k < MK_REQUIRED) {
            rc = mconfig_check((enum mconfig_key)k, v, ret);
            if (rc != 0) {
                LOG_ERROR("Invalid value for %s = '%s' (%s)", mconfig_keys[k], v,
                          mconfig_rule((enum mconfig_key)k, rule, sizeof(rule)));
                return -EINVAL;
            }
        } else if (k == MK_FILTER) {
            if (str_copy(ret->filter, sizeof(ret->filter), v, strlen(v)) != 0) {
                LOG_ERROR("Invalid value for %s = '%.64s...' (at most %d bytes)", mconfig_keys[k], v,
                          MCONFIG_MAX_FILTER);
                return -EINVAL;
            }
        } else {
            char *dst = k == MK_ROT_LINES ? ret->rotate_lines : ret->rotate_files;
            /* Validated by the JSONL processor at start; an over-long value stays invalid. */
            if (str_copy(dst, sizeof(ret->rotate_lines), v, strlen(v)) != 0)
                str_copy(dst, sizeof(ret->rotate_lines), "invalid", 7);
        }
    }
    return 0;
}
