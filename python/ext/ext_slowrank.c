/* ext_slowrank: the Python face of the shared slow-rank rule (see ext_slowrank.h). Input is
 * checked whole before the rule runs: TypeError names the first bad element. */
#include "ext_slowrank.h"

#include <stdint.h>
#include <stdlib.h>

#include "contract/slowrank.h"

static int u64_item(PyObject *seq, Py_ssize_t i, uint64_t *ret)
{
    PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
    if (!PyLong_Check(o))
        return -1;
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    *ret = v;
    return 0;
}

static int parse_step(PyObject *row, struct slowrank_sample *s)
{
    PyObject *f = PySequence_Fast(row, "");
    int rc = -1;
    if (!f) {
        PyErr_Clear();
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    if ((n == 8 || n == 9) && PyLong_Check(PySequence_Fast_GET_ITEM(f, 0))) {
        long long step = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(f, 0));
        if (PyErr_Occurred()) {
            PyErr_Clear();
        } else if (u64_item(f, 1, &s->wall) == 0 && u64_item(f, 2, &s->compute) == 0 &&
                   u64_item(f, 3, &s->comm) == 0 && u64_item(f, 4, &s->memcpy) == 0 &&
                   u64_item(f, 5, &s->host) == 0 && u64_item(f, 6, &s->wait) == 0 &&
                   u64_item(f, 7, &s->transfer) == 0) {
            s->step = step;
            /* the split's name; without it a split can only have been measured */
            s->split = s->wait || s->transfer < s->comm ? DATAMSG_SPLIT_MEASURED : DATAMSG_SPLIT_NONE;
            rc = 0;
            if (n == 9) {
                PyObject *how = PySequence_Fast_GET_ITEM(f, 8);
                Py_ssize_t len = 0;
                const char *name = PyUnicode_Check(how) ? PyUnicode_AsUTF8AndSize(how, &len) : NULL;
                if (!name || datamsg_split_parse(name, (size_t)len, &s->split) != 0) {
                    PyErr_Clear();
                    rc = -1;
                } else if (s->split != DATAMSG_SPLIT_MEASURED) {
                    s->split = DATAMSG_SPLIT_NONE; /* the merge infers it again */
                }
            }
        }
    }
    Py_DECREF(f);
    return rc;
}

/* The rule travels with the verdict, so a caller that passed no parameters can say which it
 * was judged by without restating the defaults (docs/cluster.md). */
static PyObject *result_dict(const struct slowrank_result *res, const struct slowrank_in *in,
                             const struct slowrank_rule *rule)
{
    PyObject *d = Py_BuildValue("{s:n,s:L,s:L,s:d,s:d,s:d,s:{s:d,s:d,s:I,s:I},s:{s:n,s:n,s:n}}", "judged_steps",
                                (Py_ssize_t)res->judged_steps, "first_step", (long long)res->first_step, "last_step",
                                (long long)res->last_step, "median_ms", res->median_ms, "p99_ms", res->p99_ms,
                                "max_ms", res->max_ms, "rule", "threshold", rule->threshold, "mad_k", rule->mad_k,
                                "min_steps", (unsigned)rule->min_steps, "min_ranks", (unsigned)rule->min_ranks,
                                "split", datamsg_split_name(DATAMSG_SPLIT_MEASURED),
                                (Py_ssize_t)res->split[DATAMSG_SPLIT_MEASURED],
                                datamsg_split_name(DATAMSG_SPLIT_INFERRED),
                                (Py_ssize_t)res->split[DATAMSG_SPLIT_INFERRED], datamsg_split_name(DATAMSG_SPLIT_NONE),
                                (Py_ssize_t)res->split[DATAMSG_SPLIT_NONE]);
    PyObject *slow = d ? PyList_New(0) : NULL;
    if (!slow)
        goto fail;
    for (size_t i = 0; i < res->nslow; i++) {
        const struct slowrank_slow *s = &res->slow[i];
        PyObject *e = Py_BuildValue(
            "{s:i,s:L,s:L,s:I,s:d,s:s,s:s,s:d,s:d,s:L,s:s,s:{s:d,s:d,s:d}}", "rank", (int)in[s->rank_index].rank,
            "since_step", (long long)s->since_step, "last_step", (long long)s->last_step, "slow_steps",
            (unsigned)s->run, "ratio", s->ratio, "cause", slowrank_cause_name(s->cause), "severity",
            slowrank_severity_name(s->severity), "cost_ms", s->cost_ms, "cost_share", s->cost_share, "cost_to_step",
            (long long)s->cost_last_step, "split", datamsg_split_name(s->split), "excess_ms", "compute",
            s->excess_ms[SLOWRANK_COMPUTE], "communication", s->excess_ms[SLOWRANK_COMMUNICATION], "host",
            s->excess_ms[SLOWRANK_HOST]);
        if (!e || PyList_Append(slow, e) != 0) {
            Py_XDECREF(e);
            goto fail;
        }
        Py_DECREF(e);
    }
    if (PyDict_SetItemString(d, "slow", slow) != 0)
        goto fail;
    Py_DECREF(slow);
    return d;
fail:
    Py_XDECREF(slow);
    Py_XDECREF(d);
    return NULL;
}

