/* markpair: the one marker pairing of the plugin (05-outputs.md §1.2, §3.3, §4.4). Records
 * of one marker id may arrive in any order, in different buffers, on different msPTI
 * completion threads (an END before its START): each part completes when both of its
 * records are in. Pending ids are bounded (oldest evicted) and aged out. */
#ifndef MSMON_PLUGIN_MARKPAIR_H
#define MSMON_PLUGIN_MARKPAIR_H

#include <stddef.h>
#include <stdint.h>

#include "plugin/pipeline/pipeline.h"
#include "plugin/pipeline/record.h"

#define MARKPAIR_PENDING_CAP 65536

struct markpair;

/* cap: most pending ids. Caller owns; free with markpair_destroy(). */
int markpair_create(size_t cap, struct markpair **ret);
void markpair_destroy(struct markpair *mp);
/* Feed one marker record (thread-safe, serialised internally). Returns 1 and fills *ret when
 * the record completed a part, else 0. now_ns: monotonic time, for aging. */
int markpair_feed(struct markpair *mp, const struct mon_marker *m, uint64_t now_ns, struct pl_range *ret);
/* Forget ids first seen more than max_age_ns before now_ns; returns how many. */
size_t markpair_expire(struct markpair *mp, uint64_t now_ns, uint64_t max_age_ns);
/* Pending ids (tests). */
size_t markpair_pending(struct markpair *mp);

#endif
