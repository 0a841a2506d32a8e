/* ext_callback: the step callback of a C hook, run so that it never breaks the training step
 * (ext_callback.h). */
#include "ext_callback.h"

void ext_callback_run(PyObject *callback, PyObject *warn, bool *warned)
{
    PyObject *res, *type, *value, *tb, *msg;

    if (!callback)
        return;
    /* held across the call: the callback may replace itself (install() again) */
    Py_INCREF(callback);
    res = PyObject_CallNoArgs(callback);
    Py_DECREF(callback);
    if (res) {
        Py_DECREF(res);
        return;
    }
    if (*warned || !warn) {
        PyErr_Clear();
        return;
    }
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    msg = value ? PyObject_Str(value) : NULL;
    PyErr_Clear();
    *warned = true;
    if (msg) {
        PyObject *w = PyObject_CallOneArg(warn, msg);
        Py_XDECREF(w);
        Py_DECREF(msg);
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Clear();
}
