/* ext_dynamic: `IPCMonitor_C.dynamic` (ext_dynamic.h). Every call that may block (segment
 * attach, poller join, a config applied inside step) runs with the GIL released; the stop
 * hook takes it back to call into Python. A step that cannot wait keeps the GIL. */
#include "ext_dynamic.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "msmon/msmonitor.h"

static PyObject *stop_hook; /* strong reference; set and cleared with the GIL held */

/* Runs on the stepping thread inside msmon_dynamic_step(), GIL released by us. */
static void call_stop_hook(void *ctx)
{
    (void)ctx;
    PyGILState_STATE g = PyGILState_Ensure();
    if (stop_hook) {
        PyObject *r = PyObject_CallNoArgs(stop_hook);
        if (!r)
            PyErr_WriteUnraisable(stop_hook); /* never breaks the training step */
        Py_XDECREF(r);
    }
    PyGILState_Release(g);
}

static PyObject *d_init(PyObject *mod, PyObject *args)
{
    (void)mod;
    int rank, echo = 0, rc;
    if (!PyArg_ParseTuple(args, "i|p:init", &rank, &echo))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = msmon_dynamic_init_ex(rank, echo ? MSMON_DYNAMIC_ECHO : 0);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc);
}

/* The window's epoch the previous step() returned with (msmon_dynamic_trace_epoch); the GIL
 * guards it. */
static uint32_t seen_epoch;

/* One step of libmsmonitor; true when the nputrace window moved since the previous one
 * (msmonitor.nputrace then reads it through trace_info()); the steps in between cost it
 * nothing. */
static bool step_once(void)
{
    uint32_t epoch;

    /* The GIL is released only for a step that may wait (a config to apply, the window
     * opening or closing): every other step keeps it, so another Python thread never takes
     * over the training thread in the middle of a step. */
    if (!msmon_dynamic_step_nowait()) {
        Py_BEGIN_ALLOW_THREADS
        (void)msmon_dynamic_step();
        Py_END_ALLOW_THREADS
    }
    epoch = msmon_dynamic_trace_epoch();
    if (epoch == seen_epoch)
        return false;
    seen_epoch = epoch;
    return true;
}

static PyObject *d_step(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyBool_FromLong(step_once());
}

/* What tick() needs besides the step, set by set_step_window(); the GIL guards it. */
static PyObject *tick_window;   /* msmonitor.nputrace.Window or NULL */
static PyObject *tick_on_error; /* on_error(exception): once, then tick() does nothing */
static PyObject *str_busy, *str_after_step;
static bool tick_failed;

/* dynamic_profile.step() whole, the callback of the step hooks: no Python frame on the steps
 * where the window did not move and no analysis waits (docs/benchmarks.md#the-always-on-cost-of-a-step). */
static PyObject *d_tick(PyObject *mod, PyObject *unused)
{
    PyObject *window = tick_window, *busy = NULL, *res = NULL;
    int run_window;

    (void)mod;
    (void)unused;
    if (tick_failed)
        Py_RETURN_NONE;
    run_window = step_once();
    if (!window)
        Py_RETURN_NONE;
    Py_INCREF(window);
    if (!run_window) { /* the window is read only when it moved, or while an analysis waits */
        busy = PyObject_GetAttr(window, str_busy);
        run_window = busy ? PyObject_IsTrue(busy) : -1;
        Py_XDECREF(busy);
    }
    if (run_window > 0)
        res = PyObject_CallMethodNoArgs(window, str_after_step);
    Py_DECREF(window);
    if (run_window == 0 || res) {
        Py_XDECREF(res);
        Py_RETURN_NONE;
    }
    /* never breaks the training step: said once through on_error, then the steps stop */
    tick_failed = true;
    if (tick_on_error) {
        PyObject *type, *value, *tb, *r;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        r = PyObject_CallOneArg(tick_on_error, value ? value : Py_None);
        if (!r)
            PyErr_WriteUnraisable(tick_on_error);
        Py_XDECREF(r);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    }
    PyErr_Clear();
    Py_RETURN_NONE;
}

