/* apply: the one apply of a config and its one answer (docs/design/session.md#the-route-of-a-config).
 * Whatever the entry point (the native poller, a dyno-mode rank at its step, the C API and
 * Python), a config parsed once by pconfig comes here: npu-monitor to the session actor,
 * nputrace to the actor's window; whatever happens, it is answered once, by apply_answer. */
#ifndef MSMON_PLUGIN_APPLY_H
#define MSMON_PLUGIN_APPLY_H

#include <stddef.h>
#include <stdint.h>

#include "plugin/control/pconfig.h"

/* Where a config entered the plugin (docs/design/session.md#the-route-of-a-config). */
enum apply_entry {
    APPLY_ENTRY_NATIVE,  /* the native poller: no step call, a window is marker-bounded */
    APPLY_ENTRY_STEP,    /* a dyno-mode rank at its step(): a window is step-bounded */
    APPLY_ENTRY_API,     /* the C API / Python (enable_dyno_npu_monitor): npu-monitor only */
};
struct apply_source {
    enum apply_entry entry;
    int32_t rank;          /* the window's rank selection */
    int32_t step;          /* APPLY_ENTRY_STEP: the step the config was read at; else -1 */
    int32_t aligned;       /* APPLY_ENTRY_STEP: the creator's start step for -1; -1 none */
};

/* The one apply of a config parsed by pconfig (parse_rc its result): an npu-monitor config goes
 * to the session, an nputrace config arms the session's window, anything else is refused; the
 * exclusion between the two is the session's one decision (monitor.h). Every config is answered
 * once, from here (ack.h), with applied / applied, partly / rejected. 0 applied (also partly),
 * -EINVAL refused or invalid, -ENOMSG neither class, -ENOMEM. */
int apply_config(const struct pconfig *cfg, int parse_rc, const struct apply_source *src);
/* Parse text (pconfig_parse_text) and apply_config it. */
int apply_text(const char *text, size_t len, const struct apply_source *src);

#endif
