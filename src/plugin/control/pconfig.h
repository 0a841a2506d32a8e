/* pconfig: a config as the plugin reads it, parsed once at the plugin's boundary into one typed,
 * validated value (docs/design/session.md#the-route-of-a-config): its class, the daemon's id,
 * every key of the class read by its rule in src/contract/cfgrules.def (absent keys take the
 * table's `absent` value) and the errors, collected, each naming its key. Whatever the entry
 * point (native poller, dyno mode's segment, the C API, Python), this is the only reader of
 * config keys in the plugin; what happens next reads the struct. Pure: nothing is applied and
 * no file is touched here. */
#ifndef MSMON_PLUGIN_PCONFIG_H
#define MSMON_PLUGIN_PCONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/cfgkeys.h"
#include "contract/fgram.h"
#include "contract/outputs.h"

#define PCONFIG_MAX_LOG_FILE 4096         /* the contract's path limit */
#define PCONFIG_MAX_FILTER FGRAM_MAX_TEXT /* the contract's filter limit */
#define PCONFIG_ID_CAP 24                 /* decimal uint64 + NUL */
#define PCONFIG_NOTES_CAP 256
#define PCONFIG_ERRORS_CAP 241            /* what an acknowledgement carries (ack.h) */
#define PCONFIG_RANKS_CAP 1025            /* PROFILE_RANK_LIST: a CLI string flag */

/* npu-monitor (docs/design/contract.md#npu-monitor-keys). */
struct pconfig_monitor {
    uint32_t kinds_mask;        /* bit (1u << kind); 0 = do not change kinds */
    uint32_t report_interval_s; /* 0 = keep the current interval */
    double duration_s;          /* negative input already clamped to 0 */
    bool start, stop;
    enum msmon_output output;   /* NPU_MONITOR_EXPORT_TYPE: an exportable row of the output table */
    char log_file[PCONFIG_MAX_LOG_FILE + 1];
    char filter[PCONFIG_MAX_FILTER + 1];
    char rotate_lines[32];      /* raw JSONL_ROTATE_LOG_LINES ("" if absent; checked at a JSONL start) */
    char rotate_files[32];
};

/* nputrace window options (also msmon_trace_info.flags, include/msmon/msmonitor.h). */
enum {
    PCONFIG_TRACE_CPU = 1u << 0,
    PCONFIG_TRACE_NPU = 1u << 1,
    PCONFIG_TRACE_ANALYSE = 1u << 2,
    PCONFIG_TRACE_ASYNC = 1u << 3,
    PCONFIG_TRACE_RECORD_SHAPES = 1u << 4,
    PCONFIG_TRACE_PROFILE_MEMORY = 1u << 5,
    PCONFIG_TRACE_WITH_STACK = 1u << 6,
    PCONFIG_TRACE_WITH_FLOPS = 1u << 7,
    PCONFIG_TRACE_WITH_MODULES = 1u << 8,
    PCONFIG_TRACE_EXPORT_DB = 1u << 9,
};

/* nputrace (docs/design/contract.md#nputrace-keys, docs/nputrace.md). */
struct pconfig_trace {
    char log_file[PCONFIG_MAX_LOG_FILE + 1]; /* ACTIVITIES_LOG_FILE as given (checked when armed) */
    int32_t start_step;         /* -1: the next step (dyno mode: the creator's aligned step) */
    int32_t iterations;         /* >= 1 */
    uint32_t flags;             /* PCONFIG_TRACE_* */
    bool rank_select;           /* PROFILE_IS_RANK: only the ranks of rank_list trace */
    char rank_list[PCONFIG_RANKS_CAP];
};

struct pconfig {
    enum cfgkeys_class cls;     /* the one class rule (cfgkeys_classify) */
    char id[PCONFIG_ID_CAP];    /* REQUEST_TRACE_ID ("" = not from the daemon): acknowledged */
    char notes[PCONFIG_NOTES_CAP];   /* "unknown key 'X' ignored; ..." ("" = none) */
    char errors[PCONFIG_ERRORS_CAP]; /* "" valid; else each error line, joined by "; " */
    unsigned nerrors;
    struct pconfig_monitor mon;      /* cls == CFGKEYS_NPU_MONITOR */
    struct pconfig_trace trace;      /* cls == CFGKEYS_NPU_TRACE */
};

/* Read n key/value pairs (keys and values trimmed of spaces and tabs; a repeated key keeps its
 * last value) into *ret, as a config of class `as`, or of the class its keys say when `as` is
 * CFGKEYS_OTHER. Every invalid value, and a missing required key, is one ERROR line
 * (`Invalid value for <KEY> = '<v>' (<rule>)`, `Missing required key: <KEY>`) and one entry of
 * ret->errors. Keys of another class or none are named in ret->notes. 0 valid npu-monitor or
 * nputrace config; -EINVAL invalid; -ENOMSG neither class (a Kineto gputrace config). ret is
 * always filled (id, class) so the caller can answer. */
int pconfig_parse_pairs(const char *const *keys, const char *const *values, size_t n, enum cfgkeys_class as,
                        struct pconfig *ret);
/* The same over KEY=value text (the contract's kvtext rule), classified by its keys. Also -E2BIG (too many keys) and
 * -ENOMEM, with ret->errors saying so. */
int pconfig_parse_text(const char *text, size_t len, struct pconfig *ret);
/* The window is for `rank` (PROFILE_IS_RANK off, or rank in PROFILE_RANK_LIST). */
bool pconfig_trace_for_rank(const struct pconfig_trace *t, int32_t rank);

#endif
