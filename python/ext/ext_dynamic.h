/* ext_dynamic: the `IPCMonitor_C.dynamic` submodule — msmonitor.dynamic_profile's bindings to
 * the one implementation of the dyno-mode shm handoff in libmsmonitor (msmon_dynamic_*). */
#ifndef MSMON_EXT_DYNAMIC_H
#define MSMON_EXT_DYNAMIC_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* New reference to the submodule, or NULL with an exception set. */
PyObject *ext_dynamic_create(void);

#endif
