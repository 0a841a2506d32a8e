/* batch: what one delivery through the pipeline carries (docs/design/session.md#pipeline): the
 * kept records in arrival order and the marker parts they completed. The pairing (markpair)
 * builds the parts, the window stage holds batches, and every output receives them
 * (output.h); none of them needs the pipeline itself for it. */
#ifndef MSMON_PLUGIN_BATCH_H
#define MSMON_PLUGIN_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin/pipeline/record.h"

/* A marker part completed by a batch: the host part (host START + END in either order, or a
 * host instant) or the device part (device START + END, or a device instant). */
enum pl_part { PL_PART_HOST = 1, PL_PART_DEVICE = 2 };

struct pl_range {
    uint64_t id;
    uint32_t done;              /* the part this event completes: PL_PART_HOST or PL_PART_DEVICE */
    uint32_t parts;             /* parts whose fields are valid (done, plus an earlier one) */
    bool instant;
    bool with_device;           /* the host records were *_WITH_DEVICE (a device part belongs) */
    uint64_t host_start, host_end;
    uint32_t pid, tid;          /* host START (instant: the record) */
    uint32_t end_pid, end_tid;  /* host END (instant: the record) */
    uint64_t dev_start, dev_end;
    uint32_t device_id, stream_id; /* device END (instant: the record) */
    const char *name, *domain;  /* host START/instant's, else the device record's; never NULL */
    size_t at;                  /* index in pl_batch.recs of the record that completed it */
};

/* What an output receives per delivery. recs: kept records in arrival order (markers
 * included: the DB numbers their strings); ranges: ascending `at`. Borrowed for the call. */
struct pl_batch {
    const struct mon_record *recs;
    size_t nrecs;
    const struct pl_range *ranges;
    size_t nranges;
};

/* The metric rule of docs/design/outputs.md#metric-datagrams: a range is reported once all its parts are in. */
static inline bool pl_range_complete(const struct pl_range *r)
{
    return !r->instant && (r->with_device ? r->parts == (PL_PART_HOST | PL_PART_DEVICE) : r->done == PL_PART_HOST);
}

#endif
