/* monitor: the MsptiMonitor session as an actor. One thread (the session actor) owns every
 * piece of session state; callers post commands (start, stop, config, kinds, interval) into
 * a bounded queue and wait for the result with a bounded wait. The actor also runs the report
 * ticks and the duration expiry, so nothing else ever touches the processor's control side.
 * The backend's completion threads are the only concurrent readers: they see the session only
 * through mon_deliver(), attached by the backend's start() and detached by its stop().
 *
 * No IPC happens on the actor either: npuMonitorStatus goes through a one-slot mailbox to a
 * short-lived reporter thread, newest value wins. A stale dynolog.sock (10 retries, ~10 s per
 * send) therefore delays no command and no training step (docs/plugin.md "Session actor"). */
#include "plugin/control/monitor.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/strutil.h"
#include "common/thr.h"
#include "contract/names.h"
#include "contract/kinds.h"
#include "contract/rank.h"
#include "msmon/ipc_wire.h"
#include "plugin/control/ack.h"
#include "plugin/control/dyno.h"
#include "plugin/penv.h"
#include "plugin/pipeline/filter.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/pipeline.h"
#include "plugin/plog.h"

#define MON_QUEUE_CAP 16            /* commands in flight; a full queue waits, then -EAGAIN */
#define MON_WAIT_CONFIG_MS 1000u    /* monitor_handle_config: the training step's path */
#define MON_WAIT_CALL_MS 10000u     /* monitor_start, monitor_replace_kinds */
#define MON_WAIT_STOP_MS 60000u     /* monitor_stop: the final flush and end-of-session files */
#define MON_NAME_RUNNING "MsptiMonitor" /* users look for it while monitoring */
#define MON_NAME_IDLE "MsMonitorCtl"
#define MON_LOG_DIR_CAP (MCONFIG_MAX_LOG_FILE + 1)
#define MON_MAX_OUTPUTS OUTPUT_MAX   /* outputs of one session (the pipeline's bound) */

enum mon_op { MON_OP_CONFIG, MON_OP_START, MON_OP_STOP, MON_OP_END_WINDOW, MON_OP_KINDS, MON_OP_INTERVAL };
enum mon_slot { MON_SLOT_FREE, MON_SLOT_QUEUED, MON_SLOT_RUNNING, MON_SLOT_DONE };

/* monitor_start()'s arguments, copied: a caller whose wait timed out has gone. */
struct mon_start_copy {
    struct monitor_start_args a;
    char log_dir[MON_LOG_DIR_CAP];
    char rotate_lines[sizeof(((struct mconfig *)0)->rotate_lines)];
    char rotate_files[sizeof(((struct mconfig *)0)->rotate_files)];
    struct output_trace_opts trace;
    char backend[32];
    struct window_opts window;
};

struct mon_cmd {
    enum mon_op op;
    union {
        struct mconfig cfg;
        struct mon_start_copy start;
        uint32_t u32;
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
    int32_t trace_start, trace_stop;
    uint32_t enabled_mask;
    uint32_t interval_s;          /* kept while idle for the next start */
    double duration_s;
    uint64_t deadline_ns;         /* monotonic; 0 = none */
    uint64_t next_tick_ns;        /* monotonic; 0 = no periodic report */
    uint64_t flush_ns;            /* monitor_start_args.flush_ms; 0 = none */
    bool filter_logged;           /* last_filter was logged this session */
    char log_file[MCONFIG_MAX_LOG_FILE + 1]; /* the running npu-monitor session's, as given */
    enum msmon_output output;     /* the running npu-monitor session's output */
    char last_filter[MCONFIG_MAX_FILTER + 1];
};

static struct {
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
    atomic_int trace_status;

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
} mon = {
    .q_lock = PTHREAD_MUTEX_INITIALIZER,
    .be_lock = PTHREAD_MUTEX_INITIALIZER,
    .pgi_lock = PTHREAD_MUTEX_INITIALIZER,
    .art_lock = PTHREAD_MUTEX_INITIALIZER,
    .st_lock = PTHREAD_MUTEX_INITIALIZER,
    .trace_status = IPC_STATUS_UNINITIALIZED,
};
static pthread_once_t mon_init_once = PTHREAD_ONCE_INIT;
static pthread_once_t mon_first_once = PTHREAD_ONCE_INIT;

/* ---- backend ---- */

static struct backend *mon_backend(void)
{
    struct backend *be;

