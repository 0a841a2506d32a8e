/* health: the PluginHealth report (health.h). Step and config times are relaxed atomics so
 * the training step pays one clock read and a few stores; the report is built on the poller
 * or reporter thread. */
#include "plugin/control/health.h"

#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/jw.h"
#include "common/log.h"
#include "common/thr.h"
#include "plugin/backend/backend.h"
#include "plugin/control/dynolog_link.h"
#include "plugin/control/monitor.h"
#include "plugin/penv.h"

static struct {
    _Atomic int32_t step;
    _Atomic uint64_t step_ns;       /* monotonic; 0 = none */
    _Atomic uint64_t period_ns;     /* between the last two steps; 0 = unknown */
    _Atomic uint32_t segment_s;     /* last segment publish time noted */
    _Atomic uint64_t steps;
    _Atomic uint64_t config_ns;     /* monotonic; 0 = none */
    _Atomic uint64_t steps_at_config;
    _Atomic int32_t rank;
    _Atomic(const char *) mode;
    pthread_mutex_t lock;           /* the reporter thread */
    pthread_cond_t cond;
    bool running, stop;
    pthread_t thread;
    double period_s;
    void (*tick)(void);
    char job[HEALTH_JOB_CAP];       /* under lock */
} hl = { .step = -1, .rank = -1, .lock = PTHREAD_MUTEX_INITIALIZER };

void health_set_identity(const char *mode, int32_t rank)
{
    atomic_store_explicit(&hl.mode, mode, memory_order_relaxed);
    atomic_store_explicit(&hl.rank, rank, memory_order_relaxed);
}

void health_set_job(const char *key)
{
    pthread_mutex_lock(&hl.lock);
    snprintf(hl.job, sizeof(hl.job), "%s", key ? key : "");
    pthread_mutex_unlock(&hl.lock);
}

int32_t health_rank(void)
{
    return atomic_load_explicit(&hl.rank, memory_order_relaxed);
}

