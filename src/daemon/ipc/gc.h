/* gc: the registry/status garbage collection of docs/design/ipc.md#garbage-collection (upstream's "kinetoConfigMgr"
 * thread), here a periodic timer on the daemon loop: every interval it forgets idle registry
 * processes and prunes the status table of dead reporters. */
#ifndef MSMON_DAEMON_GC_H
#define MSMON_DAEMON_GC_H

#include <stdint.h>

#include "daemon/ipc/peer.h"
#include "daemon/ipc/registry.h"
#include "daemon/ipc/status.h"
#include "daemon/loop.h"

struct gc;

/* Arms a periodic timer of interval_ms on l. l, reg and st are borrowed until gc_destroy().
 * Caller owns *ret; free with gc_destroy(). */
int gc_create(struct loop *l, struct registry *reg, struct status_table *st,
              uint64_t interval_ms, uint64_t age_ms, struct gc **ret);
/* Also drop the sender-cache entries of exited processes every interval (peers borrowed). */
void gc_set_peers(struct gc *g, struct peer_cache *peers);
/* One more task for every interval (fn(arg); the IPC server's socket sweep). */
void gc_set_task(struct gc *g, void (*fn)(void *arg), void *arg);
/* Cancels the timer and frees g. NULL is a no-op. */
void gc_destroy(struct gc *g);

#endif