    pthread_mutex_lock(&mon.be_lock);
    if (!mon.test_be && !mon.loaded && backend_create(&mon.loaded) != 0)
        mon.loaded = NULL; /* retried at every start (docs/design/session.md#backends) */
    be = mon.test_be ? mon.test_be : mon.loaded;
    pthread_mutex_unlock(&mon.be_lock);
    return be;
}

static void mon_do_first_use(void)
{
    plog_init();
    (void)mon_backend();
}

void monitor_first_use(void)
{
    pthread_once(&mon_first_once, mon_do_first_use);
}

/* ---- the delivery seam (completion threads) ---- */

/* Every normalised batch reaches the outputs here and only here, through the session's
 * pipeline (cutoff, filter, marker pairing, counters), which hands the processor its batch. */
static void mon_deliver(void *ctx, struct mon_record *recs, size_t n)
{
    struct mon_session *s = ctx;

    if (n)
        pipeline_deliver(s->pl, recs, n);
}

/* ---- status reporter ---- */

static void *mon_reporter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mon.st_lock);
    while (mon.st_pending) {
        int32_t v = mon.st_value;
        mon.st_pending = false;
        pthread_mutex_unlock(&mon.st_lock);
        /* It may retry for seconds (stale dynolog.sock): nobody waits for it. */
        (void)dyno_send_monitor_status(v);
        pthread_mutex_lock(&mon.st_lock);
    }
    mon.st_alive = false;
    pthread_mutex_unlock(&mon.st_lock);
    return NULL;
}

/* Start the reporter if it is not running. st_lock held. */
static void mon_reporter_kick_locked(int32_t status)
{
    if (!mon.st_alive) {
        if (thr_start(NULL, "MsMonitorStat", mon_reporter, NULL, THR_DETACHED) == 0) {
            mon.st_alive = true;
        } else {
            mon.st_pending = false;
            LOG_RL(&mon.st_rl, 10000, LOG_LVL_WARNING, "MsptiMonitor: cannot start the status thread; "
                                                     "status %d not sent", (int)status);
        }
    }
}

/* Queue npuMonitorStatus for the daemon. The daemon only keeps the latest value, so a value
 * not yet sent is replaced: Running then Idle never leaves the daemon at Running. */
static void mon_status_post(int32_t status)
{
    pthread_mutex_lock(&mon.st_lock);
    mon.st_value = status;
    mon.st_pending = true;
    mon_reporter_kick_locked(status);
    pthread_mutex_unlock(&mon.st_lock);
}

/* ---- session (actor thread) ---- */

static int32_t mon_rank(void)
{
    /* the contract's rank rule over the read-once env table; -1 when unknown */
    return rank_resolve(penv_get(PENV_RANK), penv_get(PENV_RANK_ID));
}

static uint64_t mon_period_ns(void)
{
    if (mon.sess.flush_ns)
        return mon.sess.flush_ns;
    return mon.sess.standalone ? 0 : (uint64_t)mon.sess.interval_s * 1000000000ull;
}

static void mon_publish(void)
{
    atomic_store(&mon.pub_kinds, mon.sess.running ? mon.sess.enabled_mask : 0);
    atomic_store(&mon.pub_running, mon.sess.running);
    atomic_store(&mon.pub_trace, mon.sess.running && mon.sess.trace);
}

/* docs/design/session.md#session-life-cycle steps 1–3 (the backend), 5–7. */
static void mon_teardown(void)
{
    struct mon_session *s = &mon.sess;
    struct backend *be = s->be;
    struct backend_drops d;
    char *pgi = NULL;

    be->ops->stop(be); /* after this no completion reads the session */
    be->ops->drops(be, &d);
    if (d.buffers_declined || d.unknown_kind || d.read_errors || d.vendor_dropped)
        LOG_WARN("MsptiMonitor: backend %s lost data this session: %llu buffer requests declined, %llu "
                 "records of unknown kind, %llu record read errors, %llu records dropped by the library",
                 be->ops->name, (unsigned long long)d.buffers_declined, (unsigned long long)d.unknown_kind,
                 (unsigned long long)d.read_errors, (unsigned long long)d.vendor_dropped);
    /* Our own copy: set_cluster_config_data may replace the text while the processor uses it. */
    pthread_mutex_lock(&mon.pgi_lock);
    if (mon.parallel_group_info && !(pgi = strdup(mon.parallel_group_info)))
        LOG_WARN("MsptiMonitor: out of memory copying parallel_group_info; not written");
    pthread_mutex_unlock(&mon.pgi_lock);
    pipeline_set_declined(s->pl, d.buffers_declined);
    if (pipeline_stop(s->pl, pgi) != 0)
        LOG_WARN("MsptiMonitor: output %s reported an error at stop", outputs_name(s->output));
    pipeline_destroy(s->pl);
    free(pgi);
    s->pl = NULL;
    if (s->filter)
        (void)filter_state_set(s->filter, NULL);
    s->filter_logged = false;
    s->running = false;
    s->trace = false;
    s->log_file[0] = '\0';
    s->enabled_mask = 0;
    s->duration_s = 0;
    s->deadline_ns = s->next_tick_ns = 0;
    s->flush_ns = 0;
    mon_publish();
    pthread_setname_np(pthread_self(), MON_NAME_IDLE); /* gone from `top -H` before the log line */
    LOG_INFO("MsptiMonitor stop successfully");
}

