/* proc_trace: the nputrace trace writer (docs/nputrace.md), one more output of the pipeline.
 * Completion threads append the kept records and completed marker parts of the step window
 * to chunked in-memory storage (capped; overflow counted as dropped_queue); stop() writes the
 * rank's Chrome trace-event file once, to a temporary name renamed into place, so a reader
 * never sees a truncated trace. With --export-type Db the DB output (proc_db) runs beside it
 * over the same records. */
#ifndef MSMON_PLUGIN_PROC_TRACE_H
#define MSMON_PLUGIN_PROC_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin/outputs/proc.h"

#define PROC_TRACE_MAX_EVENTS (4u << 20)     /* records + marker parts kept per window */
#define PROC_TRACE_GZ_BYTES (64ull << 20)    /* estimated size above which the file is .json.gz */
#define PROC_TRACE_NAME_MAX 4096

/* Window description (proc_config.trace); strings copied by create(). */
struct proc_trace_opts {
    int32_t start_step, stop_step;  /* [start, stop) */
    int32_t world_size;             /* <= 0: unknown (written as 1) */
    bool export_db;                 /* also the DB output for the window */
    const char *backend;            /* "mspti" | "cupti" | … */
    bool marker_steps;              /* no step call here: the program's `step <N>` marker ranges
                                     * delimit the window (docs/nputrace.md, native programs) */
    int32_t iterations;             /* marker_steps with start_step -1: the window is the first
                                     * `iterations` steps whose range starts in the session */
};

/* Where a marker-delimited window stands (proc_trace_marker_state). */
enum { PROC_TRACE_MK_ARMED, PROC_TRACE_MK_OPEN, PROC_TRACE_MK_CLOSED, PROC_TRACE_MK_REFUSED };
struct proc_trace_mstate {
    int32_t step;          /* highest `step <N>` range start seen, -1 none */
    int32_t start, stop;   /* the window ([-1, -1) while start step -1 is unresolved) */
    int phase;             /* PROC_TRACE_MK_* */
};

extern const struct proc_ops proc_trace_ops;

/* "<dir>/msmonitor_trace_<pid>_rank<r>_step<s>-<e>.json" (+ ".gz" when gz). The Python side
 * builds the torch.profiler and analysis names from the same stem. 0 or -ENAMETOOLONG. */
int proc_trace_name(char *buf, size_t cap, const char *dir, int pid, int32_t rank, int32_t start, int32_t stop,
                    bool gz);
/* End the running window at end_ns (CLOCK_REALTIME, the records' clock): records and marker
 * parts starting at or after it are left out (counted in the file's msmonitor.afterWindow).
 * Set on the stepping thread when the window closes, so the session's stop (flush + file
 * write) can run on the session thread without the training step waiting for it. */
void proc_trace_close_window(uint64_t end_ns);
/* A marker-delimited window (opts.marker_steps): armed (records before the start of `step
 * <start>` are left out), open, closed (the start of `step <stop>` was seen: the session may
 * be stopped), or refused (the first step seen was past an explicit start step: no file). */
void proc_trace_marker_state(struct proc_trace_mstate *ret);
/* Copy the path of the last trace file this process wrote ("" before any) into buf. */
void proc_trace_last_path(char *buf, size_t cap);
/* Test seams: event cap (0 = default) and size threshold for gzip (0 = default). */
void proc_trace_test_set_limits(size_t max_events, uint64_t gz_bytes);

#endif
