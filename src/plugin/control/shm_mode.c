/* shm_mode: dyno mode (shm_mode.h): the process's state in it, its poller, the per-step work
 * and the takeover of a poller whose rank left. */
#include "plugin/control/shm_mode.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/strutil.h"
#include "contract/kvtext.h"
#include "contract/rank.h"
#include "ipc/ipc_msg.h"
#include "msmon/ipc_wire.h"
#include "plugin/control/apply.h"
#include "plugin/control/dynolog_link.h"
#include "plugin/control/health.h"
#include "plugin/control/job_key.h"
#include "plugin/control/monitor.h"
#include "plugin/control/pconfig.h"
#include "plugin/control/shm_segment.h"
#include "plugin/control/step_marks.h"
#include "plugin/control/step_slots.h"
#include "plugin/penv.h"

#define SM_STATUS_PERIOD_NS 1000000000ull
/* Steps the poller adds to the highest step of the node's ranks for PROFILE_START_STEP -1,
 * so every rank, each reading the segment at its next step, agrees on one start step. */
#define SM_ALIGN_STEPS 5

bool shm_mode_use_daemon(const char *msmon, const char *kineto, char *why, size_t cap)
{
    const char *name = "MSMONITOR_USE_DAEMON", *raw = msmon;
    char tmp[64];
    const char *v;
    size_t n;
    int64_t value;

    if (why && cap)
        why[0] = '\0';
    if (!raw) {
        if (!kineto)
            return false;
        raw = kineto;
        name = "KINETO_USE_DAEMON";
        if (why && cap)
            snprintf(why, cap, "KINETO_USE_DAEMON is deprecated, use MSMONITOR_USE_DAEMON");
        else
            LOG_WARN("dynamic_profile: KINETO_USE_DAEMON is deprecated, use MSMONITOR_USE_DAEMON");
    }
    v = raw;
    n = strlen(raw);
    str_trim_view(&v, &n, KVTEXT_WS);
    if (str_copy(tmp, sizeof(tmp), v, n) != 0 || str_to_i64(tmp, &value) != 0) {
        if (why && cap)
            snprintf(why, cap, "Environment variable %s='%s' value not valid, will be set to 0 !", name, raw);
        else
            LOG_WARN("dynamic_profile: Environment variable %s='%s' value not valid, will be set to 0 !", name, raw);
        return false;
    }
    return value == 1;
}

double shm_mode_poll_interval(const char *raw)
{
    double v;

    if (!raw)
        return SHM_MODE_POLL_S;
    if (str_to_double(raw, &v) != 0 || !(v >= 0.1 && v <= 50)) {
        LOG_WARN("dynamic_profile: MSMONITOR_POLL_INTERVAL_S='%s' invalid (0.1..50), using 2", raw);
        return SHM_MODE_POLL_S;
    }
    return v;
}

long shm_mode_stale_seconds(const char *raw)
{
    int32_t v;

    if (!raw)
        return SHMSEG_STALE_S;
    if (kvtext_int(raw, &v) != 0 || v < 0) {
        LOG_WARN("dynamic_profile: MSMONITOR_SHM_STALE_S='%s' invalid (integer >= 0), using %d", raw, SHMSEG_STALE_S);
        return SHMSEG_STALE_S;
    }
    return v;
}

/* ---- the process's dyno-mode state ---- */

static struct {
    pthread_mutex_t lock;
    bool enabled, creator, atexit_done;
    pid_t pid; /* the process that joined: a fork()ed child inherits nothing of it */
    bool forked;      /* set in a fork()ed child (atfork): its steps are no-ops, without a getpid() each */
    bool atfork_done;
    char path[PATH_MAX];
    int fd;
    uint8_t *shm;
    int32_t rank, step;
    uint32_t last_ts;
    uint64_t range_id, last_status_ns;
    bool status_due;
    struct step_slots slots;      /* every rank's current step (the alignment) */
    struct poller *poller; /* the creator's */
    void (*stop_hook)(void *);
    void *stop_hook_ctx;
    char key[24];                 /* the job key: names the segment, labels this rank's health */
    char key_source[160];         /* which rule gave it (job_key_of) */
    bool creator_gone;            /* health thread: it took the creator lock of a gone creator */
    bool echo;                    /* SHM_MODE_ECHO: lifecycle lines on stderr too */
} dyn = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

