/* ext_monitor: `IPCMonitor_C.monitor` — ActivityKind, the four record classes and the
 * standalone Monitor functions. The record classes share one object layout and one set of
 * accessors driven by a per-class field table, so the tuple order of to_tuple() and the
 * attribute names live in exactly one place (the tables below). */
#include "ext_monitor.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "contract/kinds.h"
#include "ext_results.h"
#include "ext_xlsx.h"
#include "msmon/msmonitor.h"

/* The kinds the standalone monitor exposes as ActivityKind, in member order (docs/design/session.md
 * docs/design/session.md#standalone-monitor); names and values come from the contract's one kind table. */
/* Kind values, the standalone subset and ActivityKind's order are the contract's (kinds.def). */
enum {
#define KIND(name, id, value, standalone) KIND_##id = value,
#include "contract/kinds.def"
#undef KIND
};
#define N_KINDS KINDS_STANDALONE_COUNT

/* ---- record classes ---------------------------------------------------------------- */

enum fkind { F_STR, F_NS, F_U64, F_U32, F_I32 };

struct fdesc {
    const char *name;
    enum fkind kind;
    int slot;   /* index into rec.s (F_STR) or rec.n (numbers) */
};

#define REC_NSTR 4
#define REC_NNUM 8

typedef struct {
    PyObject_HEAD
    PyObject *s[REC_NSTR];   /* str objects, never NULL after init */
    int64_t n[REC_NNUM];     /* numbers; unsigned fields stored as their bit pattern */
} RecObject;

/* Field tables in to_tuple() order (docs/design/session.md#python-surface). */
static const struct fdesc api_fields[] = {
    {"name", F_STR, 0},    {"startNs", F_NS, 0}, {"endNs", F_NS, 1},
    {"pid", F_U32, 2},     {"tid", F_U32, 3},    {"correlationId", F_U64, 4},
    {NULL, 0, 0},
};
static const struct fdesc kernel_fields[] = {
    {"name", F_STR, 0},        {"startNs", F_NS, 0},          {"endNs", F_NS, 1},
    {"deviceId", F_U32, 2},    {"streamId", F_U32, 3},        {"correlationId", F_U64, 4},
    {"type", F_STR, 1},        {NULL, 0, 0},
};
static const struct fdesc comm_fields[] = {
    {"name", F_STR, 0},     {"startNs", F_NS, 0},   {"endNs", F_NS, 1},
    {"deviceId", F_U32, 2}, {"streamId", F_U32, 3}, {"count", F_U64, 4},
    {"dataType", F_STR, 1}, {"commName", F_STR, 2}, {"algType", F_STR, 3},
    {"correlationId", F_U64, 5}, {NULL, 0, 0},
};
static const struct fdesc marker_fields[] = {
    {"name", F_STR, 0},    {"sourceKind", F_I32, 0}, {"domain", F_STR, 1},
    {"id", F_U64, 1},      {"startNs", F_NS, 2},     {"endNs", F_NS, 3},
    {"pid", F_U32, 4},     {"tid", F_U32, 5},        {"deviceId", F_U32, 6},
    {"streamId", F_U32, 7}, {NULL, 0, 0},
};

enum rec_class { RC_API, RC_KERNEL, RC_COMM, RC_MARKER, RC_COUNT };

static const struct {
    const char *spec_name;
    const struct fdesc *fields;
} rec_classes[RC_COUNT] = {
    [RC_API] = {"IPCMonitor_C.monitor.API", api_fields},
    [RC_KERNEL] = {"IPCMonitor_C.monitor.Kernel", kernel_fields},
    [RC_COMM] = {"IPCMonitor_C.monitor.Communication", comm_fields},
    [RC_MARKER] = {"IPCMonitor_C.monitor.Marker", marker_fields},
};

/* Created once at module init; the module is single-phase, so one set per process. */
static PyTypeObject *rec_types[RC_COUNT];
static PyObject *activity_kind;   /* the ActivityKind enum class */

static const struct fdesc *rec_fields_of(PyObject *self)
{
    for (int i = 0; i < RC_COUNT; i++)
        if (Py_TYPE(self) == rec_types[i])
            return rec_classes[i].fields;
    /* Subclasses: walk the MRO through PyObject_TypeCheck. */
    for (int i = 0; i < RC_COUNT; i++)
        if (rec_types[i] && PyObject_TypeCheck(self, rec_types[i]))
            return rec_classes[i].fields;
    return NULL;
}

