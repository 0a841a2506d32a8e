/* monitor: the MsptiMonitor session. Locks, outermost first: session_lock (start, stop,
 * config handling) → proc_lock (calls into the processor from the config path and the timer
 * thread) → lock (timer state, condition variable). The completion path only takes cb_lock
 * shared, once per buffer, so teardown can detach the processor safely.
 *
 * Expiry runs on the timer thread without session_lock: under `lock` it marks the session
 * `expiring` unless a stop was already requested; session_lock holders that see `expiring`
 * join the thread, which finishes the teardown. That way nobody waits for a lock the other
 * side holds. A session_lock holder that works on the running session (filter, kinds) first
 * takes a hold (mon_hold); a due expiry waits until the hold is released, so the teardown
 * never runs under a replace_kinds that is still using the processor. */
#include "plugin/control/monitor.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/strutil.h"
#include "contract/rank.h"
#include "msmon/ipc_wire.h"
#include "plugin/backend/bufpool.h"
#include "plugin/control/dyno.h"
#include "plugin/pipeline/filter.h"
#include "plugin/outputs/outfile.h"
#include "plugin/penv.h"
#include "plugin/plog.h"

#define MON_BATCH 256

struct mon_state {
    pthread_mutex_t session_lock;
    pthread_mutex_t proc_lock;
    pthread_mutex_t lock;
    pthread_cond_t cond;          /* CLOCK_MONOTONIC */
    pthread_rwlock_t cb_lock;     /* completion path (shared) vs. processor detach */

    struct backend loaded;        /* dlopen'ed backend, kept for the process */
    bool loaded_ok;
    const struct backend *test_be;
    const struct proc_ops *test_ops[PROC_STANDALONE + 1];

    /* session (written under session_lock [+ lock for the flags]) */
    const struct backend *be;     /* read by the completion path */
    const struct proc_ops *ops;
    struct proc *proc;
    struct bufpool *pool;         /* created once, never freed: late completions return to it */
    struct filter_state *filter;  /* created once */
    msptiSubscriberHandle sub;
    uint32_t enabled_mask;
    double duration_s;
    bool standalone;

    /* timer thread state (under lock) */
    bool running, expiring, stop_req, thread_joinable;
    unsigned holds;               /* session_lock holders using the running session */
    pthread_t thread;
    uint32_t interval_s;
    bool interval_changed;
    uint64_t deadline_ns;         /* monotonic; 0 = none */

    int32_t trace_status;
    char *parallel_group_info;    /* under lock: the expiry teardown does not hold session_lock */
    struct log_ratelimit next_rl;
};

static struct mon_state mon = {
    .session_lock = PTHREAD_MUTEX_INITIALIZER,
    .proc_lock = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .cb_lock = PTHREAD_RWLOCK_INITIALIZER,
    .trace_status = IPC_STATUS_UNINITIALIZED,
};
static pthread_once_t mon_cond_once = PTHREAD_ONCE_INIT;
static pthread_once_t mon_first_once = PTHREAD_ONCE_INIT;

static void mon_cond_init(void)
{
    pthread_condattr_t a;

    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&mon.cond, &a);
    pthread_condattr_destroy(&a);
}

static const struct backend *mon_backend(void)
{
    if (mon.test_be)
        return mon.test_be;
    if (!mon.loaded_ok)
        mon.loaded_ok = backend_mspti_load(&mon.loaded) == 0; /* retried at every start */
    return mon.loaded_ok ? &mon.loaded : NULL;
}

static void mon_do_first_use(void)
{
    const struct backend *be;

    plog_init();
    pthread_mutex_lock(&mon.session_lock);
    be = mon_backend();
    if (be && be->disable_marker_domain)
        (void)be->disable_marker_domain("communication"); /* hide HCCL's internal markers */
    pthread_mutex_unlock(&mon.session_lock);
}

void monitor_first_use(void)
{
    pthread_once(&mon_first_once, mon_do_first_use);
}

/* ---- completion path (msPTI threads) ---- */