/* Runs in the child of a fork(), single-threaded: whatever the parent joined is not the child's. */
static void sm_atfork_child(void)
{
    dyn.forked = true;
}

/* The stepping process is the one that joined. dyn.forked is never written in that process; a
 * child of a process whose atfork registration failed still falls back to comparing pids. */
static bool sm_ours(void)
{
    return !dyn.forked && (dyn.atfork_done || dyn.pid == getpid());
}

/* RANK, else RANK_ID; unknown counts as rank 0 here (init_dyno id, rank-list match). */
static int32_t sm_env_rank(void)
{
    int32_t r = rank_resolve(penv_get(PENV_RANK), penv_get(PENV_RANK_ID));

    return r == RANK_UNKNOWN ? 0 : r;
}

/* Poller callback (poller thread): publish one poll reply in the segment for every rank, as
 * the daemon delivered it (its canonical text, docs/design/session.md#the-route-of-a-config),
 * with the step an nputrace start step -1 means: the node's highest step plus a margin, so
 * every rank, each reading the segment at its next step, agrees on one start step. The
 * poller reads no key: each rank parses the text once, where it applies it. */
static void sm_publish(void *ctx, const char *text, size_t len)
{
    uint8_t *shm = ctx;
    int32_t top = step_slots_max(&dyn.slots, __atomic_load_n(&dyn.step, __ATOMIC_RELAXED));
    int32_t aligned = top <= INT32_MAX - SM_ALIGN_STEPS - 1 ? top + SM_ALIGN_STEPS : -1;
    int rc;

    uint32_t now = (uint32_t)time(NULL), prev = shmseg_time(shm);

    /* ranks compare whole seconds: a second config within the second of the first gets the
     * next one, so a stop right after a start is never lost */
    if (now <= prev && prev < UINT32_MAX)
        now = prev + 1;
    rc = shmseg_write(shm, text, len, aligned, now);
    if (rc == 0)
        shmseg_note(LOG_LVL_INFO, "config published (%zu bytes)", len);
    else
        shmseg_note(LOG_LVL_ERROR, "config of %zu bytes dropped: %s", len, errno_name(-rc));
}

static void sm_poller_exit(void *ctx)
{
    (void)ctx;
    (void)dynolog_send_status(IPC_STATUS_UNINITIALIZED, -1, -1, -1);
}

static void sm_poller_start(void)
{
    struct poller_cfg cfg = {
        .name = "MsMonitorPoll", .rank = dyn.rank, .period_s = shm_mode_poll_interval(penv_get(PENV_POLL_INTERVAL_S)),
        .on_config = sm_publish, .on_exit = sm_poller_exit, .ctx = dyn.shm, .echo_stderr = dyn.echo,
    };

    poller_backoff_from_env(&cfg.backoff);
    if (poller_create(&cfg, &dyn.poller) != 0)
        dyn.poller = NULL; /* logged; without a poller the ranks still run */
}

/* ---- SIGTERM: a job's normal stop leaves no segment behind ----
 * A program that does not handle SIGTERM (a plain Python training script) dies of it without
 * running atexit, so its segment and steps file would stay, and the next job would "take
 * over" a leftover as if the job had been killed. Each rank installs, over the default
 * disposition only (never over the program's own handler), a handler that drops this rank's
 * hold on the segment and, if no other rank of the job holds it any more (an exclusive flock,
 * the protocol of cleanup-shm), unlinks the segment and its steps file; then SIGTERM takes its
 * default action, so the process still dies of SIGTERM at once. Only async-signal-safe calls
 * (close, open, flock, unlink, getpid, sigaction, raise). A takeover then means the creator
 * was killed (SIGKILL, a crash, the OOM killer); a rank that goes on while others of its job
 * stopped takes the poller over (sm_take_over). */
