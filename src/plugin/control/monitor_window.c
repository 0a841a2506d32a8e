/* monitor_window: the nputrace window's commands, run on the session actor (monitor_int.h):
 * its arm, its steps, the job leaving, the native poller's tick, and the view the actor
 * publishes for the stepping thread and the status readers. */
#include "plugin/control/monitor.h"
#include "plugin/control/monitor_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/strutil.h"
#include "contract/names.h"
#include "msmon/ipc_wire.h"
#include "plugin/penv.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/pipeline.h"

bool mon_win_busy(void)
{
    return mon.win.win.phase == WINDOW_ARMED || mon.win.win.phase == WINDOW_OPEN;
}

/* ---- the nputrace window (actor) ---- */

/* Kinds a window collects: every user-visible kind (8, external correlation, never). */
#define MON_WINDOW_KINDS 0x1EFEu
/* The backend flush period of a marker-bounded window: how soon its step ranges are seen. */
#define MON_NATIVE_FLUSH_MS 200

static int32_t mon_win_status(const struct window_state *w)
{
    return w->phase == WINDOW_ARMED ? IPC_STATUS_READY : w->phase == WINDOW_OPEN ? IPC_STATUS_RUNNING
                                                                                : IPC_STATUS_IDLE;
}

/* The window as the actor leaves it: bounds first, the phase last, so a stepping thread that
 * sees the phase sees its bounds. The epoch moves after the view when anything but its step
 * changed, so a reader that sees the new epoch reads the new view (the Python side reads the
 * view only then: docs/benchmarks.md#the-always-on-cost-of-a-step). */
static void mon_win_publish(void)
{
    const struct mon_window *mw = &mon.win;
    struct monitor_window_view *v = &mon.pub_win;
    int32_t state = mw->win.phase == MON_WIN_NONE ? -1 : mon_win_status(&mw->win);
    bool moved;

    pthread_mutex_lock(&mon.win_lock);
    moved = v->state != state || v->start != mw->win.start || v->stop != mw->win.stop || v->rank != mw->rank ||
            v->flags != mw->opts.flags || v->windows != mw->windows || strcmp(v->log_dir, mw->log_dir) != 0;
    v->state = state;
    v->step = mw->win.step;
    v->start = mw->win.start;
    v->stop = mw->win.stop;
    v->rank = mw->rank;
    v->flags = mw->opts.flags;
    v->windows = mw->windows;
    snprintf(v->log_dir, sizeof(v->log_dir), "%s", mw->log_dir);
    pthread_mutex_unlock(&mon.win_lock);
    if (moved)
        atomic_fetch_add(&mon.pub_win_epoch, 1);
    atomic_store(&mon.pub_win_start, mw->win.start);
    atomic_store(&mon.pub_win_stop, mw->win.stop);
    atomic_store(&mon.pub_win_marker, mw->win.marker_steps);
    atomic_store(&mon.pub_win_phase, mw->win.phase);
}

/* ACTIVITIES_LOG_FILE as a directory the window may write: a symlink could point the trace
 * of a privileged job anywhere, so it is refused outright. 0 or -errno (one ERROR). */
static int mon_win_dir(const char *path, char *ret, size_t cap)
{
    struct stat st;
    int rc;

    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        LOG_ERROR("nputrace config ignored: --log-file '%s' is a symbolic link", path);
        return -ELOOP;
    }
    if (lstat(path, &st) == 0 && !S_ISDIR(st.st_mode)) {
        LOG_ERROR("nputrace config ignored: --log-file '%s' exists and is not a directory", path);
        return -ENOTDIR;
    }
    rc = output_prepare_dir(MSMON_OUTPUT_TRACE, path, ret, cap); /* logs the reason */
    if (rc != 0)
        LOG_ERROR("nputrace config ignored: --log-file '%s' is not a writable directory: %s", path, strerror(-rc));
    return rc;
}

/* The window's collection session (every kind, the trace output, plus the DB with
 * --export-type Db); native: a marker-delimited window (start -1: `iters` steps from the
 * first that begins). 0 also when there is nothing to collect (no NPU activities). */
