/* plog: plugin logging set-up (docs/design/session.md#logging): one log file per process under
 * $MSMONITOR_LOG_PATH/msmonitor_log (else <cwd>/msmonitor_log), ERROR also on stderr. */
#ifndef MSMON_PLUGIN_PLOG_H
#define MSMON_PLUGIN_PLOG_H

#include <stddef.h>

/* Idempotent and thread-safe; the first call does the work. Never fails: on error the
 * plugin logs to stderr only. */
void plog_init(void);
/* Path of the log file ("" when logging to stderr only). Borrowed for the process. */
const char *plog_path(void);

#endif