static struct {
    char seg[PATH_MAX], steps[PATH_MAX + 32];
    pid_t pid;             /* the process that joined: a fork()ed child cleans up nothing */
    volatile sig_atomic_t armed;
    volatile sig_atomic_t fd;
} sm_term;

static void sm_on_sigterm(int sig)
{
    int saved = errno;

    if (sm_term.armed && getpid() == sm_term.pid) {
        int fd;
        sm_term.armed = 0;
        /* our shared flock: unlocked by hand, the segment's mapping keeps the description open */
        (void)flock(sm_term.fd, LOCK_UN);
        (void)close(sm_term.fd);
        fd = open(sm_term.seg, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            if (flock(fd, LOCK_EX | LOCK_NB) == 0) { /* no other rank holds it: the job is gone */
                if (sm_term.steps[0])
                    (void)unlink(sm_term.steps);
                (void)unlink(sm_term.seg);
            }
            (void)close(fd);
        }
    }
    /* SA_RESETHAND put the default back: delivered on return, it ends the process */
    (void)raise(sig);
    errno = saved;
}

/* dyn.lock held. */
static void sm_term_install(void)
{
    struct sigaction old, sa;

    if (sigaction(SIGTERM, NULL, &old) != 0 || (!(old.sa_flags & SA_SIGINFO) && old.sa_handler != SIG_DFL))
        return; /* the program handles SIGTERM itself: its clean exit runs finalize */
    snprintf(sm_term.seg, sizeof(sm_term.seg), "%s", dyn.path);
    snprintf(sm_term.steps, sizeof(sm_term.steps), "%s", dyn.slots.path);
    sm_term.pid = getpid();
    sm_term.fd = dyn.fd;
    sm_term.armed = 1;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = sm_on_sigterm;
    sa.sa_flags = SA_RESETHAND;
    sigfillset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0)
        sm_term.armed = 0;
}