static int mon_do_kinds(uint32_t mask);

static void mon_tick(void)
{
    struct backend_drops d;

    (void)mon.sess.be->ops->flush(mon.sess.be); /* the interval's records are in this interval's report */
    mon.sess.be->ops->drops(mon.sess.be, &d);
    pipeline_set_declined(mon.sess.pl, d.buffers_declined); /* live, not only at stop */
    if (pipeline_tick(mon.sess.pl) != 0)
        LOG_DEBUG("MsptiMonitor: processor tick reported an error");
}

/* One INFO line per filter change (every config repeats the filter), so a run's files can be
 * told what was filtered (the files record the last one, docs/outputs.md#session-end).
 * Control bytes are masked: the text comes from an RPC client. */
static void mon_log_filter(const char *text)
{
    struct mon_session *s = &mon.sess;
    char shown[MCONFIG_MAX_FILTER + 1];
    size_t i;

    if (s->filter_logged && strcmp(s->last_filter, text) == 0)
        return;
    for (i = 0; text[i] && i < MCONFIG_MAX_FILTER; i++)
        shown[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7f ? '?' : text[i];
    shown[i] = '\0';
    (void)str_copy(s->last_filter, sizeof(s->last_filter), text, strnlen(text, MCONFIG_MAX_FILTER));
    s->filter_logged = true;
    LOG_INFO("MsptiMonitor filter: '%s'", shown);
}

/* The session's outputs from the registry: its own first, then the others of the set. */
static size_t mon_outputs(const struct monitor_start_args *a, const struct output_ops **ops)
{
    size_t n = 0;

    if ((unsigned)a->output >= MSMON_OUTPUT_COUNT)
        return 0;
    ops[n++] = output_ops_of(a->output);
    for (unsigned i = 0; i < MSMON_OUTPUT_COUNT && n < MON_MAX_OUTPUTS; i++)
        if ((a->also & MSMON_OUTPUT_BIT(i)) && i != (unsigned)a->output)
            ops[n++] = output_ops_of((enum msmon_output)i);
    return n;
}

/* output_config.artifact: an output's finished file (its session thread or a stopping one). */
static void mon_artifact(void *ctx, const char *path)
{
    (void)ctx;
    pthread_mutex_lock(&mon.art_lock);
    snprintf(mon.last_artifact, sizeof(mon.last_artifact), "%s", path);
    pthread_mutex_unlock(&mon.art_lock);
}

void monitor_last_artifact(char *buf, size_t cap)
{
    if (!buf || !cap)
        return;
    pthread_mutex_lock(&mon.art_lock);
    snprintf(buf, cap, "%s", mon.last_artifact);
    pthread_mutex_unlock(&mon.art_lock);
}

static int mon_do_start(const struct monitor_start_args *a)
{
    struct mon_session *s = &mon.sess;
    const struct output_ops *ops[MON_MAX_OUTPUTS];
    struct backend *be;
    struct output_config pc;
    struct pipeline *pl = NULL;
    size_t nops;
    int rc;

    if (s->running)
        return -EALREADY;
    if (a->window && (!a->trace || !a->log_dir || !a->kinds_mask))
        return -EINVAL;
    /* The framework's own trace status; our trace window is this very session. */
    if (!a->window && atomic_load(&mon.trace_status) == IPC_STATUS_RUNNING) {
        LOG_ERROR("MsptiMonitor start refused: nputrace is running in this process (msPTI allows one "
                  "subscriber; stop the trace first)");
        return -EBUSY;
    }
    be = mon_backend();
    if (!be) {
        LOG_ERROR("msPTI library not found, mspti monitor start failed");
        return -ENOENT;
    }
    nops = mon_outputs(a, ops);
    if (!nops) {
        LOG_ERROR("MsptiMonitor start failed: invalid output %d", (int)a->output);
        return -EINVAL;
    }
    if (!s->filter && filter_state_create(&s->filter) != 0)
        s->filter = NULL;
    s->standalone = a->standalone;
    s->flush_ns = (uint64_t)a->flush_ms * 1000000ull;
    pc = (struct output_config){
        .log_dir = a->log_dir, .rank = mon_rank(), .session_start_ns = clock_real_ns(),
        .report_interval_s = a->standalone ? 0 : s->interval_s, .jsonl_rotate_lines = a->rotate_lines,
        .jsonl_rotate_files = a->rotate_files, .send_ctx = NULL,
        /* metric data always goes to the daemon; file outputs only send their counters
         * (PluginStats), and only to a daemon this process talks to; the standalone Monitor
         * has no daemon */
        .send = a->standalone && !a->window ? NULL
                : a->output == MSMON_OUTPUT_METRIC || dyno_reachable() ? dyno_send_data : NULL,
        .trace = a->trace, .artifact = mon_artifact,
    };
    rc = pipeline_create_set(&pc, s->filter, ops, nops, &pl);
    if (rc == 0 && a->window)
        rc = pipeline_set_window(pl, a->window);
    if (rc != 0) {
        LOG_ERROR("MsptiMonitor start failed: cannot create the %s processor: %s", ops[0]->name, errno_name(-rc));
        pipeline_destroy(pl);
        return rc;
    }
    s->be = be;
    s->pl = pl;
    s->output = a->output;
    rc = be->ops->start(be, mon_deliver, s); /* logs its own failures */
    if (rc != 0)
        goto err_proc;
    rc = pipeline_start(pl);
    if (rc != 0) {
        LOG_ERROR("MsptiMonitor start failed: the %s processor did not start: %s", ops[0]->name, errno_name(-rc));
        be->ops->stop(be);
        goto err_proc;
    }
    s->enabled_mask = 0;
    s->duration_s = a->duration_s > 0 ? a->duration_s : 0;
    s->deadline_ns = s->duration_s > 0 ? clock_mono_ns() + (uint64_t)llround(s->duration_s * 1e9) : 0;
    s->next_tick_ns = mon_period_ns() ? clock_mono_ns() + mon_period_ns() : 0;
    s->running = true;
    s->trace = a->window != NULL;
    if (s->trace) {
        s->trace_start = a->window->start_step;
        s->trace_stop = a->window->stop_step;
    }
    mon_publish();
    if (a->kinds_mask)
        (void)mon_do_kinds(a->kinds_mask);
    pthread_setname_np(pthread_self(), MON_NAME_RUNNING);
    LOG_INFO("MsptiMonitor start successfully");
    LOG_INFO("Start mspti monitor thread successfully, rankid: %d", (int)pc.rank);
    return 0;

err_proc:
    pipeline_destroy(pl);
    s->pl = NULL;
    return rc;
}

static int mon_do_stop(void)
{
    if (!mon.sess.running)
        return -ENOENT;
    mon_teardown();
    return 0;
}

/* A step-bounded window ends at end_ns (the stepping thread's clock reading): what starts
 * later is cut by the window stage, then the session stops and the outputs write. */
static int mon_do_end_window(uint64_t end_ns)
{
    if (!mon.sess.running || !mon.sess.trace)
        return -ENOENT;
    (void)pipeline_window_close(mon.sess.pl, end_ns);
    mon_teardown();
    return 0;
}

/* docs/design/session.md#report-ticks: a different value while running reports the data of the old interval now. */
static void mon_do_interval(uint32_t seconds)
{
    struct mon_session *s = &mon.sess;

    if (seconds == s->interval_s)
        return;
    s->interval_s = seconds;
    if (!s->running)
        return;
    mon_tick();
    s->next_tick_ns = mon_period_ns() ? clock_mono_ns() + mon_period_ns() : 0;
}

static int mon_do_kinds(uint32_t mask)
{
    struct mon_session *s = &mon.sess;
    uint32_t enabled = s->enabled_mask;

    if (!s->running)
        return -ENOENT;
    (void)s->be->ops->set_kinds(s->be, mask, &enabled); /* logs per-kind failures */
    s->enabled_mask = enabled;
    mon_publish();
    pipeline_set_kinds(s->pl, enabled);
    return 0;
}

/* A start while a session runs with other output settings restarts it with the new ones
 * (docs/troubleshooting.md): the old session's files are closed first, so the two runs never
 * share a file and a new --duration counts from this config. */
static bool mon_settings_differ(const struct mconfig *cfg)
{
    const struct mon_session *s = &mon.sess;

    if (strcmp(s->log_file, cfg->log_file) != 0)
        return true;
    if (cfg->log_file[0] && s->output != cfg->output)
        return true;
    return fabs(s->duration_s - (cfg->duration_s > 0 ? cfg->duration_s : 0)) > 1e-9;
}

/* Enable the config's kinds; when the backend refused some, why into `why` ("<backend> could
 * not enable Kernel, Memory: <its error>"). Returns the kinds still missing. */
static uint32_t mon_enable_checked(uint32_t mask, char *why, size_t cap)
{
    struct mon_session *s = &mon.sess;
    char err[ACK_REASON_CAP + 1] = "", names[160] = "";
    uint32_t missing;
    size_t o = 0;

    log_reason_begin(err, sizeof(err));
    (void)mon_do_kinds(mask);
    log_reason_end();
    missing = mask & ~s->enabled_mask;
    if (!missing)
        return 0;
    for (int k = 0; k < 32 && o < sizeof(names); k++) {
        const char *n = (missing & (1u << k)) ? kinds_name(k) : NULL;
        if (n) {
            int w = snprintf(names + o, sizeof(names) - o, "%s%s", o ? ", " : "", n);
            o += w > 0 ? (size_t)w : 0;
        }
    }
    snprintf(why, cap, "%s could not enable %s: %s", s->be->ops->name, names, err[0] ? err : "refused");
    return missing;
}

/* docs/design/session.md#applying-a-config DealMonitorReq; returns the status reported (1 running, 0 not). Every config that came
 * from the daemon is answered with its outcome (ack.h). */
static int mon_do_config(const struct mconfig *cfg)
{
    struct mon_session *s = &mon.sess;
    char *dir = NULL;
    char why[ACK_REASON_CAP + 1] = "", err[ACK_REASON_CAP + 1] = "";
    bool rejected = false, started = false;
    int status;

    log_reason_begin(err, sizeof(err));
    if (s->running && s->trace) {
        /* docs/design/rpc.md#setkinetondemandrequest: the daemon refuses npu-monitor while nputrace runs; a config that still
         * arrives (an older daemon, a direct API caller) must not end the window. */
        LOG_ERROR("npu-monitor config refused: nputrace is tracing steps [%d, %d) in this process; "
                  "retry after the window", (int)s->trace_start, (int)s->trace_stop);
        log_reason_end();
        mon_status_post(IPC_STATUS_IDLE);
        (void)ack_send(cfg->id, "rejected", err, "Tracing");
        return 0;
    }
    if (cfg->stop) {
        (void)mon_do_stop();
        goto report;
    }
    if (cfg->report_interval_s != 0)
        mon_do_interval(cfg->report_interval_s);
    if (cfg->start && s->running && mon_settings_differ(cfg)) {
        LOG_INFO("MsptiMonitor: a start with new settings (log file '%s' -> '%s', duration %gs -> %gs): "
                 "restarting the session", s->log_file, cfg->log_file, s->duration_s, cfg->duration_s);
        (void)mon_do_stop();
    }
    if (cfg->start && !s->running) {
        struct monitor_start_args a = {
            .output = MSMON_OUTPUT_METRIC, .duration_s = cfg->duration_s,
            .rotate_lines = cfg->rotate_lines, .rotate_files = cfg->rotate_files,
        };
        if (cfg->log_file[0]) {
            dir = malloc(MON_LOG_DIR_CAP);
            if (!dir || output_prepare_dir(cfg->output, cfg->log_file, dir, MON_LOG_DIR_CAP) != 0) {
                LOG_ERROR("Invalid log path, mspti monitor start failed");
                rejected = true;
                goto report;
            }
            a.log_dir = dir;
            a.output = cfg->output;
        }
        if (mon_do_start(&a) != 0) {
            rejected = true;
            goto report;
        }
        started = true;
        (void)str_copy(s->log_file, sizeof(s->log_file), cfg->log_file, strlen(cfg->log_file));

    }
    if (s->running) {
        if (s->filter && filter_state_set(s->filter, cfg->filter) != 0) {
            LOG_ERROR("MsptiMonitor: filter '%s' not applied", cfg->filter);
            rejected = true;
        } else if (s->filter) {
            mon_log_filter(cfg->filter);
        }
        if (cfg->kinds_mask && mon_enable_checked(cfg->kinds_mask, why, sizeof(why))) {
            LOG_ERROR("MsptiMonitor: %s", why);
            rejected = true;
            /* a session this config started that collects nothing is no session */
            if (started && !s->enabled_mask)
                (void)mon_do_stop();
        }
    }
report:
    log_reason_end();
    free(dir);
    status = s->running ? 1 : 0;
    /* Queued in order on this thread: an expiry's later Idle always replaces this Running. */
    mon_status_post(status ? IPC_STATUS_RUNNING : IPC_STATUS_IDLE);
    if (rejected)
        (void)ack_send(cfg->id, "rejected", why[0] ? why : err[0] ? err : "not applied",
                       names_ipc_status(status));
    else
        (void)ack_send(cfg->id, "applied", cfg->notes, names_ipc_status(status));
    return status;
}

static void mon_do_expire(void)
{
    LOG_INFO("MsptiMonitor run duration: %gs expired", mon.sess.duration_s);
    mon_teardown();
    mon_status_post(IPC_STATUS_IDLE); /* dyno status shows Idle, nputrace is accepted again */
}

static int mon_run(struct mon_cmd *c)
{
    switch (c->op) {
    case MON_OP_CONFIG:
        return mon_do_config(&c->arg.cfg);
    case MON_OP_START:
        return mon_do_start(&c->arg.start.a);
    case MON_OP_STOP:
        return mon_do_stop();
    case MON_OP_END_WINDOW:
        return mon_do_end_window(c->arg.u64);
    case MON_OP_KINDS:
        return mon_do_kinds(c->arg.u32);
    case MON_OP_INTERVAL:
        mon_do_interval(c->arg.u32);
        return 0;
    }
    return -EINVAL;
}

/* Oldest queued command, or NULL. q_lock held. */
static struct mon_cmd *mon_next_locked(void)
{
    struct mon_cmd *best = NULL;

    for (int i = 0; i < MON_QUEUE_CAP; i++)
        if (mon.slots[i].st == MON_SLOT_QUEUED && (!best || mon.slots[i].seq < best->seq))
            best = &mon.slots[i];
    return best;
}

/* No command queued or running. q_lock held. */
static bool mon_idle_locked(void)
{
    for (int i = 0; i < MON_QUEUE_CAP; i++)
        if (mon.slots[i].st == MON_SLOT_QUEUED || mon.slots[i].st == MON_SLOT_RUNNING)
            return false;
    return true;
}

static void mon_timedwait(pthread_cond_t *cv, uint64_t deadline_ns)
{
    struct timespec ts = { .tv_sec = (time_t)(deadline_ns / 1000000000ull),
                           .tv_nsec = (long)(deadline_ns % 1000000000ull) };

    pthread_cond_timedwait(cv, &mon.q_lock, &ts);
}

static void *mon_actor(void *arg)
{
    struct mon_session *s = &mon.sess;

    (void)arg;
    pthread_setname_np(pthread_self(), s->running ? MON_NAME_RUNNING : MON_NAME_IDLE);
    pthread_mutex_lock(&mon.q_lock);
    for (;;) {
        struct mon_cmd *c = mon_next_locked();
        uint64_t now, wake;

        if (c) {
            c->st = MON_SLOT_RUNNING;
            pthread_mutex_unlock(&mon.q_lock);
            c->result = mon_run(c);
            pthread_mutex_lock(&mon.q_lock);
            c->st = c->waiter ? MON_SLOT_DONE : MON_SLOT_FREE;
            pthread_cond_broadcast(&mon.done_cond);
            continue;
        }
        /* Commands first; then the session's own timers (docs/design/session.md#session-life-cycle, #report-ticks). */
        now = clock_mono_ns();
        if (s->running && s->deadline_ns && now >= s->deadline_ns) {
            pthread_mutex_unlock(&mon.q_lock);
            mon_do_expire();
            pthread_mutex_lock(&mon.q_lock);
            continue;
        }
        if (s->running && s->next_tick_ns && now >= s->next_tick_ns) {
            pthread_mutex_unlock(&mon.q_lock);
            mon_tick();
            now = clock_mono_ns();
            s->next_tick_ns += mon_period_ns();
            if (s->next_tick_ns <= now) /* a tick longer than the period: no burst of catch-ups */
                s->next_tick_ns = now + mon_period_ns();
            pthread_mutex_lock(&mon.q_lock);
            continue;
        }
        wake = s->running ? s->next_tick_ns : 0;
        if (s->running && s->deadline_ns && (!wake || s->deadline_ns < wake))
            wake = s->deadline_ns;
        if (wake)
            mon_timedwait(&mon.q_cond, wake);
        else
            pthread_cond_wait(&mon.q_cond, &mon.q_lock);
    }
    return NULL; /* not reached: the actor lives as long as the process */
}

/* ---- posting commands ---- */

static void mon_atfork_prepare(void)
{
    pthread_mutex_lock(&mon.q_lock);
    pthread_mutex_lock(&mon.st_lock);
}

static void mon_atfork_parent(void)
{
    pthread_mutex_unlock(&mon.st_lock);
    pthread_mutex_unlock(&mon.q_lock);
}

/* The child has none of our threads: they are started again on its first command. Commands
 * in flight belonged to the parent's threads. */
static void mon_atfork_child(void)
{
    for (int i = 0; i < MON_QUEUE_CAP; i++)
        mon.slots[i].st = MON_SLOT_FREE;
    mon.actor_started = false;
    mon.st_alive = false;
    mon.st_pending = false;
    pthread_mutex_unlock(&mon.st_lock);
    pthread_mutex_unlock(&mon.q_lock);
}

static void mon_init(void)
{
    pthread_condattr_t a;

    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&mon.q_cond, &a);
    pthread_cond_init(&mon.done_cond, &a);
    pthread_condattr_destroy(&a);
    (void)pthread_atfork(mon_atfork_prepare, mon_atfork_parent, mon_atfork_child);
}