PyObject *ext_slow_ranks(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = { "ranks", "threshold", "mad_k", "min_steps", "min_ranks", NULL };
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    PyObject *ranks, *seq = NULL, *ret = NULL;
    struct slowrank_in *in = NULL;
    struct slowrank_sample *smp = NULL;
    struct slowrank_result res = { 0 };
    PyObject **rows = NULL;
    size_t total = 0;
    unsigned int min_steps = rule.min_steps, min_ranks = rule.min_ranks;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|ddII:slow_ranks", kwlist, &ranks, &rule.threshold, &rule.mad_k,
                                     &min_steps, &min_ranks))
        return NULL;
    if (!(rule.threshold >= 0 && rule.threshold <= 100) || !(rule.mad_k >= 0 && rule.mad_k <= 1000) ||
        min_steps < 1 || min_ranks < 1) {
        PyErr_SetString(PyExc_TypeError, "slow_ranks(): threshold in [0, 100], mad_k in [0, 1000], min_steps and "
                                         "min_ranks >= 1");
        return NULL;
    }
    rule.min_steps = min_steps;
    rule.min_ranks = min_ranks;
    seq = PySequence_Fast(ranks, "slow_ranks(): ranks must be a list of (rank, steps)");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    in = calloc((size_t)n + 1, sizeof(*in));
    rows = calloc((size_t)n + 1, sizeof(*rows));
    if (!in || !rows) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i), *p = PySequence_Fast(pair, "");
        if (!p || PySequence_Fast_GET_SIZE(p) != 2 || !PyLong_Check(PySequence_Fast_GET_ITEM(p, 0))) {
            Py_XDECREF(p);
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "slow_ranks(): ranks[%zd] is not a (rank, steps) pair", i);
            goto out;
        }
        long r = PyLong_AsLong(PySequence_Fast_GET_ITEM(p, 0));
        rows[i] = PySequence_Fast(PySequence_Fast_GET_ITEM(p, 1), "");
        Py_DECREF(p);
        if (PyErr_Occurred() || r < -1 || r > INT32_MAX || !rows[i]) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "slow_ranks(): ranks[%zd]: rank must be an int in [-1, 2^31) and steps a "
                                          "list", i);
            goto out;
        }
        in[i].rank = (int32_t)r;
        in[i].host = "";
        in[i].n = (size_t)PySequence_Fast_GET_SIZE(rows[i]);
        total += in[i].n;
    }
    smp = calloc(total + 1, sizeof(*smp));
    if (!smp) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0, q = 0; i < n; i++) {
        in[i].s = &smp[q];
        for (size_t k = 0; k < in[i].n; k++, q++) {
            if (parse_step(PySequence_Fast_GET_ITEM(rows[i], (Py_ssize_t)k), &smp[q]) != 0 ||
                (k > 0 && smp[q].step <= smp[q - 1].step)) {
                PyErr_Format(PyExc_TypeError, "slow_ranks(): ranks[%zd] step %zu is not 8 non-negative ints "
                                              "(step, wall, compute, comm, memcpy, host, wait, transfer) and an "
                                              "optional split name in ascending step order", i, k);
                goto out;
            }
        }
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = slowrank_merge(in, (size_t)n, &rule, &res);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        PyErr_NoMemory();
        goto out;
    }
    ret = result_dict(&res, in, &rule);
out:
    slowrank_result_fini(&res);
    if (rows)
        for (Py_ssize_t i = 0; i < n; i++)
            Py_XDECREF(rows[i]);
    free(rows);
    free(in);
    free(smp);
    Py_DECREF(seq);
    return ret;
}
