/* outputs: the table of the plugin's outputs, written once (docs/design/session.md#outputs).
 * The pipeline's output registry (plugin/pipeline/output.h) has the ops of each row; mconfig
 * and the CLI's --export-type take their accepted values and help from it: adding an output is
 * one row here plus its file. */
#ifndef MSMON_CONTRACT_OUTPUTS_H
#define MSMON_CONTRACT_OUTPUTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* X(ID, stem, sel, export_value, help): the plugin's ops are proc_<stem>_ops; sel is E when
 * NPU_MONITOR_EXPORT_TYPE / `dyno npu-monitor --export-type` selects the output by
 * export_value (matched without regard to case by the plugin, exactly by the CLI), N when a
 * session adds it itself (metric datagrams without --log-file, the standalone Monitor, the
 * nputrace window). Rows in the order the CLI lists the values. */
#define MSMON_OUTPUT_TABLE(X)                                                                   \
    X(DB, db, E, "DB", "SQLite database")                                                       \
    X(JSONL, jsonl, E, "Jsonl", "JSON lines, rotated")                                          \
    X(METRIC, metric, N, "metric", "per-interval metric datagrams to the daemon")               \
    X(MEMORY, memory, N, "memory", "in-memory records of the standalone Monitor")               \
    X(TRACE, trace, N, "trace", "Chrome trace-event file of an nputrace window")

enum msmon_output {
#define MSMON_OUTPUT_ENUM_(id, stem, sel, value, help) MSMON_OUTPUT_##id,
    MSMON_OUTPUT_TABLE(MSMON_OUTPUT_ENUM_)
#undef MSMON_OUTPUT_ENUM_
    MSMON_OUTPUT_COUNT
};

/* A set of outputs: bit (1u << enum msmon_output). */
typedef uint32_t msmon_output_set;
#define MSMON_OUTPUT_BIT(id) ((msmon_output_set)1u << (id))

/* The exportable values as literals: `static const char *const v[] = { MSMON_OUTPUT_EXPORT_VALUES NULL };`
 * and `"..., one of:" MSMON_OUTPUT_EXPORT_HELP` (" DB Jsonl"). */
#define MSMON_OUTPUT_SEL_VALUE_E(v) v,
#define MSMON_OUTPUT_SEL_VALUE_N(v)
#define MSMON_OUTPUT_SEL_HELP_E(v) " " v
#define MSMON_OUTPUT_SEL_HELP_N(v)
#define MSMON_OUTPUT_VALUE_(id, stem, sel, value, help) MSMON_OUTPUT_SEL_VALUE_##sel(value)
#define MSMON_OUTPUT_HELP_(id, stem, sel, value, help) MSMON_OUTPUT_SEL_HELP_##sel(value)
#define MSMON_OUTPUT_EXPORT_VALUES MSMON_OUTPUT_TABLE(MSMON_OUTPUT_VALUE_)
#define MSMON_OUTPUT_EXPORT_HELP MSMON_OUTPUT_TABLE(MSMON_OUTPUT_HELP_)

/* The output's name ("db", "trace", ...); NULL out of range. */
const char *outputs_name(enum msmon_output id);
/* An export type value (trimmed by the caller) to its output, without regard to case; only
 * rows marked E match. 0 or -EINVAL. */
int outputs_export_parse(const char *value, enum msmon_output *ret);
/* "db or jsonl" (the exportable values, lower case, always terminated): the config
 * checker's rule text. */
void outputs_export_rule(char *buf, size_t cap);

#endif
