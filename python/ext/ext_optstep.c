/* ext_optstep: `IPCMonitor_C.optstep`, msmonitor.step_hook's optimizer step wrapper in C
 * (ext_optstep.h, docs/python.md "The optimizer hook"). The wrapper runs at every training
 * step: in Python it cost a frame with an argument tuple and dict, a thread-local lookup and
 * two more calls, whose objects are cold again after a step's worth of torch work
 * (docs/benchmarks.md#the-always-on-cost-of-a-step); here it is one call. The GIL guards a
 * Hook; the nesting stack is per thread. */
#include "ext_optstep.h"

#include <stdbool.h>
#include <stddef.h>

#include "ext_callback.h"

/* The step callback, the optimizer that counts (a weak reference, or the object itself when it
 * takes none) and warn(message) for a failing callback. One per step_hook module. */
typedef struct {
    PyObject_HEAD
    PyObject *callback;
    PyObject *primary;
    PyObject *warn;
    bool warned;
} HookObject;

/* What replaces an optimizer class's `step`: a method descriptor (so `opt.step()` calls it
 * with the optimizer first, no bound method made) with a __dict__ for functools.wraps. */
typedef struct {
    PyObject_HEAD
    PyObject *fn;
    HookObject *hook;
    PyObject *dict;
    vectorcallfunc vectorcall;
} WrapObject;

/* The steps running on this thread, outermost first: a step of the same optimizer inside one
 * (a subclass's super().step()) is counted by the outer one. Deeper than NEST_MAX distinct
 * steps nest untracked (each counts as outermost). */
#define NEST_MAX 32
static _Thread_local struct {
    const void *hook, *opt;
} nest[NEST_MAX];
static _Thread_local int nnest;

/* Borrowed primary optimizer, NULL when none (or it is gone). */
static PyObject *primary_get(HookObject *h)
{
    PyObject *p = h->primary;

    if (!p)
        return NULL;
    if (PyWeakref_CheckRef(p)) {
        p = PyWeakref_GetObject(p);
        return p == Py_None ? NULL : p;
    }
    return p;
}

static void claim(HookObject *h, PyObject *opt)
{
    PyObject *ref = PyWeakref_NewRef(opt, NULL);

    if (!ref) { /* no weakref support: hold it (an optimizer lives for the run) */
        PyErr_Clear();
        ref = Py_NewRef(opt);
    }
    Py_XSETREF(h->primary, ref);
}

/* After an outermost step of `opt`: the callback when opt is the primary (the first one to
 * step claims it when none is). */
static void fire(HookObject *h, PyObject *opt)
{
    PyObject *primary = primary_get(h);

    if (!primary) {
        claim(h, opt);
        primary = opt;
    }
    if (primary == opt)
        ext_callback_run(h->callback, h->warn, &h->warned);
}

/* call(args...) as a step of `opt` under hook h. */
static PyObject *run(HookObject *h, PyObject *opt, PyObject *call, PyObject *const *args, size_t nargsf,
                     PyObject *kwnames)
{
    PyObject *res;
    int depth = nnest;

    for (int i = depth - 1; i >= 0; i--)
        if (nest[i].opt == opt && nest[i].hook == h)
            return PyObject_Vectorcall(call, args, nargsf, kwnames);
    if (depth < NEST_MAX) {
        nest[depth].hook = h;
        nest[depth].opt = opt;
        nnest = depth + 1;
    }
    res = PyObject_Vectorcall(call, args, nargsf, kwnames);
    nnest = depth;
    if (res)
        fire(h, opt); /* a step that raised is no step */
    return res;
}

/* -- the wrapper -- */

static PyObject *wrap_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    WrapObject *w = (WrapObject *)self;

    if (PyVectorcall_NARGS(nargsf) < 1) /* no optimizer: fn says what is wrong */
        return PyObject_Vectorcall(w->fn, args, nargsf, kwnames);
    return run(w->hook, args[0], w->fn, args, nargsf, kwnames);
}

