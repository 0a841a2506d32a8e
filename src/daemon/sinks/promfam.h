/* promfam: the one mapping from sink records to Prometheus samples (family, sorted labels,
 * value) and the store of their latest values, shared by /metrics (prom_http) and remote
 * write (rw_sender). Formatting does no I/O and is tested alone (docs/design/daemon.md#prometheus-endpoint, docs/design/outputs.md#prometheus). */
#ifndef MSMON_DAEMON_PROMFAM_H
#define MSMON_DAEMON_PROMFAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/sinks/sink.h"

#define PROMFAM_MAX_OP_SERIES 10000   /* docs/design/outputs.md#prometheus: op series (one per op label set) */
#define PROMFAM_MAX_SERIES 200000     /* every other family together: a memory bound */
#define PROMFAM_MAX_LABELS 12
#define PROMFAM_NAME_MAX 200          /* family names longer than this are refused */
#define PROMFAM_VALUE_MAX 1024        /* label values are cut (on a UTF-8 boundary) here */

struct promfam_label {
    const char *name;
    const char *value;
};

/* One sample of a record. Labels exclude __name__ and are sorted by name. */
struct promfam_sample {
    const char *family;
    const struct promfam_label *labels;
    size_t nlabels;
    double value;
};

typedef void (*promfam_emit_fn)(void *arg, const struct promfam_sample *s);

/* Map one record to its samples (docs/design/outputs.md#prometheus, docs/design/daemon.md#prometheus-endpoint): host metrics (device NULL, keys
 * "<metric>[.<entity>]"), upstream sum lines (npu_activity_duration_ns), markers
 * (npu_marker_duration_ns), OpStats entries (npu_op_*), and records without a "kind" key
 * (each numeric key one family). host is the host_name label. Returns the number of samples
 * emitted; records it does not export (PluginStats, PluginInfo, strings) emit none. */
int promfam_map(const struct sink_record *rec, const char *host, promfam_emit_fn fn, void *arg);

/* The HELP text of a family (one table; a generic line for families it does not list). */
const char *promfam_help(const char *family, char *buf, size_t cap);

struct promfam_store;

struct promfam_stats {
    uint64_t series;          /* live series */
    uint64_t op_series;       /* live op label sets (the 10,000 cap) */
    uint64_t dropped_series;  /* new series refused by a cap since start */
    uint64_t removed_series;  /* absent from the latest OpStats report, or stale */
};

/* host: the host_name label (copied). stale_ms: series other than op series that were not
 * updated for this long are removed (0 = never). Caller owns *ret; free with
 * promfam_store_destroy(). */
int promfam_store_create(const char *host, uint64_t stale_ms, struct promfam_store **ret);
void promfam_store_destroy(struct promfam_store *st);

/* Apply one record (thread-safe; the store has its own lock). now_ms: wall clock of the
 * update, used for staleness. */
int promfam_store_write(struct promfam_store *st, const struct sink_record *rec, uint64_t now_ms);
/* Set one daemon-made series directly (the daemon's own counters, e.g. remote-write drops). */
int promfam_store_set(struct promfam_store *st, const char *family, const struct promfam_label *labels,
                      size_t nlabels, double value, uint64_t now_ms);

/* The store as a sink for data_router_add, named name (static storage: "prometheus",
 * "remote_write", "prometheus+remote_write" — what the enabled-loggers list shows). Its
 * destroy does nothing: the store outlives the router and main destroys it. */
struct sink promfam_store_sink(struct promfam_store *st, const char *name);

/* Text exposition 0.0.4 of every live series into a heap buffer (families sorted by name,
 * series by labels). Caller owns *ret_text; free(). Removes expired series first. */
int promfam_store_render(struct promfam_store *st, uint64_t now_ms, char **ret_text, size_t *ret_len);

/* Visit every live series (for remote write): labels sorted by name, __name__ not included.
 * Returns the number visited. Removes expired series first. */
long promfam_store_each(struct promfam_store *st, uint64_t now_ms, promfam_emit_fn fn, void *arg);

void promfam_store_stats(struct promfam_store *st, struct promfam_stats *ret);
/* Refresh the store's own series (msmonitor_prometheus_series, _dropped_series). */
void promfam_store_publish(struct promfam_store *st, uint64_t now_ms);

/* Formatting pieces, exposed for the tests and the remote-write encoder. */
/* A valid metric name from text: [a-zA-Z_:][a-zA-Z0-9_:]*, other bytes become '_'.
 * Returns the length written (< cap), or -EINVAL for an empty or too long name. */
int promfam_sanitize_name(const char *s, size_t n, char *out, size_t cap);
/* "%.17g", NaN, +Inf, -Inf as the text format writes a value. Returns the length. */
int promfam_format_value(double v, char *out, size_t cap);

#endif
