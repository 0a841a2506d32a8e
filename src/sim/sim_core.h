/* sim_core: process-wide state of the simulated msPTI runtime — subscription, enabled kinds,
 * callback domains, the consumer buffer path (lazy request, 80 % rotation, drops, NULL
 * completions), the ActivityManager thread and FlushAll (spec docs/design/mspti.md#runtime-semantics, #simulator). */
#ifndef MSMON_SIM_CORE_H
#define MSMON_SIM_CORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msmon/mspti.h"
#include "msmon/mssim.h"
#include "sim/sim_env.h"

#define SIM_EXPORT __attribute__((visibility("default")))

/* Idempotent; every exported entry point calls it first. */
void sim_core_init(void);
/* True once sim_core_init has completed (acquire): lets hot entry points skip pthread_once. */
extern _Atomic bool sim_core_g_ready;
static inline bool sim_core_ready(void)
{
    return atomic_load_explicit(&sim_core_g_ready, memory_order_acquire);
}
/* Knobs of the current load (stable between mssim_reset calls). */
const struct sim_knobs *sim_knobs(void);

bool sim_subscribed(void);
bool sim_kind_enabled(int kind);
void sim_kind_set(int kind, bool on);
/* Hccl/Memory/MemSet/MemCpy in profiles < 26.0 produce records only with LD_PRELOAD or the
 * check disabled (docs/design/mspti.md#knobs). */
bool sim_kind_produces(int kind);

/* Callback domain/cbid enablement and delivery (docs/design/mspti.md#driver-api). */
int sim_callback_enable(bool on, msptiSubscriberHandle h, int domain, int cbid); /* msptiResult */
void sim_callback(int domain, uint32_t cbid, int site, const char *function_name);

/* Append one record through the buffer path (no-op when unsubscribed). */
/* Append a driver-built record; dropped if its kind is not enabled at that moment. The check
 * runs under the buffer lock and disabling takes that lock too, so once Disable returns no
 * record of the kind can slip into a buffer after the consumer's FlushAll. */
void sim_append(const void *rec, size_t size);
/* Append verbatim (mssim_emit_raw): only the subscription is checked. */
void sim_append_raw(const void *rec, size_t size);
/* Bulk append for benchmarks: n records cycling over ntmpl templates. Returns appended. */
uint64_t sim_append_bulk(const void *const *tmpls, const size_t *sizes, size_t ntmpl, uint64_t n);

void sim_stats_add_suppressed(void);
void sim_core_get_stats(struct mssim_stats *out);
/* mssim_reset's part for this module (see mssim.h). */
void sim_core_reset(void);


#endif