/* Post *tmpl and, if wait_ms > 0, wait up to wait_ms for its result. A command whose wait
 * times out still runs (a config a training step handed over must take effect); the caller
 * gets -ETIMEDOUT. -EAGAIN if the queue stayed full, -EDEADLK from the actor itself. */
static int mon_call(const struct mon_cmd *tmpl, unsigned wait_ms)
{
    uint64_t deadline = clock_mono_ns() + (uint64_t)(wait_ms ? wait_ms : MON_WAIT_CONFIG_MS) * 1000000ull;
    struct mon_cmd *c = NULL;
    int rc = 0;

    pthread_once(&mon_init_once, mon_init);
    pthread_mutex_lock(&mon.q_lock);
    if (mon.actor_started && pthread_equal(mon.actor, pthread_self())) {
        rc = -EDEADLK; /* a processor callback calling back into the monitor */
        goto out;
    }
    if ((tmpl->op == MON_OP_STOP || tmpl->op == MON_OP_END_WINDOW) && !atomic_load(&mon.pub_running) &&
        mon_idle_locked()) {
        rc = -ENOENT; /* nothing queued could start a session: no need to wake (or start) the actor */
        goto out;
    }
    if (!mon.actor_started) {
        rc = thr_start(&mon.actor, MON_NAME_IDLE, mon_actor, NULL, THR_DETACHED);
        if (rc != 0) {
            LOG_ERROR("MsptiMonitor: cannot create the session thread: %s", errno_name(-rc));
            goto out;
        }
        mon.actor_started = true;
    }
    for (;;) {
        for (int i = 0; i < MON_QUEUE_CAP && !c; i++)
            if (mon.slots[i].st == MON_SLOT_FREE)
                c = &mon.slots[i];
        if (c)
            break;
        if (clock_mono_ns() >= deadline) {
            LOG_RL(&mon.q_rl, 10000, LOG_LVL_WARNING, "MsptiMonitor: command queue full (%d); command dropped",
                   MON_QUEUE_CAP);
            rc = -EAGAIN;
            goto out;
        }
        mon_timedwait(&mon.done_cond, deadline);
    }
    *c = *tmpl;
    c->seq = ++mon.seq;
    c->waiter = wait_ms > 0;
    c->st = MON_SLOT_QUEUED;
    pthread_cond_signal(&mon.q_cond);
    if (!c->waiter)
        goto out;
    while (c->st != MON_SLOT_DONE) {
        if (clock_mono_ns() >= deadline) {
            c->waiter = false; /* the actor frees the slot when it is done */
            LOG_RL(&mon.q_rl, 10000, LOG_LVL_WARNING, "MsptiMonitor: the session is busy; command left to "
                                                    "finish in the background after %u ms", wait_ms);
            rc = -ETIMEDOUT;
            goto out;
        }
        mon_timedwait(&mon.done_cond, deadline);
    }
    rc = c->result;
    c->st = MON_SLOT_FREE;
    pthread_cond_broadcast(&mon.done_cond); /* a poster may wait for a free slot */
out:
    pthread_mutex_unlock(&mon.q_lock);
    return rc;
}

