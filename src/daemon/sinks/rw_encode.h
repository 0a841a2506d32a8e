/* rw_encode: batches -> one Prometheus remote-write 1.0 request body: a WriteRequest protobuf
 * (protobuf-c, rw_remote.proto) compressed with snappy's block format. No I/O. */
#ifndef MSMON_DAEMON_RW_ENCODE_H
#define MSMON_DAEMON_RW_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/sinks/rw_queue.h"

/* Reusable scratch of one sender: the message tree, the packed and the compressed buffers
 * grow to the largest request seen and are kept, so a steady 1 s cadence allocates nothing
 * (and takes no page faults) after the first request. Zero-initialise; rw_encoder_fini(). */
struct rw_encoder {
    void *ts, *tsp, *sm, *smp, *lb, *lbp;
    size_t ns_cap, nl_cap;
    uint8_t *raw, *out;
    size_t raw_cap, out_cap;
};
void rw_encoder_fini(struct rw_encoder *e);

/* Encode every sample of the chain (one TimeSeries per sample: labels __name__ first, then
 * the sorted labels; one Sample with the batch's ms timestamp). *ret_body is borrowed from e
 * until its next use. *ret_samples: samples encoded. -ENOMEM, -EINVAL (corrupt batch), -EIO
 * (snappy). */
int rw_encode(struct rw_encoder *e, const struct rw_batch *chain, const uint8_t **ret_body, size_t *ret_len,
              size_t *ret_samples);

#endif
