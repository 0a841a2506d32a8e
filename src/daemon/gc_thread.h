/* gc_thread: the "kinetoConfigMgr" thread (03-ipc.md §4.6): every interval it forgets idle
 * registry processes and prunes the status table of dead reporters. */
#ifndef MSMON_DAEMON_GC_THREAD_H
#define MSMON_DAEMON_GC_THREAD_H

#include <stdint.h>

#include "daemon/registry.h"
#include "daemon/status.h"

struct gc_thread;

/* reg and st are borrowed until gc_thread_destroy(). Caller owns the result. */
struct gc_thread *gc_thread_create(struct registry *reg, struct status_table *st,
                                   uint64_t interval_ms, uint64_t age_ms);
int gc_thread_start(struct gc_thread *g);
/* Wake and join the thread; frees it. */
void gc_thread_destroy(struct gc_thread *g);

#endif
