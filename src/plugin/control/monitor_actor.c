/* monitor_actor: the MsptiMonitor session as an actor — the actor's thread, its queue and the
 * public calls that post to it (the commands themselves: monitor_session.c, monitor_window.c).
 * One thread (the session actor) owns every piece of session state, the nputrace window
 * included; callers post commands (start, stop, config, window, kinds, interval, results)
 * into a bounded queue and wait for the result with a bounded wait. The actor also runs the report
 * ticks and the duration expiry, so nothing else ever touches the processor's control side.
 * The backend's completion threads are the only concurrent readers: they see the session only
 * through mon_deliver(), attached by the backend's start() and detached by its stop().
 *
 * No IPC happens on the actor either: npuMonitorStatus goes through a one-slot mailbox to a
 * short-lived reporter thread, newest value wins. A stale dynolog.sock (10 retries, ~10 s per
 * send) therefore delays no command and no training step (docs/plugin.md "Session actor"). */
#include "plugin/control/monitor.h"
#include "plugin/control/monitor_int.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/strutil.h"
#include "common/thr.h"
#include "msmon/ipc_wire.h"
#include "plugin/control/dynolog_link.h"
#include "plugin/pipeline/pipeline.h"
#include "plugin/plog.h"

struct mon_state mon = {
    .q_lock = PTHREAD_MUTEX_INITIALIZER,
    .be_lock = PTHREAD_MUTEX_INITIALIZER,
    .pgi_lock = PTHREAD_MUTEX_INITIALIZER,
    .art_lock = PTHREAD_MUTEX_INITIALIZER,
    .st_lock = PTHREAD_MUTEX_INITIALIZER,
    .win_lock = PTHREAD_MUTEX_INITIALIZER,
    .pub_win_phase = MON_WIN_NONE,
    .pub_win = { .state = -1, .step = -1, .start = -1, .stop = -1, .rank = -1 },
    .sess = { .fw_trace = IPC_STATUS_UNINITIALIZED },
    .win = { .win = { .phase = MON_WIN_NONE, .step = -1, .start = -1, .stop = -1 } },
};
static pthread_once_t mon_init_once = PTHREAD_ONCE_INIT;
static pthread_once_t mon_first_once = PTHREAD_ONCE_INIT;

/* ---- backend ---- */

struct backend *mon_backend(void)
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
        (void)dynolog_send_monitor_status(v);
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
void mon_status_post(int32_t status)
{
    pthread_mutex_lock(&mon.st_lock);
    mon.st_value = status;
    mon.st_pending = true;
    mon_reporter_kick_locked(status);
    pthread_mutex_unlock(&mon.st_lock);
}