/* Command templates are ~5 KiB: off the (possibly small) framework thread stacks. */
static struct mon_cmd *mon_cmd_new(enum mon_op op)
{
    struct mon_cmd *c = calloc(1, sizeof(*c));

    if (c)
        c->op = op;
    return c;
}

static int mon_call_simple(enum mon_op op, uint32_t arg, unsigned wait_ms)
{
    struct mon_cmd *c = mon_cmd_new(op);
    int rc;

    if (!c)
        return -ENOMEM;
    c->arg.u32 = arg;
    rc = mon_call(c, wait_ms);
    free(c);
    return rc;
}

/* ---- monitor.h ---- */

bool monitor_running(void)
{
    return atomic_load(&mon.pub_running);
}

bool monitor_tracing(void)
{
    return atomic_load(&mon.pub_trace);
}

int monitor_stop(void)
{
    return mon_call_simple(MON_OP_STOP, 0, MON_WAIT_STOP_MS);
}

static void mon_copy_str(char *dst, size_t cap, const char *src)
{
    dst[0] = '\0';
    if (src)
        str_copy(dst, cap, src, strlen(src));
}

int monitor_start(const struct monitor_start_args *a)
{
    struct mon_cmd *c;
    struct mon_start_copy *sc;
    int rc;

    monitor_first_use();
    if (a->log_dir && strlen(a->log_dir) >= MON_LOG_DIR_CAP)
        return -ENAMETOOLONG;
    c = mon_cmd_new(MON_OP_START);
    if (!c)
        return -ENOMEM;
    sc = &c->arg.start;
    sc->a = *a;
    mon_copy_str(sc->log_dir, sizeof(sc->log_dir), a->log_dir);
    mon_copy_str(sc->rotate_lines, sizeof(sc->rotate_lines), a->rotate_lines);
    mon_copy_str(sc->rotate_files, sizeof(sc->rotate_files), a->rotate_files);
    sc->a.log_dir = a->log_dir ? sc->log_dir : NULL;
    sc->a.rotate_lines = a->rotate_lines ? sc->rotate_lines : NULL;
    sc->a.rotate_files = a->rotate_files ? sc->rotate_files : NULL;
    if (a->trace) {
        sc->trace = *a->trace;
        mon_copy_str(sc->backend, sizeof(sc->backend), a->trace->backend);
        sc->trace.backend = sc->backend;
        sc->a.trace = &sc->trace;
    }
    if (a->window) {
        sc->window = *a->window;
        sc->a.window = &sc->window;
    }
    rc = mon_call(c, MON_WAIT_CALL_MS);
    free(c);
    return rc;
}

