/* backend_cupti: the CUPTI backend (docs/design/session.md#cupti-backend): CUPTI's activity buffer protocol (bufpool), record
 * iteration with CUPTI's variable strides and conversion straight into struct mon_record
 * batches for the core's sink. CUPTI's buffer callbacks are process-wide and carry no user
 * data, so at most one instance is started at a time. */
#ifndef MSMON_PLUGIN_BACKEND_CUPTI_H
#define MSMON_PLUGIN_BACKEND_CUPTI_H

#include <stdbool.h>

#include "plugin/backend/backend.h"
#include "plugin/backend/cupti_lib.h"

/* Load libcupti.so (cupti_lib_load; `quiet` for the automatic fallback probe). -ENOENT if not
 * found. Caller owns; free with be->ops->destroy(). */
int backend_cupti_create(struct backend **ret);
int backend_cupti_create_quiet(struct backend **ret, bool quiet);
/* The same over a table the caller built (a test's fakes, the benchmark); the table is
 * copied. Caller owns; free with be->ops->destroy(). */
int backend_cupti_create_from(const struct cupti_lib *lib, struct backend **ret);
/* CUPTI kinds (bit 1ull << CUPTI kind) a set of mon kinds (bit 1u << mon_kind) needs. */
uint64_t backend_cupti_sources(uint32_t mon_kinds);

#endif
