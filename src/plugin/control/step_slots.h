/* step_slots: every rank's current step, for the nputrace alignment of dyno mode
 * (docs/design/ipc.md#poller): `msmonitor_steps.<segment name>` next to the segment, STEP_SLOTS_N
 * uint32 slots; rank r writes its step at slot r % STEP_SLOTS_N each step, the job's poller
 * takes the maximum when it publishes a config. A side file, not the segment, because the
 * segment holds the daemon's text as it came. Only the poller's rank creates (and at exit
 * unlinks) it; the others map it when it is there. Best effort: without it the poller aligns
 * on its own step. One per process, guarded by dyno mode's lock. */
#ifndef MSMON_PLUGIN_STEP_SLOTS_H
#define MSMON_PLUGIN_STEP_SLOTS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#define STEP_SLOTS_N 4096u
#define STEP_SLOTS_RETRY 64u /* steps between a rank's tries to map a file not there yet */

struct step_slots {
    uint32_t *slots;         /* mapped, NULL when not (yet) */
    uint32_t retry;          /* steps until the next try */
    char path[PATH_MAX + 32];
};

/* The side file of the segment at seg_path; create: the poller's rank (zeroed: a killed job's
 * steps must not push the start away), else map it if it is there. A file another user could
 * write is refused (one WARNING). */
void step_slots_open(struct step_slots *s, const char *seg_path, bool create);
/* The stepping thread's step; a rank that has no mapping yet retries every STEP_SLOTS_RETRY
 * steps. */
void step_slots_note(struct step_slots *s, int32_t rank, int32_t step);
/* The highest step any rank reports, at least own (the poller's thread). */
int32_t step_slots_max(const struct step_slots *s, int32_t own);
/* Unmap; remove the file when ours (the poller's rank that created it). */
void step_slots_close(struct step_slots *s, bool ours);

#endif
