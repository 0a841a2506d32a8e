/* rw_encode: batches -> one Prometheus remote-write 1.0 request body: a WriteRequest protobuf
 * (protobuf-c, rw_remote.proto) compressed with snappy's block format. No I/O. */
#ifndef MSMON_DAEMON_RW_ENCODE_H
#define MSMON_DAEMON_RW_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/rw_queue.h"

/* Encode every sample of the chain (one TimeSeries per sample: labels __name__ first, then
 * the sorted labels; one Sample with the batch's ms timestamp). Caller owns *ret_body; free().
 * *ret_samples: samples encoded. -ENOMEM, -EINVAL (corrupt batch), -EIO (snappy). */
int rw_encode(const struct rw_batch *chain, uint8_t **ret_body, size_t *ret_len, size_t *ret_samples);

#endif
