/* monitor_int: what the files of the session actor share (monitor_actor.c: the actor, its queue and
 * the public calls; monitor_session.c: the session's commands; monitor_window.c: the nputrace
 * window's). Not a public header: only these three include it. */
#ifndef MSMON_PLUGIN_MONITOR_INT_H
#define MSMON_PLUGIN_MONITOR_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/log.h"
#include "plugin/control/monitor.h"
#include "plugin/pipeline/output.h"

#define MON_QUEUE_CAP 16            /* commands in flight; a full queue waits, then -EAGAIN */
#define MON_WAIT_CONFIG_MS 1000u    /* monitor_handle_config: the training step's path */
#define MON_WAIT_CALL_MS 10000u     /* monitor_start, monitor_replace_kinds */
#define MON_WAIT_STOP_MS 60000u     /* monitor_stop: the final flush and end-of-session files */
#define MON_NAME_RUNNING "MsptiMonitor" /* users look for it while monitoring */
#define MON_NAME_IDLE "MsMonitorCtl"
#define MON_LOG_DIR_CAP (PCONFIG_MAX_LOG_FILE + 1)
#define MON_MAX_OUTPUTS OUTPUT_MAX   /* outputs of one session (the pipeline's bound) */

enum mon_op {
    MON_OP_CONFIG, MON_OP_START, MON_OP_STOP, MON_OP_END_WINDOW, MON_OP_KINDS, MON_OP_INTERVAL,
    MON_OP_ARM, MON_OP_WIN_STEP, MON_OP_WIN_LEAVE, MON_OP_WIN_TICK, MON_OP_FW_TRACE,
    MON_OP_MEMORY,
};
enum mon_slot { MON_SLOT_FREE, MON_SLOT_QUEUED, MON_SLOT_RUNNING, MON_SLOT_DONE };

/* monitor_start()'s arguments, copied: a caller whose wait timed out has gone. */
struct mon_start_copy {
    struct monitor_start_args a;
    char log_dir[MON_LOG_DIR_CAP];
    char rotate_lines[sizeof(((struct pconfig_monitor *)0)->rotate_lines)];
    char rotate_files[sizeof(((struct pconfig_monitor *)0)->rotate_files)];
    struct output_trace_opts trace;
    char backend[32];
    struct window_opts window;
    int32_t memory_kinds[MON_KIND_LIMIT];
};

/* A config command: what it applies and how it is answered. */
struct mon_answer {
    char id[PCONFIG_ID_CAP];
    char notes[PCONFIG_NOTES_CAP];
    monitor_done_fn done;
};

struct mon_cmd {
    enum mon_op op;
    union {
        struct {
            struct pconfig_monitor cfg;
            struct mon_answer ans;
        } config;
        struct {
            struct monitor_arm arm;
            struct mon_answer ans;
        } arm;
        struct mon_start_copy start;
        struct {
            int32_t step;
            uint64_t end_ns;
        } step;
        struct monitor_window_view view; /* MON_OP_WIN_TICK's answer */
        struct {
            int32_t kind;                  /* -1: the kinds */
            const struct msmon_result *arr;
            size_t n;
            int32_t kinds[MON_KIND_LIMIT];
        } memory;                          /* MON_OP_MEMORY's question and answer */
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
    } arg;
    uint64_t seq;                 /* FIFO order */
    int result;
    enum mon_slot st;
    bool waiter;                  /* a caller waits; else the actor frees the slot */
};

/* Session state: the actor's alone, except that completion threads read ops/proc/filter
 * through mon_deliver() between the backend's start() and stop(). */
struct mon_session {
    struct backend *be;           /* the backend this session started on */
    struct pipeline *pl;          /* cutoff, filter, window, pairing, counters; owns the outputs */
    struct filter_state *filter;  /* created once, never freed */
    bool running, standalone;
    bool trace;                   /* an nputrace window session, not npu-monitor */
    uint32_t enabled_mask;
    uint32_t interval_s;          /* kept while idle for the next start */
    double duration_s;
    uint64_t deadline_ns;         /* monotonic; 0 = none */
    uint64_t next_tick_ns;        /* monotonic; 0 = no periodic report */
    uint64_t flush_ns;            /* monitor_start_args.flush_ms; 0 = none */
    bool stop_after;              /* stop once the current command is answered (a closed native window) */
    uint64_t offline_base;        /* the daemon link's drop total when the session started */
    bool filter_logged;           /* last_filter was logged this session */
    char log_file[PCONFIG_MAX_LOG_FILE + 1]; /* the running npu-monitor session's, as given */
    enum msmon_output output;     /* the running npu-monitor session's output */
    char last_filter[PCONFIG_MAX_FILTER + 1];
    int32_t fw_trace;             /* the framework's own profiler status (monitor_set_trace_status) */
};

