/* ext_fwdhook: `IPCMonitor_C.fwdhook`, the module-wide forward step hook of msmonitor.step_hook
 * in C (ext_fwdhook.h, docs/python.md "The forward hook"). The hooks run at every training
 * step: in C they cost a call each and no Python frame, and since they never release the GIL
 * nor run Python code but the step callback, they need no lock of their own. */
#include "ext_fwdhook.h"

#include "ext_callback.h"

#include <stdbool.h>
#include <stdlib.h>

/* Set by setup(), dropped by clear(); the GIL guards all of it. */
static PyObject *table;     /* torch's _global_forward_pre_hooks */
static PyObject *gid;       /* our key in it */
static PyObject *rid;       /* our key in a root's _forward_pre_hooks / _forward_hooks */
static PyObject *callback;  /* the step: dynamic_profile.step */
static PyObject *warn;      /* warn(message): once, when the callback fails */
static bool warned;
static PyObject *glob_pre_fn, *root_pre_fn, *root_post_fn; /* our own function objects */
static PyObject *str_pre, *str_post;                      /* "_forward_pre_hooks", "_forward_hooks" */

/* The roots whose outermost forwards run, with how many (one per thread inside it); usually
 * one. Each entry holds a reference to its module. */
struct root {
    PyObject *module;
    long running;
};
static struct root *roots;
static size_t nroots, caproots;

/* The root this thread is inside (a strong reference), NULL outside any forward. */
static _Thread_local PyObject *groot;

static struct root *root_find(PyObject *module)
{
    for (size_t i = 0; i < nroots; i++)
        if (roots[i].module == module)
            return &roots[i];
    return NULL;
}

/* d[key] = value, or del d[key] (value NULL; absent is fine), on attribute `attr` of obj
 * (NULL: obj itself). Never raises: a failure leaves that table as it was. */
static void table_set(PyObject *obj, PyObject *attr, PyObject *key, PyObject *value)
{
    PyObject *d = attr ? PyObject_GetAttr(obj, attr) : (Py_INCREF(obj), obj);
    int rc;

    if (!d) {
        PyErr_Clear();
        return;
    }
    rc = value ? PyObject_SetItem(d, key, value) : PyObject_DelItem(d, key);
    if (rc < 0)
        PyErr_Clear();
    Py_DECREF(d);
}

/* An outermost forward of `module` begins on this thread. */
static void enter(PyObject *module)
{
    struct root *r = root_find(module);

    Py_XSETREF(groot, Py_NewRef(module));
    if (r) {
        r->running++;
    } else {
        if (nroots == caproots) {
            size_t cap = caproots ? caproots * 2 : 4;
            struct root *n = realloc(roots, cap * sizeof(*n));
            if (!n)
                return; /* not followed: this forward is not a step */
            roots = n;
            caproots = cap;
        }
        roots[nroots++] = (struct root){ Py_NewRef(module), 1 };
        table_set(module, str_pre, rid, root_pre_fn);
        table_set(module, str_post, rid, root_post_fn);
    }
    table_set(table, NULL, gid, NULL);
}

/* The global pre hook, in torch's table only while no forward runs: `module` is outermost. */
static PyObject *fh_glob_pre(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs >= 1 && table)
        enter(args[0]);
    Py_RETURN_NONE;
}

/* On a root while its forwards run: this thread's outermost call of it while another thread's
 * runs, or a call of it again after this thread's forward of it raised (then it is entered
 * already). */
static PyObject *fh_root_pre(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs >= 1 && table && !groot)
        enter(args[0]);
    Py_RETURN_NONE;
}

static PyObject *fh_root_post(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *module;
    struct root *r;

    (void)self;
    if (nargs < 1 || !table || groot != args[0])
        Py_RETURN_NONE; /* nested in another root of this thread */
    module = groot;
    groot = NULL; /* our reference moves to `module` */
    r = root_find(module);
    if (r && --r->running <= 0) {
        PyObject *held = r->module;
        *r = roots[--nroots];
        /* the global hook back first: a call of this root from another thread right now meets
         * one of ours either way (enter() takes ours off in the other order) */
        if (nroots == 0)
            table_set(table, NULL, gid, glob_pre_fn);
        table_set(held, str_pre, rid, NULL);
        table_set(held, str_post, rid, NULL);
        Py_DECREF(held);
    }
    Py_DECREF(module);
    ext_callback_run(callback, warn, &warned);
    Py_RETURN_NONE;
}

