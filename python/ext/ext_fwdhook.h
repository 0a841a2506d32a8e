/* ext_fwdhook: the `IPCMonitor_C.fwdhook` submodule — the module-wide forward step hook of
 * msmonitor.step_hook (docs/python.md "The forward hook"): a global forward pre hook that sits
 * in torch's table only while no forward runs, and a pre and a post hook put on the outermost
 * module while its forwards run. */
#ifndef MSMON_EXT_FWDHOOK_H
#define MSMON_EXT_FWDHOOK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* New reference to the submodule, or NULL with an exception set. */
PyObject *ext_fwdhook_create(void);

#endif