static PyObject *wrap_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (!obj || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static int wrap_traverse(PyObject *self, visitproc visit, void *arg)
{
    WrapObject *w = (WrapObject *)self;

    Py_VISIT(w->fn);
    Py_VISIT(w->hook);
    Py_VISIT(w->dict);
    return 0;
}

static int wrap_clear(PyObject *self)
{
    WrapObject *w = (WrapObject *)self;

    Py_CLEAR(w->fn);
    Py_CLEAR(w->hook);
    Py_CLEAR(w->dict);
    return 0;
}

static void wrap_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    (void)wrap_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *wrap_repr(PyObject *self)
{
    return PyUnicode_FromFormat("<msmonitor optimizer step wrapper of %R>", ((WrapObject *)self)->fn);
}

static PyGetSetDef wrap_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject WrapType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "IPCMonitor_C.optstep.Wrap",
    .tp_basicsize = sizeof(WrapObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "An optimizer class's step run through msmonitor's step hook (Hook.wrap).",
    .tp_vectorcall_offset = offsetof(WrapObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = wrap_descr_get,
    .tp_dictoffset = offsetof(WrapObject, dict),
    .tp_getset = wrap_getset,
    .tp_traverse = wrap_traverse,
    .tp_clear = wrap_clear,
    .tp_dealloc = wrap_dealloc,
    .tp_repr = wrap_repr,
};

/* -- the hook -- */

static PyObject *hook_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *warn;
    HookObject *h;

    if (!PyArg_ParseTuple(args, "O:Hook", &warn))
        return NULL;
    if (kwargs && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Hook() takes no keyword arguments");
        return NULL;
    }
    if (!PyCallable_Check(warn)) {
        PyErr_SetString(PyExc_TypeError, "Hook(warn): warn must be callable");
        return NULL;
    }
    h = (HookObject *)type->tp_alloc(type, 0);
    if (h)
        h->warn = Py_NewRef(warn);
    return (PyObject *)h;
}

static int hook_traverse(PyObject *self, visitproc visit, void *arg)
{
    HookObject *h = (HookObject *)self;

    Py_VISIT(h->callback);
    Py_VISIT(h->primary);
    Py_VISIT(h->warn);
    return 0;
}

static int hook_clear(PyObject *self)
{
    HookObject *h = (HookObject *)self;

    Py_CLEAR(h->callback);
    Py_CLEAR(h->primary);
    Py_CLEAR(h->warn);
    return 0;
}

static void hook_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    (void)hook_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *hook_wrap(PyObject *self, PyObject *fn)
{
    WrapObject *w;

    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "wrap(fn): fn must be callable");
        return NULL;
    }
    w = PyObject_GC_New(WrapObject, &WrapType);
    if (!w)
        return NULL;
    w->fn = Py_NewRef(fn);
    w->hook = (HookObject *)Py_NewRef(self);
    w->dict = NULL;
    w->vectorcall = wrap_vectorcall;
    PyObject_GC_Track(w);
    return (PyObject *)w;
}

static PyObject *hook_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "run(opt, call, *args, **kwargs): opt and call are required");
        return NULL;
    }
    return run((HookObject *)self, args[0], args[1], args + 2, (size_t)(nargs - 2), kwnames);
}

static PyObject *hook_claim(PyObject *self, PyObject *opt)
{
    claim((HookObject *)self, opt);
    Py_RETURN_NONE;
}

static PyObject *hook_fire(PyObject *self, PyObject *opt)
{
    fire((HookObject *)self, opt);
    Py_RETURN_NONE;
}

static PyObject *hook_set_callback(PyObject *self, PyObject *fn)
{
    HookObject *h = (HookObject *)self;

    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "set_callback(): argument must be callable or None");
        return NULL;
    }
    Py_XSETREF(h->callback, fn == Py_None ? NULL : Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyObject *hook_primary(PyObject *self, PyObject *unused)
{
    PyObject *p = primary_get((HookObject *)self);

    (void)unused;
    return Py_NewRef(p ? p : Py_None);
}

static PyMethodDef hook_methods[] = {
    {"wrap", hook_wrap, METH_O, "wrap(fn) -> the object to put in place of an optimizer class's step."},
    {"run", (PyCFunction)(void (*)(void))hook_run, METH_FASTCALL | METH_KEYWORDS,
     "run(opt, call, *args, **kwargs): call(*args, **kwargs) as a step of opt (a step already bound)."},
    {"claim", hook_claim, METH_O, "claim(opt): opt is the optimizer that counts from now on."},
    {"fire", hook_fire, METH_O, "fire(opt): after an outermost step of opt (the post-hook path)."},
    {"set_callback", hook_set_callback, METH_O, "set_callback(fn): the step callback from now on (None: none)."},
    {"primary", hook_primary, METH_NOARGS, "primary() -> the optimizer that counts, or None."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject HookType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "IPCMonitor_C.optstep.Hook",
    .tp_basicsize = sizeof(HookObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Hook(warn): one step hook's callback, primary optimizer and wrappers.",
    .tp_new = hook_new,
    .tp_traverse = hook_traverse,
    .tp_clear = hook_clear,
    .tp_dealloc = hook_dealloc,
    .tp_methods = hook_methods,
};

static struct PyModuleDef optstep_def = {
    PyModuleDef_HEAD_INIT, "IPCMonitor_C.optstep",
    "msmonitor.step_hook's optimizer step wrapper.", -1, NULL, NULL, NULL, NULL, NULL,
};

PyObject *ext_optstep_create(void)
{
    PyObject *m;

    if (PyType_Ready(&WrapType) < 0 || PyType_Ready(&HookType) < 0)
        return NULL;
    m = PyModule_Create(&optstep_def);
    if (!m)
        return NULL;
    if (PyModule_AddObjectRef(m, "Hook", (PyObject *)&HookType) < 0 ||
        PyModule_AddObjectRef(m, "Wrap", (PyObject *)&WrapType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
