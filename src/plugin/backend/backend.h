/* backend: the vendor activity API as a table of function pointers (04-plugin.md §9), filled
 * by dlsym from the msPTI library found at run time. The monitor core only calls through
 * this table, so unit tests substitute a fake one. Optional entries may be NULL. */
#ifndef MSMON_PLUGIN_BACKEND_H
#define MSMON_PLUGIN_BACKEND_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "msmon/mspti.h"

struct backend {
    char path[PATH_MAX];   /* library that provided the table ("" for fakes) */
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

/* Search the candidates of §9 in order and fill *ret from the first library that has every
 * mandatory symbol. -ENOENT (ERROR `msPTI library not found` naming what was searched) if
 * none. Thread-safe only with respect to other callers holding the caller's lock. */
int backend_mspti_load(struct backend *ret);
/* "MSPTI_ERROR_..." through msptiGetResultString when present, else our own table. */
const char *backend_result_name(const struct backend *be, int result);

#endif
