/* cupti_lib: the CUPTI library found at run time (docs/design/session.md#cupti-backend) and its symbols as a table of
 * function pointers filled by dlsym; no CUDA header or library is needed to build it. Only
 * the CUPTI backend, its tests and the CUPTI benchmark use it. Optional entries may be NULL. */
#ifndef MSMON_PLUGIN_CUPTI_LIB_H
#define MSMON_PLUGIN_CUPTI_LIB_H

#include <limits.h>
#include <stdbool.h>

#include "msmon/cupti_abi.h"

struct cupti_lib {
    char path[PATH_MAX];   /* library that provided the table ("" for hand-built tables) */
    void *dl;              /* dlopen handle, never closed (record strings point into it) */
    /* mandatory */
    cupti_abi_register_callbacks_fn *register_callbacks;
    cupti_abi_enable_fn *enable;
    cupti_abi_enable_fn *disable;
    cupti_abi_get_next_record_fn *get_next_record;
    cupti_abi_flush_all_fn *flush_all;
    cupti_abi_get_version_fn *get_version;
    /* optional */
    cupti_abi_get_callback_name_fn *get_callback_name;
    cupti_abi_get_result_string_fn *get_result_string;
    cupti_abi_get_num_dropped_fn *get_num_dropped;
    cupti_abi_flush_period_fn *flush_period;
    cupti_abi_finalize_fn *finalize;
};

/* Search the candidates of docs/design/session.md#cupti-backend in order (MSMONITOR_CUPTI_LIB is authoritative when set;
 * an already mapped copy; $CUDA_HOME and /usr/local/cuda paths; plain dlopen) and fill *ret
 * from the first library with every mandatory symbol. -ENOENT (ERROR `CUPTI library not
 * found` naming what was searched) if none; `quiet` turns that ERROR into DEBUG (the
 * automatic fallback probe). Not thread-safe: callers serialise. */
int cupti_lib_load(struct cupti_lib *ret, bool quiet);
/* "CUPTI_ERROR_..." for the result codes we name; the number otherwise is in the log line. */
const char *cupti_lib_result_name(int result);

#endif
