/* poller: the one poll loop of the plugin, shared by the native poller (native_poller.c) and
 * dyno mode's poller rank (shm_mode.c): a thread that registers with the daemon through the
 * link (dynolog_link.h), polls it and hands each config to its owner, reports its status,
 * and, while the daemon cannot be reached (socket missing, refused, stale), retries
 * registration with capped exponential back-off — POLLER_BACKOFF_INITIAL_S doubling up to
 * POLLER_BACKOFF_CAP_S — and never gives up (docs/plugin.md "Daemon absent or restarted").
 * It logs one line when it loses the daemon and one when it is back. */
#ifndef MSMON_PLUGIN_POLLER_H
#define MSMON_PLUGIN_POLLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POLLER_BACKOFF_INITIAL_S 1.0
#define POLLER_BACKOFF_CAP_S 30.0 /* also the upper bound of the override */
#define POLLER_BACKOFF_MIN_S 0.05 /* lower bound of the overrides (tests) */

/* Back-off of registration retries: MSMONITOR_RETRY_INITIAL_S / MSMONITOR_RETRY_MAX_S
 * (seconds, POLLER_BACKOFF_MIN_S..POLLER_BACKOFF_CAP_S, initial <= max) or the defaults;
 * invalid values warn once and give the default. */
struct poller_backoff {
    double initial_s, cap_s;
};
void poller_backoff_from_env(struct poller_backoff *ret);
/* The delay after `failures` consecutive failed attempts (>= 1): initial * 2^(failures-1),
 * capped. Pure; exposed for tests. */
double poller_backoff_delay(const struct poller_backoff *b, unsigned failures);

struct poller_cfg {
    const char *name;     /* log prefix and thread name, e.g. "MsMonitorPoll" (<= 15 chars) */
    int32_t rank;         /* npu id sent in the ctxt registration */
    double period_s;      /* poll period while registered */
    struct poller_backoff backoff;
    /* A non-empty config text received by a poll (borrowed for the call). */
    void (*on_config)(void *ctx, const char *text, size_t len);
    /* After each successful poll (status reports). May be NULL. */
    void (*on_tick)(void *ctx);
    /* Once, on the poller thread, just before it exits, if it registered and the daemon
     * answered its last attempt. May be NULL. */
    void (*on_exit)(void *ctx);
    void *ctx;
    bool echo_stderr;     /* the lost/back lines also on stderr (Python callers) */
};

/* Where a poller stands; for tests and diagnostics. */
struct poller_state {
    bool registered;      /* registered at least once */
    bool reachable;       /* last attempt reached the daemon */
    unsigned failures;    /* consecutive failed attempts */
    unsigned registrations; /* successful registrations, including after restarts */
};

struct poller;
/* Start the poller thread (signals blocked; the first attempt is immediate). Caller owns;
 * free with poller_destroy(). 0 or -errno. */
int poller_create(const struct poller_cfg *cfg, struct poller **ret);
/* Stop (wakes the thread out of any wait), join, free. NULL is a no-op. */
void poller_destroy(struct poller *p);
/* Status hand-off: keep (status, steps) as the latest report and let the poller thread send
 * it as soon as the daemon is reachable.
 * Never blocks on IPC, so a training step that reports status is not delayed by a stale or
 * missing daemon. */
void poller_post_status(struct poller *p, int32_t status, int32_t current_step, int32_t start_step,
                                int32_t stop_step);
void poller_get_state(struct poller *p, struct poller_state *ret);

#endif
