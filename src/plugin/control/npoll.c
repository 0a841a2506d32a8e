/* npoll: the native poller (docs/design/session.md#control-sources) as one control_poller: every 2 s it polls,
 * applies npu-monitor configs in this process, arms nputrace windows delimited by the
 * program's `step <N>` marker ranges (tracewin.h) and reports their status. Registration
 * retries with back-off until the daemon is reachable, so a job started before the daemon
 * is picked up once the daemon appears (control.h). */
#include "plugin/control/npoll.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/log.h"
#include "contract/cfgkeys.h"
#include "contract/names.h"
#include "contract/kvtext.h"
#include "contract/rank.h"
#include "msmon/ipc_wire.h"
#include "plugin/control/ack.h"
#include "plugin/control/control.h"
#include "plugin/control/dynamic.h"
#include "plugin/control/health.h"
#include "plugin/control/tracewin.h"
#include "plugin/penv.h"


static pthread_mutex_t npoll_lock = PTHREAD_MUTEX_INITIALIZER;
static struct control_poller *npoll_poller;

int npoll_apply_text(const char *text, size_t len)
{
    return control_apply_text(text, len);
}

/* RANK, else RANK_ID (docs/design/session.md#control-sources); unknown registers as npu 0. */
static int32_t npoll_rank(void)
{
    int32_t r = rank_resolve(penv_get(PENV_RANK), penv_get(PENV_RANK_ID));

    return r == RANK_UNKNOWN ? 0 : r;
}

/* An nputrace config, answered to the daemon (ack.h) with the reason its line logs. */
static void npoll_trace_config(const char *text, size_t len)
{
    char id[ACK_ID_CAP] = "", why[ACK_REASON_CAP + 1];
    const char *note = "";
    struct kvtext kv;
    int rc;

    if (kvtext_parse(text, len, &kv) == 0) {
        const char *am = kvtext_get(&kv, CFGKEY_PROFILE_ASYNC_MODE);
        ack_find_id(kv.keys, kv.values, kv.n, id);
        /* an option of the PyTorch profiler: named, so a user does not wait for it */
        if (cfgkeys_true(am))
            note = "--async-mode applies to PyTorch processes only; ignored by this native process";
        kvtext_fini(&kv);
    }
    log_reason_begin(why, sizeof(why));
    rc = tracewin_native_config(text, len, npoll_rank());
    log_reason_end();
    if (rc == 0 && why[0])
        rc = -EINVAL; /* ignored with an ERROR line (a rank not in the list, a passed step) */
    {
        struct tracewin_status st;
        tracewin_status(&st); /* the window's own state, not a guess */
        (void)ack_send(id, rc == 0 ? "applied" : "rejected", rc == 0 ? note : why[0] ? why : "not applied",
                       names_ipc_status(st.status));
    }
}

static void npoll_on_config(void *ctx, const char *text, size_t len)
{
    (void)ctx;
    health_note_config();
    /* nputrace: no step call here; the program's `step <N>` marker ranges delimit it */
    if (cfgkeys_classify_text(text, len) == CFGKEYS_NPU_TRACE)
        npoll_trace_config(text, len);
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
        .name = "MsMonitorPoll", .rank = npoll_rank(),
        /* MSMONITOR_POLL_INTERVAL_S as in dyno mode (dynamic.h), default 2 s */
        .period_s = dyn_poll_interval(penv_get(PENV_POLL_INTERVAL_S)),
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