int monitor_stop_nowait(void)
{
    return mon_call_simple(MON_OP_STOP, 0, 0);
}

int monitor_end_window(uint64_t end_ns, bool wait)
{
    struct mon_cmd *c = mon_cmd_new(MON_OP_END_WINDOW);
    int rc;

    if (!c)
        return -ENOMEM;
    c->arg.u64 = end_ns;
    rc = mon_call(c, wait ? MON_WAIT_STOP_MS : 0);
    free(c);
    return rc;
}

int monitor_window(struct window_state *ret)
{
    return pipeline_live_window(ret);
}

void monitor_set_interval(uint32_t seconds)
{
    (void)mon_call_simple(MON_OP_INTERVAL, seconds, 0); /* ordered with later commands */
}

int monitor_replace_kinds(uint32_t mask)
{
    return mon_call_simple(MON_OP_KINDS, mask, MON_WAIT_CALL_MS);
}

uint32_t monitor_enabled_kinds(void)
{
    return atomic_load(&mon.pub_kinds);
}

int monitor_handle_config(const struct mconfig *cfg)
{
    struct mon_cmd *c;
    int rc;

    monitor_first_use();
    c = mon_cmd_new(MON_OP_CONFIG);
    if (!c)
        return 0;
    c->arg.cfg = *cfg;
    rc = mon_call(c, MON_WAIT_CONFIG_MS);
    free(c);
    /* Timed out: the config is still applied and reported by the actor; say "not running". */
    return rc == 1 ? 1 : 0;
}

