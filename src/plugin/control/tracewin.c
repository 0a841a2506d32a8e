/* tracewin: the nputrace window's session and options (tracewin.h). The window's records go
 * through the same backend and pipeline as npu-monitor, into proc_trace; one subscriber per
 * process is why a window and an npu-monitor session exclude each other here too. */
#include "plugin/control/tracewin.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/strutil.h"
#include "contract/cfgkeys.h"
#include "msmon/ipc_wire.h"
#include "msmon/msmonitor.h"
#include "plugin/control/monitor.h"
#include "plugin/penv.h"
#include "plugin/pipeline/output.h"

/* No window yet: msmon_dynamic_trace_info() reports state -1 until the first one; the status
 * the IPC sees is Idle. window_advance leaves this phase alone. */
#define TW_NONE (-1)

static struct {
    pthread_mutex_t lock;
    /* The one window of the process: step-bounded (moved by tracewin_step) or, for a native
     * window, the session's window stage as the poller's tick last read it. */
    struct window_state win;
    int32_t rank;
    uint32_t windows;
    bool session;                 /* a window session of ours runs */
    bool native;                  /* that session is a marker-delimited window (no step call) */
    struct tracewin_cfg cfg;      /* the armed window's options */
    /* Bumped (under the lock) whenever what msmon_dynamic_trace_info() reports changes, but
     * for the step: the Python side reads the window at a step only when it moved. */
    _Atomic uint32_t epoch;
} tw = { .lock = PTHREAD_MUTEX_INITIALIZER, .win = { .phase = TW_NONE, .step = -1, .start = -1, .stop = -1 } };

/* The IPC status value of a window (lock held). */
static int32_t tw_status_of(const struct window_state *w)
{
    return w->phase == WINDOW_ARMED ? IPC_STATUS_READY : w->phase == WINDOW_OPEN ? IPC_STATUS_RUNNING : IPC_STATUS_IDLE;
}

static bool tw_busy(const struct window_state *w)
{
    return w->phase == WINDOW_ARMED || w->phase == WINDOW_OPEN;
}

/* What msmon_dynamic_trace_info() reports changed (lock held). */
static void tw_moved(void)
{
    atomic_fetch_add_explicit(&tw.epoch, 1, memory_order_relaxed);
}

/* The one refusal line of a second config while a window is armed or running (lock held). */
static int tw_refuse_busy(const char *prefix, int32_t rank)
{
    if (!tw_busy(&tw.win))
        return 0;
    LOG_ERROR("%snputrace config ignored on rank %d: a window [%d, %d) is already %s", prefix, (int)rank,
              (int)tw.win.start, (int)tw.win.stop, tw.win.phase == WINDOW_OPEN ? "running" : "armed");
    return -EBUSY;
}

static bool tw_rank_listed(const char *list, int32_t rank)
{
    char want[16];
    const char *p = list;

    snprintf(want, sizeof(want), "%d", (int)rank);
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        const char *item = p;
        str_trim_view(&item, &n, KVTEXT_WS);
        if (n > 0 && n == strlen(want) && memcmp(item, want, n) == 0)
            return true;
        if (!comma)
            break;
        p = comma + 1;
    }
    return false;
}

static const char *tw_get(const struct kvtext *kv, const char *key, const char *dflt)
{
    const char *v = kvtext_get(kv, key);

    return v ? v : dflt;
}