/* Drop every reference and put back whatever of ours is in a table. */
static void fh_reset(void)
{
    if (table)
        table_set(table, NULL, gid, NULL);
    for (size_t i = 0; i < nroots; i++) {
        table_set(roots[i].module, str_pre, rid, NULL);
        table_set(roots[i].module, str_post, rid, NULL);
        Py_DECREF(roots[i].module);
    }
    nroots = 0;
    Py_CLEAR(table);
    Py_CLEAR(gid);
    Py_CLEAR(rid);
    Py_CLEAR(callback);
    Py_CLEAR(warn);
    warned = false;
}

static PyObject *fh_setup(PyObject *mod, PyObject *args)
{
    PyObject *t, *g, *r, *cb, *w;

    if (!PyArg_ParseTuple(args, "OOOOO:setup", &t, &g, &r, &cb, &w))
        return NULL;
    if (!PyCallable_Check(cb) || !PyCallable_Check(w)) {
        PyErr_SetString(PyExc_TypeError, "setup(): callback and warn must be callable");
        return NULL;
    }
    if (!glob_pre_fn) {
        glob_pre_fn = PyObject_GetAttrString(mod, "glob_pre");
        root_pre_fn = PyObject_GetAttrString(mod, "root_pre");
        root_post_fn = PyObject_GetAttrString(mod, "root_post");
        str_pre = PyUnicode_InternFromString("_forward_pre_hooks");
        str_post = PyUnicode_InternFromString("_forward_hooks");
        if (!glob_pre_fn || !root_pre_fn || !root_post_fn || !str_pre || !str_post)
            return NULL;
    }
    fh_reset();
    table = Py_NewRef(t);
    gid = Py_NewRef(g);
    rid = Py_NewRef(r);
    callback = Py_NewRef(cb);
    warn = Py_NewRef(w);
    Py_RETURN_NONE;
}

static PyObject *fh_clear(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    fh_reset();
    Py_RETURN_NONE;
}

static PyObject *fh_set_callback(PyObject *mod, PyObject *fn)
{
    (void)mod;
    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "set_callback(): argument must be callable or None");
        return NULL;
    }
    Py_XSETREF(callback, fn == Py_None ? NULL : Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyObject *fh_running(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyLong_FromSize_t(nroots);
}

static PyMethodDef fwdhook_methods[] = {
    {"glob_pre", (PyCFunction)(void (*)(void))fh_glob_pre, METH_FASTCALL,
     "glob_pre(module, inputs): torch's global forward pre hook (only while no forward runs)."},
    {"root_pre", (PyCFunction)(void (*)(void))fh_root_pre, METH_FASTCALL,
     "root_pre(module, inputs): a running root's pre hook."},
    {"root_post", (PyCFunction)(void (*)(void))fh_root_post, METH_FASTCALL,
     "root_post(module, inputs, output): a running root's forward hook: the step."},
    {"setup", fh_setup, METH_VARARGS,
     "setup(table, gid, rid, callback, warn): torch's global pre-hook table, our key in it, our key "
     "in a root's tables, the step callback, warn(message) for a failing callback (once)."},
    {"set_callback", fh_set_callback, METH_O, "set_callback(fn): the step callback from now on (None: none)."},
    {"clear", fh_clear, METH_NOARGS, "clear(): take everything of ours out of torch's tables."},
    {"running", fh_running, METH_NOARGS, "running() -> int: roots whose forward runs now."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fwdhook_def = {
    PyModuleDef_HEAD_INIT, "IPCMonitor_C.fwdhook",
    "msmonitor.step_hook's module-wide forward step hook.", -1, fwdhook_methods, NULL, NULL, NULL, NULL,
};

PyObject *ext_fwdhook_create(void)
{
    return PyModule_Create(&fwdhook_def);
}
