/* steps: the daemon's bounded rolling window of per-rank step summaries (docs/cluster.md §2).
 * Fed by StepSummary `data` payloads (data_sink.c), read by the getSteps RPC (rpc_steps.c);
 * each new step also goes to the sinks as one record (the per-rank step series).
 * Thread-safe (one mutex), although the daemon calls it from its one loop. */
#ifndef MSMON_DAEMON_STEPS_H
#define MSMON_DAEMON_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "contract/datamsg.h"
#include "contract/podid.h"
#include "daemon/sinks/sink.h"

#define STEPS_KIND DATAMSG_STEP_SUMMARY
#define STEPS_WINDOW 128      /* steps kept per (job, rank) */
#define STEPS_MAX_RANKS 4096  /* (job, rank) windows per daemon; beyond: the stalest one goes */

/* One (job, rank) window as copied out by steps_snapshot. */
struct steps_rank {
    int64_t job;
    int32_t rank;        /* -1 when the process did not know its rank (keyed by pid then) */
    int32_t pid;
    char src[12];        /* "step" or "interval" */
    uint64_t updated_ns; /* monotonic time of the last summary */
    uint64_t plugin_dropped;
    char pod[PODID_VALUE_CAP]; /* the rank's pod as it reported it ("" unknown; docs/deploy.md#attribution) */
    char pod_namespace[PODID_VALUE_CAP];
    char container[PODID_VALUE_CAP];
    size_t n;            /* rows in use, oldest first */
    struct datamsg_step rows[STEPS_WINDOW];
};

struct steps_store;

/* 0 and *ret (caller owns; free with steps_destroy()), or -ENOMEM. */
int steps_create(struct steps_store **ret);
void steps_destroy(struct steps_store *s);

/* Who sent a StepSummary, when the kernel said (data_sink): the node's pid of the process, which
 * replaces the payload's own (a container's number), and its pod labels (borrowed, NULL unknown).
 * pid 0: the payload's pid as it is. */
struct steps_who {
    int32_t pid;
    const char *pod;
    const char *pod_namespace;
    const char *container;
};

/* One StepSummary message (already validated as a data payload). New rows are written to
 * out (borrowed; NULL: nowhere). Returns the number of rows stored, or -EINVAL when the
 * message is malformed (nothing stored; logged once per second). */
int steps_take(struct steps_store *s, const struct sink *out, const cJSON *msg, uint64_t wall_ns,
               uint64_t mono_ns, const struct steps_who *who);
/* Copy of every window, sorted by (job, rank, pid). Caller owns *ret (free()). */
int steps_snapshot(struct steps_store *s, struct steps_rank **ret, size_t *ret_n);
/* Counters: windows in use, messages refused, windows evicted. */
void steps_counters(struct steps_store *s, size_t *ret_ranks, uint64_t *ret_refused, uint64_t *ret_evicted);

#endif
