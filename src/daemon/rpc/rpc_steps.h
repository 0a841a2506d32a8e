/* rpc_steps: the getSteps RPC method (docs/cluster.md §2): the step windows of this daemon,
 * the newest `last` steps of each (job, rank). */
#ifndef MSMON_DAEMON_RPC_STEPS_H
#define MSMON_DAEMON_RPC_STEPS_H

#include <cjson/cJSON.h>

#include "common/jw.h"
#include "daemon/ipc/steps.h"

#define RPC_STEPS_LAST_DEFAULT 64

/* {"fn":"getSteps"[,"last":N][,"job_id":J]} -> {"dropped":…,"ranks":[…],"window":128}; a bad
 * "last"/"job_id" gets {"status":"failed: <reason>"}. steps is borrowed, NULL when the
 * daemon keeps no windows (an empty reply). 0 or -ENOMEM. */
int rpc_steps_get(struct steps_store *steps, const cJSON *req, struct jw *w);

#endif
