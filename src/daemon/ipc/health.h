/* health: live per-process health for getStatus (docs/daemon.md "Live health"). Parses the
 * plugin's PluginHealth reports and judges an entry: each problem is one mark, a stable code
 * and one line with its fix, which `dyno status` prints and `dyno doctor` fails. */
#ifndef MSMON_DAEMON_HEALTH_H
#define MSMON_DAEMON_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/jw.h"
#include "contract/cjx.h"
#include "contract/datamsg.h"
#include "contract/podid.h"
#include "daemon/ipc/status.h"

#define HEALTH_MSG_KIND DATAMSG_PLUGIN_HEALTH
#define HEALTH_MAX_MARKS 8
#define HEALTH_MARK_TEXT_CAP 1280
/* A config may wait this long for a step before it is a mark, or three step periods when a
 * step takes longer: a slow step is not a missing one. */
#define HEALTH_NO_STEP_MIN_MS 5000
/* Consecutive report intervals without a record while npu-monitor runs. */
#define HEALTH_QUIET_INTERVALS 2

struct health_mark {
    const char *code;     /* "gone", "no_records", "no_step", "filter_keeps_nothing", "backend_fallback",
                           * "no_backend", "dropping_declined", "dropping_write", "dropping_queue",
                           * "dropping_offline" */
    char text[HEALTH_MARK_TEXT_CAP];
};

/* A PluginHealth message into *ret; its pid into *ret_pid. -EINVAL (nothing written) when a
 * field is missing, of the wrong type or out of range, or a text is not printable. */
int health_parse(const cJSON *msg, struct status_health *ret, int32_t *ret_pid);
/* The optional pod fields of a PluginHealth message (podid.h keys "pod_name", "pod_namespace",
 * "node_name", "container_name": what the process reports about itself; "hostname" stands in for
 * an absent pod name, with ret->pod_from_hostname set). Absent fields stay "";
 * a field that is not a valid name is left out and counted: returns how many were refused. */
int health_parse_pod(const cJSON *msg, struct podid_self *ret);
/* The marks of one entry at now_ns (monotonic); gone: its pid no longer exists. Returns how
 * many were written (at most cap). Pure. */
size_t health_marks(const struct status_entry *e, bool gone, uint64_t now_ns, struct health_mark *out, size_t cap);
/* The "health" value of a getStatus process: {"backend":…,"interval":{…},"marks":[…],…}.
 * Nothing is written when the entry has nothing to say (no report, no mark). */
void health_write(struct jw *w, const struct status_entry *e, bool gone, uint64_t now_ns);
/* True when the entry has something for health_write (the caller writes the key first). */
bool health_has(const struct status_entry *e, bool gone);

#endif
