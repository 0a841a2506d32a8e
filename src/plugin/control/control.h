/* control: the control layer of the plugin, between what arrives from the daemon and the
 * monitor session. Configs are applied here, framework status is reported from here, and
 * the poller loop shared by the native poller (npoll) and the dyno-mode creator (dynamic)
 * lives here. The exported msmon_* API (api.c) calls into this layer, never the reverse.
 *
 * Poller policy (docs/plugin.md "Daemon absent or restarted"): while the daemon cannot be
 * reached (socket missing, refused, stale) the poller retries registration with capped
 * exponential back-off — CONTROL_BACKOFF_INITIAL_S doubling up to CONTROL_BACKOFF_CAP_S —
 * and never gives up. It logs one line when it loses the daemon and one when it is back. */
#ifndef MSMON_PLUGIN_CONTROL_H
#define MSMON_PLUGIN_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin/control/pconfig.h"

#define CONTROL_BACKOFF_INITIAL_S 1.0
#define CONTROL_BACKOFF_CAP_S 30.0 /* also the upper bound of the override */
#define CONTROL_BACKOFF_MIN_S 0.05 /* lower bound of the overrides (tests) */

/* ---- configs and status ---- */

/* Where a config entered the plugin (docs/design/session.md#the-route-of-a-config). */
enum control_entry {
    CONTROL_ENTRY_NATIVE,  /* the native poller: no step call, a window is marker-bounded */
    CONTROL_ENTRY_STEP,    /* a dyno-mode rank at its step(): a window is step-bounded */
    CONTROL_ENTRY_API,     /* the C API / Python (enable_dyno_npu_monitor): npu-monitor only */
};
struct control_source {
    enum control_entry entry;
    int32_t rank;          /* the window's rank selection */
    int32_t step;          /* CONTROL_ENTRY_STEP: the step the config was read at; else -1 */
    int32_t aligned;       /* CONTROL_ENTRY_STEP: the creator's start step for -1; -1 none */
};

/* The one apply of a config parsed by pconfig (parse_rc its result): an npu-monitor config goes
 * to the session, an nputrace config arms the session's window, anything else is refused; the
 * exclusion between the two is the session's one decision (monitor.h). Every config is answered
 * once, from here (ack.h), with applied / applied, partly / rejected. 0 applied (also partly),
 * -EINVAL refused or invalid, -ENOMSG neither class, -ENOMEM. */
int control_apply(const struct pconfig *cfg, int parse_rc, const struct control_source *src);
/* Parse text (pconfig_parse_text) and control_apply it. */
int control_apply_text(const char *text, size_t len, const struct control_source *src);
/* Our own window's and poller's status to the daemon: npuTraceStatus; status -1 (process
 * leaving) also sends npuMonitorStatus -1. 0 or -errno. */
int control_send_status(int32_t status, int32_t current_step, int32_t start_step, int32_t stop_step);

/* ---- the poller ---- */

/* Back-off of registration retries: MSMONITOR_RETRY_INITIAL_S / MSMONITOR_RETRY_MAX_S
 * (seconds, CONTROL_BACKOFF_MIN_S..CONTROL_BACKOFF_CAP_S, initial <= max) or the defaults;
 * invalid values warn once and give the default. */
struct control_backoff {
    double initial_s, cap_s;
};
void control_backoff_from_env(struct control_backoff *ret);
/* The delay after `failures` consecutive failed attempts (>= 1): initial * 2^(failures-1),
 * capped. Pure; exposed for tests. */
double control_backoff_delay(const struct control_backoff *b, unsigned failures);

struct control_poller_cfg {
    const char *name;     /* log prefix and thread name, e.g. "MsMonitorPoll" (<= 15 chars) */
    int32_t rank;         /* npu id sent in the ctxt registration */
    double period_s;      /* poll period while registered */
    struct control_backoff backoff;
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
struct control_poller_state {
    bool registered;      /* registered at least once */
    bool reachable;       /* last attempt reached the daemon */
    unsigned failures;    /* consecutive failed attempts */
    unsigned registrations; /* successful registrations, including after restarts */
};

struct control_poller;
/* Start the poller thread (signals blocked; the first attempt is immediate). Caller owns;
 * free with control_poller_destroy(). 0 or -errno. */
int control_poller_create(const struct control_poller_cfg *cfg, struct control_poller **ret);
/* Stop (wakes the thread out of any wait), join, free. NULL is a no-op. */
void control_poller_destroy(struct control_poller *p);
/* Status hand-off: keep (status, steps) as the latest report and let the poller thread send
 * it as soon as the daemon is reachable.
 * Never blocks on IPC, so a training step that reports status is not delayed by a stale or
 * missing daemon. */
void control_poller_post_status(struct control_poller *p, int32_t status, int32_t current_step, int32_t start_step,
                                int32_t stop_step);
void control_poller_get_state(struct control_poller *p, struct control_poller_state *ret);

#endif
