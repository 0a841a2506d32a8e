/* sim_dev: simulated device timelines, one per (device, stream), and the `mssim-device`
 * thread that appends device records once the wall clock passes their end (+ lag). */
#ifndef MSMON_SIM_DEV_H
#define MSMON_SIM_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_MAX_DEVICES 1024
#define SIM_DEV_REC_MAX 72

/* Start of work submitted at host time t: max(t, stream busy-until). With advance, the stream
 * is busy until start + dur afterwards. */
uint64_t sim_dev_place(uint32_t device, uint32_t stream, uint64_t t, uint64_t dur, bool advance);
/* Stream dst starts no earlier than the current end of stream src (an event wait). */
void sim_dev_stream_wait(uint32_t device, uint32_t dst, uint32_t src);
/* Queue a device record (<= SIM_DEV_REC_MAX bytes) to be appended at visible_ns. */
int sim_dev_submit(uint32_t device, uint64_t visible_ns, const void *rec, size_t size);
/* Wait until no record of device (-1: any) is queued. */
void sim_dev_synchronize(int32_t device);
/* Append now every queued record of `kind` (in visibility order) — what msptiActivityDisable
 * does for device kinds ("disabling a device kind first flushes that kind's device data",
 * docs/design/mspti.md#runtime-semantics), so a consumer's stop sequence disable -> FlushAll loses nothing in flight. */
void sim_dev_flush_kind(int32_t kind);
/* Drop queued records and timelines. */
void sim_dev_reset(void);

#endif
