/* ext_slowrank: IPCMonitor_C.slow_ranks() — the shared slow-rank rule of
 * src/contract/slowrank.c for the HTML report (docs/report.md), so the page and `dyno steps`
 * judge a run identically. */
#ifndef MSMON_EXT_SLOWRANK_H
#define MSMON_EXT_SLOWRANK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *ext_slow_ranks(PyObject *mod, PyObject *args, PyObject *kw);

#define EXT_SLOW_RANKS_DOC                                                                                 \
    "slow_ranks(ranks, threshold=, mad_k=, min_steps=, min_ranks=) -> dict: ranks is a list of "          \
    "(rank, [(step, wall, compute, comm, memcpy, host, wait, transfer), ...]) in ns, steps ascending; "   \
    "omitted parameters are those of dyno steps. The result has judged_steps, first_step, last_step, "    \
    "median_ms, p99_ms, max_ms, rule (the parameters used) and slow: a list of dicts (rank, since_step, " \
    "last_step, slow_steps, ratio, cause, cost_ms, excess_ms) as dyno steps."

#endif