static void mon_request_cb(uint8_t **buf, size_t *size, size_t *max_records)
{
    *max_records = 0;
    *buf = bufpool_get(mon.pool, size);
}

/* Filter and consume one batch: the filter reads its snapshot once per batch. */
static void mon_flush_batch(struct filter_state *fs, struct mon_record *batch, size_t n)
{
    if (fs)
        n = filter_state_apply(fs, batch, n);
    if (n)
        mon.ops->consume(mon.proc, batch, n);
}

static void mon_consume_buffer(const struct backend *be, uint8_t *buf, size_t valid)
{
    struct mon_record batch[MON_BATCH];
    __typeof__(msptiActivityGetNextRecord) *next = be->get_next_record;
    struct filter_state *fs = mon.filter;
    msptiActivity *rec = NULL;
    msptiResult r;
    size_t n = 0;

    while ((r = next(buf, valid, &rec)) == MSPTI_SUCCESS) {
        if (mon_record_from_mspti(rec, &batch[n]) != 0)
            continue; /* unknown kind: skipped */
        if (++n == MON_BATCH) {
            mon_flush_batch(fs, batch, n);
            n = 0;
        }
    }
    if (r != MSPTI_ERROR_MAX_LIMIT_REACHED) {
        LOG_RL(&mon.next_rl, 10000, LOG_LVL_ERROR, "MsptiMonitor GetNextRecord failed: %s (%d)",
               backend_result_name(be, r), (int)r);
        rec = NULL;
        (void)next(buf, 0, &rec); /* resets msPTI's thread-local cursor */
    }
    mon_flush_batch(fs, batch, n);
}

static void mon_complete_cb(uint8_t *buf, size_t size, size_t valid)
{
    (void)size;
    if (!buf)
        return; /* a declined request being completed */
    pthread_rwlock_rdlock(&mon.cb_lock);
    if (mon.be && mon.ops && mon.proc && valid > 0)
        mon_consume_buffer(mon.be, buf, valid);
    pthread_rwlock_unlock(&mon.cb_lock);
    bufpool_put(mon.pool, buf); /* always, also for empty buffers (D4) */
}

/* ---- session teardown (§5.2 steps 1–3, 5–7) ---- */

static void mon_teardown(void)
{
    const struct proc_ops *ops = mon.ops;
    struct proc *p;
    char *pgi = NULL;

    for (int k = 1; k < MON_KIND_LIMIT; k++)
        if (mon.enabled_mask & (1u << k))
            (void)mon.be->disable((msptiActivityKind)k);
    (void)mon.be->flush_all(1);
    (void)mon.be->unsubscribe(mon.sub);
    pthread_rwlock_wrlock(&mon.cb_lock);
    p = mon.proc;
    mon.proc = NULL;
    mon.ops = NULL;
    pthread_rwlock_unlock(&mon.cb_lock);
    /* Our own copy: set_cluster_config_data may replace the text while we write with it. */
    pthread_mutex_lock(&mon.lock);
    if (mon.parallel_group_info && !(pgi = strdup(mon.parallel_group_info)))
        LOG_WARN("MsptiMonitor: out of memory copying parallel_group_info; not written");
    pthread_mutex_unlock(&mon.lock);
    pthread_mutex_lock(&mon.proc_lock);
    if (ops->stop(p, pgi) != 0)
        LOG_WARN("MsptiMonitor: processor %s reported an error at stop", ops->name);
    ops->destroy(p);
    pthread_mutex_unlock(&mon.proc_lock);
    free(pgi);
    if (mon.filter)
        (void)filter_state_set(mon.filter, NULL);
    mon.enabled_mask = 0;
    mon.duration_s = 0;
    mon.sub = NULL;
    LOG_INFO("MsptiMonitor stop successfully");
}

/* ---- timer thread ---- */

static void mon_tick(void)
{
    pthread_mutex_lock(&mon.proc_lock);
    (void)mon.be->flush_all(1); /* the interval's records are in this interval's report */
    if (mon.ops->tick(mon.proc) != 0)
        LOG_DEBUG("MsptiMonitor: processor tick reported an error");
    pthread_mutex_unlock(&mon.proc_lock);
}