/* dyn.lock held: the default back, unless the program installed its own handler since. */
static void sm_term_remove(void)
{
    struct sigaction cur, dfl;

    sm_term.armed = 0;
    if (sigaction(SIGTERM, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == sm_on_sigterm) {
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        (void)sigaction(SIGTERM, &dfl, NULL);
    }
}

void shm_mode_finalize(void)
{
    pthread_mutex_lock(&dyn.lock);
    if (!dyn.enabled || dyn.pid != getpid())
        goto out; /* a child must not join the parent's poller nor unlink its segment */
    __atomic_store_n(&dyn.enabled, false, __ATOMIC_RELAXED);
    sm_term_remove();
    /* its tick reads the segment: stopped before the unmap (it never takes dyn.lock) */
    health_reporter_stop();
    step_marks_end(dyn.range_id);
    dyn.range_id = 0;
    monitor_window_leave(dyn.step);
    (void)monitor_stop();
    poller_destroy(dyn.poller); /* sends the last status, then the -1 statuses */
    dyn.poller = NULL;
    munmap(dyn.shm, SHMSEG_SIZE);
    dyn.shm = NULL;
    step_slots_close(&dyn.slots, dyn.creator);
    if (dyn.creator && unlink(dyn.path) != 0 && errno != ENOENT)
        LOG_WARN("dynamic_profile: cannot remove %s: %s", dyn.path, strerror(errno));
    close(dyn.fd);
    dyn.fd = -1;
out:
    pthread_mutex_unlock(&dyn.lock);
}

static const char *sm_penv_get(void *ctx, const char *name)
{
    (void)ctx;
    return penv_lookup(name);
}

/* <private dir>/DynamicProfileNpuShm-<job key> (docs/python.md, "Where the segment lives"). */
static int sm_segment_path(char *buf, size_t cap)
{
    char dir[PATH_MAX], sock[PATH_MAX], key[24], name[64];
    int rc;

    if (ipc_socket_dir(NULL, sock, sizeof(sock)) != 0)
        sock[0] = '\0';
    rc = shmseg_dir(penv_get(PENV_SHM_DIR), penv_get(PENV_XDG_RUNTIME_DIR), sock, dir, sizeof(dir));
    if (rc != 0) {
        LOG_ERROR("dynamic_profile: dynamic profiler disabled: no directory of uid %u for the segment (see the "
                  "lines above; set MSMONITOR_SHM_DIR to a directory only you can write)", (unsigned)geteuid());
        return rc;
    }
    const struct job_key_env env = { .get = sm_penv_get };

    if (job_key_of(&env, getppid(), getpid(), key, sizeof(key), dyn.key_source, sizeof(dyn.key_source)) != 0 ||
        shmseg_name(key, name, sizeof(name)) != 0 ||
        snprintf(buf, cap, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name) >= (int)cap) {
        LOG_ERROR("dynamic_profile: dynamic profiler disabled: shm directory too long: %s", dir);
        return -ENAMETOOLONG;
    }
    snprintf(dyn.key, sizeof(dyn.key), "%s", key);
    return 0;
}

/* Reporter thread: the segment's publish time, so a rank that never steps shows how long
 * a config has waited for it. The segment stays mapped until the reporter is stopped. */
static void sm_health_tick(void)
{
    if (!__atomic_load_n(&dyn.enabled, __ATOMIC_RELAXED))
        return;
    health_note_segment(shmseg_time(dyn.shm));
    /* A creator that left (it finished first, or was killed) leaves its job unpolled: the
     * first rank to get its lock becomes the creator at its next step (shm_mode_step), so a job
     * that goes on stays monitored. The lock belongs to this rank's open file description. */
    if (!__atomic_load_n(&dyn.creator, __ATOMIC_RELAXED) && !__atomic_load_n(&dyn.creator_gone, __ATOMIC_RELAXED) &&
        shmseg_creator_lock(dyn.fd) == 0)
        __atomic_store_n(&dyn.creator_gone, true, __ATOMIC_RELEASE);
}

/* The stepping thread, dyn.lock held: this rank holds the lock of a gone creator. */
static void sm_take_over(void)
{
    __atomic_store_n(&dyn.creator_gone, false, __ATOMIC_RELAXED);
    __atomic_store_n(&dyn.creator, true, __ATOMIC_RELAXED);
    step_slots_open(&dyn.slots, dyn.path, true);
    sm_poller_start();
    shmseg_note(LOG_LVL_WARNING, "rank %d runs the poller of %s now: its creator has exited and the job goes on",
             (int)dyn.rank, dyn.path);
}

int shm_mode_init(int32_t rank, unsigned flags)
{
    char err[PATH_MAX + 512];
    int rc = 0;

    pthread_mutex_lock(&dyn.lock);
    if (dyn.enabled && dyn.pid == getpid())
        goto out;
    if (dyn.enabled) {
        rc = -ECHILD; /* fork()ed from a joined rank: the segment and poller are the parent's */
        goto out;
    }
    if (!shm_mode_use_daemon(penv_get(PENV_USE_DAEMON), penv_get(PENV_KINETO_USE_DAEMON), NULL, 0)) {
        rc = -ENOTSUP;
        goto out;
    }
    dyn.echo = flags & SHM_MODE_ECHO;
    shmseg_set_echo(dyn.echo);
    dyn.rank = rank >= 0 ? rank : sm_env_rank();
    rc = sm_segment_path(dyn.path, sizeof(dyn.path));
    if (rc != 0)
        goto out;
    srand((unsigned)getpid() ^ (unsigned)clock_mono_ns());
    rc = shmseg_attach(dyn.path, shm_mode_stale_seconds(penv_get(PENV_SHM_STALE_S)), &dyn.fd, &dyn.creator,
                              err, sizeof(err));
    if (rc != 0) {
        if (rc == -ESTALE)
            LOG_ERROR("dynamic_profile: %s", err);
        else
            LOG_ERROR("dynamic_profile: dynamic profiler disabled: %s", err);
        goto out;
    }
    dyn.shm = mmap(NULL, SHMSEG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, dyn.fd, 0);
    if (dyn.shm == MAP_FAILED) {
        rc = -errno;
        LOG_ERROR("dynamic_profile: dynamic profiler disabled: mmap %s: %s", dyn.path, strerror(-rc));
        goto close_fd;
    }
    dyn.pid = getpid();
    /* 0, not now: a rank that attaches after a config was published applies it at its
     * first step (docs/python.md "Ranks that attach late") */
    dyn.last_ts = 0;
    dyn.step = 1;
    dyn.status_due = true;
    step_slots_open(&dyn.slots, dyn.path, dyn.creator); /* before the poller: it reads the slots */
    if (dyn.creator)
        sm_poller_start();
    step_marks_resolve();
    dyn.range_id = step_marks_begin(dyn.step);
    __atomic_store_n(&dyn.enabled, true, __ATOMIC_RELAXED);
    if (!dyn.atexit_done && atexit(shm_mode_finalize) == 0)
        dyn.atexit_done = true;
    if (!dyn.atfork_done && pthread_atfork(NULL, NULL, sm_atfork_child) == 0)
        dyn.atfork_done = true;
    sm_term_install();
    shmseg_note(LOG_LVL_INFO, "rank %d attached to %s%s (job key from %s)%s", (int)dyn.rank, dyn.path,
             dyn.creator ? " as creator" : "", dyn.key_source,
             strncmp(dyn.key_source, "the parent pid", 14) == 0
                 ? "; ranks of another job with the same parent would share it: give each job its own "
                   "MSMONITOR_JOB_KEY"
                 : "");
    health_set_identity("dyno", dyn.rank);
    health_set_job(dyn.key);
    (void)health_reporter_start(shm_mode_poll_interval(penv_get(PENV_POLL_INTERVAL_S)), sm_health_tick);
    goto out;
close_fd:
    close(dyn.fd);
    dyn.fd = -1;
    if (dyn.creator)
        (void)unlink(dyn.path);
out:
    pthread_mutex_unlock(&dyn.lock);
    return rc;
}


/* A new config in the segment, read at step `step`: parsed once, here, and applied once
 * (apply_config answers it to the daemon with this rank's outcome). */
static void sm_apply(int32_t step)
{
    struct apply_source src = { .entry = APPLY_ENTRY_STEP, .rank = dyn.rank, .step = step, .aligned = -1 };
    struct pconfig *cfg = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc;

    if (shmseg_read(dyn.shm, &text, &len, &src.aligned) != 0)
        return; /* empty: nothing published yet */
    cfg = malloc(sizeof(*cfg));
    if (!cfg)
        goto out;
    rc = pconfig_parse_text(text, len, cfg);
    /* The session end writes the cluster layout next to the data (docs/design/outputs.md). */
    if (rc == 0 && cfg->cls == CFGKEYS_NPU_MONITOR && cfg->mon.stop && dyn.stop_hook)
        dyn.stop_hook(dyn.stop_hook_ctx);
    /* Every rank runs its own monitor and writes its own files. */
    if (apply_config(cfg, rc, &src) == 0 && cfg->cls == CFGKEYS_NPU_TRACE)
        dyn.status_due = true; /* report the new window state at once */
out:
    free(cfg);
    free(text);
}

/* One step, dyn.lock held (docs/benchmarks.md#the-always-on-cost-of-a-step). may_wait false:
 * a step that has something to wait for (a config to apply on the session actor, with the stop
 * hook; the nputrace window opening or closing; the poller of a gone creator to take over)
 * returns -EAGAIN before doing anything; every other step is atomics, the step markers and no
 * system call. */
static int sm_step_locked(bool may_wait)
{
    int32_t next = dyn.step < INT32_MAX ? dyn.step + 1 : dyn.step;
    uint32_t ts = shmseg_time(dyn.shm);
    bool gone = __atomic_load_n(&dyn.creator_gone, __ATOMIC_ACQUIRE);
    uint64_t now;

    if (!may_wait && (gone || ts > dyn.last_ts || monitor_window_due(next)))
        return -EAGAIN;
    if (gone)
        sm_take_over();
    step_marks_end(dyn.range_id);
    __atomic_store_n(&dyn.step, next, __ATOMIC_RELAXED); /* the creator's poller reads it */
    now = health_note_step(dyn.step);
    step_slots_note(&dyn.slots, dyn.rank, dyn.step);
    if (may_wait) {
        if (ts > dyn.last_ts) {
            dyn.last_ts = ts;
            sm_apply(dyn.step);
        }
        /* The window opens and closes between steps, before this step's range starts, so the
         * trace holds exactly the records (and `step <N>` ranges) of [start, stop). */
        if (monitor_window_step(dyn.step))
            dyn.status_due = true;
    }
    dyn.range_id = step_marks_begin(dyn.step);
    if (dyn.poller && (dyn.status_due || now - dyn.last_status_ns >= SM_STATUS_PERIOD_NS)) {
        struct monitor_window_view v;
        bool busy;
        monitor_window_view(&v);
        busy = v.state == IPC_STATUS_READY || v.state == IPC_STATUS_RUNNING;
        dyn.status_due = false;
        dyn.last_status_ns = now;
        /* Handed to the poller thread: the step never waits on the daemon. */
        poller_post_status(dyn.poller, v.state < 0 ? IPC_STATUS_IDLE : v.state, dyn.step, busy ? v.start : -1,
                           busy ? v.stop : -1);
    }
    return 0;
}

int shm_mode_step(void)
{
    if (!__atomic_load_n(&dyn.enabled, __ATOMIC_RELAXED) || dyn.forked)
        return 0;
    pthread_mutex_lock(&dyn.lock);
    if (dyn.enabled && sm_ours())
        (void)sm_step_locked(true);
    pthread_mutex_unlock(&dyn.lock);
    return 0;
}

int shm_mode_step_nowait(void)
{
    int rc = 0;

    if (!__atomic_load_n(&dyn.enabled, __ATOMIC_RELAXED) || dyn.forked)
        return 1;
    if (pthread_mutex_trylock(&dyn.lock) != 0)
        return 0; /* finalize or an info() holds it: the caller waits for it in shm_mode_step */
    if (dyn.enabled && sm_ours())
        rc = sm_step_locked(false);
    pthread_mutex_unlock(&dyn.lock);
    return rc == 0 ? 1 : 0;
}

void shm_mode_set_stop_hook(void (*fn)(void *ctx), void *ctx)
{
    pthread_mutex_lock(&dyn.lock);
    dyn.stop_hook = fn;
    dyn.stop_hook_ctx = ctx;
    pthread_mutex_unlock(&dyn.lock);
}

void shm_mode_get_info(struct shm_mode_info *ret)
{
    memset(ret, 0, sizeof(*ret));
    pthread_mutex_lock(&dyn.lock);
    ret->enabled = dyn.enabled && dyn.pid == getpid();
    if (ret->enabled) {
        ret->creator = dyn.creator;
        ret->rank = dyn.rank;
        ret->step = dyn.step;
        snprintf(ret->path, sizeof(ret->path), "%s", dyn.path);
        if (dyn.poller) {
            ret->poller = true;
            poller_get_state(dyn.poller, &ret->poller_state);
        }
    }
    pthread_mutex_unlock(&dyn.lock);
}
