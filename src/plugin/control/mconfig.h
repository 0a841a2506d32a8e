/* mconfig: parse and validate one npu-monitor config map (docs/design/session.md#applying-a-config). Pure: the
 * caller passes the key/value arrays received from the framework; nothing is applied here. */
#ifndef MSMON_PLUGIN_MCONFIG_H
#define MSMON_PLUGIN_MCONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/fgram.h"
#include "contract/outputs.h"

#define MCONFIG_MAX_LOG_FILE 4096
#define MCONFIG_MAX_FILTER FGRAM_MAX_TEXT /* the contract's filter limit */

struct mconfig {
    uint32_t kinds_mask;        /* bit (1u << kind); 0 = do not change kinds */
    uint32_t report_interval_s;
    double duration_s;          /* negative input already clamped to 0 */
    bool start, stop;
    enum msmon_output output;   /* NPU_MONITOR_EXPORT_TYPE: an exportable row of the output table */
    char log_file[MCONFIG_MAX_LOG_FILE + 1];
    char filter[MCONFIG_MAX_FILTER + 1];
    char rotate_lines[32];      /* raw JSONL_ROTATE_LOG_LINES ("" if absent or too long) */
    char rotate_files[32];
    char id[24];                /* REQUEST_TRACE_ID ("" = not from the daemon): acknowledged */
    char notes[256];            /* "unknown key 'X' ignored; ..." ("" = none) */
};

/* Fill *ret from n key/value pairs. Values are trimmed of spaces/tabs; unknown keys are
 * ignored and named in ret->notes (a typo must not pass unnoticed). Only NPU_MONITOR_START is
 * required: every other key, when absent (an older dyno), takes its default (docs/cli.md):
 * MSPTI_ACTIVITY_KIND Marker, REPORT_INTERVAL_S 0 (keep), DURATION 0, NPU_MONITOR_STOP false,
 * NPU_MONITOR_LOG_FILE "", NPU_MONITOR_EXPORT_TYPE DB. A missing NPU_MONITOR_START or an
 * invalid value → ERROR `Missing required key: <KEY>` or `Invalid value for <KEY> = '<v>'
 * (<rule>)` and -EINVAL. */
int mconfig_parse(const char *const *keys, const char *const *values, size_t n, struct mconfig *ret);

#endif
