/* monitor: the MsptiMonitor singleton (docs/design/session.md#applying-a-config, #kind-replacement): one collection session at a time
 * over the backend (backend.h), its filter, enabled kinds, window and outputs. A session actor
 * thread owns the state; every entry point is thread-safe and posts a command to it (bounded
 * queue, bounded waits: docs/plugin.md "Session actor"). Nothing here waits for the daemon. */
#ifndef MSMON_PLUGIN_MONITOR_H
#define MSMON_PLUGIN_MONITOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin/backend/backend.h"
#include "plugin/control/mconfig.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/window.h"

struct monitor_start_args {
    enum msmon_output output;   /* the session's own output (pipeline/output.h) */
    msmon_output_set also;      /* more outputs fed the same records (nputrace --export-type Db) */
    const char *log_dir;        /* file outputs: prepared absolute directory */
    double duration_s;          /* 0 = unlimited */
    const char *rotate_lines, *rotate_files;
    bool standalone;            /* report interval 0 for this session (docs/design/session.md#standalone-monitor) */
    uint32_t kinds_mask;        /* enabled right after the start (0: none until a config) */
    const struct output_trace_opts *trace; /* the trace output's options (copied) */
    const struct window_opts *window;    /* an nputrace window session (copied); NULL: none */
    uint32_t flush_ms;          /* > 0: flush the backend this often (a marker-delimited window
                                 * must see the `step <N>` ranges while the job runs) */
};

/* Apply one validated config (docs/design/session.md#applying-a-config) and queue npuMonitorStatus (docs/design/ipc.md#status-tracking) ahead of any
 * later expiry's Idle. Returns the status reported (1 running, 0 not). Waits at most 1 s for
 * the actor (the training step's path); on timeout the config still applies and 0 is returned. */
int monitor_handle_config(const struct mconfig *cfg);
/* docs/design/session.md#session-life-cycle; -EALREADY if running, -EBUSY if nputrace runs here, -ENOENT no backend, -errno;
 * -ETIMEDOUT after 10 s of a busy actor (the start still happens). Arguments are copied. */
int monitor_start(const struct monitor_start_args *a);
/* docs/design/session.md#session-life-cycle; -ENOENT if no session was running. Waits up to 60 s for the final output. */
int monitor_stop(void);
/* The same stop, queued without waiting (the nputrace window's end on the stepping thread);
 * later commands run after it. 0 or -EAGAIN (queue full), -ENOENT. */
int monitor_stop_nowait(void);
bool monitor_running(void);
/* End an nputrace window session: its window closes at end_ns (CLOCK_REALTIME; records
 * starting later are left out), then the session stops as monitor_stop. Queued behind earlier
 * commands; wait: up to 60 s for the file write, else not waiting (the stepping thread).
 * 0, -ENOENT (no window session), -EAGAIN (queue full), -ETIMEDOUT. */
int monitor_end_window(uint64_t end_ns, bool wait);
/* Where the running session's window stands (any thread). -ENOENT: no window session. */
int monitor_window(struct window_state *ret);
/* The last file an output of a session put in place (e.g. the nputrace window's trace), ""
 * before any; kept across sessions until a newer one. Any thread. */
void monitor_last_artifact(char *buf, size_t cap);
/* The running session is an nputrace window. */
bool monitor_tracing(void);
/* docs/design/session.md#report-ticks live interval change (stored while idle). Queued; does not wait. */
void monitor_set_interval(uint32_t seconds);
/* docs/design/session.md#kind-replacement; the mask holds bit (1u << kind). Only while running. */
int monitor_replace_kinds(uint32_t mask);
uint32_t monitor_enabled_kinds(void);
/* Framework trace status (mutual exclusion with nputrace). */
void monitor_set_trace_status(int32_t status);
/* Stored for the session end (docs/design/outputs.md); key "parallel_group_info" is used. */
int monitor_set_cluster_config(const char *key, const char *value);
/* Load the backend once if possible (first use, docs/design/session.md#layers); never fails. */
void monitor_first_use(void);
/* The backend in use and the vendor library it loaded (both borrowed for the process's
 * life), loading it first if needed; -ENOENT when no vendor library was found. */
int monitor_backend_info(const char **ret_name, const char **ret_library);

/* What the backend lost in the current (or last) session; zeros before any. Any thread. */
void monitor_backend_drops(struct backend_drops *ret);

/* Test seam: a backend instead of the MSMONITOR_BACKEND one (NULL restores it; borrowed
 * until restored). Outputs are replaced through output_test_replace (pipeline/output.h). */
void monitor_test_set_backend(struct backend *be);

#endif
