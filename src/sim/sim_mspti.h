/* sim_mspti: the record-level msPTI functions (kinds, GetNextRecord, external correlation,
 * marker domains, callback enabling, result strings) and what the driver needs from them. */
#ifndef MSMON_SIM_MSPTI_H
#define MSMON_SIM_MSPTI_H

#include <stddef.h>
#include <stdint.h>

/* Emit the ExternalCorrelation records that precede an API record (docs/design/mspti.md#runtime-semantics). */
void sim_ext_emit(uint64_t correlation_id);
/* Forget the calling thread's external-correlation stacks (mssim_reset). */
void sim_ext_reset_thread(void);
/* Record stride of a kind known to the current profile; 0 when unknown. */
size_t sim_kind_stride(int32_t kind);

#endif
