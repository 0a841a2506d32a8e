/* monitor_session: the session's commands, run on the session actor (monitor_int.h): start,
 * stop, end of a window, report ticks, kinds, interval, an npu-monitor config and its answer,
 * the duration's expiry, and the one decision of what may run beside what. The completion
 * threads reach a session only through mon_deliver(). */
#include "plugin/control/monitor.h"
#include "plugin/control/monitor_int.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/strutil.h"
#include "contract/names.h"
#include "contract/kinds.h"
#include "contract/rank.h"
#include "msmon/ipc_wire.h"
#include "plugin/control/dynolog_link.h"
#include "plugin/pipeline/output.h"
#include "plugin/penv.h"
#include "plugin/pipeline/filter.h"
#include "plugin/pipeline/pipeline.h"

/* ---- the delivery seam (completion threads) ---- */

/* Every normalised batch reaches the outputs here and only here, through the session's
 * pipeline (cutoff, filter, marker pairing, counters), which hands the processor its batch. */
static void mon_deliver(void *ctx, struct mon_record *recs, size_t n)
{
    struct mon_session *s = ctx;

    if (n)
        pipeline_deliver(s->pl, recs, n);
}

/* ---- session (actor thread) ---- */

static int32_t mon_rank(void)
{
    /* the contract's rank rule over the read-once env table; -1 when unknown */
    return rank_resolve(penv_get(PENV_RANK), penv_get(PENV_RANK_ID));
}

uint64_t mon_period_ns(void)
{
    if (mon.sess.flush_ns)
        return mon.sess.flush_ns;
    return mon.sess.standalone ? 0 : (uint64_t)mon.sess.interval_s * 1000000000ull;
}

void mon_publish(void)
{
    atomic_store(&mon.pub_kinds, mon.sess.running ? mon.sess.enabled_mask : 0);
    atomic_store(&mon.pub_running, mon.sess.running);
    atomic_store(&mon.pub_trace, mon.sess.running && mon.sess.trace);
}

/* The metric datagrams the daemon link lost since the session started: asked of its owner
 * (dynolog_link.c), written into the session's counters here, on the actor. */
