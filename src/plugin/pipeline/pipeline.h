/* pipeline: the one stage between the backend's normalised records and the session's outputs
 * (docs/design/session.md#pipeline). Per batch, once: filter + whitelist, session-start
 * cutoff, marker/range pairing (any arrival order, any completion thread), devices seen,
 * session counters, and the trace window (window.h) when the session has one. Every output
 * of the session gets the same pl_batch (kept records + the ranges they completed) and only
 * formats and writes. */
#ifndef MSMON_PLUGIN_PIPELINE_H
#define MSMON_PLUGIN_PIPELINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/datamsg.h"
#include "contract/stats.h"
#include "plugin/pipeline/batch.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/record.h"
#include "plugin/pipeline/window.h"

struct filter_state;

/* Session counters, written by the pipeline and by the outputs' writers (relaxed atomics);
 * one field per counter of the contract (contract/stats.h). dropped_declined is set via
 * pipeline_set_declined, dropped_offline via pipeline_add_offline_drops. */
struct pl_counters {
#define PL_COUNTER(key, label, pos, what) _Atomic uint64_t key;
    STATS_COUNTERS(PL_COUNTER)
#undef PL_COUNTER
};

struct pipeline_stats {
#define PL_STAT(key, label, pos, what) uint64_t key;
    STATS_COUNTERS(PL_STAT)
#undef PL_STAT
};

struct pipeline;

/* Create the session's pipeline and its outputs (each ops->create with cfg, cfg->pl set to
 * the new pipeline; at most OUTPUT_MAX, one per row of the output table). ops[0] is the session's own output: its failure fails the
 * create; a later one that fails is left out with one ERROR line. fs: borrowed, may be NULL
 * (no filter). Caller owns; free with pipeline_destroy(), which destroys the outputs too. */
int pipeline_create_set(const struct output_config *cfg, struct filter_state *fs, const struct output_ops *const *ops,
                        size_t nops, struct pipeline **ret);
/* The same with one output. */
int pipeline_create(const struct output_config *cfg, struct filter_state *fs, const struct output_ops *ops,
                    struct pipeline **ret);
/* The first output (borrowed until pipeline_destroy). */
struct output *pipeline_output(struct pipeline *pl);
/* Start every output (the first one's failure is returned; a later one is dropped). */
int pipeline_start(struct pipeline *pl);
/* The enabled kinds to every output. */
void pipeline_set_kinds(struct pipeline *pl, uint32_t enabled_mask);
/* Give the session a trace window (before any delivery): from now on the kept batches are
 * held by the window stage and reach the outputs cut to the window at pipeline_stop.
 * 0, -EINVAL, -ENOMEM, -EALREADY. */
int pipeline_set_window(struct pipeline *pl, const struct window_opts *o);
/* End a step-bounded window at end_ns (window_close). -ENOENT without a window. */
int pipeline_window_close(struct pipeline *pl, uint64_t end_ns);
/* The window's state (any thread). -ENOENT without a window. */
int pipeline_window(struct pipeline *pl, struct window_state *ret);
/* The same for the live session, if any (the control layer's view). -ENOENT none. */
int pipeline_live_window(struct window_state *ret);
/* Completion path: filter, cutoff and pair recs[0..n) (compacted in place), then hand the
 * batch to the output. Thread-safe; cheap; no allocation. */
void pipeline_deliver(struct pipeline *pl, struct mon_record *recs, size_t n);
/* Report interval: every output's tick, then the session's counters to the daemon (PluginStats). */
int pipeline_tick(struct pipeline *pl);
/* End of session: the window's cut to the outputs, every output's stop, the final counters to
 * the daemon, then the one stats line. Not concurrent with deliver. */
int pipeline_stop(struct pipeline *pl, const char *parallel_group_info);
void pipeline_destroy(struct pipeline *pl);

/* Counters for the outputs to add to. */
struct pl_counters *pipeline_counters(struct pipeline *pl);
/* Snapshot of the session's counters (any thread). */
void pipeline_stats(struct pipeline *pl, struct pipeline_stats *ret);
/* Counters of the running session, else of the last one that stopped (zero before the first):
 * for the control layer's process status. */
void pipeline_last_stats(struct pipeline_stats *ret);
/* "consumed=… kept=… …" into buf (always terminated); returns the length. */
size_t pipeline_stats_format(const struct pipeline_stats *s, char *buf, size_t cap);
/* The `data` payload carrying a session's counters (docs/design/outputs.md keys the daemon accepts,
 * plus "pid" and "stats"): {"deviceId":-1,"duration":<cpu_ns>,"kind":"PluginStats",
 * "name":"consumed=… …","pid":<pid>,"stats":{…},"timestamp":<now>}. Pure; returns the length,
 * 0 if cap is too small. */
#define PIPELINE_STATS_KIND DATAMSG_PLUGIN_STATS
size_t pipeline_stats_json(const struct pipeline_stats *s, int32_t pid, uint64_t now_ns, char *buf, size_t cap);
/* Only the counters object, {"before_start":…,…}, as in the payload's "stats" (for the outputs'
 * session-end record, docs/outputs.md#session-end). */
struct jw;
void pipeline_stats_obj(struct jw *w, const struct pipeline_stats *s);
/* The session's filter text as last set ("" = none or no filter state); see filter_state_text. */
size_t pipeline_filter_text(struct pipeline *pl, char *buf, size_t cap);
/* Hook for the control layer's undelivered-data drops (added to the running session, if any;
 * drops between sessions are only in the control layer's own total). */
void pipeline_add_offline_drops(uint64_t n);
/* Hook for the backend's declined-buffer count (absolute for this session). */
void pipeline_set_declined(struct pipeline *pl, uint64_t n);

/* Devices seen this session (Kernel, Communication, completed device marker parts), ascending
 * into out (up to cap); *ret_n = total number seen. */
void pipeline_devices(struct pipeline *pl, uint32_t *out, size_t cap, size_t *ret_n);

/* String interning shared by the outputs that keep text (DB ids, standalone copies): text →
 * id 0, 1, 2 … in first-request order, with a stable copy. Not thread-safe. */
struct pl_strpool;
int pl_strpool_create(size_t max_strings, struct pl_strpool **ret);
void pl_strpool_destroy(struct pl_strpool *sp);
/* Id of s (NULL = ""), -1 when the pool is full or out of memory. *ret_text (may be NULL):
 * the pool's copy, borrowed until pl_strpool_destroy. */
int64_t pl_strpool_id(struct pl_strpool *sp, const char *s, const char **ret_text);
size_t pl_strpool_count(const struct pl_strpool *sp);
/* Text and length of id (id < count). */
const char *pl_strpool_text(const struct pl_strpool *sp, size_t id, size_t *ret_len);
/* Per-string counter slot (DB: per-commName opName counter). */
uint64_t *pl_strpool_counter(struct pl_strpool *sp, size_t id);

#endif
