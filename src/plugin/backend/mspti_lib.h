/* mspti_lib: the msPTI library found at run time and its symbols as a table of function
 * pointers (docs/design/session.md#backends), filled by dlsym. Only the msPTI backend (and its tests and the
 * benchmarks that substitute the simulator's functions) use it. Optional entries may be NULL. */
#ifndef MSMON_PLUGIN_MSPTI_LIB_H
#define MSMON_PLUGIN_MSPTI_LIB_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "msmon/mspti.h"

struct mspti_lib {
    char path[PATH_MAX];   /* library that provided the table ("" for hand-built tables) */
    void *dl;              /* dlopen handle, never closed (records point into it) */
    /* mandatory */
    __typeof__(msptiSubscribe) *subscribe;
    __typeof__(msptiUnsubscribe) *unsubscribe;
    __typeof__(msptiActivityRegisterCallbacks) *register_callbacks;
    __typeof__(msptiActivityEnable) *enable;
    __typeof__(msptiActivityDisable) *disable;
    __typeof__(msptiActivityGetNextRecord) *get_next_record;
    __typeof__(msptiActivityFlushAll) *flush_all;
    /* optional */
    __typeof__(msptiActivityFlushPeriod) *flush_period;
    __typeof__(msptiActivityPushExternalCorrelationId) *push_external_id;
    __typeof__(msptiActivityPopExternalCorrelationId) *pop_external_id;
    __typeof__(msptiActivityEnableMarkerDomain) *enable_marker_domain;
    __typeof__(msptiActivityDisableMarkerDomain) *disable_marker_domain;
    __typeof__(msptiActivityIsEnabled) *is_enabled;
    __typeof__(msptiEnableCallback) *enable_callback;
    __typeof__(msptiEnableDomain) *enable_domain;
    __typeof__(msptiGetResultString) *get_result_string;
};

/* Search the candidates in order (docs/design/session.md#backends, then a plain dlopen("libmspti.so") through the
 * loader's own search path: LD_LIBRARY_PATH, as CANN's set_env.sh sets it; docs/plugin.md)
 * and fill *ret from the first library that has every mandatory symbol. -ENOENT (ERROR
 * `msPTI library not found` naming what was searched) if none. Not thread-safe: callers
 * serialise. */
int mspti_lib_load(struct mspti_lib *ret);
/* The places the last failed mspti_lib_load searched ("" before any failure). */
const char *mspti_lib_last_searched(void);
/* "MSPTI_ERROR_..." for a result code (stable for greps across CANN versions). */
const char *mspti_lib_result_name(int result);

#endif
