/* ext_monitor: the `IPCMonitor_C.monitor` submodule (docs/design/session.md#python-surface, #standalone-monitor) — the
 * ActivityKind enum, the API/Kernel/Communication/Marker record classes and the standalone
 * Monitor functions over libmsmonitor's msmon_monitor_* API. */
#ifndef MSMON_EXT_MONITOR_H
#define MSMON_EXT_MONITOR_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>

/* Serialises start_monitor (which invalidates the borrowed result arrays) against readers
 * of those arrays (get_*_data, save_xlsx). Taken with the GIL released by writers. */
extern pthread_mutex_t ext_results_lock;

/* New reference to the submodule, or NULL with an exception set. */
PyObject *ext_monitor_create(void);

/* Name of an activity kind as ActivityKind.name ("Kernel"), or NULL for a kind the
 * monitor module does not expose. Static storage. */
const char *ext_kind_name(int32_t kind);

#endif