static int mon_run(struct mon_cmd *c)
{
    char refused[MONITOR_REASON_CAP];

    switch (c->op) {
    case MON_OP_CONFIG:
        return mon_do_config(&c->arg.config.cfg, &c->arg.config.ans);
    case MON_OP_START:
        if (!c->arg.start.a.window && !mon.sess.running &&
            mon_refusal(MON_WANT_STANDALONE, 0, refused, sizeof(refused)))
            return -EBUSY;
        return mon_do_start(&c->arg.start.a);
    case MON_OP_ARM:
        mon_do_arm(&c->arg.arm.arm, &c->arg.arm.ans);
        return 0;
    case MON_OP_WIN_STEP:
        return mon_do_win_step(c->arg.step.step, c->arg.step.end_ns);
    case MON_OP_WIN_LEAVE:
        mon_do_win_leave(c->arg.i32);
        return 0;
    case MON_OP_WIN_TICK:
        mon_do_win_tick(&c->arg.view);
        return 0;
    case MON_OP_MEMORY:
        if (c->arg.memory.kind < 0)
            return output_held_kinds(MSMON_OUTPUT_MEMORY, c->arg.memory.kinds, MON_KIND_LIMIT, &c->arg.memory.n);
        return output_held_results(MSMON_OUTPUT_MEMORY, c->arg.memory.kind, &c->arg.memory.arr, &c->arg.memory.n);
    case MON_OP_FW_TRACE:
        mon.sess.fw_trace = c->arg.i32;
        if (c->arg.i32 == IPC_STATUS_RUNNING && mon.sess.running && !mon.sess.trace)
            LOG_WARN("nputrace reported Running while an npu-monitor session runs in this process; msPTI "
                     "allows one subscriber, stop npu-monitor before tracing");
        return 0;
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
            if (s->stop_after) {
                /* answered first, so the poller that asked does not wait for the file */
                s->stop_after = false;
                pthread_mutex_unlock(&mon.q_lock);
                (void)mon_do_stop();
                pthread_mutex_lock(&mon.q_lock);
            }
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

/* Post *tmpl and, if wait_ms > 0, wait up to wait_ms for its result (and, with ret_cmd, the
 * command as the actor left it). A command whose wait times out still runs (a config a
 * training step handed over must take effect); the caller gets -ETIMEDOUT. -EAGAIN if the
 * queue stayed full, -EDEADLK from the actor itself. */
static int mon_call_out(const struct mon_cmd *tmpl, unsigned wait_ms, struct mon_cmd *ret_cmd)
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
    if (ret_cmd)
        *ret_cmd = *c;
    c->st = MON_SLOT_FREE;
    pthread_cond_broadcast(&mon.done_cond); /* a poster may wait for a free slot */
out:
    pthread_mutex_unlock(&mon.q_lock);
    return rc;
}

static int mon_call(const struct mon_cmd *tmpl, unsigned wait_ms)
{
    return mon_call_out(tmpl, wait_ms, NULL);
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
    if (a->n_memory_kinds > MON_KIND_LIMIT) {
        free(c);
        return -EINVAL;
    }
    if (a->n_memory_kinds)
        memcpy(sc->memory_kinds, a->memory_kinds, a->n_memory_kinds * sizeof(sc->memory_kinds[0]));
    sc->a.memory_kinds = sc->memory_kinds;
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

static void mon_answer_copy(struct mon_answer *dst, const char *id, const char *notes, monitor_done_fn done)
{
    mon_copy_str(dst->id, sizeof(dst->id), id);
    mon_copy_str(dst->notes, sizeof(dst->notes), notes);
    dst->done = done;
}

int monitor_handle_config(const struct pconfig_monitor *cfg, const char *id, const char *notes, monitor_done_fn done)
{
    struct mon_cmd *c;
    int rc;

    monitor_first_use();
    c = mon_cmd_new(MON_OP_CONFIG);
    if (!c)
        return 0;
    c->arg.config.cfg = *cfg;
    mon_answer_copy(&c->arg.config.ans, id, notes, done);
    rc = mon_call(c, MON_WAIT_CONFIG_MS);
    free(c);
    /* Timed out: the config is still applied and answered by the actor; say "not running". */
    return rc == 1 ? 1 : 0;
}

int monitor_window_arm(const struct monitor_arm *a, const char *id, const char *notes, monitor_done_fn done)
{
    struct mon_cmd *c;
    int rc;

    monitor_first_use();
    c = mon_cmd_new(MON_OP_ARM);
    if (!c)
        return -ENOMEM;
    c->arg.arm.arm = *a;
    mon_answer_copy(&c->arg.arm.ans, id, notes, done);
    rc = mon_call(c, MON_WAIT_CONFIG_MS);
    free(c);
    return rc;
}

/* The poster's side of the per-step check: which transition of which window it has posted,
 * so steps that follow before the actor took it do not post it again (atomics of the
 * stepping thread, not session state). */
static _Atomic uint64_t mon_step_posted;

static uint64_t mon_step_key(int phase, int32_t start, int32_t stop)
{
    return ((uint64_t)(uint32_t)phase << 62) ^ ((uint64_t)(uint32_t)start << 31) ^ (uint32_t)stop;
}

/* The transition monitor_window_step(step) posts (its key, *ret_phase the window's phase), 0
 * when the window does not move at step or that transition is posted already. */
static uint64_t mon_step_due(int32_t step, int *ret_phase)
{
    int phase = atomic_load(&mon.pub_win_phase);
    int32_t start, stop;
    uint64_t key;

    if (phase != WINDOW_ARMED && phase != WINDOW_OPEN)
        return 0;
    start = atomic_load(&mon.pub_win_start);
    stop = atomic_load(&mon.pub_win_stop);
    if (atomic_load(&mon.pub_win_marker))
        return 0;
    if (phase == WINDOW_ARMED && step < start)
        return 0;
    if (phase == WINDOW_OPEN && step < stop)
        return 0;
    key = mon_step_key(phase, start, stop) + 1;
    if (atomic_load(&mon_step_posted) == key)
        return 0;
    *ret_phase = phase;
    return key;
}

bool monitor_window_due(int32_t step)
{
    int phase;

    return mon_step_due(step, &phase) != 0;
}

bool monitor_window_step(int32_t step)
{
    int phase = MON_WIN_NONE;
    uint64_t key = mon_step_due(step, &phase);
    struct mon_cmd *c;
    bool wait;

    if (key == 0)
        return false;
    /* opening: wait for the session, so the step's own range is collected; closing: the
     * file is written on the actor while training goes on */
    wait = phase == WINDOW_ARMED;
    c = mon_cmd_new(MON_OP_WIN_STEP);
    if (!c)
        return false;
    c->arg.step.step = step;
    c->arg.step.end_ns = clock_real_ns();
    if (mon_call(c, wait ? MON_WAIT_CALL_MS : 0) == 0 || !wait)
        atomic_store(&mon_step_posted, key);
    free(c);
    return true;
}

void monitor_window_leave(int32_t step)
{
    struct mon_cmd *c;

    if (atomic_load(&mon.pub_win_phase) == MON_WIN_NONE && !atomic_load(&mon.pub_running))
        return; /* no window ever: nothing to wake */
    c = mon_cmd_new(MON_OP_WIN_LEAVE);
    if (!c)
        return;
    c->arg.i32 = step;
    (void)mon_call(c, MON_WAIT_STOP_MS);
    free(c);
}

void monitor_window_view(struct monitor_window_view *ret)
{
    pthread_mutex_lock(&mon.win_lock);
    *ret = mon.pub_win;
    pthread_mutex_unlock(&mon.win_lock);
}

uint32_t monitor_window_epoch(void)
{
    return atomic_load(&mon.pub_win_epoch);
}

void monitor_window_tick(struct monitor_window_view *ret)
{
    struct mon_cmd *c = mon_cmd_new(MON_OP_WIN_TICK);

    if (c && mon_call_out(c, MON_WAIT_CALL_MS, c) == 0)
        *ret = c->arg.view;
    else
        monitor_window_view(ret); /* a busy actor: the view as last published */
    free(c);
}

int monitor_memory_kinds(int32_t *out, size_t cap, size_t *ret_n)
{
    struct mon_cmd *c = mon_cmd_new(MON_OP_MEMORY);
    int rc;

    if (!c)
        return -ENOMEM;
    c->arg.memory.kind = -1;
    rc = mon_call_out(c, MON_WAIT_CALL_MS, c);
    if (rc == 0 || rc == -ENOSPC) {
        *ret_n = c->arg.memory.n;
        if (c->arg.memory.n > cap)
            rc = -ENOSPC;
        else if (c->arg.memory.n)
            memcpy(out, c->arg.memory.kinds, c->arg.memory.n * sizeof(out[0]));
    }
    free(c);
    return rc;
}

int monitor_memory_results(int32_t kind, const struct msmon_result **ret_arr, size_t *ret_n)
{
    struct mon_cmd *c;
    int rc;

    if (kind < 0)
        return -EINVAL;
    c = mon_cmd_new(MON_OP_MEMORY);
    if (!c)
        return -ENOMEM;
    c->arg.memory.kind = kind;
    rc = mon_call_out(c, MON_WAIT_CALL_MS, c);
    if (rc == 0) {
        *ret_arr = c->arg.memory.arr;
        *ret_n = c->arg.memory.n;
    }
    free(c);
    return rc;
}

void monitor_set_trace_status(int32_t status)
{
    static _Atomic int32_t posted = IPC_STATUS_UNINITIALIZED - 1;

    if (atomic_exchange(&posted, status) == status)
        return; /* unchanged: no command (a framework may report every step) */
    (void)mon_call_simple(MON_OP_FW_TRACE, (uint32_t)status, 0);
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
