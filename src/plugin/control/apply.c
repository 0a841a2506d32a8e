/* apply: the one apply and the one answer (apply.h). */
#include "plugin/control/apply.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/strutil.h"
#include "contract/names.h"
#include "msmon/ipc_wire.h"
#include "plugin/control/ack.h"
#include "plugin/control/monitor.h"

/* The one acknowledgement (ack.h): outcome, reason and the state afterwards. An applied
 * config's reason is its notes (unknown keys); a partly applied one's adds them. */
static void apply_answer(const char *id, const char *notes, const struct monitor_result *r)
{
    static const char *const words[] = { [MONITOR_APPLIED] = "applied", [MONITOR_PARTLY] = "partly",
                                         [MONITOR_REJECTED] = "rejected" };
    char reason[ACK_REASON_CAP + 1];

    reason[0] = '\0';
    (void)str_append(reason, sizeof(reason), r->reason);
    if (r->outcome != MONITOR_REJECTED && notes && notes[0]) {
        (void)str_append(reason, sizeof(reason), r->reason[0] ? "; " : "");
        (void)str_append(reason, sizeof(reason), notes);
    }
    (void)ack_send(id, words[r->outcome], reason, r->state);
}

/* Answer a config that never reached the session (invalid, or of no class). */
static void apply_refuse(const struct pconfig *cfg, const char *reason)
{
    struct monitor_result r = { .outcome = MONITOR_REJECTED };
    struct monitor_window_view v;

    if (cfg->cls == CFGKEYS_NPU_TRACE) {
        monitor_window_view(&v);
        r.state = names_ipc_status(v.state < 0 ? IPC_STATUS_IDLE : v.state);
    } else {
        r.state = names_ipc_status(monitor_running() ? IPC_STATUS_RUNNING : IPC_STATUS_IDLE);
    }
    snprintf(r.reason, sizeof(r.reason), "%s", reason);
    apply_answer(cfg->id, "", &r);
}

int apply_config(const struct pconfig *cfg, int parse_rc, const struct apply_source *src)
{
    if (parse_rc == -ENOMSG) {
        LOG_INFO("MsMonitorPoll: ignored a config that is neither an npu-monitor nor an nputrace config");
        apply_refuse(cfg, "not an npu-monitor or nputrace config (gputrace targets Kineto clients)");
        return -ENOMSG;
    }
    if (parse_rc != 0) {
        apply_refuse(cfg, cfg->errors[0] ? cfg->errors : "invalid config");
        return parse_rc == -ENOMEM ? -ENOMEM : -EINVAL;
    }
    if (cfg->cls == CFGKEYS_NPU_MONITOR) {
        (void)monitor_handle_config(&cfg->mon, cfg->id, cfg->notes, apply_answer);
        return 0; /* answered by the session, whatever the outcome */
    }
    if (src->entry == APPLY_ENTRY_API) {
        apply_refuse(cfg, "an nputrace config reaches a process through its poller, not this API");
        return -EINVAL;
    }
    {
        struct monitor_arm a = { .opts = cfg->trace, .rank = src->rank, .step = src->step,
                                 .aligned = src->aligned, .native = src->entry == APPLY_ENTRY_NATIVE };
        char notes[PCONFIG_NOTES_CAP];

        notes[0] = '\0';
        (void)str_append(notes, sizeof(notes), cfg->notes);
        /* an option of the PyTorch profiler: named, so a user does not wait for it */
        if (a.native && (cfg->trace.flags & PCONFIG_TRACE_ASYNC)) {
            (void)str_append(notes, sizeof(notes), cfg->notes[0] ? "; " : "");
            (void)str_append(notes, sizeof(notes), "--async-mode applies to PyTorch processes only; ignored by "
                                                   "this native process");
        }
        return monitor_window_arm(&a, cfg->id, notes, apply_answer) == -ENOMEM ? -ENOMEM : 0;
    }
}

int apply_text(const char *text, size_t len, const struct apply_source *src)
{
    struct pconfig *cfg = malloc(sizeof(*cfg)); /* ~11 KiB: keep it off small framework thread stacks */
    int rc;

    if (!cfg)
        return -ENOMEM;
    rc = pconfig_parse_text(text, len, cfg);
    rc = apply_config(cfg, rc, src);
    free(cfg);
    return rc;
}
