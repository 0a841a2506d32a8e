/* pconfig: the one reader of config keys in the plugin (pconfig.h). The keys, their types,
 * ranges and what an absent key means come from src/contract/cfgrules.def; the rule text of an
 * error line is built from the same row, so a range is never restated here. */
#include "plugin/control/pconfig.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/strutil.h"
#include "contract/cfgrules.h"
#include "contract/kinds.h"
#include "contract/kvtext.h"

#define PCONFIG_MAX_VALUE 8192 /* longer than any valid value; longer ones are invalid */
#define PCONFIG_MAX_RULES 64   /* bound on the table (checked at parse) */
#define PCONFIG_WS " \t"

/* Trimmed copy of a value into buf; -ENOSPC when it does not fit. */
static int pc_trim(const char *v, char *buf, size_t cap)
{
    size_t n = strlen(v);

    str_trim_view(&v, &n, PCONFIG_WS);
    return str_copy(buf, cap, v, n);
}

/* Append one error line (logged here) to ret->errors. */
static void pc_error(struct pconfig *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pc_error(struct pconfig *c, const char *fmt, ...)
{
    char line[PCONFIG_ERRORS_CAP];
    size_t o = strlen(c->errors);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    LOG_ERROR("%s", line);
    c->nerrors++;
    (void)str_append(c->errors, sizeof(c->errors), o ? "; " : "");
    (void)str_append(c->errors, sizeof(c->errors), line);
}

static void pc_note_unknown(struct pconfig *c, const char *key)
{
    char shown[48], line[80];
    size_t i;

    for (i = 0; key[i] && i < sizeof(shown) - 1; i++)
        shown[i] = (unsigned char)key[i] < 0x20 || (unsigned char)key[i] >= 0x7f ? '?' : key[i];
    shown[i] = '\0';
    snprintf(line, sizeof(line), "%sunknown key '%s' ignored", c->notes[0] ? "; " : "", shown);
    (void)str_append(c->notes, sizeof(c->notes), line);
}

/* The rule of an error line, from the row (the choices from their own tables). */
static const char *pc_rule_text(const struct cfgrules_rule *r, char *buf, size_t cap)
{
    switch (r->type) {
    case CFGRULES_BOOL:
        return "true or false";
    case CFGRULES_INT:
        if (r->min == 0 && !r->minus_one)
            snprintf(buf, cap, "digits only, at most %lld", (long long)r->max);
        else
            snprintf(buf, cap, "%san integer in [%lld, %lld]", r->minus_one ? "-1 or " : "", (long long)r->min,
                     (long long)r->max);
        return buf;
    case CFGRULES_PYINT:
        if (r->minus_one)
            snprintf(buf, cap, "an integer; -1 = the next step");
        else
            snprintf(buf, cap, "an integer >= %lld", (long long)r->min);
        return buf;
    case CFGRULES_SECONDS:
        return "decimal number of seconds";
    case CFGRULES_KINDS:
        return "comma list of " KINDS_LIST_TEXT;
    case CFGRULES_DIR:
        snprintf(buf, cap, "a directory, at most %d bytes", PCONFIG_MAX_LOG_FILE);
        return buf;
    case CFGRULES_EXPORT:
        outputs_export_rule(buf, cap);
        return buf;
    case CFGRULES_FILTER:
        snprintf(buf, cap, "at most %d bytes", PCONFIG_MAX_FILTER);
        return buf;
    default:
        return "see docs/design/contract.md";
    }
}

static void pc_invalid(struct pconfig *c, const struct cfgrules_rule *r, const char *v)
{
    char rule[160];

    pc_error(c, "Invalid value for %s = '%s' (%s)", r->key, v, pc_rule_text(r, rule, sizeof(rule)));
}

/* An npu-monitor value by its row: 0 taken, -EINVAL invalid (the caller logs). */
static int pc_monitor_value(struct pconfig_monitor *m, const struct cfgrules_rule *r, const char *v)
{
    double d;

    if (strcmp(r->key, CFGKEY_NPU_MONITOR_START) == 0)
        return cfgkeys_bool(v, &m->start);
    if (strcmp(r->key, CFGKEY_NPU_MONITOR_STOP) == 0)
        return cfgkeys_bool(v, &m->stop);
    switch (r->type) {
    case CFGRULES_KINDS:
        /* the contract's lenient list rule: items trimmed, empty ones dropped, names exact */
        return kinds_parse_list(v, strlen(v), false, &m->kinds_mask, NULL, NULL);
    case CFGRULES_INT:
        if (strcmp(r->key, CFGKEY_REPORT_INTERVAL_S) == 0)
            return str_to_u32(v, &m->report_interval_s);
        /* the JSONL rotation: checked, with its WARNINGs, when a JSONL session starts
         * (docs/design/outputs.md#rotation); an over-long value stays invalid */
        {
            char *dst = strcmp(r->key, CFGKEY_JSONL_ROTATE_LOG_LINES) == 0 ? m->rotate_lines : m->rotate_files;
            if (str_copy(dst, sizeof(m->rotate_lines), v, strlen(v)) != 0)
                str_copy(dst, sizeof(m->rotate_lines), "invalid", 7);
        }
        return 0;
    case CFGRULES_SECONDS:
        if (str_to_decimal(v, &d) != 0 || !isfinite(d))
            return -EINVAL;
        m->duration_s = d > 0 ? d : 0;
        return 0;
    case CFGRULES_DIR:
        return str_copy(m->log_file, sizeof(m->log_file), v, strlen(v)) == 0 ? 0 : -EINVAL;
    case CFGRULES_EXPORT:
        return outputs_export_parse(v, &m->output);
    case CFGRULES_FILTER:
        return str_copy(m->filter, sizeof(m->filter), v, strlen(v)) == 0 ? 0 : -EINVAL;
    default:
        return -EINVAL;
    }
}

/* The option bit of a switch row; 0 for the switches the plugin does not read. */
static uint32_t pc_switch_bit(const char *key)
{
    static const struct { const char *key; uint32_t bit; } bits[] = {
        { CFGKEY_PROFILE_ANALYSE, PCONFIG_TRACE_ANALYSE },
        { CFGKEY_PROFILE_ASYNC_MODE, PCONFIG_TRACE_ASYNC },
        { CFGKEY_PROFILE_RECORD_SHAPES, PCONFIG_TRACE_RECORD_SHAPES },
        { CFGKEY_PROFILE_PROFILE_MEMORY, PCONFIG_TRACE_PROFILE_MEMORY },
        { CFGKEY_PROFILE_WITH_STACK, PCONFIG_TRACE_WITH_STACK },
        { CFGKEY_PROFILE_WITH_FLOPS, PCONFIG_TRACE_WITH_FLOPS },
        { CFGKEY_PROFILE_WITH_MODULES, PCONFIG_TRACE_WITH_MODULES },
    };

    for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
        if (strcmp(bits[i].key, key) == 0)
            return bits[i].bit;
    return 0;
}

/* An nputrace value by its row. The window's readers are lenient where upstream's were (a
 * switch other than `true` is off, fewer than one iteration is one, a negative start step is
 * the next step); a start step or count that is not an int32 is an error. */
static int pc_trace_value(struct pconfig_trace *t, const struct cfgrules_rule *r, const char *v)
{
    int32_t i = 0;
    int rc;

    switch (r->type) {
    case CFGRULES_DIR:
        if (!v[0])
            return -EINVAL;
        return str_copy(t->log_file, sizeof(t->log_file), v, strlen(v)) == 0 ? 0 : -EINVAL;
    case CFGRULES_PYINT:
        rc = cfgrules_pyint(r, v, &i);
        if (rc == -EINVAL)
            return rc;
        if (strcmp(r->key, CFGKEY_PROFILE_START_STEP) == 0)
            t->start_step = i < 0 ? -1 : i;
        else if (strcmp(r->key, CFGKEY_ACTIVITIES_ITERATIONS) == 0)
            t->iterations = i < 1 ? 1 : i;
        return 0;
    case CFGRULES_SWITCH:
        if (strcmp(r->key, CFGKEY_PROFILE_IS_RANK) == 0)
            t->rank_select = cfgkeys_true(v);
        else if (cfgkeys_true(v))
            t->flags |= pc_switch_bit(r->key);
        return 0;
    case CFGRULES_ACTIVITIES:
        t->flags |= (strstr(v, "CPU") ? PCONFIG_TRACE_CPU : 0) | (strstr(v, "NPU") ? PCONFIG_TRACE_NPU : 0);
        return 0;
    case CFGRULES_TRACE_EXPORT:
        if (strcasecmp(v, "Db") == 0)
            t->flags |= PCONFIG_TRACE_EXPORT_DB;
        return 0;
    case CFGRULES_RANKS:
        /* a list beyond the cap selects nothing it cannot hold: an error, not a silent cut */
        return str_copy(t->rank_list, sizeof(t->rank_list), v, strlen(v)) == 0 ? 0 : -EINVAL;
    default:
        return 0; /* torch.profiler's and msprof's own options: passed along */
    }
}

/* REQUEST_TRACE_ID: a non-zero decimal id, else "". */
static void pc_id(struct pconfig *c, const char *v)
{
    uint64_t u;

    if (str_to_u64(v, &u) == 0 && u != 0 && strlen(v) < sizeof(c->id))
        snprintf(c->id, sizeof(c->id), "%s", v);
    else
        c->id[0] = '\0';
}

static const char *const pc_command[] = { [CFGKEYS_NPU_MONITOR] = "npu-monitor", [CFGKEYS_NPU_TRACE] = "nputrace" };

/* The row index of a key of the table (the callers name rows that exist). */
static size_t pc_row(const char *key)
{
    return (size_t)(cfgrules_of(key) - cfgrules_at(0));
}

int pconfig_parse_pairs(const char *const *keys, const char *const *values, size_t n, enum cfgkeys_class as,
                        struct pconfig *ret)
{
    const char *found[PCONFIG_MAX_RULES] = { 0 };
    const char *present[3];
    size_t nrules = cfgrules_count(), npresent = 0;
    char *local = NULL;
    int rc = 0;

    memset(ret, 0, sizeof(*ret));
    ret->trace.start_step = -1;
    ret->trace.iterations = 1;
    if ((n > 0 && (!keys || !values)) || nrules > PCONFIG_MAX_RULES)
        return -EINVAL;
    /* first the keys: which row each names (the last value of a repeated key wins) */
    for (size_t i = 0; i < n; i++) {
        char key[64] = "";
        size_t k;

        if (!keys[i] || !values[i])
            continue;
        if (pc_trim(keys[i], key, sizeof(key)) != 0) {
            pc_note_unknown(ret, keys[i]);
            continue;
        }
        if (strcmp(key, CFGKEY_REQUEST_TRACE_ID) == 0) {
            char idv[PCONFIG_ID_CAP + 1];
            if (pc_trim(values[i], idv, sizeof(idv)) == 0)
                pc_id(ret, idv);
            else
                ret->id[0] = '\0';
            continue;
        }
        if (strcmp(key, CFGKEY_IS_VALID) == 0)
            continue; /* the framework's handoff flag */
        for (k = 0; k < nrules && strcmp(cfgrules_at(k)->key, key) != 0; k++)
            ;
        if (k < nrules)
            found[k] = values[i];
        else if (key[0])
            pc_note_unknown(ret, key);
    }
    /* the class: the contract's one rule over the keys that decide it, unless the entry point
     * is an npu-monitor one (the C API's enable_dyno_npu_monitor) */
    if (as == CFGKEYS_OTHER) {
        static const char *const deciding[] = { CFGKEY_NPU_MONITOR_START, CFGKEY_ACTIVITIES_LOG_FILE,
                                                CFGKEY_ACTIVITIES_ITERATIONS };
        for (size_t d = 0; d < sizeof(deciding) / sizeof(deciding[0]); d++)
            if (found[pc_row(deciding[d])])
                present[npresent++] = deciding[d];
        as = cfgkeys_classify(present, npresent);
        if (as == CFGKEYS_OTHER)
            return -ENOMSG;
    }
    ret->cls = as;
    local = malloc(PCONFIG_MAX_VALUE);
    if (!local) {
        pc_error(ret, "out of memory reading a config");
        return -ENOMEM;
    }
    /* then the values of this class's rows, each by its rule; the others' keys are noted */
    for (size_t k = 0; k < nrules; k++) {
        const struct cfgrules_rule *r = cfgrules_at(k);
        const char *v = found[k];

        if (!cfgrules_for(r, pc_command[ret->cls])) {
            if (v)
                pc_note_unknown(ret, r->key);
            continue;
        }
        if (!v && !r->absent) {
            pc_error(ret, "Missing required key: %s", r->key);
            continue;
        }
        if (!v) {
            v = r->absent; /* the table's reading of a missing key: valid by construction */
        } else if (pc_trim(v, local, PCONFIG_MAX_VALUE) != 0) {
            char shown[256];
            str_copy(shown, sizeof(shown), v, strlen(v));
            pc_error(ret, "Invalid value for %s = '%s...' (too long)", r->key, shown);
            continue;
        } else {
            v = local;
        }
        rc = ret->cls == CFGKEYS_NPU_MONITOR ? pc_monitor_value(&ret->mon, r, v) : pc_trace_value(&ret->trace, r, v);
        if (rc != 0) {
            if (r->type == CFGRULES_FILTER)
                pc_error(ret, "Invalid value for %s = '%.64s...' (at most %d bytes)", r->key, v, PCONFIG_MAX_FILTER);
            else
                pc_invalid(ret, r, v);
        }
    }
    free(local);
    return ret->nerrors ? -EINVAL : 0;
}

int pconfig_parse_text(const char *text, size_t len, struct pconfig *ret)
{
    struct kvtext kv;
    int rc;

    rc = kvtext_parse(text, len, &kv);
    if (rc == 0) {
        rc = pconfig_parse_pairs(kv.keys, kv.values, kv.n, CFGKEYS_OTHER, ret);
    } else {
        memset(ret, 0, sizeof(*ret));
        pc_error(ret, "config not read: %s", rc == -E2BIG ? "more than 256 keys" : "out of memory");
    }
    kvtext_fini(&kv);
    return rc;
}

bool pconfig_trace_for_rank(const struct pconfig_trace *t, int32_t rank)
{
    char want[16];
    const char *p = t->rank_list;

    if (!t->rank_select)
        return true;
    snprintf(want, sizeof(want), "%d", (int)rank);
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        const char *item = p;
        str_trim_view(&item, &n, KVTEXT_WS);
        if (n > 0 && n == strlen(want) && memcmp(item, want, n) == 0)
            return true;
        if (!comma)
            break;
        p = comma + 1;
    }
    return false;
}
