/* proc_memory: the standalone Monitor processor (docs/design/session.md#standalone-monitor): collects API kinds,
 * Kernel, Communication and paired Marker records into msmon_result arrays that stay
 * readable after the session until the next standalone session is created. */
#ifndef MSMON_PLUGIN_PROC_MEMORY_H
#define MSMON_PLUGIN_PROC_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "msmon/msmonitor.h"

/* Called by the core at msmon_monitor_start before creating the session. Kinds outside the
 * seven standalone kinds and repeats are dropped; -EINVAL if none is left (nothing changed). */
int proc_memory_set_requested_kinds(const int32_t *kinds, size_t n);
/* Kinds of the last start, in start order; -ENOSPC if cap is too small (*ret_n = needed). */
int proc_memory_kinds(int32_t *out, size_t cap, size_t *ret_n);
/* Results of kind from the last session; borrowed until the next standalone session is
 * created (or proc_memory_reset). -EINVAL for a kind that is not a standalone kind; -EBUSY
 * while a session is collecting (the arrays may move), i.e. results are read after stop. */
int proc_memory_results(int32_t kind, const struct msmon_result **arr, size_t *ret_n);
/* Free every result (process exit, tests). Not concurrent with a running session. */
void proc_memory_reset(void);

#endif