int tracewin_rule(const struct kvtext *kv, int32_t rank, int32_t step, struct window_state *ret)
{
    const char *is_rank = tw_get(kv, "PROFILE_IS_RANK", "false");
    const char *start_s = tw_get(kv, "PROFILE_START_STEP", "-1");
    const char *iters_s = tw_get(kv, "ACTIVITIES_ITERATIONS", "1");
    int32_t start, iters;

    if (cfgkeys_true(is_rank) && !tw_rank_listed(tw_get(kv, "PROFILE_RANK_LIST", ""), rank)) {
        LOG_INFO("dynamic_profile: nputrace config not for rank %d (PROFILE_RANK_LIST '%s')", (int)rank,
                 tw_get(kv, "PROFILE_RANK_LIST", ""));
        return 0;
    }
    if (kvtext_int(start_s, &start) != 0 || kvtext_int(iters_s, &iters) != 0) {
        LOG_ERROR("dynamic_profile: nputrace config ignored: PROFILE_START_STEP='%s' ACTIVITIES_ITERATIONS='%s'",
                  start_s, iters_s);
        return -EINVAL;
    }
    if (start >= 0 && start <= step) {
        /* Tracing other steps than asked would break the alignment of the ranks' traces. */
        LOG_ERROR("dynamic_profile: nputrace config ignored on rank %d: start step %d already passed (now at "
                  "step %d)", (int)rank, (int)start, (int)step);
        return -ERANGE;
    }
    if (start < 0)
        start = step + 1;
    if (iters < 1)
        iters = 1;
    if (start > INT32_MAX - iters)
        iters = INT32_MAX - start;
    *ret = (struct window_state){ .phase = WINDOW_ARMED, .step = step, .start = start, .stop = start + iters };
    LOG_INFO("dynamic_profile: nputrace ready: steps [%d, %d)", (int)ret->start, (int)ret->stop);
    return 1;
}

uint32_t tracewin_flags(const struct kvtext *kv)
{
    static const struct { const char *key; uint32_t bit; } bools[] = {
        { CFGKEY_PROFILE_ANALYSE, TRACEWIN_ANALYSE },
        { CFGKEY_PROFILE_ASYNC_MODE, TRACEWIN_ASYNC },
        { CFGKEY_PROFILE_RECORD_SHAPES, TRACEWIN_RECORD_SHAPES },
        { CFGKEY_PROFILE_PROFILE_MEMORY, TRACEWIN_PROFILE_MEMORY },
        { CFGKEY_PROFILE_WITH_STACK, TRACEWIN_WITH_STACK },
        { CFGKEY_PROFILE_WITH_FLOPS, TRACEWIN_WITH_FLOPS },
        { CFGKEY_PROFILE_WITH_MODULES, TRACEWIN_WITH_MODULES },
    };
    const char *act = kvtext_get(kv, CFGKEY_PROFILE_ACTIVITIES);
    const char *exp = kvtext_get(kv, CFGKEY_PROFILE_EXPORT_TYPE);
    uint32_t f = 0;

    for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++)
        if (cfgkeys_true(kvtext_get(kv, bools[i].key)))
            f |= bools[i].bit;
    if (!act)
        act = "CPU,NPU"; /* the CLI default */
    if (strstr(act, "CPU"))
        f |= TRACEWIN_CPU;
    if (strstr(act, "NPU"))
        f |= TRACEWIN_NPU;
    if (exp && strcasecmp(exp, "Db") == 0)
        f |= TRACEWIN_EXPORT_DB;
    return f;
}

int tracewin_parse(const struct kvtext *kv, struct tracewin_cfg *ret)
{
    const char *path = kvtext_get(kv, CFGKEY_ACTIVITIES_LOG_FILE);
    struct stat st;
    int rc;

    memset(ret, 0, sizeof(*ret));
    ret->flags = tracewin_flags(kv);
    if (!path || !path[0]) {
        LOG_ERROR("nputrace config ignored: %s is missing or empty", CFGKEY_ACTIVITIES_LOG_FILE);
        return -EINVAL;
    }
    /* A symlink could point the trace of a privileged job anywhere: refused outright. */
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        LOG_ERROR("nputrace config ignored: --log-file '%s' is a symbolic link", path);
        return -ELOOP;
    }
    if (lstat(path, &st) == 0 && !S_ISDIR(st.st_mode)) {
        LOG_ERROR("nputrace config ignored: --log-file '%s' exists and is not a directory", path);
        return -ENOTDIR;
    }
    rc = output_prepare_dir(MSMON_OUTPUT_TRACE, path, ret->log_dir, sizeof(ret->log_dir)); /* logs the reason */
    if (rc != 0) {
        LOG_ERROR("nputrace config ignored: --log-file '%s' is not a writable directory: %s", path, strerror(-rc));
        return rc;
    }
    return 0;
}

