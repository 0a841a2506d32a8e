/* native_poller: the native poller thread `MsMonitorPoll` (docs/design/session.md#control-sources) for processes without
 * torch_npu: registers, polls every 2 s, applies npu-monitor and nputrace configs in-process
 * (apply_config) and reports the window's status; on stop it reports the -1 statuses. */
#ifndef MSMON_PLUGIN_NATIVE_POLLER_H
#define MSMON_PLUGIN_NATIVE_POLLER_H

#include <stddef.h>

/* Idempotent; 0 or -errno. */
int native_poller_start(void);
/* Joins the thread; no-op if not running. */
void native_poller_stop(void);
/* Apply one config text ("KEY=VALUE" lines) as the poller does (apply_text); exposed
 * for tests. */
int native_poller_apply_text(const char *text, size_t len);

#endif