static PyObject *rec_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)args;
    (void)kw;
    RecObject *self = (RecObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    for (int i = 0; i < REC_NSTR; i++) {
        self->s[i] = PyUnicode_FromStringAndSize("", 0);
        if (!self->s[i]) {
            Py_DECREF(self);
            return NULL;
        }
    }
    return (PyObject *)self;
}

static void rec_dealloc(PyObject *obj)
{
    RecObject *self = (RecObject *)obj;
    PyTypeObject *tp = Py_TYPE(obj);
    for (int i = 0; i < REC_NSTR; i++)
        Py_CLEAR(self->s[i]);
    tp->tp_free(obj);
    Py_DECREF(tp);
}

static PyObject *rec_get(PyObject *obj, void *closure)
{
    RecObject *self = (RecObject *)obj;
    const struct fdesc *f = closure;
    switch (f->kind) {
    case F_STR:
        return Py_NewRef(self->s[f->slot]);
    case F_I32:
        return PyLong_FromLong((long)(int32_t)self->n[f->slot]);
    case F_U32:
        return PyLong_FromUnsignedLong((unsigned long)(uint32_t)self->n[f->slot]);
    case F_NS:
    case F_U64:
    default:
        return PyLong_FromUnsignedLongLong((unsigned long long)(uint64_t)self->n[f->slot]);
    }
}

/* Wrong types raise TypeError; out-of-range integers raise OverflowError like any
 * fixed-width C attribute. */
static int rec_set(PyObject *obj, PyObject *value, void *closure)
{
    RecObject *self = (RecObject *)obj;
    const struct fdesc *f = closure;
    if (!value) {
        PyErr_Format(PyExc_TypeError, "cannot delete attribute '%s'", f->name);
        return -1;
    }
    if (f->kind == F_STR) {
        if (!PyUnicode_Check(value)) {
            PyErr_Format(PyExc_TypeError, "'%s' must be str, not %.100s", f->name,
                         Py_TYPE(value)->tp_name);
            return -1;
        }
        Py_SETREF(self->s[f->slot], Py_NewRef(value));
        return 0;
    }
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "'%s' must be int, not %.100s", f->name, Py_TYPE(value)->tp_name);
        return -1;
    }
    if (f->kind == F_I32) {
        long v = PyLong_AsLong(value);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (v < INT32_MIN || v > INT32_MAX) {
            PyErr_Format(PyExc_OverflowError, "'%s' out of range: %ld", f->name, v);
            return -1;
        }
        self->n[f->slot] = v;
        return 0;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(value);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    if (f->kind == F_U32 && v > UINT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "'%s' out of range: %llu", f->name, v);
        return -1;
    }
    self->n[f->slot] = (int64_t)v;
    return 0;
}

/* Keyword arguments named like the attributes are accepted (all optional). */
static int rec_init(PyObject *self, PyObject *args, PyObject *kw)
{
    const struct fdesc *fields = rec_fields_of(self);
    if (!fields)
        return 0;
    if (args && PyTuple_GET_SIZE(args) > 0) {
        PyErr_SetString(PyExc_TypeError, "record classes take keyword arguments only");
        return -1;
    }
    if (!kw)
        return 0;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kw, &pos, &key, &value)) {
        const char *k = PyUnicode_AsUTF8(key);
        if (!k)
            return -1;
        const struct fdesc *f = NULL;
        for (const struct fdesc *it = fields; it->name; it++)
            if (strcmp(it->name, k) == 0)
                f = it;
        if (!f) {
            PyErr_Format(PyExc_TypeError, "unexpected keyword argument '%s'", k);
            return -1;
        }
        if (rec_set(self, value, (void *)f) < 0)
            return -1;
    }
    return 0;
}

