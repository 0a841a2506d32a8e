/* markpair: the one marker pairing of the plugin (docs/design/outputs.md#metric-datagrams, #tables, #line-shapes). Records
 * of one marker id may arrive in any order, in different buffers, on different msPTI
 * completion threads (an END before its START): each part completes when both of its
 * records are in. Pending ids are bounded (oldest evicted) and aged out. */
#ifndef MSMON_PLUGIN_MARKPAIR_H
#define MSMON_PLUGIN_MARKPAIR_H

#include <stddef.h>
#include <stdint.h>

#include "plugin/pipeline/batch.h"
#include "plugin/pipeline/record.h"

#define MARKPAIR_PENDING_CAP 65536

struct markpair;

/* cap: most pending ids. Caller owns; free with markpair_destroy(). */
int markpair_create(size_t cap, struct markpair **ret);
void markpair_destroy(struct markpair *mp);
/* Feed one marker record (thread-safe, serialised internally). Returns how many parts the
 * record completed (0, 1 or 2) and fills ret[0..n). A device part is named by its host START:
 * when the device records are in first it waits, and the host START then completes it (after
 * the host part, when the END was in too: two parts). now_ns: monotonic time, for aging. */
int markpair_feed(struct markpair *mp, const struct mon_marker *m, uint64_t now_ns, struct pl_range ret[2]);
/* A host START cut by the session start (its range is not reported): its name and domain
 * still name the device part. Returns 1 and fills *ret when a waiting device part completes
 * with it, else 0. Other records: 0, nothing changes. */
int markpair_feed_cut(struct markpair *mp, const struct mon_marker *m, uint64_t now_ns, struct pl_range *ret);
/* Forget ids first seen more than max_age_ns before now_ns; returns how many. A device part
 * still waiting for its host START is not lost: it completes with the device records' own
 * name into out[0..*ret_nout) (at most cap; when out is full the rest stay for the next call).
 * At session end: now_ns = UINT64_MAX, max_age_ns = 0 until nothing is left. */
size_t markpair_expire(struct markpair *mp, uint64_t now_ns, uint64_t max_age_ns, struct pl_range *out, size_t cap,
                       size_t *ret_nout);
/* Pending ids (tests). */
size_t markpair_pending(struct markpair *mp);

#endif
