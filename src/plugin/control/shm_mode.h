/* shm_mode: dyno mode (docs/design/ipc.md#shared-memory-handoff): the framework side of a job
 * whose configs reach its ranks through the job's segment (shm_segment.h), implemented once
 * for C programs (msmon_dynamic_*) and msmonitor.dynamic_profile (IPCMonitor_C.dynamic). One
 * rank per job runs the poller (poller.h) and publishes what the daemon delivered; every rank,
 * at its step, parses a new config once and applies it (apply.h), emits its `step <N>` range
 * (step_marks.h) and notes its step for the alignment (step_slots.h). When the poller's rank
 * leaves first, another rank of the job takes the poller over. */
#ifndef MSMON_PLUGIN_SHM_MODE_H
#define MSMON_PLUGIN_SHM_MODE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "plugin/control/poller.h"

#define SHM_MODE_POLL_S 2.0

/* MSMONITOR_USE_DAEMON, else the deprecated KINETO_USE_DAEMON (warns), as an integer after
 * trimming whitespace; only 1 enables. Bad values warn "... value not valid, will be set to 0 !".
 * The warning goes to why ("" when none), or with why NULL to the log. */
bool shm_mode_use_daemon(const char *msmon, const char *kineto, char *why, size_t cap);
/* MSMONITOR_POLL_INTERVAL_S in [0.1, 50] (default 2) and MSMONITOR_SHM_STALE_S >= 0 (default
 * 60); NULL means unset; invalid values warn and give the default. */
double shm_mode_poll_interval(const char *raw);
long shm_mode_stale_seconds(const char *raw);

/* msmon_dynamic_init(): join dyno mode as `rank` (< 0: RANK, else RANK_ID, else 0). 0 active
 * (also when already active), -ENOTSUP dyno mode not asked for by the environment, -ESTALE
 * stale segment of a live creator (logged with the `rm -f` hint), -ECHILD in a fork()ed
 * child of a joined process (init and step are no-ops there), -errno.
 * SHM_MODE_ECHO: the lifecycle lines (attached, poller, config published, takeover) also go
 * to stderr as "[LEVEL] [msmonitor.dynamic_profile <pid>] ..." (the Python module's form). */
#define SHM_MODE_ECHO 1u
int shm_mode_init(int32_t rank, unsigned flags);
/* msmon_dynamic_step(): 0 (a no-op when inactive). */
int shm_mode_step(void);
/* msmon_dynamic_step_nowait(): the same step when it can be done without waiting (no config
 * to apply, the nputrace window does not move, no poller to take over, nobody else holds the
 * state): 1 done (or inactive), 0 nothing done — call shm_mode_step(), which may wait. */
int shm_mode_step_nowait(void);
/* Called on the stepping thread just before a config with NPU_MONITOR_STOP true is applied
 * (the Python module sets the cluster layout there). NULL clears it. */
void shm_mode_set_stop_hook(void (*fn)(void *ctx), void *ctx);

/* Where this process stands in dyno mode. */
struct shm_mode_info {
    bool enabled, creator, poller;
    int32_t rank, step;
    char path[PATH_MAX];
    struct poller_state poller_state; /* when poller */
};
void shm_mode_get_info(struct shm_mode_info *ret);

/* Tear down (also the atexit handler): end the step range, stop the session, stop the
 * poller, unmap, unlink the segment if we created it. Idempotent. */
void shm_mode_finalize(void);

#endif