static int mon_win_begin(int32_t start, int32_t stop, bool native, int32_t iters)
{
    struct mon_window *mw = &mon.win;
    const char *be_name = "", *be_lib = "", *ws = penv_get(PENV_WORLD_SIZE);
    struct output_trace_opts opts = { 0 };
    struct window_opts wo = { .start_step = start, .stop_step = stop, .marker_steps = native, .iterations = iters };
    struct monitor_start_args a = { .output = MSMON_OUTPUT_TRACE, .log_dir = mw->log_dir, .standalone = true,
                                    .also = mw->opts.flags & PCONFIG_TRACE_EXPORT_DB ? MSMON_OUTPUT_BIT(MSMON_OUTPUT_DB)
                                                                                    : 0,
                                    .kinds_mask = MON_WINDOW_KINDS, .trace = &opts, .window = &wo,
                                    .flush_ms = native ? MON_NATIVE_FLUSH_MS : 0 };
    char refused[MONITOR_REASON_CAP];
    int64_t w = 0;
    int rc;

    mw->windows++;
    if (!(mw->opts.flags & PCONFIG_TRACE_NPU)) {
        LOG_INFO("nputrace: steps [%d, %d): PROFILE_ACTIVITIES has no NPU; no device trace from libmsmonitor",
                 (int)start, (int)stop);
        return 0;
    }
    if (mon_refusal(MON_WANT_WINDOW_OPEN, mw->rank, refused, sizeof(refused)))
        return -EBUSY;
    if (monitor_backend_info(&be_name, &be_lib) != 0) {
        LOG_ERROR("nputrace: steps [%d, %d) not traced: no msPTI or CUPTI library found", (int)start, (int)stop);
        return -ENOENT;
    }
    if (ws && str_to_i64(ws, &w) == 0 && w > 0 && w <= INT32_MAX)
        opts.world_size = (int32_t)w;
    opts.backend = be_name;
    rc = mon_do_start(&a);
    if (rc != 0) {
        LOG_ERROR("nputrace: steps [%d, %d) not traced: the collection did not start: %s", (int)start, (int)stop,
                  errno_name(-rc));
        return rc;
    }
    mw->session = true;
    if (native && start < 0)
        LOG_INFO("nputrace: armed for steps [first, first + %d) on rank %d (%s), delimited by the program's "
                 "`step <N>` marker ranges", (int)iters, (int)mw->rank, be_name);
    else if (native)
        LOG_INFO("nputrace: armed for steps [%d, %d) on rank %d (%s), delimited by the program's `step <N>` "
                 "marker ranges", (int)start, (int)stop, (int)mw->rank, be_name);
    else
        LOG_INFO("nputrace: tracing steps [%d, %d) on rank %d (%s)", (int)start, (int)stop, (int)mw->rank, be_name);
    return 0;
}

/* End the window's session: at end_ns (its records starting later are left out), or early
 * (the job leaves mid-window: the partial trace is written, one WARNING). */
static void mon_win_end(int32_t step, bool early, uint64_t end_ns)
{
    struct mon_window *mw = &mon.win;

    if (!mw->session)
        return;
    mw->session = false;
    if (!mon.sess.running || !mon.sess.trace)
        return;
    if (early) {
        LOG_WARN("nputrace: the job is leaving at step %d inside the window; the partial trace is written", (int)step);
        (void)mon_do_stop();
        return;
    }
    (void)mon_do_end_window(end_ns);
}

/* An nputrace config (docs/design/session.md#the-window): the exclusion, the rank selection,
 * the start step (-1: the creator's aligned step, else the next), the directory; a native
 * window's session starts now. Answered with Ready, Idle (not for this rank) or the refusal. */
