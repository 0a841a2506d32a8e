/* datamsg: the `data` message envelope the plugin sends the daemon (docs/design/contract.md#data-messages):
 * one JSON object with upstream's keys deviceId, duration, kind, timestamp (and name when the
 * message has one) plus the extra keys of its data kind, all written in sorted key order.
 * One builder for every sender (metric lines, OpStats, StepSummary, PluginStats, PluginInfo). */
#ifndef MSMON_CONTRACT_DATAMSG_H
#define MSMON_CONTRACT_DATAMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/jw.h"

/* Data kinds beyond the eleven activity kinds (the daemon's own key sets: docs/design/ipc.md). */
#define DATAMSG_OP_STATS "OpStats"
#define DATAMSG_PLUGIN_STATS "PluginStats"
#define DATAMSG_PLUGIN_INFO "PluginInfo"
#define DATAMSG_PLUGIN_HEALTH "PluginHealth"
#define DATAMSG_STEP_SUMMARY "StepSummary"
#define DATAMSG_CONFIG_ACK "ConfigAck"

#define DATAMSG_EXTRA_MAX 24 /* extra keys per message */

/* A StepSummary's per-step durations, in key order: X(field, key, what). "wait" and
 * "transfer" came later; a reader accepts a row without them (all transfer). */
#define DATAMSG_STEP_FIELDS(X)                                                                   \
    X(comm_ns, "comm", "communication time inside the step (= wait + transfer)")               \
    X(compute_ns, "compute", "kernel time inside the step (sum over streams)")                 \
    X(host_ns, "host", "wall time with no device activity at all: host-side gaps")             \
    X(memcpy_ns, "memcpy", "memcpy + memset time inside the step")                             \
    X(start_ns, "start", "first timestamp of the step (host or device part)")                  \
    X(transfer_ns, "transfer", "of comm: moving data (the Hccl records' time; comm when none)") \
    X(wait_ns, "wait", "of comm: waiting for the other members (0 when not split)")            \
    X(wall_ns, "wall", "step end - start")

/* One step of a StepSummary, as the plugin sends it and the daemon keeps it. */
struct datamsg_step {
    int64_t step; /* N of `step <N>`; the interval number when the summary's src is "interval" */
#define DATAMSG_STEP_FIELD(field, key, what) uint64_t field;
    DATAMSG_STEP_FIELDS(DATAMSG_STEP_FIELD)
#undef DATAMSG_STEP_FIELD
};

/* One step row as a JSON object, keys sorted. */
void datamsg_step_write(struct jw *w, const struct datamsg_step *r);

enum datamsg_type { DATAMSG_INT, DATAMSG_UINT, DATAMSG_STR, DATAMSG_BOOL, DATAMSG_FN };

/* One extra key. STR: s[0..slen) (slen SIZE_MAX: up to the NUL; s NULL: ""). FN: fn writes the value. */
struct datamsg_field {
    const char *key;
    enum datamsg_type type;
    int64_t i;
    uint64_t u;
    const char *s;
    size_t slen;
    bool b;
    void (*fn)(struct jw *w, const void *ctx);
    const void *ctx;
};

struct datamsg {
    const char *kind;
    int64_t device_id;   /* < 0: no device, written -1 */
    uint64_t duration;
    uint64_t timestamp;
    const char *name;    /* NULL: no "name" key */
    size_t name_len;     /* SIZE_MAX: up to the NUL */
};

/* The message m with extra[0..n) into w (initialised by the caller), keys sorted. 0, or
 * -EINVAL (no kind, n > DATAMSG_EXTRA_MAX, a NULL key or FN) or w's error (-ENOSPC). */
int datamsg_write(struct jw *w, const struct datamsg *m, const struct datamsg_field *extra, size_t n);

#endif
