/* native_poller: the native poller (docs/design/session.md#control-sources) as one poller (poller.h): every 2 s it polls,
 * hands each config to the one apply (apply.h) — npu-monitor configs and nputrace windows
 * delimited by the program's `step <N>` marker ranges — and reports the window's status. Registration
 * retries with back-off until the daemon is reachable, so a job started before the daemon
 * is picked up once the daemon appears (poller.h). */
#include "plugin/control/native_poller.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/log.h"
#include "contract/rank.h"
#include "msmon/ipc_wire.h"
#include "plugin/control/apply.h"
#include "plugin/control/shm_mode.h"
#include "plugin/control/dynolog_link.h"
#include "plugin/control/health.h"
#include "plugin/control/monitor.h"
#include "plugin/control/poller.h"
#include "plugin/penv.h"


static pthread_mutex_t native_lock = PTHREAD_MUTEX_INITIALIZER;
static struct poller *native_poller;

/* RANK, else RANK_ID (docs/design/session.md#control-sources); unknown registers as npu 0. */
static int32_t native_rank(void)
{
    int32_t r = rank_resolve(penv_get(PENV_RANK), penv_get(PENV_RANK_ID));

    return r == RANK_UNKNOWN ? 0 : r;
}

int native_poller_apply_text(const char *text, size_t len)
{
    const struct apply_source src = { .entry = APPLY_ENTRY_NATIVE, .rank = native_rank(), .step = -1,
                                        .aligned = -1 };

    return apply_text(text, len, &src);
}

static void native_on_config(void *ctx, const char *text, size_t len)
{
    (void)ctx;
    health_note_config();
    /* nputrace here has no step call: the program's `step <N>` marker ranges delimit it */
    (void)native_poller_apply_text(text, len);
}

static void native_on_tick(void *ctx)
{
    struct monitor_window_view v;
    bool busy;

    (void)ctx;
    monitor_window_tick(&v);
    busy = v.state == IPC_STATUS_READY || v.state == IPC_STATUS_RUNNING;
    (void)dynolog_send_status(v.state < 0 ? IPC_STATUS_IDLE : v.state, v.step, busy ? v.start : -1,
                              busy ? v.stop : -1);
    (void)health_send(); /* live health for `dyno status` (docs/daemon.md "Live health") */
}

static void native_on_exit(void *ctx)
{
    (void)ctx;
    (void)dynolog_send_status(IPC_STATUS_UNINITIALIZED, -1, -1, -1);
}

int native_poller_start(void)
{
    struct poller_cfg cfg = {
        .name = "MsMonitorPoll", .rank = native_rank(),
        /* MSMONITOR_POLL_INTERVAL_S as in dyno mode (shm_mode.h), default 2 s */
        .period_s = shm_mode_poll_interval(penv_get(PENV_POLL_INTERVAL_S)),
        .on_config = native_on_config, .on_tick = native_on_tick, .on_exit = native_on_exit,
    };
    int rc = 0;

    pthread_mutex_lock(&native_lock);
    if (native_poller)
        goto out;
    poller_backoff_from_env(&cfg.backoff);
    health_set_identity("native", native_rank());
    rc = poller_create(&cfg, &native_poller);
    if (rc == 0)
        LOG_INFO("MsMonitorPoll: native poller started");
out:
    pthread_mutex_unlock(&native_lock);
    return rc;
}

void native_poller_stop(void)
{
    struct poller *p;

    pthread_mutex_lock(&native_lock);
    p = native_poller;
    native_poller = NULL;
    pthread_mutex_unlock(&native_lock);
    poller_destroy(p); /* joins outside the lock: the thread never takes it */
}