void monitor_set_trace_status(int32_t status)
{
    atomic_store(&mon.trace_status, status);
    if (status == IPC_STATUS_RUNNING && atomic_load(&mon.pub_running) && !atomic_load(&mon.pub_trace))
        LOG_WARN("nputrace reported Running while an npu-monitor session runs in this process; msPTI "
                 "allows one subscriber, stop npu-monitor before tracing");
}

int monitor_set_cluster_config(const char *key, const char *value)
{
    char *copy;

    if (!key || !value)
        return -EINVAL;
    if (strcmp(key, "parallel_group_info") != 0)
        return 0; /* nothing else is used by the session end */
    copy = strdup(value);
    if (!copy)
        return -ENOMEM;
    pthread_mutex_lock(&mon.pgi_lock);
    free(mon.parallel_group_info);
    mon.parallel_group_info = copy;
    pthread_mutex_unlock(&mon.pgi_lock);
    return 0;
}

int monitor_backend_info(const char **ret_name, const char **ret_library)
{
    struct backend *be = mon_backend(); /* loads it if nothing has yet (retried each call) */

    if (!be)
        return -ENOENT;
    *ret_name = be->ops->name;
    *ret_library = be->library ? be->library : "";
    return 0;
}

void monitor_backend_drops(struct backend_drops *ret)
{
    struct backend *be;

    memset(ret, 0, sizeof(*ret));
    pthread_mutex_lock(&mon.be_lock);
    be = mon.test_be ? mon.test_be : mon.loaded;
    pthread_mutex_unlock(&mon.be_lock);
    if (be)
        be->ops->drops(be, ret);
}

void monitor_test_set_backend(struct backend *be)
{
    pthread_mutex_lock(&mon.be_lock);
    mon.test_be = be;
    pthread_mutex_unlock(&mon.be_lock);
}
