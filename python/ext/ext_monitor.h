/* ext_monitor: the `IPCMonitor_C.monitor` submodule (docs/design/session.md#python-surface, #standalone-monitor) — the
 * ActivityKind enum, the API/Kernel/Communication/Marker record classes and the standalone
 * Monitor functions over libmsmonitor's msmon_monitor_* API. */
#ifndef MSMON_EXT_MONITOR_H
#define MSMON_EXT_MONITOR_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* New reference to the submodule, or NULL with an exception set. */
PyObject *ext_monitor_create(void);

#endif