static void mon_note_offline(void)
{
    struct dynolog_data_stats ds;

    dynolog_data_backlog(&ds);
    pipeline_set_offline(mon.sess.pl, ds.dropped - mon.sess.offline_base);
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
    mon_note_offline();
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

void mon_tick(void)
{
    struct backend_drops d;

    (void)mon.sess.be->ops->flush(mon.sess.be); /* the interval's records are in this interval's report */
    mon.sess.be->ops->drops(mon.sess.be, &d);
    pipeline_set_declined(mon.sess.pl, d.buffers_declined); /* live, not only at stop */
    mon_note_offline();
    if (pipeline_tick(mon.sess.pl) != 0)
        LOG_DEBUG("MsptiMonitor: processor tick reported an error");
}

/* One INFO line per filter change (every config repeats the filter), so a run's files can be
 * told what was filtered (the files record the last one, docs/outputs.md#session-end).
 * Control bytes are masked: the text comes from an RPC client. */
static void mon_log_filter(const char *text)
{
    struct mon_session *s = &mon.sess;
    char shown[PCONFIG_MAX_FILTER + 1];
    size_t i;

    if (s->filter_logged && strcmp(s->last_filter, text) == 0)
        return;
    for (i = 0; text[i] && i < PCONFIG_MAX_FILTER; i++)
        shown[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7f ? '?' : text[i];
    shown[i] = '\0';
    (void)str_copy(s->last_filter, sizeof(s->last_filter), text, strnlen(text, PCONFIG_MAX_FILTER));
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

int mon_do_start(const struct monitor_start_args *a)
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
    be = mon_backend();
    if (!be) {
        LOG_ERROR("msPTI library not found, mspti monitor start failed");
        return -ENOENT;
    }
    if (a->output == MSMON_OUTPUT_MEMORY && a->n_memory_kinds) {
        rc = output_request_kinds(MSMON_OUTPUT_MEMORY, a->memory_kinds, a->n_memory_kinds);
        if (rc != 0)
            return rc;
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
                : a->output == MSMON_OUTPUT_METRIC || dynolog_reachable() ? dynolog_send_data : NULL,
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
    {
        struct dynolog_data_stats ds;
        dynolog_data_backlog(&ds);
        s->offline_base = ds.dropped;
    }
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

int mon_do_stop(void)
{
    if (!mon.sess.running)
        return -ENOENT;
    mon_teardown();
    return 0;
}

/* A step-bounded window ends at end_ns (the stepping thread's clock reading): what starts
 * later is cut by the window stage, then the session stops and the outputs write. */
int mon_do_end_window(uint64_t end_ns)
{
    if (!mon.sess.running || !mon.sess.trace)
        return -ENOENT;
    (void)pipeline_window_close(mon.sess.pl, end_ns);
    mon_teardown();
    return 0;
}

/* docs/design/session.md#report-ticks: a different value while running reports the data of the old interval now. */
void mon_do_interval(uint32_t seconds)
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

int mon_do_kinds(uint32_t mask)
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
static bool mon_settings_differ(const struct pconfig_monitor *cfg)
{
    const struct mon_session *s = &mon.sess;

    if (strcmp(s->log_file, cfg->log_file) != 0)
        return true;
    if (cfg->log_file[0] && s->output != cfg->output)
        return true;
    return fabs(s->duration_s - (cfg->duration_s > 0 ? cfg->duration_s : 0)) > 1e-9;
}

/* Enable the config's kinds; when the backend refused some, why into `why` ("<backend> could
 * not enable Kernel, Memory: <its error>") and their names into `names`. Returns the kinds
 * still missing. */
static uint32_t mon_enable_checked(uint32_t mask, char *why, size_t cap, char *names, size_t ncap)
{
    struct mon_session *s = &mon.sess;
    char err[MONITOR_REASON_CAP] = "";
    uint32_t missing;
    size_t o = 0;

    names[0] = '\0';
    log_reason_begin(err, sizeof(err));
    (void)mon_do_kinds(mask);
    log_reason_end();
    missing = mask & ~s->enabled_mask;
    if (!missing)
        return 0;
    for (int k = 0; k < 32 && o < ncap; k++) {
        const char *n = (missing & (1u << k)) ? kinds_name(k) : NULL;
        if (n) {
            int w = snprintf(names + o, ncap - o, "%s%s", o ? ", " : "", n);
            o += w > 0 ? (size_t)w : 0;
        }
    }
    snprintf(why, cap, "%s could not enable %s: %s", s->be->ops->name, names, err[0] ? err : "refused");
    return missing;
}

/* ---- one activity subscriber: the one decision of what may run beside what ---- */

/* msPTI takes one activity subscriber per process, so an npu-monitor session, the standalone
 * Monitor, an nputrace window from its arm to its end and the framework's own profiler
 * exclude each other (docs/troubleshooting.md#npu-monitor-and-nputrace-exclude-each-other).
 * NULL: admitted; else the refusal, also logged as one ERROR. */
const char *mon_refusal(enum mon_want w, int32_t rank, char *buf, size_t cap)
{
    const struct mon_session *s = &mon.sess;
    const struct window_state *win = &mon.win.win;
    const char *other = s->standalone ? "the standalone Monitor" : "npu-monitor";

    buf[0] = '\0';
    switch (w) {
    case MON_WANT_MONITOR:
        if (s->running && s->trace)
            snprintf(buf, cap, "npu-monitor config refused: nputrace is tracing steps [%d, %d) in this process; "
                     "retry after the window", (int)win->start, (int)win->stop);
        else if (win->phase == WINDOW_ARMED)
            snprintf(buf, cap, "npu-monitor start refused: an nputrace window for steps [%d, %d) is armed in this "
                     "process (one activity subscriber); start npu-monitor after the window", (int)win->start,
                     (int)win->stop);
        else if (s->fw_trace == IPC_STATUS_RUNNING)
            snprintf(buf, cap, "MsptiMonitor start refused: nputrace is running in this process (msPTI allows one "
                     "subscriber; stop the trace first)");
        break;
    case MON_WANT_STANDALONE:
        if (mon_win_busy())
            snprintf(buf, cap, "Monitor start refused: an nputrace window for steps [%d, %d) is %s in this "
                     "process (one activity subscriber)", (int)win->start, (int)win->stop,
                     win->phase == WINDOW_OPEN ? "running" : "armed");
        break;
    case MON_WANT_WINDOW_ARM:
        if (mon_win_busy())
            snprintf(buf, cap, "nputrace config ignored on rank %d: a window [%d, %d) is already %s", (int)rank,
                     (int)win->start, (int)win->stop, win->phase == WINDOW_OPEN ? "running" : "armed");
        else if (s->running && !s->trace)
            snprintf(buf, cap, "nputrace refused on rank %d: %s is running in this process (one activity "
                     "subscriber); stop it with dyno npu-monitor --npu-monitor-stop first", (int)rank, other);
        break;
    case MON_WANT_WINDOW_OPEN:
        if (s->running && !s->trace)
            snprintf(buf, cap, "nputrace refused on rank %d: %s is running in this process (one activity "
                     "subscriber); stop it with dyno npu-monitor --npu-monitor-stop first", (int)rank, other);
        break;
    }
    if (!buf[0])
        return NULL;
    LOG_ERROR("%s", buf);
    return buf;
}

/* ---- configs ---- */

void mon_answer(const struct mon_answer *ans, enum monitor_outcome o, const char *state, const char *reason)
{
    struct monitor_result r = { .outcome = o, .state = state };

    if (!ans->done)
        return;
    snprintf(r.reason, sizeof(r.reason), "%s", reason ? reason : "");
    ans->done(ans->id, ans->notes, &r);
}

/* docs/design/session.md#applying-a-config DealMonitorReq; returns the status reported (1
 * running, 0 not) and answers the config (applied, applied partly, rejected). */
int mon_do_config(const struct pconfig_monitor *cfg, const struct mon_answer *ans)
{
    struct mon_session *s = &mon.sess;
    char *dir = NULL;
    char why[MONITOR_REASON_CAP] = "", err[MONITOR_REASON_CAP] = "", refused[MONITOR_REASON_CAP];
    char names[160] = "";
    bool rejected = false, started = false;
    int status;

    if ((s->running && s->trace) || (cfg->start && !cfg->stop && mon_refusal(MON_WANT_MONITOR, 0, refused,
                                                                             sizeof(refused)))) {
        if (s->running && s->trace)
            (void)mon_refusal(MON_WANT_MONITOR, 0, refused, sizeof(refused));
        /* the window's own session must not end: the config is answered and nothing changes */
        mon_status_post(IPC_STATUS_IDLE);
        mon_answer(ans, MONITOR_REJECTED, s->running && s->trace ? "Tracing"
                   : names_ipc_status(mon.win.win.phase == WINDOW_ARMED ? IPC_STATUS_READY : IPC_STATUS_IDLE),
                   refused);
        return 0;
    }
    log_reason_begin(err, sizeof(err));
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
        if (cfg->kinds_mask && mon_enable_checked(cfg->kinds_mask, why, sizeof(why), names, sizeof(names))) {
            LOG_ERROR("MsptiMonitor: %s", why);
            /* none of the kinds asked for: refused (and a session this config started that
             * collects nothing is no session); some of them: the config applied partly */
            if (!(s->enabled_mask & cfg->kinds_mask)) {
                rejected = true;
                if (started && !s->enabled_mask)
                    (void)mon_do_stop();
            }
        }
    }
report:
    log_reason_end();
    free(dir);
    status = s->running ? 1 : 0;
    /* Queued in order on this thread: an expiry's later Idle always replaces this Running. */
    mon_status_post(status ? IPC_STATUS_RUNNING : IPC_STATUS_IDLE);
    if (rejected)
        mon_answer(ans, MONITOR_REJECTED, names_ipc_status(status), why[0] ? why : err[0] ? err : "not applied");
    else if (why[0]) {
        /* e.g. `applied, partly: Hccl not enabled (mspti could not enable Hccl: ...)` */
        char part[MONITOR_REASON_CAP];
        int room = (int)(sizeof(part) - strlen(names) - sizeof(" not enabled ()"));
        snprintf(part, sizeof(part), "%s not enabled (%.*s)", names, room > 0 ? room : 0, why);
        mon_answer(ans, MONITOR_PARTLY, names_ipc_status(status), part);
    }
    else
        mon_answer(ans, MONITOR_APPLIED, names_ipc_status(status), "");
    return status;
}


void mon_do_expire(void)
{
    LOG_INFO("MsptiMonitor run duration: %gs expired", mon.sess.duration_s);
    mon_teardown();
    mon_status_post(IPC_STATUS_IDLE); /* dyno status shows Idle, nputrace is accepted again */
}

