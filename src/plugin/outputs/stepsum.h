/* stepsum: per-rank step summaries of metric mode (docs/cluster.md §1). From each completed
 * `step <N>` range and the device activity inside it, one compact summary per step: wall,
 * compute (kernels), communication, memcpy/memset and host-side gap time. Sent with the
 * interval data as `StepSummary` datagrams; without step ranges, one summary per interval. */
#ifndef MSMON_PLUGIN_STEPSUM_H
#define MSMON_PLUGIN_STEPSUM_H

#include <stddef.h>
#include <stdint.h>

#include "contract/datamsg.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/pipeline.h"

#define STEPSUM_KIND DATAMSG_STEP_SUMMARY
#define STEPSUM_IV_CAP 262144   /* device activity intervals held between ticks */
#define STEPSUM_STEP_CAP 4096   /* completed steps held between ticks */


struct stepsum;

/* Caller owns; free with stepsum_destroy(). */
int stepsum_create(int32_t rank, int32_t pid, struct stepsum **ret);
void stepsum_destroy(struct stepsum *s);
/* Completion path (any thread): the batch's device activity and completed step ranges. */
void stepsum_feed(struct stepsum *s, const struct pl_batch *b);
/* Report interval: summaries of the steps completed so far, as datagrams through send.
 * interval_ns: length of the interval ending now (for the per-interval fallback). */
int stepsum_tick(struct stepsum *s, output_send_fn send, void *ctx, uint64_t now_ns, uint64_t interval_ns);

/* Pure: one summary per step range from intervals ivs (start-sorted) — used by the tick and
 * the unit tests. cls: 0 compute, 1 communication (whole op), 2 memcpy/memset, 3 transfer (the
 * Hccl records: the data movement of a collective, docs/cluster.md §1). */
struct stepsum_iv {
    uint64_t s, e;
    uint32_t cls;
};
void stepsum_compute(const struct stepsum_iv *ivs, size_t n, uint64_t s, uint64_t e, struct datamsg_step *ret);
/* Pure: the datagram for rows[0..n): returns its length (≤ cap) or 0 when it does not fit. */
size_t stepsum_json(const struct datamsg_step *rows, size_t n, int32_t rank, int32_t pid, const char *src,
                    uint64_t dropped, uint64_t now_ns, char *buf, size_t cap);

#endif