static uint64_t mon_interval_ns(void)
{
    return mon.standalone ? 0 : (uint64_t)mon.interval_s * 1000000000ull;
}

static void *mon_thread(void *arg)
{
    uint64_t next_tick, now;
    bool expired = false;

    (void)arg;
    pthread_setname_np(pthread_self(), "MsptiMonitor");
    pthread_mutex_lock(&mon.lock);
    now = clock_mono_ns();
    next_tick = mon_interval_ns() ? now + mon_interval_ns() : 0;
    while (!mon.stop_req) {
        uint64_t wake;
        bool held_expiry = false;
        now = clock_mono_ns();
        if (mon.deadline_ns && now >= mon.deadline_ns) {
            if (!mon.holds) {
                mon.expiring = expired = true;
                break;
            }
            held_expiry = true; /* mon_release() signals us */
        }
        if (mon.interval_changed || (next_tick && now >= next_tick)) {
            bool changed = mon.interval_changed;
            mon.interval_changed = false;
            pthread_mutex_unlock(&mon.lock);
            mon_tick();
            pthread_mutex_lock(&mon.lock);
            now = clock_mono_ns();
            if (!mon_interval_ns())
                next_tick = 0;
            else if (changed || next_tick + mon_interval_ns() <= now)
                next_tick = now + mon_interval_ns();
            else
                next_tick += mon_interval_ns();
            continue;
        }
        wake = next_tick;
        if (mon.deadline_ns && !held_expiry && (!wake || mon.deadline_ns < wake))
            wake = mon.deadline_ns;
        if (!wake) {
            pthread_cond_wait(&mon.cond, &mon.lock);
        } else {
            struct timespec ts = { .tv_sec = (time_t)(wake / 1000000000ull),
                                   .tv_nsec = (long)(wake % 1000000000ull) };
            pthread_cond_timedwait(&mon.cond, &mon.lock, &ts);
        }
    }
    pthread_mutex_unlock(&mon.lock);
    if (expired) {
        LOG_INFO("MsptiMonitor run duration: %gs expired", mon.duration_s);
        mon_teardown();
        (void)dyno_send_monitor_status(IPC_STATUS_IDLE);
        pthread_mutex_lock(&mon.lock);
        mon.running = false;
        mon.expiring = false;
        pthread_mutex_unlock(&mon.lock);
    }
    return NULL;
}

/* Join a thread that finished (expired) or is finishing its expiry. session_lock held. */
static void mon_settle_locked(void)
{
    bool join;

    if (!mon.thread_joinable)
        return;
    pthread_mutex_lock(&mon.lock);
    join = !mon.running || mon.expiring;
    pthread_mutex_unlock(&mon.lock);
    if (join) {
        pthread_join(mon.thread, NULL);
        mon.thread_joinable = false;
    }
}

static bool mon_running_locked(void)
{
    bool r;

    pthread_mutex_lock(&mon.lock);
    r = mon.running && !mon.expiring;
    pthread_mutex_unlock(&mon.lock);
    return r;
}

bool monitor_running(void)
{
    return mon_running_locked();
}

/* Take a hold on the running session (session_lock held): its expiry waits until
 * mon_release(). False, and no hold, when no session runs. */
static bool mon_hold(void)
{
    bool r;

    pthread_mutex_lock(&mon.lock);
    r = mon.running && !mon.expiring;
    if (r)
        mon.holds++;
    pthread_mutex_unlock(&mon.lock);
    return r;
}

static void mon_release(void)
{
    pthread_mutex_lock(&mon.lock);
    mon.holds--;
    pthread_cond_signal(&mon.cond);
    pthread_mutex_unlock(&mon.lock);
}

static int mon_stop_locked(void)
{
    mon_settle_locked();
    pthread_mutex_lock(&mon.lock);
    if (!mon.running || mon.expiring) {
        pthread_mutex_unlock(&mon.lock);
        mon_settle_locked();
        return -ENOENT;
    }
    mon.stop_req = true;
    pthread_cond_signal(&mon.cond);
    pthread_mutex_unlock(&mon.lock);
    /* The thread only ticks; stopping it first keeps its flush out of the teardown. */
    pthread_join(mon.thread, NULL);
    mon.thread_joinable = false;
    mon_teardown();
    pthread_mutex_lock(&mon.lock);
    mon.running = false;
    pthread_mutex_unlock(&mon.lock);
    return 0;
}

