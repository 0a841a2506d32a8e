/* ext_callback: calling msmonitor.step_hook's step callback from a C hook (ext_fwdhook,
 * ext_optstep). The hooks run inside the user's forward() or optimizer.step(): a callback that
 * raises must never break them, and is said once through the Python side's logger. */
#ifndef MSMON_EXT_CALLBACK_H
#define MSMON_EXT_CALLBACK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>

/* Calls callback() (NULL: nothing). On an exception: the first time (*warned false) calls
 * warn(str(exception)) and sets *warned; never leaves an exception set. */
void ext_callback_run(PyObject *callback, PyObject *warn, bool *warned);

#endif