static PyObject *d_set_step_window(PyObject *mod, PyObject *args)
{
    PyObject *window, *on_error;

    (void)mod;
    if (!PyArg_ParseTuple(args, "OO:set_step_window", &window, &on_error))
        return NULL;
    if (!PyCallable_Check(on_error)) {
        PyErr_SetString(PyExc_TypeError, "set_step_window(window, on_error): on_error must be callable");
        return NULL;
    }
    if (!str_busy) {
        str_busy = PyUnicode_InternFromString("busy");
        str_after_step = PyUnicode_InternFromString("after_step");
        if (!str_busy || !str_after_step)
            return NULL;
    }
    Py_XSETREF(tick_window, window == Py_None ? NULL : Py_NewRef(window));
    Py_XSETREF(tick_on_error, Py_NewRef(on_error));
    tick_failed = false;
    Py_RETURN_NONE;
}

static PyObject *d_finalize(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    Py_BEGIN_ALLOW_THREADS
    msmon_dynamic_finalize();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *d_set_stop_hook(PyObject *mod, PyObject *fn)
{
    (void)mod;
    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "set_stop_hook(): argument must be callable or None, not %.100s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    Py_XSETREF(stop_hook, fn == Py_None ? NULL : Py_NewRef(fn));
    msmon_dynamic_set_stop_hook(stop_hook ? call_stop_hook : NULL, NULL);
    Py_RETURN_NONE;
}

static PyObject *d_info(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    struct msmon_dynamic_info i;
    if (msmon_dynamic_info(&i) != 0)
        return PyErr_NoMemory();
    return Py_BuildValue("{s:O,s:O,s:O,s:O,s:O,s:I,s:i,s:i,s:s}", "enabled", i.enabled ? Py_True : Py_False,
                         "creator", i.creator ? Py_True : Py_False, "polling", i.polling ? Py_True : Py_False,
                         "registered", i.registered ? Py_True : Py_False, "reachable",
                         i.reachable ? Py_True : Py_False, "registrations", (unsigned)i.registrations, "rank",
                         (int)i.rank, "step", (int)i.step, "path", i.path);
}

/* trace_info() -> dict: the nputrace window of this rank (msmon_dynamic_trace_info), read by
 * msmonitor.nputrace after each step to run torch.profiler and the analysis. */
static PyObject *d_trace_info(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    struct msmon_trace_info *i = PyMem_Calloc(1, sizeof(*i));
    if (!i)
        return PyErr_NoMemory();
    (void)msmon_dynamic_trace_info(i);
    PyObject *r = Py_BuildValue("{s:i,s:i,s:i,s:i,s:i,s:I,s:I,s:s,s:s}", "state", (int)i->state, "start",
                                (int)i->start_step, "stop", (int)i->stop_step, "step", (int)i->step, "rank",
                                (int)i->rank, "flags", (unsigned)i->flags, "windows", (unsigned)i->windows,
                                "log_dir", i->log_dir, "last_trace", i->last_trace);
    PyMem_Free(i);
    return r;
}

/* attach(path) -> (rc, fd, creator, err): the caller raises; fd (>= 0 when rc == 0) is
 * the caller's to close. */
static PyObject *d_attach(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *po;
    char err[PATH_MAX + 512];
    int fd = -1, creator = 0, rc;
    if (!PyArg_ParseTuple(args, "O&:attach", PyUnicode_FSConverter, &po))
        return NULL;
    err[0] = '\0';
    const char *path = PyBytes_AS_STRING(po);
    Py_BEGIN_ALLOW_THREADS
    rc = msmon_dynamic_attach(path, &fd, &creator, err, sizeof(err));
    Py_END_ALLOW_THREADS
    Py_DECREF(po);
    return Py_BuildValue("(iiOs)", rc, rc == 0 ? fd : -1, creator ? Py_True : Py_False, err);
}

/* job_key(environ: dict, ppid, pid) -> (key, source): the library's one rule over a
 * process's environment. */
static PyObject *d_job_key(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *env, *items = NULL, *ret = NULL;
    const char **names = NULL, **values = NULL;
    char key[24], src[160];
    int ppid, pid;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "O!ii:job_key", &PyDict_Type, &env, &ppid, &pid))
        return NULL;
    items = PyDict_Items(env);
    if (!items)
        return NULL;
    n = PyList_GET_SIZE(items);
    names = PyMem_Calloc((size_t)n + 1, sizeof(*names));
    values = PyMem_Calloc((size_t)n + 1, sizeof(*values));
    if (!names || !values) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *kv = PyList_GET_ITEM(items, i);
        PyObject *k = PyTuple_GET_ITEM(kv, 0), *v = PyTuple_GET_ITEM(kv, 1);
        /* other entries (bytes, None) are no variable of a process: left out */
        if (PyUnicode_Check(k) && PyUnicode_Check(v)) {
            names[i] = PyUnicode_AsUTF8(k);
            values[i] = PyUnicode_AsUTF8(v);
            if (!names[i] || !values[i])
                goto out;
        }
    }
    if (msmon_dynamic_job_key(names, values, (size_t)n, ppid, pid, key, sizeof(key), src, sizeof(src)) != 0) {
        PyErr_SetString(PyExc_ValueError, "job_key: no key");
        goto out;
    }
    ret = Py_BuildValue("(ss)", key, src);