void mon_do_arm(const struct monitor_arm *a, const struct mon_answer *ans)
{
    struct mon_window *mw = &mon.win;
    const struct pconfig_trace *o = &a->opts;
    struct window_state w;
    char why[MONITOR_REASON_CAP] = "", note[MONITOR_REASON_CAP];
    int32_t start = o->start_step, iters = o->iterations;
    /* native: the last `step <N>` an earlier window saw (-1 none); a start that has passed
     * without our knowing is refused when the first step is seen */
    int32_t step = a->native ? mw->win.step : a->step;
    int rc;

    if (mon_refusal(MON_WANT_WINDOW_ARM, a->rank, why, sizeof(why))) {
        mon_answer(ans, MONITOR_REJECTED, names_ipc_status(mon_win_status(&mw->win)), why);
        return;
    }
    if (!pconfig_trace_for_rank(o, a->rank)) {
        snprintf(note, sizeof(note), "not for rank %d (PROFILE_RANK_LIST '%.128s')", (int)a->rank, o->rank_list);
        LOG_INFO("dynamic_profile: nputrace config %s", note);
        mon_answer(ans, MONITOR_APPLIED, names_ipc_status(IPC_STATUS_IDLE), note);
        return;
    }
    log_reason_begin(why, sizeof(why));
    if (start < 0 && a->aligned >= 0 && !a->native) {
        start = a->aligned;
        LOG_INFO("nputrace: start step -1 aligned for every rank to step %d", (int)start);
    }
    if (start >= 0 && start <= step) {
        /* tracing other steps than asked would break the alignment of the ranks' traces */
        LOG_ERROR("dynamic_profile: nputrace config ignored on rank %d: start step %d already passed (now at "
                  "step %d)", (int)a->rank, (int)start, (int)step);
        rc = -ERANGE;
        goto out;
    }
    if (start < 0)
        start = step + 1;
    if (start > INT32_MAX - iters)
        iters = INT32_MAX - start;
    w = (struct window_state){ .phase = WINDOW_ARMED, .step = step, .start = start, .stop = start + iters };
    rc = mon_win_dir(o->log_file, mw->log_dir, sizeof(mw->log_dir));
    if (rc != 0)
        goto out;
    mw->opts = *o;
    mw->rank = a->rank;
    if (a->native) {
        if (o->start_step < 0)
            w.start = w.stop = -1; /* resolved by the first step that begins */
        rc = mon_win_begin(w.start, w.stop, true, iters);
        if (rc != 0)
            goto out;
        if (!(o->flags & PCONFIG_TRACE_NPU))
            goto out; /* nothing to collect: stays Idle */
        w.marker_steps = true;
    } else {
        LOG_INFO("dynamic_profile: nputrace ready: steps [%d, %d)", (int)w.start, (int)w.stop);
    }
    mw->win = w;
out:
    log_reason_end();
    mon_win_publish();
    if (rc != 0)
        mon_answer(ans, MONITOR_REJECTED, names_ipc_status(mon_win_status(&mw->win)), why[0] ? why : "not applied");
    else
        mon_answer(ans, MONITOR_APPLIED, names_ipc_status(mon_win_status(&mw->win)), "");
}

/* The stepping thread's step `step`: the window opens at its start (its session begins; a
 * refused begin leaves it Idle, logged) and closes at its stop. 1 when the status changed. */
int mon_do_win_step(int32_t step, uint64_t end_ns)
{
    struct mon_window *mw = &mon.win;
    int was = mw->win.phase;
    bool changed;

    if (mw->win.marker_steps || was == MON_WIN_NONE)
        return 0; /* moved by the program's own `step <N>` ranges instead */
    changed = window_advance(&mw->win, step);
    mw->win.step = step;
    if (changed && (was == WINDOW_OPEN || mw->win.phase != WINDOW_OPEN))
        mon_win_end(step, false, end_ns);
    if (changed && mw->win.phase == WINDOW_OPEN && mon_win_begin(mw->win.start, mw->win.stop, false, 0) != 0)
        mw->win.phase = WINDOW_CLOSED; /* refused: the line says why; status goes Idle */
    mon_win_publish();
    return changed ? 1 : 0;
}

void mon_do_win_leave(int32_t step)
{
    struct mon_window *mw = &mon.win;

    if (mw->win.phase == WINDOW_OPEN && !mw->win.marker_steps)
        mon_win_end(step, true, 0); /* the partial window is written, valid */
    mw->win.phase = WINDOW_CLOSED;
    mw->win.step = step;
    mon_win_publish();
}

/* The native poller's tick: a marker-bounded window mirrors its session's window stage; once
 * closed, the session stops after the answer (its file is written here, not waited for). */
void mon_do_win_tick(struct monitor_window_view *ret)
{
    struct mon_window *mw = &mon.win;
    struct mon_session *s = &mon.sess;
    struct window_state m = { .step = -1, .start = -1, .stop = -1, .phase = WINDOW_ARMED };
    bool ours = mw->session && mw->win.marker_steps;

    if (ours && s->running && s->trace && pipeline_window(s->pl, &m) == 0) {
        if (m.step < 0)
            m.step = mw->win.step;
        m.marker_steps = true;
        mw->win = m;
        if (!mon_win_busy()) {
            mw->session = false;
            s->stop_after = true;
        }
    } else if (mw->win.marker_steps) {
        mw->win.phase = WINDOW_CLOSED; /* the session ended (job exit, a stop): nothing armed */
        mw->session = false;
    }
    mon_win_publish();
    monitor_window_view(ret);
}

