/* ext_module: the CPython extension `IPCMonitor_C` (docs/design/session.md#python-surface) — top-level dyno
 * functions over libmsmonitor's C API plus the `monitor` and `dynamic` submodules. Arguments are checked
 * here (TypeError for wrong types, the only exception that escapes); everything that may
 * block (sends with retries, polls, stops) runs with the GIL released. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/strutil.h"
#include "ext_dynamic.h"
#include "ext_fwdhook.h"
#include "ext_monitor.h"
#include "ext_optstep.h"
#include "ext_slowrank.h"
#include "msmon/msmonitor.h"

#define POLL_FIRST_CAP (65536 + 1)
#define CONFIG_MAX_ITEMS 256

/* UTF-8 of a str; NULL with TypeError for other types. Borrowed from `s`. */
static const char *utf8_of(PyObject *s, const char *what, const char *fn)
{
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be str, not %.100s", fn, what, Py_TYPE(s)->tp_name);
        return NULL;
    }
    Py_ssize_t n = 0;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (!u) {
        /* Lone surrogates cannot cross into C: report them as a wrong argument. */
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s(): %s is not valid UTF-8 text", fn, what);
        return NULL;
    }
    if ((size_t)n != strlen(u)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s %R contains a NUL byte", fn, what, s);
        return NULL;
    }
    return u;
}

static PyObject *f_init_dyno(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {"npu_id", NULL};
    PyObject *o;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:init_dyno", kwlist, &o))
        return NULL;
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "init_dyno(): npu_id must be int, not %.100s", Py_TYPE(o)->tp_name);
        return NULL;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || v < INT32_MIN || v > INT32_MAX) {
        PySys_FormatStderr("[ERROR] init_dyno: npu_id %R out of range\n", o);
        Py_RETURN_FALSE;
    }
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = msmon_init_dyno((int32_t)v);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(ok == 1);
}

static PyObject *f_poll_dyno(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    size_t cap = POLL_FIRST_CAP, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return PyErr_NoMemory();
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = msmon_poll_dyno(buf, cap, &len);
    if (rc == -ENOSPC && len > 0 && len < SIZE_MAX - 1) {
        /* The config is kept for the next call; fetch it with a buffer that fits. */
        char *nb = realloc(buf, len + 1);
        if (nb) {
            buf = nb;
            cap = len + 1;
            rc = msmon_poll_dyno(buf, cap, &len);
        }
    }
    Py_END_ALLOW_THREADS
    PyObject *res;
    if (rc < 0 || len == 0 || len >= cap)
        res = PyUnicode_FromStringAndSize("", 0);
    else
        res = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)len, "replace");
    free(buf);
    return res;
}

static PyObject *f_enable_dyno_npu_monitor(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {"config_map", NULL};
    PyObject *d;
    PyObject *keep = NULL;   /* owns the str() conversions while the C call runs */
    const char **keys = NULL, **vals = NULL;
    PyObject *ret = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:enable_dyno_npu_monitor", kwlist, &d))
        return NULL;
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "enable_dyno_npu_monitor(): config_map must be dict, not %.100s",
                     Py_TYPE(d)->tp_name);
        return NULL;
    }
    Py_ssize_t n = PyDict_Size(d);
    if (n > CONFIG_MAX_ITEMS) {
        PySys_FormatStderr("[ERROR] enable_dyno_npu_monitor: %zd keys (at most %d), config ignored\n", n,
                           CONFIG_MAX_ITEMS);
        Py_RETURN_NONE;
    }
    /* Iterate a private copy: a value's __str__ may mutate the caller's dict, which would
     * end the iteration early or free a key whose UTF-8 we already hold. */
    d = PyDict_Copy(d);
    if (!d)
        return NULL;
    keep = PyList_New(0);
    keys = calloc((size_t)n + 1, sizeof(*keys));
    vals = calloc((size_t)n + 1, sizeof(*vals));
    if (!keep || !keys || !vals) {
        PyErr_NoMemory();
        goto out;
    }
    PyObject *k, *v;
    Py_ssize_t pos = 0, i = 0;
    while (PyDict_Next(d, &pos, &k, &v) && i < n) {
        keys[i] = utf8_of(k, "key", "enable_dyno_npu_monitor");
        if (!keys[i])
            goto out;
        PyObject *sv = PyUnicode_Check(v) ? Py_NewRef(v) : PyObject_Str(v);
        if (!sv || PyList_Append(keep, sv) < 0) {
            Py_XDECREF(sv);
            goto out;
        }
        Py_DECREF(sv);
        vals[i] = utf8_of(sv, "value", "enable_dyno_npu_monitor");
        if (!vals[i])
            goto out;
        i++;
    }
    Py_BEGIN_ALLOW_THREADS
    msmon_enable_npu_monitor(keys, vals, (size_t)i);
    Py_END_ALLOW_THREADS
    ret = Py_NewRef(Py_None);