int tracewin_align(struct kvtext *kv, int32_t max_step, char *buf, size_t cap)
{
    const char *v = kvtext_get(kv, CFGKEY_PROFILE_START_STEP);
    int64_t start = -1;
    int rc;

    if (cfgkeys_classify(kv->keys, kv->n) != CFGKEYS_NPU_TRACE)
        return 0;
    if (v && (str_to_i64(v, &start) != 0 || start != -1))
        return 0; /* an explicit step is the same on every rank already */
    if (max_step > INT32_MAX - TRACEWIN_ALIGN_STEPS - 1)
        return 0;
    snprintf(buf, cap, "%d", (int)(max_step + TRACEWIN_ALIGN_STEPS));
    rc = kvtext_put(kv, CFGKEY_PROFILE_START_STEP, buf);
    if (rc != 0)
        return rc;
    LOG_INFO("nputrace: start step -1 aligned for every rank to step %s (highest rank step %d + %d)", buf,
             (int)max_step, TRACEWIN_ALIGN_STEPS);
    return 1;
}

/* native: a marker-delimited window (start -1: `iters` steps from the first that begins). */
static int tw_begin(const struct tracewin_cfg *c, int32_t start, int32_t stop, int32_t rank, bool native,
                    int32_t iters)
{
    const char *be_name = "", *be_lib = "";
    const char *ws = penv_get(PENV_WORLD_SIZE);
    struct output_trace_opts opts = { 0 };
    struct window_opts win = { .start_step = start, .stop_step = stop, .marker_steps = native, .iterations = iters };
    /* --export-type Db: the DB is a second output of the window's session */
    struct monitor_start_args a = { .output = MSMON_OUTPUT_TRACE, .log_dir = c->log_dir, .standalone = true,
                                    .also = c->flags & TRACEWIN_EXPORT_DB ? MSMON_OUTPUT_BIT(MSMON_OUTPUT_DB) : 0,
                                    .kinds_mask = TRACEWIN_KINDS, .trace = &opts, .window = &win,
                                    .flush_ms = native ? TRACEWIN_NATIVE_FLUSH_MS : 0 };
    int64_t w = 0;
    int rc;

    pthread_mutex_lock(&tw.lock);
    tw.windows++;
    tw_moved();
    pthread_mutex_unlock(&tw.lock);
    if (!(c->flags & TRACEWIN_NPU)) {
        LOG_INFO("nputrace: steps [%d, %d): PROFILE_ACTIVITIES has no NPU; no device trace from libmsmonitor",
                 (int)start, (int)stop);
        return 0;
    }
    if (monitor_running() && !monitor_tracing()) { /* a trace still being written is queued before us */
        LOG_ERROR("nputrace refused on rank %d: npu-monitor is running in this process (one activity "
                  "subscriber); stop it with dyno npu-monitor --npu-monitor-stop first", (int)rank);
        return -EBUSY;
    }
    if (monitor_backend_info(&be_name, &be_lib) != 0) {
        LOG_ERROR("nputrace: steps [%d, %d) not traced: no msPTI or CUPTI library found", (int)start, (int)stop);
        return -ENOENT;
    }
    if (ws && str_to_i64(ws, &w) == 0 && w > 0 && w <= INT32_MAX)
        opts.world_size = (int32_t)w;
    opts.backend = be_name;
    rc = monitor_start(&a);
    if (rc != 0) {
        LOG_ERROR("nputrace: steps [%d, %d) not traced: the collection did not start: %s", (int)start, (int)stop,
                  errno_name(-rc));
        return rc;
    }
    pthread_mutex_lock(&tw.lock);
    tw.session = true;
    tw.native = native;
    pthread_mutex_unlock(&tw.lock);
    if (native && start < 0)
        LOG_INFO("nputrace: armed for steps [first, first + %d) on rank %d (%s), delimited by the program's "
                 "`step <N>` marker ranges", (int)iters, (int)rank, be_name);
    else if (native)
        LOG_INFO("nputrace: armed for steps [%d, %d) on rank %d (%s), delimited by the program's `step <N>` "
                 "marker ranges", (int)start, (int)stop, (int)rank, be_name);
    else
        LOG_INFO("nputrace: tracing steps [%d, %d) on rank %d (%s)", (int)start, (int)stop, (int)rank, be_name);
    return 0;
}

/* End our window session at step `step` (early: the job is leaving mid-window; waits for the
 * partial trace). */
