/* backend_mspti: the msPTI backend (docs/design/session.md#session-life-cycle, #kind-replacement): subscription, the buffer protocol
 * of docs/design/session.md#buffers (bufpool), record iteration and conversion into struct mon_record batches handed to
 * the core's sink on msPTI's completion threads. msPTI allows one subscriber and its
 * callbacks carry no user data, so at most one instance is started at a time. */
#ifndef MSMON_PLUGIN_BACKEND_MSPTI_H
#define MSMON_PLUGIN_BACKEND_MSPTI_H

#include "plugin/backend/backend.h"
#include "plugin/backend/mspti_lib.h"

/* Load the library (mspti_lib_load) and hide HCCL's internal "communication" markers (docs/design/session.md#layers).
 * -ENOENT if not found (logged). Caller owns; free with be->ops->destroy(). */
int backend_mspti_create(struct backend **ret);
/* The same over a table the caller built (the simulator's functions, a test's fakes); the
 * table is copied. Caller owns; free with be->ops->destroy(). */
int backend_mspti_create_from(const struct mspti_lib *lib, struct backend **ret);

#endif
