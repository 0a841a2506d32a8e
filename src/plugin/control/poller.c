/* poller: the poll loop (poller.h): one thread per instance that registers with the daemon,
 * polls it and hands configs to its owner; when the daemon is away it retries with capped
 * back-off instead of stopping. */
#include "plugin/control/poller.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/jw.h"
#include "common/log.h"
#include "common/logesc.h"
#include "common/strutil.h"
#include "common/thr.h"
#include "contract/names.h"
#include "contract/datamsg.h"
#include "msmon/ipc_wire.h"
#include "plugin/control/dynolog_link.h"
#include "plugin/control/monitor.h"
#include "plugin/penv.h"

#define POLLER_REPLY_CAP (DYNOLOG_MAX_CONFIG + 64)

/* ---- back-off ---- */

static double poller_env_seconds(enum penv_id id, double dflt)
{
    const char *raw = penv_get(id);
    double v;

    if (!raw)
        return dflt;
    if (str_to_double(raw, &v) != 0 || !(v >= POLLER_BACKOFF_MIN_S && v <= POLLER_BACKOFF_CAP_S)) {
        LOG_WARN("control: %s='%s' invalid (%.2f..%.0f s), using %.1f", penv_name(id), raw,
                 POLLER_BACKOFF_MIN_S, POLLER_BACKOFF_CAP_S, dflt);
        return dflt;
    }
    return v;
}

void poller_backoff_from_env(struct poller_backoff *ret)
{
    ret->initial_s = poller_env_seconds(PENV_RETRY_INITIAL_S, POLLER_BACKOFF_INITIAL_S);
    ret->cap_s = poller_env_seconds(PENV_RETRY_MAX_S, POLLER_BACKOFF_CAP_S);
    if (ret->initial_s > ret->cap_s)
        ret->initial_s = ret->cap_s;
}

double poller_backoff_delay(const struct poller_backoff *b, unsigned failures)
{
    double d = b->initial_s;

    for (unsigned i = 1; i < failures && d < b->cap_s; i++)
        d *= 2;
    return d < b->cap_s ? d : b->cap_s;
}

/* ---- the poller ---- */

struct poller {
    struct poller_cfg cfg;
    pthread_t thread;
    pthread_mutex_t lock; /* stop flag, state */
    pthread_cond_t cond;
    bool stop;
    struct poller_state st;
    bool status_pending;
    int32_t status[4]; /* status, current, start, stop of the latest posted report */
    char name[16];
    char *buf; /* POLLER_REPLY_CAP bytes: one poll reply */
};

/* Send the latest posted status report, if any, while the daemon is reachable (else it
 * waits for the next registration). Called and returns with the lock held. */
static void poller_flush_status(struct poller *p)
{
    int32_t s[4];

    if (!p->status_pending || !p->st.registered || !p->st.reachable)
        return;
    memcpy(s, p->status, sizeof(s));
    p->status_pending = false;
    pthread_mutex_unlock(&p->lock);
    (void)dynolog_send_status(s[0], s[1], s[2], s[3]);
    pthread_mutex_lock(&p->lock);
}

/* Wait up to `seconds` or until stop, sending posted status reports meanwhile; returns
 * with the lock held. */
static void poller_wait(struct poller *p, double seconds)
{
    uint64_t deadline = clock_mono_ns() + (uint64_t)(seconds * 1e9);
    struct timespec ts = { .tv_sec = (time_t)(deadline / 1000000000ull), .tv_nsec = (long)(deadline % 1000000000ull) };

    while (!p->stop) {
        poller_flush_status(p);
        if (p->stop || pthread_cond_timedwait(&p->cond, &p->lock, &ts) == ETIMEDOUT)
            break;
    }
    poller_flush_status(p);
}

/* One attempt: register if never registered, then poll (dyno re-registers by itself after a
 * daemon restart or a failed send). Returns true if the daemon answered. */
static bool poller_attempt(struct poller *p)
{
    size_t len = 0;
    bool ok;

    if (!p->st.registered) {
        ok = dynolog_init(p->cfg.rank) == 1;
        pthread_mutex_lock(&p->lock);
        p->st.registered = ok;
        pthread_mutex_unlock(&p->lock);
        if (!ok)
            return false;
        /* and poll at once: the daemon only targets processes that have polled */
    }
    if (dynolog_poll(p->buf, POLLER_REPLY_CAP, &len) == 0 && len > 0 && p->cfg.on_config)
        p->cfg.on_config(p->cfg.ctx, p->buf, len);
    ok = dynolog_reachable();
    /* Metric data kept while the daemon was away (or restarting between two polls) goes out
     * now, not only with the session's next report: a quiet session drains too. */
    if (ok)
        (void)dynolog_flush_data();
    if (ok && p->cfg.on_tick)
        p->cfg.on_tick(p->cfg.ctx);
    return ok;
}