out:
    PyMem_Free(names);
    PyMem_Free(values);
    Py_DECREF(items);
    return ret;
}

/* use_daemon(msmon, kineto) -> (enabled, warning): the MSMONITOR_USE_DAEMON rule. */
static PyObject *d_use_daemon(PyObject *mod, PyObject *args)
{
    (void)mod;
    const char *a = NULL, *b = NULL;
    char why[256];
    int on;
    if (!PyArg_ParseTuple(args, "zz:use_daemon", &a, &b))
        return NULL;
    on = msmon_dynamic_use_daemon(a, b, why, sizeof(why));
    return Py_BuildValue("(Os)", on ? Py_True : Py_False, why);
}

static PyMethodDef dynamic_methods[] = {
    {"init", d_init, METH_VARARGS, "init(rank, echo=False) -> int: join dyno mode (0 active, else -errno)."},
    {"step", d_step, METH_NOARGS, "step() -> bool: once per iteration; True when the nputrace window moved."},
    {"tick", d_tick, METH_NOARGS,
     "tick(): step() and, when the window moved or its analysis waits, window.after_step() "
     "(set_step_window); an exception goes to on_error once and stops the ticks."},
    {"set_step_window", d_set_step_window, METH_VARARGS,
     "set_step_window(window, on_error): what tick() runs after the step (window None: none); re-arms tick()."},
    {"finalize", d_finalize, METH_NOARGS, "finalize(): stop the session and the poller, remove our segment."},
    {"set_stop_hook", d_set_stop_hook, METH_O, "set_stop_hook(fn): called before an NPU_MONITOR_STOP config."},
    {"info", d_info, METH_NOARGS, "info() -> dict: enabled, creator, polling, registered, ..."},
    {"trace_info", d_trace_info, METH_NOARGS, "trace_info() -> dict: the nputrace window (state, start, stop, flags, ...)."},
    {"attach", d_attach, METH_VARARGS, "attach(path) -> (rc, fd, creator, err): the segment handoff alone."},
    {"job_key", d_job_key, METH_VARARGS, "job_key(environ, ppid, pid) -> (key, source): the job key rule."},
    {"use_daemon", d_use_daemon, METH_VARARGS, "use_daemon(msmon, kineto) -> (enabled, warning)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef dynamic_def = {
    PyModuleDef_HEAD_INIT, "IPCMonitor_C.dynamic",
    "dyno-mode shared-memory handoff (libmsmonitor msmon_dynamic_*).", -1, dynamic_methods, NULL, NULL, NULL, NULL,
};

PyObject *ext_dynamic_create(void)
{
    return PyModule_Create(&dynamic_def);
}
