/* npoll: the native poller (04-plugin.md §12) as one control_poller: every 2 s it polls,
 * applies npu-monitor configs in this process, arms nputrace windows delimited by the
 * program's `step <N>` marker ranges (tracewin.h) and reports their status. Registration
 * retries with back-off until the daemon is reachable, so a job started before the daemon
 * is picked up once the daemon appears (control.h). */
#include "plugin/control/npoll.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/log.h"
#include "contract/rank.h"
#include "msmon/ipc_wire.h"
#include "plugin/control/control.h"
#include "plugin/control/health.h"
#include "plugin/control/tracewin.h"
#include "plugin/penv.h"

#define NPOLL_PERIOD_S 2.0

static pthread_mutex_t npoll_lock = PTHREAD_MUTEX_INITIALIZER;
static struct control_poller *npoll_poller;

int npoll_apply_text(const char *text, size_t len)
{
    return control_apply_text(text, len);
}

/* RANK, else RANK_ID (§12); unknown registers as npu 0. */
static int32_t npoll_rank(void)
{
    int32_t r = rank_resolve(penv_get(PENV_RANK), penv_get(PENV_RANK_ID));

    return r == RANK_UNKNOWN ? 0 : r;
}

static void npoll_on_config(void *ctx, const char *text, size_t len)
{
    (void)ctx;
    health_note_config();
    /* nputrace: no step call here; the program's `step <N>` marker ranges delimit it */
    if (tracewin_is_trace_text(text, len))
        (void)tracewin_native_config(text, len, npoll_rank());
    else
        (void)control_apply_text(text, len);
}

static void npoll_on_tick(void *ctx)
{
    int32_t st, step, start, stop;

    (void)ctx;
    tracewin_native_tick(&st, &step, &start, &stop);
    (void)control_report_status(st, step, start, stop);
    (void)health_send(); /* live health for `dyno status` (docs/daemon.md "Live health") */
}

static void npoll_on_exit(void *ctx)
{
    (void)ctx;
    (void)control_report_status(IPC_STATUS_UNINITIALIZED, -1, -1, -1);
}

int npoll_start(void)
{
    struct control_poller_cfg cfg = {
        .name = "MsMonitorPoll", .rank = npoll_rank(), .period_s = NPOLL_PERIOD_S,
        .on_config = npoll_on_config, .on_tick = npoll_on_tick, .on_exit = npoll_on_exit,
    };
    int rc = 0;

    pthread_mutex_lock(&npoll_lock);
    if (npoll_poller)
        goto out;
    control_backoff_from_env(&cfg.backoff);
    health_set_identity("native", npoll_rank());
    rc = control_poller_create(&cfg, &npoll_poller);
    if (rc == 0)
        LOG_INFO("MsMonitorPoll: native poller started");
out:
    pthread_mutex_unlock(&npoll_lock);
    return rc;
}

void npoll_stop(void)
{
    struct control_poller *p;

    pthread_mutex_lock(&npoll_lock);
    p = npoll_poller;
    npoll_poller = NULL;
    pthread_mutex_unlock(&npoll_lock);
    control_poller_destroy(p); /* joins outside the lock: the thread never takes it */
}