out:
    free(keys);
    free(vals);
    Py_XDECREF(keep);
    Py_DECREF(d);
    return ret;
}

static PyObject *f_finalize_dyno(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    Py_BEGIN_ALLOW_THREADS
    msmon_finalize();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* Validates a dict[str, str] argument. */
static int check_str_dict(PyObject *d, const char *fn)
{
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument must be dict, not %.100s", fn, Py_TYPE(d)->tp_name);
        return -1;
    }
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (!utf8_of(k, "key", fn) || !utf8_of(v, "value", fn))
            return -1;
    }
    return 0;
}

static PyObject *f_set_cluster_config_data(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {"cluster_config", NULL};
    PyObject *d;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:set_cluster_config_data", kwlist, &d))
        return NULL;
    if (check_str_dict(d, "set_cluster_config_data") < 0)
        return NULL;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
        /* Never blocks; the GIL stays held so the dict's strings stay alive. */
        msmon_set_cluster_config(PyUnicode_AsUTF8(k), PyUnicode_AsUTF8(v));
    }
    Py_RETURN_NONE;
}

/* A missing or non-integer value becomes -1 (docs/design/ipc.md#status-tracking). */
static int32_t status_field(PyObject *d, const char *key)
{
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v)
        return -1;
    const char *s = PyUnicode_AsUTF8(v);
    if (!s) {
        PyErr_Clear();
        return -1;
    }
    const char *p = s;
    size_t n = strlen(s);
    str_trim_view(&p, &n, " \t");
    char buf[32];
    int32_t out;
    if (n == 0 || n >= sizeof(buf))
        return -1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return str_to_i32(buf, &out) == 0 ? out : -1;
}

static PyObject *f_update_profiler_status(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {"status", NULL};
    PyObject *d;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:update_profiler_status", kwlist, &d))
        return NULL;
    if (check_str_dict(d, "update_profiler_status") < 0)
        return NULL;
    int32_t st = status_field(d, "profiler_status"), cur = status_field(d, "current_step");
    int32_t start = status_field(d, "start_step"), stop = status_field(d, "stop_step");
    Py_BEGIN_ALLOW_THREADS
    msmon_update_profiler_status(st, cur, start, stop);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

#define KWFN(f) (PyCFunction)(void (*)(void))(f)

static PyMethodDef module_methods[] = {
    {"init_dyno", KWFN(f_init_dyno), METH_VARARGS | METH_KEYWORDS,
     "init_dyno(npu_id) -> bool: register this process with the dynolog daemon."},
    {"poll_dyno", f_poll_dyno, METH_NOARGS, "poll_dyno() -> str: the pending config text, or ''."},
    {"enable_dyno_npu_monitor", KWFN(f_enable_dyno_npu_monitor), METH_VARARGS | METH_KEYWORDS,
     "enable_dyno_npu_monitor(config_map): apply an npu-monitor config dict."},
    {"finalize_dyno", f_finalize_dyno, METH_NOARGS, "finalize_dyno(): stop a running session."},
    {"set_cluster_config_data", KWFN(f_set_cluster_config_data), METH_VARARGS | METH_KEYWORDS,
     "set_cluster_config_data(cluster_config): dict[str, str] kept for the session end."},
    {"update_profiler_status", KWFN(f_update_profiler_status), METH_VARARGS | METH_KEYWORDS,
     "update_profiler_status(status): dict[str, str] with profiler_status/current_step/start_step/stop_step."},
    {"slow_ranks", KWFN(ext_slow_ranks), METH_VARARGS | METH_KEYWORDS, EXT_SLOW_RANKS_DOC},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "IPCMonitor_C",
    "msMonitor plugin bindings (libmsmonitor.so): dyno IPC and the standalone monitor.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

/* m.<name> = create(), importable as `IPCMonitor_C.<name>` too (`from IPCMonitor_C.monitor
 * import X`). 0, or -1 with an exception set. */
static int add_submodule(PyObject *m, const char *name, PyObject *(*create)(void))
{
    char full[64];
    PyObject *sub = create();

    if (!sub)
        return -1;
    snprintf(full, sizeof(full), "IPCMonitor_C.%s", name);
    if (PyDict_SetItemString(PyImport_GetModuleDict(), full, sub) < 0 || PyModule_AddObject(m, name, sub) < 0) {
        Py_DECREF(sub);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit_IPCMonitor_C(void)
{
    PyObject *m = PyModule_Create(&module_def);

    if (!m)
        return NULL;
    if (add_submodule(m, "monitor", ext_monitor_create) < 0 || add_submodule(m, "dynamic", ext_dynamic_create) < 0 ||
        add_submodule(m, "fwdhook", ext_fwdhook_create) < 0 || add_submodule(m, "optstep", ext_optstep_create) < 0 ||
        PyModule_AddStringConstant(m, "__version__", MSMON_PLUGIN_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
