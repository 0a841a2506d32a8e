/* output: what an output is to the pipeline that calls it (docs/design/session.md#outputs), the
 * way collectd's plugin.h belongs to its core: the pipeline defines the interface, every output
 * (metric datagrams, SQLite DB, JSONL, in-memory standalone results, nputrace file; one file
 * each under outputs/) includes this header, and nothing in the pipeline includes an output.
 * The registry is here too: one {name, ops} row per row of the output table
 * (contract/outputs.h), so a session picks its outputs by id without naming an output's file.
 *
 * Threading contract: consume() runs on the vendor's completion threads, possibly several at
 * once, and must be thread-safe; it may wait (back-pressure) but never on the training thread.
 * start/tick/set_kinds/stop/destroy are called by the session actor (or the stopping thread),
 * never concurrently with each other; tick and stop run after the backend's flush, so every
 * record of the interval has been consumed. */
#ifndef MSMON_PLUGIN_OUTPUT_H
#define MSMON_PLUGIN_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/outputs.h"
#include "plugin/pipeline/batch.h"
#include "plugin/pipeline/record.h"

/* Outputs one session feeds: each row of the table at most once. */
#define OUTPUT_MAX MSMON_OUTPUT_COUNT

struct pipeline;

/* Sends one `data` datagram payload (JSON text ≤ 4096 bytes) to the daemon; 0 or -errno.
 * Provided by the control layer (the IPC client: 5 retries from 1 ms). */
typedef int (*output_send_fn)(void *ctx, const char *json, size_t len);
/* An output put a finished file in place (its final name, after the rename): how the session
 * learns what its outputs wrote without reading their state. Any thread; must not block. */
typedef void (*output_artifact_fn)(void *ctx, const char *path);

/* The trace output's options (output_config.trace); strings copied by create(). The steps and
 * the cut come from the session's window (window.h). */
struct output_trace_opts {
    int32_t world_size;             /* <= 0: unknown (written as 1) */
    const char *backend;            /* "mspti" | "cupti" | … */
};

struct output_config {
    const char *log_dir;             /* DB/JSONL/trace: absolute, existing, writable directory */
    int32_t rank;                    /* get_rank_id() or -1 */
    uint64_t session_start_ns;       /* CLOCK_REALTIME at session start */
    uint32_t report_interval_s;      /* current interval (0 = none) */
    const char *jsonl_rotate_lines;  /* raw JSONL_ROTATE_LOG_LINES value, may be "" or NULL */
    const char *jsonl_rotate_files;  /* raw JSONL_ROTATE_LOG_FILES value, may be "" or NULL */
    output_send_fn send;             /* metric data; every session's counters (NULL: not sent) */
    void *send_ctx;
    struct pipeline *pl;             /* set by pipeline_create: counters, devices seen */
    const struct output_trace_opts *trace; /* the trace output's options (borrowed for create) */
    output_artifact_fn artifact;     /* NULL: nobody listens */
    void *artifact_ctx;
};

struct output; /* opaque, one per session and output */

struct output_ops {
    const char *name;
    /* Allocate; the config's strings are copied. Caller owns; free with destroy(). */
    int (*create)(const struct output_config *cfg, struct output **ret);
    int (*start)(struct output *o);                                /* RunPreTask */
    /* Kept records and the marker parts they completed (batch.h); borrowed for the call. */
    void (*consume)(struct output *o, const struct pl_batch *b);
    int (*tick)(struct output *o);                                 /* report interval */
    void (*set_kinds)(struct output *o, uint32_t enabled_mask);    /* bit (1u << kind) */
    /* Final partial interval + end-of-session output. parallel_group_info may be NULL. */
    int (*stop)(struct output *o, const char *parallel_group_info);
    void (*destroy)(struct output *o);
    /* Outputs that write files (NULL for the others): check and create the directory a session
     * will write into, before the session starts (docs/design/session.md#applying-a-config);
     * the resolved directory into ret_abs (cap bytes). 0 or -errno, the reason logged. */
    int (*prepare_dir)(const char *path, char *ret_abs, size_t cap);
};

/* Every output's ops, proc_<stem>_ops, defined by its own file outputs/proc_<stem>.c and
 * declared here from the output table. */
#define OUTPUT_DECL_(id, stem, sel, value, help) extern const struct output_ops proc_##stem##_ops;
MSMON_OUTPUT_TABLE(OUTPUT_DECL_)
#undef OUTPUT_DECL_

/* The ops of output id (a test replacement if one is set); NULL out of range. */
const struct output_ops *output_ops_of(enum msmon_output id);
/* The output's directory check (ops->prepare_dir) for a session about to start: 0 or -errno;
 * -EINVAL for an output that writes no file. */
int output_prepare_dir(enum msmon_output id, const char *path, char *ret_abs, size_t cap);
/* Test seam: ops replacing an output's (NULL restores the table's). */
void output_test_replace(enum msmon_output id, const struct output_ops *ops);

#endif