uint64_t health_note_step(int32_t step)
{
    uint64_t now = clock_mono_ns(), prev = atomic_load_explicit(&hl.step_ns, memory_order_relaxed);

    if (prev && now > prev)
        atomic_store_explicit(&hl.period_ns, now - prev, memory_order_relaxed);
    atomic_store_explicit(&hl.step, step, memory_order_relaxed);
    atomic_store_explicit(&hl.step_ns, now, memory_order_relaxed);
    /* one writer (the stepping thread, under dyno mode's lock): a plain increment, no locked
     * read-modify-write */
    atomic_store_explicit(&hl.steps, atomic_load_explicit(&hl.steps, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    return now;
}

void health_note_config(void)
{
    atomic_store_explicit(&hl.steps_at_config, atomic_load(&hl.steps), memory_order_relaxed);
    atomic_store_explicit(&hl.config_ns, clock_mono_ns(), memory_order_relaxed);
}

void health_note_segment(uint32_t published_s)
{
    uint64_t now_real = clock_real_ns(), now = clock_mono_ns(), then = (uint64_t)published_s * 1000000000ull;

    if (published_s == 0 || atomic_exchange(&hl.segment_s, published_s) == published_s)
        return;
    /* the publish time on our clock; steps before it do not count */
    atomic_store_explicit(&hl.steps_at_config, atomic_load(&hl.steps), memory_order_relaxed);
    atomic_store_explicit(&hl.config_ns, now_real > then && now - 1 > now_real - then ? now - (now_real - then) : now,
                          memory_order_relaxed);
}

static int64_t age_ms(uint64_t then, uint64_t now)
{
    if (then == 0)
        return -1;
    return now > then ? (int64_t)((now - then) / 1000000u) : 0;
}

void health_pod(struct podid_self *ret)
{
    static atomic_bool warned;
    char host[256];
    const char *v[PODID_NFIELDS] = { [PODID_POD] = penv_get(PENV_POD_NAME),
                                     [PODID_NAMESPACE] = penv_get(PENV_POD_NAMESPACE),
                                     [PODID_NODE] = penv_get(PENV_NODE_NAME),
                                     [PODID_CONTAINER] = penv_get(PENV_CONTAINER_NAME) };

    if (gethostname(host, sizeof(host) - 1) != 0)
        host[0] = '\0';
    host[sizeof(host) - 1] = '\0';
    /* a typo in a manifest shows in the job's log once, not as a silently unnamed pod */
    if (podid_self_from_values(ret, v, host) > 0 && !atomic_exchange(&warned, true))
        LOG_WARN("a downward-API variable (POD_NAME, POD_NAMESPACE, NODE_NAME, CONTAINER_NAME) is not a valid name "
                 "([A-Za-z0-9._-], Kubernetes lengths): left out of what this process reports "
                 "(docs/deploy.md#attribution)");
}

void health_snapshot(struct health_snapshot *ret, uint64_t now, char *note, size_t notecap)
{
    const char *mode = atomic_load_explicit(&hl.mode, memory_order_relaxed);
    uint64_t steps = atomic_load(&hl.steps), at = atomic_load(&hl.steps_at_config);

    memset(ret, 0, sizeof(*ret));
    ret->pid = (int32_t)getpid();
    ret->rank = atomic_load_explicit(&hl.rank, memory_order_relaxed);
    ret->mode = mode ? mode : "native";
    ret->step = atomic_load(&hl.step);
    ret->step_age_ms = age_ms(atomic_load(&hl.step_ns), now);
    ret->step_period_ms = atomic_load(&hl.period_ns) ? (int64_t)(atomic_load(&hl.period_ns) / 1000000u) : -1;
    ret->config_age_ms = age_ms(atomic_load(&hl.config_ns), now);
    ret->steps = steps;
    ret->steps_since_config = steps > at ? steps - at : 0;
    ret->backend = "";
    ret->library = "";
    if (monitor_backend_info(&ret->backend, &ret->library) != 0) {
        ret->backend = "";
        ret->library = "";
    }
    backend_fallback_note(note, notecap);
    ret->fallback = note;
    pthread_mutex_lock(&hl.lock);
    memcpy(ret->job, hl.job, sizeof(ret->job));
    pthread_mutex_unlock(&hl.lock);
    health_pod(&ret->pod);
}

size_t health_json(const struct health_snapshot *s, uint64_t now_real_ns, char *buf, size_t cap)
{
    struct jw w;
    const struct datamsg m = { .kind = HEALTH_KIND, .device_id = -1, .timestamp = now_real_ns, .name = "health",
                               .name_len = SIZE_MAX };
    struct datamsg_field extra[DATAMSG_EXTRA_MAX] = {
        { .key = "backend", .type = DATAMSG_STR, .s = s->backend, .slen = SIZE_MAX },
        { .key = "config_age_ms", .type = DATAMSG_INT, .i = s->config_age_ms },
        { .key = "fallback", .type = DATAMSG_STR, .s = s->fallback, .slen = SIZE_MAX },
        { .key = "job_key", .type = DATAMSG_STR, .s = s->job, .slen = SIZE_MAX },
        { .key = "library", .type = DATAMSG_STR, .s = s->library, .slen = SIZE_MAX },
        { .key = "mode", .type = DATAMSG_STR, .s = s->mode, .slen = SIZE_MAX },
        { .key = "pid", .type = DATAMSG_INT, .i = s->pid },
        { .key = "rank", .type = DATAMSG_INT, .i = s->rank },
        { .key = "step", .type = DATAMSG_INT, .i = s->step },
        { .key = "step_age_ms", .type = DATAMSG_INT, .i = s->step_age_ms },
        { .key = "step_period_ms", .type = DATAMSG_INT, .i = s->step_period_ms },
        { .key = "steps", .type = DATAMSG_UINT, .u = s->steps },
        { .key = "steps_since_config", .type = DATAMSG_UINT, .u = s->steps_since_config },
    };
    size_t n = 0;

    while (n < DATAMSG_EXTRA_MAX && extra[n].key)
        n++;

    /* the pod this process says it runs in (docs/design/ipc.md#pod-fields): optional keys that a
     * daemon without them ignores */
    for (int f = 0; f < PODID_NFIELDS && n < DATAMSG_EXTRA_MAX; f++) {
        /* a hostname is not a pod name by itself: the daemon, which sees whether the process
         * runs in a container, decides */
        if (s->pod.v[f][0])
            extra[n++] = (struct datamsg_field){ .key = f == PODID_POD && s->pod.pod_from_hostname
                                                            ? PODID_HOSTNAME_KEY
                                                            : podid_key((enum podid_field)f),
                                                 .type = DATAMSG_STR, .s = s->pod.v[f], .slen = SIZE_MAX };
    }
    jw_init(&w, buf, cap);
    return datamsg_write(&w, &m, extra, n) == 0 ? w.len : 0;
}

int health_send(void)
{
    struct health_snapshot s;
    char note[HEALTH_NOTE_CAP], buf[HEALTH_NOTE_CAP + 1024];
    size_t n;

    health_snapshot(&s, clock_mono_ns(), note, sizeof(note));
    n = health_json(&s, clock_real_ns(), buf, sizeof(buf));
    if (n == 0)
        return -ENOSPC;
    return dynolog_send_once(buf, n);
}

static void *health_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&hl.lock);
    while (!hl.stop) {
        uint64_t deadline = clock_mono_ns() + (uint64_t)(hl.period_s * 1e9);
        struct timespec ts = { .tv_sec = (time_t)(deadline / 1000000000ull),
                               .tv_nsec = (long)(deadline % 1000000000ull) };
        void (*tick)(void) = hl.tick;
        pthread_mutex_unlock(&hl.lock);
        if (tick)
            tick();
        (void)health_send(); /* one quiet attempt: an absent daemon costs nothing more */
        pthread_mutex_lock(&hl.lock);
        while (!hl.stop && pthread_cond_timedwait(&hl.cond, &hl.lock, &ts) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&hl.lock);
    return NULL;
}

int health_reporter_start(double period_s, void (*tick)(void))
{
    pthread_condattr_t a;
    int rc = 0;

    pthread_mutex_lock(&hl.lock);
    if (hl.running)
        goto out;
    hl.period_s = period_s > 0 ? period_s : 2.0;
    hl.tick = tick;
    hl.stop = false;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&hl.cond, &a);
    pthread_condattr_destroy(&a);
    rc = thr_start(&hl.thread, "MsMonitorHealth", health_main, NULL, THR_JOINABLE);
    if (rc != 0) {
        pthread_cond_destroy(&hl.cond);
        LOG_WARN("health: cannot start the report thread: %s; this rank is listed only while it runs a session",
                 strerror(-rc));
        goto out;
    }
    hl.running = true;
out:
    pthread_mutex_unlock(&hl.lock);
    return rc;
}

void health_reporter_stop(void)
{
    pthread_t t;

    pthread_mutex_lock(&hl.lock);
    if (!hl.running) {
        pthread_mutex_unlock(&hl.lock);
        return;
    }
    hl.stop = true;
    hl.running = false;
    t = hl.thread;
    pthread_cond_signal(&hl.cond);
    pthread_mutex_unlock(&hl.lock);
    pthread_join(t, NULL);
    pthread_cond_destroy(&hl.cond);
}
