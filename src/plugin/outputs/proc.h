/* proc: the data-processor interface between the pipeline and its outputs (metric
 * datagrams, SQLite DB, JSONL, in-memory standalone results, nputrace file). One file per
 * implementation, one row each in the output table (contract/outputs.h, registry.h); outputs
 * are created and fed by the pipeline (pipeline.h), which has already filtered, cut, windowed
 * and paired the records and fans each batch out to every output of the session.
 *
 * Threading contract: consume() runs on msPTI completion threads, possibly several at once,
 * and must be thread-safe; it may wait (back-pressure) but never on the training thread. start/tick/set_kinds/stop/destroy are called by the
 * monitor thread (or the stopping thread), never concurrently with each other; tick and stop
 * run after msptiActivityFlushAll, so every record of the interval has been consumed. */
#ifndef MSMON_PLUGIN_PROC_H
#define MSMON_PLUGIN_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/outputs.h"
#include "plugin/pipeline/pipeline.h"
#include "plugin/pipeline/record.h"

struct proc_trace_opts; /* proc_trace.h */

/* Sends one `data` datagram payload (JSON text ≤ 4096 bytes) to the daemon; 0 or -errno.
 * Provided by the core (IPC client: 5 retries from 1 ms). */
typedef int (*proc_send_fn)(void *ctx, const char *json, size_t len);
/* An output put a finished file in place (its final name, after the rename): how the session
 * learns what its outputs wrote without reading their state. Any thread; must not block. */
typedef void (*proc_artifact_fn)(void *ctx, const char *path);

struct proc_config {
    const char *log_dir;             /* DB/JSONL: absolute, existing, writable directory */
    int32_t rank;                    /* get_rank_id() or -1 */
    uint64_t session_start_ns;       /* CLOCK_REALTIME at session start */
    uint32_t report_interval_s;      /* current interval (0 = none) */
    const char *jsonl_rotate_lines;  /* raw JSONL_ROTATE_LOG_LINES value, may be "" or NULL */
    const char *jsonl_rotate_files;  /* raw JSONL_ROTATE_LOG_FILES value, may be "" or NULL */
    proc_send_fn send;               /* metric data; every session's counters (NULL: not sent) */
    void *send_ctx;
    struct pipeline *pl;             /* set by pipeline_create: counters, devices seen */
    const struct proc_trace_opts *trace; /* the trace output's options (borrowed for create) */
    proc_artifact_fn artifact;       /* NULL: nobody listens */
    void *artifact_ctx;
};

struct proc; /* opaque, one per session */

struct proc_ops {
    const char *name;
    /* Allocate; the config's strings are copied. Caller owns; free with destroy(). */
    int (*create)(const struct proc_config *cfg, struct proc **ret);
    int (*start)(struct proc *p);                                  /* RunPreTask */
    /* Kept records and the marker parts they completed (pipeline.h); borrowed for the call. */
    void (*consume)(struct proc *p, const struct pl_batch *b);
    int (*tick)(struct proc *p);                                   /* report interval */
    void (*set_kinds)(struct proc *p, uint32_t enabled_mask);      /* bit (1u << kind) */
    /* Final partial interval + end-of-session output. parallel_group_info may be NULL. */
    int (*stop)(struct proc *p, const char *parallel_group_info);
    void (*destroy)(struct proc *p);
};

/* Every output's ops, proc_<stem>_ops, declared from the output table. */
#define PROC_DECL_(id, stem, sel, value, help) extern const struct proc_ops proc_##stem##_ops;
MSMON_OUTPUT_TABLE(PROC_DECL_)
#undef PROC_DECL_

/* Test seam of the DB writer queue: at most max_chunks chunks of 4096 items (0 = default 32)
 * and the longest a completion thread waits for room before it drops (default 5000 ms). */
void proc_db_test_set_queue(size_t max_chunks, uint32_t backpressure_ms);

#endif
