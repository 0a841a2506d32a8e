/* npoll: the native poller thread `MsMonitorPoll` (docs/design/session.md#control-sources) for processes without
 * torch_npu: registers, polls every 2 s, applies npu-monitor configs in-process and reports
 * trace status Idle; on stop it reports the -1 statuses. */
#ifndef MSMON_PLUGIN_NPOLL_H
#define MSMON_PLUGIN_NPOLL_H

#include <stddef.h>

/* Idempotent; 0 or -errno. */
int npoll_start(void);
/* Joins the thread; no-op if not running. */
void npoll_stop(void);
/* Apply one config text ("KEY=VALUE" lines) if it contains NPU_MONITOR_START; exposed for
 * tests. Returns 0 applied, -ENOMSG ignored (not an npu-monitor config), -EINVAL invalid. */
int npoll_apply_text(const char *text, size_t len);

#endif
