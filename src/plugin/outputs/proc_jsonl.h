/* proc_jsonl: settings resolution of the JSONL exporter (docs/design/outputs.md#rotation, #jsonl), split out
 * of proc_jsonl.c so the precedence, clamping and capacity rules are tested alone. The
 * processor itself is proc_jsonl_ops (pipeline/output.h). */
#ifndef MSMON_PLUGIN_PROC_JSONL_H
#define MSMON_PLUGIN_PROC_JSONL_H

#include <stdint.h>

#define JSONL_DEFAULT_LINES 10000u
#define JSONL_DEFAULT_CAPACITY 524288u
#define JSONL_MIN_CAPACITY 8192u
#define JSONL_MAX_CAPACITY 2097152u
#define JSONL_DEFAULT_INTERVAL_MS 30000u
#define JSONL_MIN_INTERVAL_MS 1000u
#define JSONL_BATCH_LINES 4096u /* queued lines that wake the writer (< JSONL_MIN_CAPACITY) */

struct jsonl_settings {
    uint32_t max_lines;
    int32_t max_files;    /* -1 = never delete, else >= 2 */
    uint32_t capacity;    /* ring capacity (holds capacity - 1 lines) */
    uint32_t interval_ms; /* max dump interval */
};

/* Resolve the settings: flag value if non-empty, else env if non-empty, else default (lines,
 * files); env only for capacity and interval. Any argument may be NULL. Invalid or
 * out-of-range values are logged at WARNING (naming the value) and replaced as the spec says. */
void jsonl_settings_resolve(const char *flag_lines, const char *flag_files, const char *env_lines,
                            const char *env_files, const char *env_capacity, const char *env_interval,
                            struct jsonl_settings *ret);

/* Test seam: the longest a completion thread waits for room in a full queue before its lines
 * are dropped and counted (default 5000 ms; 0 = drop at once, as upstream). */
void proc_jsonl_test_set_backpressure_ms(uint32_t ms);

#endif