static void poller_note(const struct poller *p, enum log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void poller_note(const struct poller *p, enum log_level lvl, const char *fmt, ...)
{
    char msg[512], esc[LOGESC_CAP(sizeof(msg))];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_write(lvl, __FILE__, __LINE__, "%s: %s", p->name, msg);
    if (p->cfg.echo_stderr)
        fprintf(stderr, "[%s] [msmonitor poller %d] %s\n", lvl == LOG_LVL_INFO ? "INFO" : "WARNING", (int)getpid(),
                logesc(msg, strlen(msg), esc, sizeof(esc))); /* values from the daemon's config */
}

/* PluginInfo (ours): after each registration, tell the daemon which vendor library this
 * process loaded ("" = none found), so `dyno status` / `dyno doctor` can show it. The upstream
 * data keys make any daemon accept (and log) it. */
static void poller_send_plugin_info(void)
{
    const char *name = "mspti", *lib = "";
    char buf[1024];
    struct jw w;

    if (monitor_backend_info(&name, &lib) != 0)
        lib = "";
    const char *shown = lib[0] ? lib : "no vendor library found";
    const struct datamsg m = { .kind = DATAMSG_PLUGIN_INFO, .device_id = -1, .timestamp = clock_real_ns(),
                               .name = shown, .name_len = SIZE_MAX };
    const struct datamsg_field extra[] = {
        { .key = "acks", .type = DATAMSG_BOOL, .b = true }, /* it answers every config with a ConfigAck (ack.h) */
        { .key = "backend", .type = DATAMSG_STR, .s = name, .slen = SIZE_MAX },
        { .key = "library", .type = DATAMSG_STR, .s = lib, .slen = SIZE_MAX },
        { .key = "pid", .type = DATAMSG_INT, .i = getpid() },
    };

    jw_init(&w, buf, sizeof(buf));
    if (datamsg_write(&w, &m, extra, sizeof(extra) / sizeof(extra[0])) == 0)
        (void)dynolog_send_data(NULL, w.buf, w.len);
}

/* The two lines of the policy: one when the daemon is lost (or absent at start), one when
 * it is back; the retries in between are silent. */
static void poller_account(struct poller *p, bool ok, bool was_registered, unsigned regs_before)
{
    const struct poller_backoff *b = &p->cfg.backoff;
    unsigned regs = dynolog_registrations();

    if (ok) {
        if (!was_registered)
            poller_note(p, LOG_LVL_INFO, "Init dynolog success !%s", p->st.failures ? " (the daemon is up now)" : "");
        else if (p->st.failures)
            poller_note(p, LOG_LVL_INFO, "the daemon is back after %u failed attempts; registered again",
                         p->st.failures);
        p->st.failures = 0;
    } else {
        if (p->st.failures == 0 && !was_registered)
            poller_note(p, LOG_LVL_WARNING, "Init dynolog failed ! The daemon is not reachable; retrying "
                         "registration (back-off %.1f s doubling to %.1f s)", b->initial_s, b->cap_s);
        else if (p->st.failures == 0)
            poller_note(p, LOG_LVL_WARNING, "lost the daemon; retrying registration (back-off %.1f s doubling "
                         "to %.1f s)", b->initial_s, b->cap_s);
        p->st.failures++;
    }
    p->st.reachable = ok;
    if (regs > regs_before) {
        p->st.registrations += regs - regs_before;
        if (ok)
            poller_send_plugin_info();
    }
}

static void *poller_main(void *arg)
{
    struct poller *p = arg;

    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        bool was_registered = p->st.registered, ok;
        unsigned regs = dynolog_registrations();
        pthread_mutex_unlock(&p->lock);
        ok = poller_attempt(p);
        pthread_mutex_lock(&p->lock);
        poller_account(p, ok, was_registered, regs);
        poller_wait(p, ok ? p->cfg.period_s : poller_backoff_delay(&p->cfg.backoff, p->st.failures));
    }
    pthread_mutex_unlock(&p->lock);
    /* The goodbye only to a daemon that answered last time: an unreachable one would cost
     * the exiting job a send (and its retries) for nothing. */
    if (p->st.registered && p->st.reachable && p->cfg.on_exit)
        p->cfg.on_exit(p->cfg.ctx);
    return NULL;
}

int poller_create(const struct poller_cfg *cfg, struct poller **ret)
{
    struct poller *p;
    pthread_condattr_t a;
    int rc;

    p = calloc(1, sizeof(*p));
    if (p)
        p->buf = malloc(POLLER_REPLY_CAP);
    if (!p || !p->buf) {
        free(p);
        return -ENOMEM;
    }
    p->cfg = *cfg;
    if (!(p->cfg.period_s > 0))
        p->cfg.period_s = 2.0;
    if (!(p->cfg.backoff.initial_s > 0) || !(p->cfg.backoff.cap_s >= p->cfg.backoff.initial_s))
        p->cfg.backoff = (struct poller_backoff){ POLLER_BACKOFF_INITIAL_S, POLLER_BACKOFF_CAP_S };
    snprintf(p->name, sizeof(p->name), "%s", cfg->name ? cfg->name : "MsMonitorPoll");
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cond, &a);
    pthread_condattr_destroy(&a);
    rc = thr_start(&p->thread, p->name, poller_main, p, THR_JOINABLE);
    if (rc != 0) {
        LOG_ERROR("%s: cannot create the poller thread: %s", p->name, errno_name(-rc));
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
        free(p->buf);
        free(p);
        return rc;
    }
    *ret = p;
    return 0;
}

void poller_destroy(struct poller *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p->buf);
    free(p);
}

void poller_post_status(struct poller *p, int32_t status, int32_t current_step, int32_t start_step,
                                int32_t stop_step)
{
    pthread_mutex_lock(&p->lock);
    p->status[0] = status;
    p->status[1] = current_step;
    p->status[2] = start_step;
    p->status[3] = stop_step;
    p->status_pending = true;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

void poller_get_state(struct poller *p, struct poller_state *ret)
{
    pthread_mutex_lock(&p->lock);
    *ret = p->st;
    pthread_mutex_unlock(&p->lock);
}