int monitor_stop(void)
{
    int rc;

    pthread_mutex_lock(&mon.session_lock);
    rc = mon_stop_locked();
    pthread_mutex_unlock(&mon.session_lock);
    return rc;
}

static const struct proc_ops *mon_ops_for(enum proc_mode mode)
{
    if ((int)mode < 0 || mode > PROC_STANDALONE)
        return NULL;
    if (mon.test_ops[mode])
        return mon.test_ops[mode];
    switch (mode) {
    case PROC_METRIC:
        return &proc_metric_ops;
    case PROC_DB:
        return &proc_db_ops;
    case PROC_JSONL:
        return &proc_jsonl_ops;
    default:
        return &proc_memory_ops;
    }
}

static int32_t mon_rank(void)
{
    /* the contract's rank rule over the read-once env table; -1 when unknown */
    return rank_resolve(penv_get(PENV_RANK), penv_get(PENV_RANK_ID));
}

static int mon_start_locked(const struct monitor_start_args *a)
{
    const struct backend *be;
    const struct proc_ops *ops;
    struct proc_config pc;
    struct proc *proc = NULL;
    sigset_t all, old;
    msptiResult r;
    int rc;

    mon_settle_locked();
    if (mon_running_locked())
        return -EALREADY;
    if (mon.trace_status == IPC_STATUS_RUNNING) {
        LOG_ERROR("MsptiMonitor start refused: nputrace is running in this process (msPTI allows one "
                  "subscriber; stop the trace first)");
        return -EBUSY;
    }
    be = mon_backend();
    if (!be) {
        LOG_ERROR("msPTI library not found, mspti monitor start failed");
        return -ENOENT;
    }
    ops = mon_ops_for(a->mode);
    if (!ops) {
        LOG_ERROR("MsptiMonitor start failed: invalid data processor mode %d", (int)a->mode);
        return -EINVAL;
    }
    if (!mon.pool) {
        rc = bufpool_create(bufpool_default_size(), &mon.pool);
        if (rc != 0)
            return rc;
    }
    if (!mon.filter && filter_state_create(&mon.filter) != 0)
        mon.filter = NULL;

    pthread_mutex_lock(&mon.lock);
    mon.standalone = a->standalone;
    pc = (struct proc_config){
        .mode = a->mode, .log_dir = a->log_dir, .rank = mon_rank(), .session_start_ns = clock_real_ns(),
        .report_interval_s = a->standalone ? 0 : mon.interval_s, .jsonl_rotate_lines = a->rotate_lines,
        .jsonl_rotate_files = a->rotate_files, .send = dyno_send_data, .send_ctx = NULL,
    };
    pthread_mutex_unlock(&mon.lock);
    rc = ops->create(&pc, &proc);
    if (rc != 0) {
        LOG_ERROR("MsptiMonitor start failed: cannot create the %s processor: %s", ops->name, errno_name(-rc));
        return rc;
    }
    r = be->subscribe(&mon.sub, NULL, NULL);
    if (r != MSPTI_SUCCESS) {
        LOG_ERROR("MsptiMonitor start failed: msptiSubscribe returned %s", backend_result_name(be, r));
        rc = -EBUSY;
        goto err_proc;
    }
    r = be->register_callbacks(mon_request_cb, mon_complete_cb);
    if (r != MSPTI_SUCCESS) {
        LOG_ERROR("MsptiMonitor start failed: msptiActivityRegisterCallbacks returned %s",
                  backend_result_name(be, r));
        rc = -EIO;
        goto err_unsub;
    }
    pthread_rwlock_wrlock(&mon.cb_lock);
    mon.be = be;
    mon.ops = ops;
    mon.proc = proc;
    pthread_rwlock_unlock(&mon.cb_lock);
    mon.enabled_mask = 0;
    mon.duration_s = a->duration_s > 0 ? a->duration_s : 0;

    pthread_mutex_lock(&mon.proc_lock);
    rc = ops->start(proc);
    pthread_mutex_unlock(&mon.proc_lock);
    if (rc != 0) {
        LOG_ERROR("MsptiMonitor start failed: the %s processor did not start: %s", ops->name, errno_name(-rc));
        goto err_detach;
    }
    pthread_mutex_lock(&mon.lock);
    mon.deadline_ns = mon.duration_s > 0 ? clock_mono_ns() + (uint64_t)llround(mon.duration_s * 1e9) : 0;
    mon.stop_req = false;
    mon.expiring = false;
    mon.interval_changed = false;
    mon.running = true;
    pthread_mutex_unlock(&mon.lock);
    /* Our thread must never take the host process's signals. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = -pthread_create(&mon.thread, NULL, mon_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        LOG_ERROR("MsptiMonitor start failed: cannot create the MsptiMonitor thread: %s", errno_name(-rc));
        pthread_mutex_lock(&mon.lock);
        mon.running = false;
        pthread_mutex_unlock(&mon.lock);
        pthread_mutex_lock(&mon.proc_lock);
        (void)ops->stop(proc, NULL);
        pthread_mutex_unlock(&mon.proc_lock);
        goto err_detach;
    }
    mon.thread_joinable = true;
    LOG_INFO("MsptiMonitor start successfully");
    LOG_INFO("Start mspti monitor thread successfully, rankid: %d", (int)pc.rank);
    return 0;

err_detach:
    pthread_rwlock_wrlock(&mon.cb_lock);
    mon.ops = NULL;
    mon.proc = NULL;
    pthread_rwlock_unlock(&mon.cb_lock);
    (void)be->flush_all(1);
err_unsub:
    (void)be->unsubscribe(mon.sub);
    mon.sub = NULL;
err_proc:
    ops->destroy(proc);
    return rc;
}

int monitor_start(const struct monitor_start_args *a)
{
    int rc;

    monitor_first_use();
    pthread_mutex_lock(&mon.session_lock);
    rc = mon_start_locked(a);
    pthread_mutex_unlock(&mon.session_lock);
    return rc;
}

void monitor_set_interval(uint32_t seconds)
{
    pthread_mutex_lock(&mon.lock);
    if (seconds != mon.interval_s) {
        mon.interval_s = seconds;
        if (mon.running && !mon.expiring) {
            mon.interval_changed = true; /* one tick now, then the new period */
            pthread_cond_signal(&mon.cond);
        }
    }
    pthread_mutex_unlock(&mon.lock);
}

