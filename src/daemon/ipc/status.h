/* status: NPU status reports (docs/design/ipc.md#status-tracking): the two upstream last-reporter records that
 * drive getStatus and the npu-monitor/nputrace gate, and our per-process table (D10).
 * Thread-safe (one internal mutex). */
#ifndef MSMON_DAEMON_STATUS_H
#define MSMON_DAEMON_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/stats.h"
#include "msmon/ipc_wire.h"

#define STATUS_MAX_ENTRIES 1024

enum status_dim { STATUS_TRACE = 0, STATUS_MONITOR = 1 };

/* A session's counters as the plugin reports them (PluginStats data messages): the contract's
 * list (contract/stats.h), X(key, ...) in key order. */
#define STATUS_STATS_FIELDS(X) STATS_COUNTERS(X)
struct status_stats {
#define STATUS_STATS_MEMBER(f, ...) uint64_t f;
    STATUS_STATS_FIELDS(STATUS_STATS_MEMBER)
#undef STATUS_STATS_MEMBER
};

/* A process's own report of itself (PluginHealth, ours; daemon/ipc/health.h parses it). Ages are
 * as reported, at received_ns. */
#define STATUS_HEALTH_BACKEND_CAP 16
#define STATUS_HEALTH_LIBRARY_CAP 256
#define STATUS_HEALTH_NOTE_CAP 768
struct status_health {
    int32_t rank;                 /* -1 unknown */
    bool dyno;                    /* dyno mode: configs apply at step() */
    int32_t step;                 /* -1 none */
    int64_t step_age_ms, step_period_ms, config_age_ms; /* -1 none */
    uint64_t steps, steps_since_config;
    char backend[STATUS_HEALTH_BACKEND_CAP];
    char library[STATUS_HEALTH_LIBRARY_CAP];
    char fallback[STATUS_HEALTH_NOTE_CAP];
    uint64_t received_ns;         /* monotonic */
};

struct status_entry {
    int64_t job;
    int32_t pid;            /* as the node numbers it (the kernel's word; the key) */
    int32_t ns_pid;         /* in the process's own pid namespace (== pid in the daemon's) */
    int32_t trace;          /* -1 until reported */
    int32_t monitor;
    int32_t current_step;   /* from the latest trace report */
    int32_t start_step;
    int32_t stop_step;
    uint64_t updated_ns;
    bool has_stats;         /* a PluginStats report arrived for this pid */
    struct status_stats stats;
    bool has_interval;      /* two reports of one session: interval holds their difference */
    struct status_stats interval;   /* the last report interval's counters */
    uint32_t quiet_intervals;       /* consecutive intervals that consumed no record */
    bool has_health;
    struct status_health health;
};

struct status_last {
    struct ipc_status trace;    /* last npuTraceStatus (status/steps -1 initially) */
    struct ipc_status monitor;  /* last npuMonitorStatus */
    bool any_received;          /* an NPU status arrived since start (Kineto-only test) */
};

struct status_table;

/* 0 and *ret (caller owns; free with status_destroy()), or -ENOMEM. */
int status_create(struct status_table **ret);
void status_destroy(struct status_table *st);

/* Apply one report of the given dimension (s->pid the node's number of the process). */
void status_update(struct status_table *st, enum status_dim dim, const struct ipc_status *s,
                   uint64_t now_ns);
/* The same for a process whose own pid namespace calls it ns_pid (shown beside the node's). */
void status_update_ns(struct status_table *st, enum status_dim dim, const struct ipc_status *s, int32_t ns_pid,
                      uint64_t now_ns);
/* Record the latest session counters of pid on its entries (every job it reported for).
 * -ENOENT when the pid has no entry: counters alone never create one, so a sender cannot
 * fill the table with pids that never reported a status. */
int status_set_stats(struct status_table *st, int32_t pid, const struct status_stats *s);
/* Record a process's health report. Creates an entry (job 0, states -1) when the pid has
 * none and `vouched` (the kernel named the sender: it is that process), so every dyno-mode
 * rank is listed; else -ENOENT, like the counters. */
int status_set_health(struct status_table *st, int32_t pid, bool vouched, const struct status_health *h,
                      uint64_t now_ns);
/* The same for a process whose own pid namespace calls it ns_pid. */
int status_set_health_ns(struct status_table *st, int32_t pid, int32_t ns_pid, bool vouched,
                         const struct status_health *h, uint64_t now_ns);
/* Fold a new counter report into an entry: the interval is the difference to the previous
 * report (a report below the previous one starts a new session). Pure; exposed for tests. */
void status_fold_stats(struct status_entry *e, const struct status_stats *s);
/* The job pid last reported a status for (labels of its records); -ENOENT if none. */
int status_job_of(struct status_table *st, int32_t pid, int64_t *ret_job);
void status_get_last(struct status_table *st, struct status_last *ret);
/* Copy of the per-process table sorted by (pid, job). Caller owns *ret (free()). */
int status_list(struct status_table *st, struct status_entry **ret, size_t *ret_n);
/* GC (docs/design/ipc.md#status-tracking): drop entries older than age_ns whose pid no longer exists. Returns removed. */
int status_gc(struct status_table *st, uint64_t now_ns, uint64_t age_ns);

/* Daemon-level facts for getStatus (ours): when the daemon started and which
 * loggers are enabled ("json,tensorboard", "" for none). */
#define STATUS_LOGGERS_CAP 256
/* Datagrams the IPC sockets refused, by reason (getStatus "ipc_drops"; dyno doctor names the fix):
 * a uid not allowed, a message speaking for a process that is not the sender's own or a
 * descendant's, a sender the kernel could not name (the daemon's own pid namespace). */
#define STATUS_UIDS_MAX 40
enum status_drop { STATUS_DROP_UID = 0, STATUS_DROP_SPEAKS_FOR, STATUS_DROP_NO_PID, STATUS_DROP_KINDS };
struct status_daemon {
    uint64_t start_mono_ns;      /* 0 until set */
    char loggers[STATUS_LOGGERS_CAP];
    uint64_t drops[STATUS_DROP_KINDS];
    uint32_t drop_uid;           /* the uid of the last STATUS_DROP_UID (when drops[UID] > 0) */
    uint64_t pid_ns, net_ns;     /* the daemon's namespaces (inodes; 0 unknown) */
    uint32_t uids[STATUS_UIDS_MAX]; /* whose datagrams the IPC sockets take: root, ours, --ipc_allowed_uids */
    size_t nuids;
};
void status_set_daemon(struct status_table *st, uint64_t start_mono_ns, const char *loggers);
void status_count_drop(struct status_table *st, enum status_drop why, uint32_t uid);
void status_set_namespaces(struct status_table *st, uint64_t pid_ns, uint64_t net_ns);
/* The uids the IPC sockets accept (getStatus "ipc_uids"; at most STATUS_UIDS_MAX kept). */
void status_set_ipc_uids(struct status_table *st, const uint32_t *uids, size_t n);
void status_get_daemon(struct status_table *st, struct status_daemon *ret);


#endif