static PyObject *rec_to_tuple(PyObject *self, PyObject *unused)
{
    (void)unused;
    const struct fdesc *fields = rec_fields_of(self);
    Py_ssize_t n = 0;
    for (const struct fdesc *f = fields; f->name; f++)
        n++;
    PyObject *t = PyTuple_New(n);
    if (!t)
        return NULL;
    Py_ssize_t i = 0;
    for (const struct fdesc *f = fields; f->name; f++, i++) {
        PyObject *v;
        if (f->kind == F_NS)
            v = PyFloat_FromDouble((double)(uint64_t)((RecObject *)self)->n[f->slot] / 1000.0);
        else
            v = rec_get(self, (void *)f);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

static PyObject *rec_repr(PyObject *self)
{
    PyObject *t = rec_to_tuple(self, NULL);
    if (!t)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("%s%R", _PyType_Name(Py_TYPE(self)), t);
    Py_DECREF(t);
    return r;
}

static PyMethodDef rec_methods[] = {
    {"to_tuple", rec_to_tuple, METH_NOARGS,
     "Fields in order, startNs/endNs as microsecond floats."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject *rec_type_create(enum rec_class rc)
{
    const struct fdesc *fields = rec_classes[rc].fields;
    size_t n = 0;
    for (const struct fdesc *f = fields; f->name; f++)
        n++;
    /* Lives as long as the type, i.e. the process (static types are never freed). */
    static PyGetSetDef getsets[RC_COUNT][16];
    PyGetSetDef *gs = getsets[rc];
    for (size_t i = 0; i < n && i < 15; i++)
        gs[i] = (PyGetSetDef){(char *)fields[i].name, rec_get, rec_set, NULL, (void *)&fields[i]};
    PyType_Slot slots[] = {
        {Py_tp_new, rec_new},       {Py_tp_init, rec_init},       {Py_tp_dealloc, rec_dealloc},
        {Py_tp_getset, gs},         {Py_tp_methods, rec_methods}, {Py_tp_repr, rec_repr},
        {0, NULL},
    };
    PyType_Spec spec = {
        .name = rec_classes[rc].spec_name,
        .basicsize = sizeof(RecObject),
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
        .slots = slots,
    };
    return (PyTypeObject *)PyType_FromSpec(&spec);
}

static const char *nz(const char *s)
{
    return s ? s : "";
}

static int set_str(RecObject *r, int slot, const char *s)
{
    PyObject *v = PyUnicode_DecodeUTF8(nz(s), (Py_ssize_t)strlen(nz(s)), "replace");
    if (!v)
        return -1;
    Py_SETREF(r->s[slot], v);
    return 0;
}

/* One Python record object from a core result. */
static PyObject *rec_from_result(enum rec_class rc, const struct msmon_result *m)
{
    PyTypeObject *tp = rec_types[rc];
    RecObject *r = (RecObject *)rec_new(tp, NULL, NULL);
    if (!r)
        return NULL;
    int rc_err = set_str(r, 0, m->name);
    switch (rc) {
    case RC_API:
        r->n[0] = (int64_t)m->start_ns;
        r->n[1] = (int64_t)m->end_ns;
        r->n[2] = m->pid;
        r->n[3] = m->tid;
        r->n[4] = (int64_t)m->correlation_id;
        break;
    case RC_KERNEL:
        r->n[0] = (int64_t)m->start_ns;
        r->n[1] = (int64_t)m->end_ns;
        r->n[2] = m->device_id;
        r->n[3] = m->stream_id;
        r->n[4] = (int64_t)m->correlation_id;
        rc_err |= set_str(r, 1, m->type);
        break;
    case RC_COMM:
        r->n[0] = (int64_t)m->start_ns;
        r->n[1] = (int64_t)m->end_ns;
        r->n[2] = m->device_id;
        r->n[3] = m->stream_id;
        r->n[4] = (int64_t)m->count;
        r->n[5] = (int64_t)m->correlation_id;
        rc_err |= set_str(r, 1, m->data_type);
        rc_err |= set_str(r, 2, m->comm_name);
        rc_err |= set_str(r, 3, m->alg_type);
        break;
    case RC_MARKER:
    default:
        r->n[0] = m->source_kind;
        r->n[1] = (int64_t)m->id;
        r->n[2] = (int64_t)m->start_ns;
        r->n[3] = (int64_t)m->end_ns;
        r->n[4] = m->pid;
        r->n[5] = m->tid;
        r->n[6] = m->device_id;
        r->n[7] = m->stream_id;
        rc_err |= set_str(r, 1, m->domain);
        break;
    }
    if (rc_err) {
        Py_DECREF(r);
        return NULL;
    }
    return (PyObject *)r;
}

/* ---- functions --------------------------------------------------------------------- */

static PyObject *kind_member(int32_t value)
{
    return PyObject_CallFunction(activity_kind, "i", (int)value);
}

static PyObject *m_start_monitor(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {"kinds", NULL};
    PyObject *list;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:start_monitor", kwlist, &list))
        return NULL;
    if (!PyList_Check(list) && !PyTuple_Check(list)) {
        PyErr_Format(PyExc_TypeError, "start_monitor(): kinds must be a list of ActivityKind, not %.100s",
                     Py_TYPE(list)->tp_name);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(list);
    /* Every item is checked; repeats are dropped, so any list length is accepted. */
    int32_t vals[N_KINDS];
    size_t nv = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(list, i);
        int ok = PyObject_IsInstance(it, activity_kind);
        if (ok < 0)
            return NULL;
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "start_monitor(): kinds[%zd] must be ActivityKind, not %.100s", i,
                         Py_TYPE(it)->tp_name);
            return NULL;
        }
        PyObject *v = PyObject_GetAttrString(it, "value");
        if (!v)
            return NULL;
        long kv = PyLong_AsLong(v);
        Py_DECREF(v);
        if (kv == -1 && PyErr_Occurred())
            return NULL;
        bool seen = false;
        for (size_t j = 0; j < nv; j++)
            seen = seen || vals[j] == kv;
        if (!seen && nv < N_KINDS)
            vals[nv++] = (int32_t)kv;
    }
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&ext_results_lock);
    msmon_monitor_start(vals, nv);
    pthread_mutex_unlock(&ext_results_lock);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *m_stop_monitor(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&ext_results_lock);
    msmon_monitor_stop();
    pthread_mutex_unlock(&ext_results_lock);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *m_get_kinds(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    int32_t out[32];
    size_t n = 0;
    if (msmon_monitor_kinds(out, sizeof(out) / sizeof(out[0]), &n) < 0)
        n = 0;
    PyObject *list = PyList_New(0);
    if (!list)
        return NULL;
    for (size_t i = 0; i < n && i < sizeof(out) / sizeof(out[0]); i++) {
        if (!ext_results_kind_name(out[i]))
            continue;
        PyObject *m = kind_member(out[i]);
        if (!m || PyList_Append(list, m) < 0) {
            Py_XDECREF(m);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(m);
    }
    return list;
}

static PyObject *get_data(int32_t kind, enum rec_class rc)
{
    PyObject *list = PyList_New(0);
    if (!list)
        return NULL;
    /* Acquiring with the GIL held is safe: holders of the lock never wait for the GIL. */
    pthread_mutex_lock(&ext_results_lock);
    const struct msmon_result *arr = NULL;
    size_t n = 0;
    if (msmon_monitor_results(kind, &arr, &n) < 0 || !arr)
        n = 0;
    for (size_t i = 0; i < n; i++) {
        PyObject *o = rec_from_result(rc, &arr[i]);
        if (!o || PyList_Append(list, o) < 0) {
            Py_XDECREF(o);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(o);
    }
    pthread_mutex_unlock(&ext_results_lock);
    return list;
}

/* How a standalone kind's msmon_result reads (include/msmon/msmonitor.h): its record class. */
static enum rec_class rec_class_of(int32_t kind)
{
    switch (kind) {
    case KIND_KERNEL:
        return RC_KERNEL;
    case KIND_COMMUNICATION:
        return RC_COMM;
    case KIND_MARKER:
        return RC_MARKER;
    default:
        return RC_API; /* API, AclAPI, NodeAPI, RuntimeAPI */
    }
}

/* get_<stem>_data, one per standalone kind of the contract (kinds.def; the stems of
 * _contract.STANDALONE_KINDS), added when the module is created: self is the kind's value. */
static PyObject *m_get_data(PyObject *kind, PyObject *unused)
{
    long k = PyLong_AsLong(kind);

    (void)unused;
    if (k == -1 && PyErr_Occurred())
        return NULL;
    return get_data((int32_t)k, rec_class_of((int32_t)k));
}

/* Function objects keep pointers to their PyMethodDef: these live for the process, written
 * (with the same values) each time the module is created, under the GIL. */
static PyMethodDef getter_defs[KINDS_STANDALONE_COUNT];
static char getter_names[KINDS_STANDALONE_COUNT][48];
static char getter_docs[KINDS_STANDALONE_COUNT][64];

static int add_getters(PyObject *m)
{
    PyObject *modname = PyModule_GetNameObject(m);
    int rc = -1;

    if (!modname)
        return -1;
    for (size_t i = 0; i < KINDS_STANDALONE_COUNT; i++) {
        int k = kinds_standalone_at(i);
        char stem[32];
        PyObject *self, *fn;

        if (k < 0 || kinds_stem(k, stem, sizeof(stem)) != 0) {
            PyErr_SetString(PyExc_SystemError, "IPCMonitor_C.monitor: the contract's standalone kinds are broken");
            goto out;
        }
        snprintf(getter_names[i], sizeof(getter_names[i]), "get_%s_data", stem);
        snprintf(getter_docs[i], sizeof(getter_docs[i]), "%s records of the last session.", kinds_name(k));
        getter_defs[i] = (PyMethodDef){ getter_names[i], m_get_data, METH_NOARGS, getter_docs[i] };
        self = PyLong_FromLong(k);
        if (!self)
            goto out;
        fn = PyCFunction_NewEx(&getter_defs[i], self, modname);
        Py_DECREF(self);
        if (!fn || PyModule_AddObject(m, getter_names[i], fn) < 0) {
            Py_XDECREF(fn);
            goto out;
        }
    }
    rc = 0;
out:
    Py_DECREF(modname);
    return rc;
}

static PyMethodDef monitor_methods[] = {
    {"start_monitor", (PyCFunction)(void (*)(void))m_start_monitor, METH_VARARGS | METH_KEYWORDS,
     "start_monitor(kinds): start a standalone session for a list of ActivityKind."},
    {"stop_monitor", m_stop_monitor, METH_NOARGS, "Stop the standalone session, flushing all data."},
    {"get_kinds", m_get_kinds, METH_NOARGS, "ActivityKind list of the last start."},
    {"save_xlsx", (PyCFunction)(void (*)(void))ext_xlsx_save, METH_VARARGS | METH_KEYWORDS,
     "save_xlsx(path) -> bool: write the last session's records as an xlsx workbook."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef monitor_def = {
    PyModuleDef_HEAD_INIT, "IPCMonitor_C.monitor",
    "Standalone activity monitor: ActivityKind, record classes and session functions.", -1,
    monitor_methods, NULL, NULL, NULL, NULL,
};

/* ActivityKind is a plain enum.Enum: members are hashable, have .name/.value and compare
 * equal only to themselves (not to ints). */
static PyObject *activity_kind_create(void)
{
    PyObject *enum_mod = NULL, *members = NULL, *kwargs = NULL, *cls = NULL;
    enum_mod = PyImport_ImportModule("enum");
    if (!enum_mod)
        goto out;
    members = PyList_New(0);
    if (!members)
        goto out;
    for (size_t i = 0; i < KINDS_STANDALONE_COUNT; i++) {
        int k = kinds_standalone_at(i);
        PyObject *pair = Py_BuildValue("(si)", kinds_name(k), k);
        if (!pair || PyList_Append(members, pair) < 0) {
            Py_XDECREF(pair);
            goto out;
        }
        Py_DECREF(pair);
    }
    kwargs = Py_BuildValue("{ss}", "module", "IPCMonitor_C.monitor");
    if (!kwargs)
        goto out;
    PyObject *enum_cls = PyObject_GetAttrString(enum_mod, "Enum");
    if (!enum_cls)
        goto out;
    PyObject *args = Py_BuildValue("(sO)", "ActivityKind", members);
    if (args)
        cls = PyObject_Call(enum_cls, args, kwargs);
    Py_XDECREF(args);
    Py_DECREF(enum_cls);
out:
    Py_XDECREF(kwargs);
    Py_XDECREF(members);
    Py_XDECREF(enum_mod);
    return cls;
}

PyObject *ext_monitor_create(void)
{
    PyObject *m = PyModule_Create(&monitor_def);
    if (!m)
        return NULL;
    if (!activity_kind) {
        activity_kind = activity_kind_create();
        if (!activity_kind)
            goto fail;
    }
    if (PyModule_AddObjectRef(m, "ActivityKind", activity_kind) < 0 || add_getters(m) < 0)
        goto fail;
    static const char *cls_names[RC_COUNT] = {"API", "Kernel", "Communication", "Marker"};
    for (int i = 0; i < RC_COUNT; i++) {
        if (!rec_types[i]) {
            rec_types[i] = rec_type_create((enum rec_class)i);
            if (!rec_types[i])
                goto fail;
        }
        if (PyModule_AddObjectRef(m, cls_names[i], (PyObject *)rec_types[i]) < 0)
            goto fail;
    }
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