static void tw_end(int32_t step, bool early)
{
    bool ours;

    pthread_mutex_lock(&tw.lock);
    ours = tw.session;
    tw.session = false;
    pthread_mutex_unlock(&tw.lock);
    if (!ours || !monitor_tracing())
        return;
    if (early) {
        LOG_WARN("nputrace: the job is leaving at step %d inside the window; the partial trace is written",
                 (int)step);
        (void)monitor_stop(); /* wait: the process is about to exit */
        return;
    }
    /* The window ends now; the flush and the file write run on the session thread. */
    uint64_t end = clock_real_ns();
    if (monitor_end_window(end, false) != 0)
        (void)monitor_end_window(end, true);
}

/* ---- a program with a step call: the step-bounded window (dynamic.c) ---- */

int tracewin_arm(const struct kvtext *kv, int32_t rank, int32_t step)
{
    struct window_state w;
    struct tracewin_cfg c;
    int rc;

    pthread_mutex_lock(&tw.lock);
    rc = tw_refuse_busy("dynamic_profile: ", rank);
    pthread_mutex_unlock(&tw.lock);
    if (rc != 0)
        return rc;
    if (tracewin_rule(kv, rank, step, &w) != 1 || tracewin_parse(kv, &c) != 0)
        return -EINVAL;
    pthread_mutex_lock(&tw.lock);
    tw.win = w;
    tw.cfg = c;
    tw.rank = rank;
    tw_moved();
    pthread_mutex_unlock(&tw.lock);
    return 0;
}

bool tracewin_step(int32_t step)
{
    struct window_state w;
    struct tracewin_cfg c;
    int32_t rank;
    int was;
    bool changed;

    pthread_mutex_lock(&tw.lock);
    if (tw.win.marker_steps) { /* moved by the program's own `step <N>` ranges instead */
        pthread_mutex_unlock(&tw.lock);
        return false;
    }
    was = tw.win.phase;
    changed = window_advance(&tw.win, step);
    tw.win.step = step;
    if (!changed) { /* every step but a window's first and last: nothing to copy */
        pthread_mutex_unlock(&tw.lock);
        return false;
    }
    tw_moved();
    w = tw.win;
    c = tw.cfg; /* 4 KiB (the log directory): only when the window moves */
    rank = tw.rank;
    pthread_mutex_unlock(&tw.lock);
    if (was == WINDOW_OPEN || w.phase != WINDOW_OPEN)
        tw_end(step, false);
    if (w.phase == WINDOW_OPEN && tw_begin(&c, w.start, w.stop, rank, false, 0) != 0) {
        pthread_mutex_lock(&tw.lock);
        tw.win.phase = WINDOW_CLOSED; /* refused: the line says why; status goes Idle */
        tw_moved();
        pthread_mutex_unlock(&tw.lock);
    }
    return true;
}

int tracewin_step_nowait(int32_t step)
{
    struct window_state w;
    int rc = 0;

    pthread_mutex_lock(&tw.lock);
    w = tw.win;
    if (!tw.win.marker_steps && window_advance(&w, step))
        rc = -EAGAIN;
    else if (!tw.win.marker_steps)
        tw.win.step = step;
    pthread_mutex_unlock(&tw.lock);
    return rc;
}

void tracewin_leave(int32_t step)
{
    bool running;

    pthread_mutex_lock(&tw.lock);
    running = tw.win.phase == WINDOW_OPEN && !tw.win.marker_steps;
    pthread_mutex_unlock(&tw.lock);
    if (running)
        tw_end(step, true); /* the partial window is written, valid */
    pthread_mutex_lock(&tw.lock);
    if (tw.win.phase != WINDOW_CLOSED)
        tw_moved();
    tw.win.phase = WINDOW_CLOSED;
    tw.win.step = step;
    pthread_mutex_unlock(&tw.lock);
}

void tracewin_status(struct tracewin_status *ret)
{
    pthread_mutex_lock(&tw.lock);
    ret->status = tw_status_of(&tw.win);
    ret->step = tw.win.step;
    ret->start = tw_busy(&tw.win) ? tw.win.start : -1;
    ret->stop = tw_busy(&tw.win) ? tw.win.stop : -1;
    pthread_mutex_unlock(&tw.lock);
}

/* ---- a program without a step call: the native poller's window ---- */