/* session_lock and a hold (mon_hold) held. */
static int mon_replace_kinds_locked(uint32_t mask)
{
    const struct backend *be = mon.be;
    uint32_t enabled;

    enabled = mon.enabled_mask;
    for (int k = 1; k < MON_KIND_LIMIT; k++) {
        uint32_t bit = 1u << k;
        msptiResult r;
        if (k == MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)
            continue;
        if ((mask & bit) && !(enabled & bit)) {
            r = be->enable((msptiActivityKind)k);
            if (r == MSPTI_SUCCESS)
                enabled |= bit;
            else
                LOG_ERROR("MsptiMonitor enableActivity failed, kind: %s (%s)%s", mon_kind_name(k),
                          backend_result_name(be, r),
                          r == MSPTI_ERROR_WITHOUT_LD_PRELOAD
                              ? "; this kind needs libmspti.so in LD_PRELOAD (CANN < 9.0.0, see FAQ)"
                              : "");
        } else if (!(mask & bit) && (enabled & bit)) {
            r = be->disable((msptiActivityKind)k);
            if (r != MSPTI_SUCCESS)
                LOG_WARN("MsptiMonitor disableActivity failed, kind: %s (%s)", mon_kind_name(k),
                         backend_result_name(be, r));
            enabled &= ~bit; /* no longer wanted either way */
        }
    }
    mon.enabled_mask = enabled;
    pthread_mutex_lock(&mon.proc_lock);
    mon.ops->set_kinds(mon.proc, enabled);
    pthread_mutex_unlock(&mon.proc_lock);
    return 0;
}

