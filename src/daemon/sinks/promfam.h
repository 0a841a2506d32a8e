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
/* Series monitored processes may create (docs/prometheus.md#bounds; dynolog's
 * --prometheus_max_series_per_process and --prometheus_max_series): beyond, a new series is
 * folded into the <other> series of its family, of its process or of all processes. */
#define PROMFAM_DEF_MAX_SERIES_PER_PROCESS 2000
#define PROMFAM_DEF_MAX_SERIES 20000
#define PROMFAM_OTHER "<other>"       /* the label value of what was folded */

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
    uint64_t process_series;  /* counted against the daemon bound now */
    uint64_t folded_process;  /* samples folded into <other> at the per-process bound since start */
    uint64_t folded_daemon;   /* ... at the daemon bound */
    uint64_t processes_folded; /* processes that reached their bound since start */
};

/* host: the host_name label (copied). stale_ms: series not updated for this long are removed
 * (op series: for three report periods of their process when that is longer; 0 = never).
 * The bounds start at PROMFAM_DEF_*. Caller owns *ret; free with promfam_store_destroy(). */
int promfam_store_create(const char *host, uint64_t stale_ms, struct promfam_store **ret);
void promfam_store_destroy(struct promfam_store *st);
/* Series of one monitored process (a record with a device, by its pid) and of all of them
 * together (host metrics and the daemon's own series are not counted). A new series beyond
 * either bound is folded: the label values that name it become PROMFAM_OTHER (all but
 * host_name/job/pid/rank at the process bound, all but host_name at the daemon bound), op
 * samples of one report add up there (count, total, bytes summed; min, max; avg = total /
 * count), other families keep the latest value; each folded sample is counted. */
void promfam_store_set_limits(struct promfam_store *st, size_t per_process, size_t total);

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
 * series by labels). Caller owns *ret_text; free(). Removes expired series first. Safe on any
 * thread: the store's lock is held only to copy the list of series, never while formatting. */
int promfam_store_render(struct promfam_store *st, uint64_t now_ms, char **ret_text, size_t *ret_len);
/* Bumped by every change a render would show: equal versions render the same text. */
uint64_t promfam_store_version(struct promfam_store *st);

/* Visit every live series (for remote write): labels sorted by name, __name__ not included.
 * Returns the number visited. Removes expired series first. */
long promfam_store_each(struct promfam_store *st, uint64_t now_ms, promfam_emit_fn fn, void *arg);

void promfam_store_stats(struct promfam_store *st, struct promfam_stats *ret);
/* Refresh the store's own series (msmonitor_prometheus_series, _dropped_series,
 * _folded_samples{cap="process"|"daemon"}). */
void promfam_store_publish(struct promfam_store *st, uint64_t now_ms);

/* Formatting pieces, exposed for the tests and the remote-write encoder. */
/* A valid metric name from text: [a-zA-Z_:][a-zA-Z0-9_:]*, other bytes become '_'.
 * Returns the length written (< cap), or -EINVAL for an empty or too long name. */
int promfam_sanitize_name(const char *s, size_t n, char *out, size_t cap);
/* "%.17g", NaN, +Inf, -Inf as the text format writes a value. Returns the length. */
int promfam_format_value(double v, char *out, size_t cap);

#endif