int tracewin_native_config(const char *text, size_t len, int32_t rank)
{
    struct kvtext kv;
    struct tracewin_cfg c;
    struct window_state w;
    int32_t iters = 1, step;
    int rc;

    pthread_mutex_lock(&tw.lock);
    rc = tw_refuse_busy("", rank);
    step = tw.win.step;
    pthread_mutex_unlock(&tw.lock);
    if (rc != 0)
        return rc;
    rc = kvtext_parse(text, len, &kv);
    if (rc != 0)
        goto out;
    /* The step is the last `step <N>` seen in an earlier window (-1: none); a start step
     * that has passed without our knowing is refused when the first step is seen. */
    rc = tracewin_rule(&kv, rank, step, &w);
    if (rc != 1)
        goto out;
    rc = tracewin_parse(&kv, &c);
    if (rc != 0)
        goto out;
    {
        const char *v = kvtext_get(&kv, CFGKEY_PROFILE_START_STEP);
        int64_t s = -1;
        iters = w.stop - w.start;
        if (!v || (str_to_i64(v, &s) == 0 && s < 0))
            w.start = w.stop = -1; /* resolved by the first step that begins */
    }
    rc = tw_begin(&c, w.start, w.stop, rank, true, iters);
    if (rc == 0 && !(c.flags & TRACEWIN_NPU))
        goto out; /* nothing to collect: stays Idle */
    if (rc == 0) {
        w.marker_steps = true;
        pthread_mutex_lock(&tw.lock);
        tw.win = w;
        tw.cfg = c;
        tw.rank = rank;
        tw_moved();
        pthread_mutex_unlock(&tw.lock);
    }
out:
    kvtext_fini(&kv);
    return rc < 0 ? rc : 0;
}

void tracewin_native_tick(int32_t *ret_status, int32_t *ret_step, int32_t *ret_start, int32_t *ret_stop)
{
    struct window_state m = { .step = -1, .start = -1, .stop = -1, .phase = WINDOW_ARMED };
    bool ours, stop = false;

    pthread_mutex_lock(&tw.lock);
    struct window_state before = tw.win;
    ours = tw.session && tw.native;
    if (ours && monitor_tracing() && monitor_window(&m) == 0) {
        /* the session's window stage moves a marker-bounded window; ours mirrors it */
        if (m.step < 0)
            m.step = tw.win.step;
        m.marker_steps = true;
        tw.win = m;
        stop = !tw_busy(&tw.win);
    } else if (ours || tw.native) {
        tw.win.phase = WINDOW_CLOSED; /* the session ended (job exit, a stop): nothing armed */
    }
    if (stop || (ours && !monitor_tracing())) {
        tw.session = false;
        tw.native = false;
    }
    if (tw.win.phase != before.phase || tw.win.start != before.start || tw.win.stop != before.stop)
        tw_moved();
    *ret_status = tw_status_of(&tw.win);
    *ret_step = tw.win.step;
    *ret_start = tw_busy(&tw.win) ? tw.win.start : -1;
    *ret_stop = tw_busy(&tw.win) ? tw.win.stop : -1;
    pthread_mutex_unlock(&tw.lock);
    /* The trace is written on the session thread; the poller does not wait for it. */
    if (stop && monitor_stop_nowait() != 0)
        (void)monitor_stop();
}

MSMON_API int msmon_dynamic_trace_info(struct msmon_trace_info *ret)
{
    if (!ret)
        return -EINVAL;
    memset(ret, 0, sizeof(*ret));
    pthread_mutex_lock(&tw.lock);
    ret->state = tw.win.phase == TW_NONE ? -1 : tw_status_of(&tw.win);
    ret->start_step = tw.win.start;
    ret->stop_step = tw.win.stop;
    ret->step = tw.win.step;
    ret->rank = tw.rank;
    ret->flags = tw.cfg.flags;
    ret->windows = tw.windows;
    snprintf(ret->log_dir, sizeof(ret->log_dir), "%s", tw.cfg.log_dir);
    monitor_last_artifact(ret->last_trace, sizeof(ret->last_trace));
    pthread_mutex_unlock(&tw.lock);
    return 0;
}

MSMON_API uint32_t msmon_dynamic_trace_epoch(void)
{
    return atomic_load_explicit(&tw.epoch, memory_order_relaxed);
}