int monitor_replace_kinds(uint32_t mask)
{
    int rc;

    pthread_mutex_lock(&mon.session_lock);
    mon_settle_locked();
    rc = -ENOENT;
    if (mon_hold()) {
        rc = mon_replace_kinds_locked(mask);
        mon_release();
    }
    pthread_mutex_unlock(&mon.session_lock);
    return rc;
}

uint32_t monitor_enabled_kinds(void)
{
    uint32_t m;

    pthread_mutex_lock(&mon.session_lock);
    m = mon_running_locked() ? mon.enabled_mask : 0;
    pthread_mutex_unlock(&mon.session_lock);
    return m;
}

int monitor_handle_config(const struct mconfig *cfg)
{
    char dir[4096 + 1];
    bool held = false;

    monitor_first_use();
    pthread_mutex_lock(&mon.session_lock);
    mon_settle_locked();
    if (cfg->stop) {
        (void)mon_stop_locked();
        goto report;
    }
    if (cfg->report_interval_s != 0)
        monitor_set_interval(cfg->report_interval_s);
    if (cfg->start && !mon_running_locked()) {
        struct monitor_start_args a = {
            .mode = PROC_METRIC, .duration_s = cfg->duration_s,
            .rotate_lines = cfg->rotate_lines, .rotate_files = cfg->rotate_files,
        };
        if (cfg->log_file[0]) {
            if (outfile_prepare_dir(cfg->log_file, dir, sizeof(dir)) != 0) {
                LOG_ERROR("Invalid log path, mspti monitor start failed");
                goto report;
            }
            a.log_dir = dir;
            a.mode = cfg->export_db ? PROC_DB : PROC_JSONL;
        }
        (void)mon_start_locked(&a);
    }
    held = mon_hold();
    if (held) {
        if (mon.filter && filter_state_set(mon.filter, cfg->filter) != 0)
            LOG_ERROR("MsptiMonitor: filter '%s' not applied", cfg->filter);
        if (cfg->kinds_mask)
            (void)mon_replace_kinds_locked(cfg->kinds_mask);
    }
report:
    /* Sent under the hold: an expiry due meanwhile sends its Idle after our Running, so the
     * daemon never keeps a stale Running. */
    if (!held)
        held = mon_hold();
    (void)dyno_send_monitor_status(held ? IPC_STATUS_RUNNING : IPC_STATUS_IDLE);
    if (held)
        mon_release();
    pthread_mutex_unlock(&mon.session_lock);
    return held ? 1 : 0;
}

void monitor_set_trace_status(int32_t status)
{
    pthread_mutex_lock(&mon.lock);
    mon.trace_status = status;
    if (status == IPC_STATUS_RUNNING && mon.running && !mon.expiring)
        LOG_WARN("nputrace reported Running while an npu-monitor session runs in this process; msPTI "
                 "allows one subscriber, stop npu-monitor before tracing");
    pthread_mutex_unlock(&mon.lock);
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
    pthread_mutex_lock(&mon.lock);
    free(mon.parallel_group_info);
    mon.parallel_group_info = copy;
    pthread_mutex_unlock(&mon.lock);
    return 0;
}

void monitor_test_set_backend(const struct backend *be)
{
    pthread_mutex_lock(&mon.session_lock);
    mon.test_be = be;
    pthread_mutex_unlock(&mon.session_lock);
}

void monitor_test_set_proc(enum proc_mode mode, const struct proc_ops *ops)
{
    if ((int)mode < 0 || mode > PROC_STANDALONE)
        return;
    pthread_mutex_lock(&mon.session_lock);
    mon.test_ops[mode] = ops;
    pthread_mutex_unlock(&mon.session_lock);
}

__attribute__((constructor)) static void mon_ctor(void)
{
    pthread_once(&mon_cond_once, mon_cond_init); /* constructors only set up primitives */
}
