/* monitor: the MsptiMonitor singleton (04-plugin.md §4–§8): one msPTI session at a time,
 * its buffers, filter, enabled kinds, data processor and the `MsptiMonitor` timer thread.
 * Every entry point is thread-safe; session changes are serialised by one session mutex. */
#ifndef MSMON_PLUGIN_MONITOR_H
#define MSMON_PLUGIN_MONITOR_H

#include <stdbool.h>
#include <stdint.h>

#include "plugin/backend/backend.h"
#include "plugin/control/mconfig.h"
#include "plugin/outputs/proc.h"

struct monitor_start_args {
    enum proc_mode mode;
    const char *log_dir;        /* DB/JSONL: prepared absolute directory */
    double duration_s;          /* 0 = unlimited */
    const char *rotate_lines, *rotate_files;
    bool standalone;            /* report interval 0 for this session (§13) */
};

/* Apply one validated config (§4) and send npuMonitorStatus (03-ipc.md §5.3) before a
 * duration expiry can send its Idle. Returns the status sent (1 running, 0 not). */
int monitor_handle_config(const struct mconfig *cfg);
/* §5.1; -EALREADY if running, -EBUSY if nputrace runs here, -ENOENT no backend, -errno. */
int monitor_start(const struct monitor_start_args *a);
/* §5.2; -ENOENT if no session was running. */
int monitor_stop(void);
bool monitor_running(void);
/* §7.3 live interval change (stored while idle). */
void monitor_set_interval(uint32_t seconds);
/* §8; the mask holds bit (1u << kind). Only while running. */
int monitor_replace_kinds(uint32_t mask);
uint32_t monitor_enabled_kinds(void);
/* Framework trace status (mutual exclusion with nputrace). */
void monitor_set_trace_status(int32_t status);
/* Stored for the session end (05-outputs.md); key "parallel_group_info" is used. */
int monitor_set_cluster_config(const char *key, const char *value);
/* Load the backend once if possible (first use, §2); never fails. */
void monitor_first_use(void);

/* Test seams: a fake backend instead of the dlopen search (NULL restores it), and a
 * processor table replacing the one of a mode (NULL restores it). */
void monitor_test_set_backend(const struct backend *be);
void monitor_test_set_proc(enum proc_mode mode, const struct proc_ops *ops);

#endif
