/* ext_optstep: the `IPCMonitor_C.optstep` submodule — msmonitor.step_hook's optimizer step
 * wrapper in C (docs/python.md "The optimizer hook"): a `Hook` holds the step callback and the
 * primary optimizer; `Hook.wrap(fn)` gives the object that replaces an optimizer class's `step`,
 * which runs `fn` and, after the outermost step of the primary optimizer on this thread, the
 * callback. */
#ifndef MSMON_EXT_OPTSTEP_H
#define MSMON_EXT_OPTSTEP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* New reference to the submodule, or NULL with an exception set. */
PyObject *ext_optstep_create(void);

#endif