/* No window yet: msmon_dynamic_trace_info() reports state -1 until the first one; the IPC
 * status is Idle. window_advance leaves this phase alone. */
#define MON_WIN_NONE (-1)

/* The nputrace window, the actor's from its arm to its end (docs/design/session.md#the-window):
 * a step-bounded one is moved by the stepping thread's steps (posted at its transitions
 * only), a marker-bounded one by its session's window stage, which the poller's tick asks. */
struct mon_window {
    struct window_state win;      /* phase MON_WIN_NONE, ARMED, OPEN, CLOSED */
    struct pconfig_trace opts;    /* the armed window's options */
    char log_dir[PATH_MAX];       /* resolved, existing, writable */
    int32_t rank;
    uint32_t windows;             /* windows that reached their start */
    bool session;                 /* its collection session runs */
};

struct mon_state {
    /* queue */
    pthread_mutex_t q_lock;
    pthread_cond_t q_cond;        /* actor: a command arrived (CLOCK_MONOTONIC) */
    pthread_cond_t done_cond;     /* callers: a result or a free slot (CLOCK_MONOTONIC) */
    struct mon_cmd slots[MON_QUEUE_CAP];
    uint64_t seq;
    bool actor_started;
    pthread_t actor;
    struct log_ratelimit q_rl;

    /* published by the actor for lock-free readers */
    atomic_bool pub_running;
    atomic_bool pub_trace;        /* the running session is an nputrace window */
    atomic_uint pub_kinds;
    /* the window as the actor last left it: its phase and bounds for the stepping thread's
     * per-step check, the whole view (under win_lock) for status readers */
    atomic_int pub_win_phase;
    atomic_int pub_win_start, pub_win_stop;
    atomic_bool pub_win_marker;
    pthread_mutex_t win_lock;
    struct monitor_window_view pub_win;
    atomic_uint pub_win_epoch;    /* bumped after pub_win changed but for its step */

    /* backend and test seam */
    pthread_mutex_t be_lock;
    struct backend *loaded;       /* created once, kept for the process */
    struct backend *test_be;

    pthread_mutex_t pgi_lock;
    char *parallel_group_info;

    /* the last file an output of a session put in place (output_config.artifact) */
    pthread_mutex_t art_lock;
    char last_artifact[PATH_MAX];

    /* status mailbox: one slot per status type, newest value wins */
    pthread_mutex_t st_lock;
    bool st_pending, st_alive;
    int32_t st_value;
    struct log_ratelimit st_rl;

    struct mon_session sess;      /* actor only */
    struct mon_window win;        /* actor only */
};

/* The one actor's state (monitor_actor.c). */
extern struct mon_state mon;

/* ---- across the module's files ---- */

/* monitor_actor.c */
struct backend *mon_backend(void);
void mon_status_post(int32_t status);

/* monitor_session.c: the session's commands, run on the actor */
enum mon_want {
    MON_WANT_MONITOR,     /* an npu-monitor config that starts (or retunes) a session */
    MON_WANT_STANDALONE,  /* the standalone Monitor */
    MON_WANT_WINDOW_ARM,  /* an nputrace config */
    MON_WANT_WINDOW_OPEN, /* an armed window reaching its start step */
};
const char *mon_refusal(enum mon_want w, int32_t rank, char *buf, size_t cap);
void mon_answer(const struct mon_answer *ans, enum monitor_outcome o, const char *state, const char *reason);
uint64_t mon_period_ns(void);
void mon_publish(void);
void mon_tick(void);
int mon_do_start(const struct monitor_start_args *a);
int mon_do_stop(void);
int mon_do_end_window(uint64_t end_ns);
void mon_do_interval(uint32_t seconds);
int mon_do_kinds(uint32_t mask);
int mon_do_config(const struct pconfig_monitor *cfg, const struct mon_answer *ans);
void mon_do_expire(void);

/* monitor_window.c: the window's commands, run on the actor */
bool mon_win_busy(void);
void mon_do_arm(const struct monitor_arm *a, const struct mon_answer *ans);
int mon_do_win_step(int32_t step, uint64_t end_ns);
void mon_do_win_leave(int32_t step);
void mon_do_win_tick(struct monitor_window_view *ret);

#endif
