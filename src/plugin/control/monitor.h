/* monitor: the MsptiMonitor singleton (docs/design/session.md#applying-a-config, #kind-replacement): one collection session at a time
 * over the backend (backend.h), its filter, enabled kinds, window and outputs. A session actor
 * thread owns the state; every entry point is thread-safe and posts a command to it (bounded
 * queue, bounded waits: docs/plugin.md "Session actor"). Nothing here waits for the daemon. */
#ifndef MSMON_PLUGIN_MONITOR_H
#define MSMON_PLUGIN_MONITOR_H

#include <stdbool.h>
#include <stddef.h>
#include <limits.h>
#include <stdint.h>

#include "plugin/backend/backend.h"
#include "plugin/control/pconfig.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/record.h"

struct msmon_result;
#include "plugin/pipeline/window.h"

#define MONITOR_REASON_CAP PCONFIG_ERRORS_CAP

/* What a command made of a config, for its one acknowledgement (apply.c). */
enum monitor_outcome { MONITOR_APPLIED, MONITOR_PARTLY, MONITOR_REJECTED };
struct monitor_result {
    enum monitor_outcome outcome;
    const char *state;                /* the session (or window) afterwards: a status word */
    char reason[MONITOR_REASON_CAP];  /* the refusal, the part not applied, or a note */
};
/* Called once per config command on the actor thread when it has run, also when its poster
 * stopped waiting; id/notes are the config's (pconfig). */
typedef void (*monitor_done_fn)(const char *id, const char *notes, const struct monitor_result *r);

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
    const int32_t *memory_kinds; /* the standalone Monitor's kinds in start order (copied) */
    size_t n_memory_kinds;
};

/* Apply one validated npu-monitor config (docs/design/session.md#applying-a-config) and queue
 * npuMonitorStatus (docs/design/ipc.md#status-tracking) ahead of any later expiry's Idle; then
 * done (may be NULL) with the outcome. The exclusion with an nputrace window is decided here:
 * a start while a window is armed or open is refused. Returns the status reported (1 running,
 * 0 not). Waits at most 1 s for the actor (the training step's path); on timeout the config
 * still applies (and is answered) and 0 is returned. */
int monitor_handle_config(const struct pconfig_monitor *cfg, const char *id, const char *notes, monitor_done_fn done);

/* ---- the nputrace window (docs/design/session.md#the-window): the actor holds it from the
 * arm to its end, so the exclusion with npu-monitor is one decision of the session's owner. */
struct monitor_arm {
    struct pconfig_trace opts;
    int32_t rank;       /* the rank selection's rank */
    int32_t step;       /* the step the config was read at (-1: no step call) */
    int32_t aligned;    /* start step -1 means this step (the creator's alignment), -1 none */
    bool native;        /* no step call: the program's `step <N>` ranges delimit it; its
                         * session starts now */
};
/* Arm a window; done with Ready (applied), Idle (applied: not for this rank; no NPU
 * activities) or the refusal. Waits like monitor_handle_config. */
int monitor_window_arm(const struct monitor_arm *a, const char *id, const char *notes, monitor_done_fn done);
/* The stepping thread, between steps: opens the window's session at its start step (waits
 * for the start) and ends it at its stop step (does not wait for the file). Costs two atomic
 * loads unless the window moves. True when its status changed. */
bool monitor_window_step(int32_t step);
/* monitor_window_step(step) would move the window (and may wait): its start or stop step is
 * reached and that transition is not posted yet. Atomic loads only; any thread. */
bool monitor_window_due(int32_t step);
/* The job leaves at `step`: an open step-bounded window writes its partial trace (one
 * WARNING) and waits for the file; the window goes Idle. */
void monitor_window_leave(int32_t step);
/* The window as the IPC reports it: state -1 before the first window, else IPC_STATUS_IDLE,
 * _RUNNING or _READY; step: the last the window saw; [start, stop) while Ready or Running,
 * else the last window's; options and directory of the last armed window. */
struct monitor_window_view {
    int32_t state, step, start, stop, rank;
    uint32_t flags, windows;
    char log_dir[PATH_MAX];
};
void monitor_window_view(struct monitor_window_view *ret);
/* Changes whenever the view changes in anything but its step (a window armed, opened,
 * closed, refused or left; new options): a reader that saw the same value since its last
 * monitor_window_view() has nothing new to read. One atomic load; any thread. */
uint32_t monitor_window_epoch(void);
/* The native poller's tick: a marker-bounded window's session reports where its window
 * stage stands (asked of the actor); once closed, the session stops (its file is written on
 * the actor, not waited for). Fills *ret like monitor_window_view. */
void monitor_window_tick(struct monitor_window_view *ret);
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
/* The framework's own profiler status (torch_npu's update_profiler_status): while it reports
 * Running, an npu-monitor start is refused (one activity subscriber). Queued. */
void monitor_set_trace_status(int32_t status);
/* Stored for the session end (docs/design/outputs.md); key "parallel_group_info" is used. */
int monitor_set_cluster_config(const char *key, const char *value);
/* Load the backend once if possible (first use, docs/design/session.md#layers); never fails. */
void monitor_first_use(void);
/* The standalone Monitor's results, asked of the session actor (it owns the memory output):
 * the kinds of its last start in start order (-ENOSPC, *ret_n = needed, when cap is too
 * small) and the records of one kind, borrowed until the next standalone start; -EBUSY while
 * a session collects, -EINVAL for a kind that is not a standalone one. */
int monitor_memory_kinds(int32_t *out, size_t cap, size_t *ret_n);
int monitor_memory_results(int32_t kind, const struct msmon_result **ret_arr, size_t *ret_n);
/* The backend in use and the vendor library it loaded (both borrowed for the process's
 * life), loading it first if needed; -ENOENT when no vendor library was found. */
int monitor_backend_info(const char **ret_name, const char **ret_library);

/* What the backend lost in the current (or last) session; zeros before any. Any thread. */
void monitor_backend_drops(struct backend_drops *ret);

/* Test seam: a backend instead of the MSMONITOR_BACKEND one (NULL restores it; borrowed
 * until restored). Outputs are replaced through output_test_replace (pipeline/output.h). */
void monitor_test_set_backend(struct backend *be);

#endif
