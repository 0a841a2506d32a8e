/* split_merge: the `dyno steps` merge as it was before the wait was inferred and fail-slow
 * devices were named (the split taken only as the records measured it; docs/cluster.md §4
 * states today's rule), kept here only as the benchmark's baseline so that the rule's cost is
 * printed next to the previous one measured in the same run. */
#include "split_merge.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { Q_WALL, Q_COMP, Q_HOST, Q_WAIT, Q_XFER, Q_N };

struct flat {
    int64_t step;
    uint32_t ri;
    uint32_t si;
};

struct judged {
    bool judged, slow, split, complete; /* complete: every rank of the input has the step */
    double ratio;
    double waited, own_wall, own_busy; /* ms: the others' extra wait; its own wall / work excess */
    double excess[3];
};

static int flat_cmp(const void *x, const void *y)
{
    const struct flat *a = x, *b = y;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    return a->ri < b->ri ? -1 : a->ri > b->ri;
}

static int dbl_cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Median of v[0..n) (sorts v). */
static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), dbl_cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void quantities(const struct slowrank_sample *s, double q[Q_N])
{
    q[Q_WALL] = (double)s->wall;
    q[Q_COMP] = (double)s->compute + (double)s->memcpy;
    q[Q_HOST] = (double)s->host;
    q[Q_WAIT] = (double)s->wait;
    /* a sample without the split is all transfer */
    q[Q_XFER] = s->wait || s->transfer ? (double)s->transfer : (double)s->comm;
}

/* The verdict of each rank at one step: g samples all[0..g) of the same step. tmp holds
 * (Q_N + 1) * g doubles. */
static void judge_step(const struct slowrank_in *in, const struct flat *all, size_t g, size_t active,
                       const size_t *off, const struct slowrank_rule *rule, double *tmp, struct judged *jd,
                       double *walls, size_t *nj)
{
    double med[Q_N], mad[Q_N], q[Q_N], busy;
    double *col = tmp + Q_N * g;

    for (int k = 0; k < Q_N; k++) {
        for (size_t i = 0; i < g; i++) {
            quantities(&in[all[i].ri].s[all[i].si], q);
            tmp[k * g + i] = q[k];
        }
        for (size_t i = 0; i < g; i++)
            col[i] = tmp[k * g + i];
        med[k] = median(col, g);
        for (size_t i = 0; i < g; i++)
            col[i] = fabs(tmp[k * g + i] - med[k]);
        mad[k] = median(col, g);
    }
    for (size_t i = 0; i < g; i++)
        col[i] = tmp[Q_WALL * g + i] > tmp[Q_WAIT * g + i] ? tmp[Q_WALL * g + i] - tmp[Q_WAIT * g + i] : 0;
    busy = median(col, g);
    for (size_t i = 0; i < g; i++) {
        const struct slowrank_sample *s = &in[all[i].ri].s[all[i].si];
        struct judged *j = &jd[off[all[i].ri] + all[i].si];
        double margin[Q_N];
        quantities(s, q);
        /* A component's excess counts against the step's own work (wall less waiting): waits
         * inflate every wall of a synchronised job without making a rank's work any longer. */
        for (int k = 0; k < Q_N; k++) {
            margin[k] = rule->threshold * (k == Q_WALL ? med[Q_WALL] : busy);
            if (rule->mad_k * 1.4826 * mad[k] > margin[k])
                margin[k] = rule->mad_k * 1.4826 * mad[k];
        }
        double ec = q[Q_COMP] - med[Q_COMP], eh = q[Q_HOST] - med[Q_HOST], et = q[Q_XFER] - med[Q_XFER];
        bool wall_slow = q[Q_WALL] > med[Q_WALL] * (1 + rule->threshold) && q[Q_WALL] - med[Q_WALL] > margin[Q_WALL];
        bool link_slow = et > margin[Q_XFER] && ec <= margin[Q_COMP];
        j->judged = true;
        j->complete = g >= active;
        j->ratio = med[Q_WALL] > 0 ? q[Q_WALL] / med[Q_WALL] : 1;
        /* A step's waits are as noisy as the ranks' start times, so whether the others wait
         * for this excess is judged over the run (slowrank_merge), not per step. */
        j->slow = wall_slow || ec > margin[Q_COMP] || eh > margin[Q_HOST] || link_slow;
        j->excess[SLOWRANK_COMPUTE] = ec / 1e6;
        j->excess[SLOWRANK_COMMUNICATION] = et / 1e6;
        j->excess[SLOWRANK_HOST] = eh / 1e6;
        j->split = med[Q_WAIT] > 0;
        j->waited = (med[Q_WAIT] - q[Q_WAIT]) / 1e6;
        j->own_wall = (q[Q_WALL] - med[Q_WALL]) / 1e6;
        j->own_busy = (q[Q_WALL] - q[Q_WAIT] - busy) / 1e6;
        walls[(*nj)++] = q[Q_WALL];
    }
}

int split_merge(const struct slowrank_in *in, size_t n, const struct slowrank_rule *rule,
                   struct slowrank_result *ret)
{
    size_t total = 0, *off = NULL, nj = 0;
    struct flat *all = NULL;
    struct judged *jd = NULL;
    double *tmp = NULL, *walls = NULL;
    int rc = -ENOMEM;

    if (!ret || !rule || (n && !in))
        return -EINVAL;
    memset(ret, 0, sizeof(*ret));
    ret->ranks = n;
    ret->first_step = ret->last_step = -1;
    off = calloc(n + 1, sizeof(*off));
    if (!off)
        goto out;
    for (size_t i = 0; i < n; i++) {
        off[i] = total;
        total += in[i].n;
    }
    off[n] = total;
    size_t active = 0;
    for (size_t i = 0; i < n; i++)
        active += in[i].n > 0;
    all = malloc((total ? total : 1) * sizeof(*all));
    jd = calloc(total ? total : 1, sizeof(*jd));
    walls = malloc((total ? total : 1) * sizeof(*walls));
    ret->slow = calloc(n ? n : 1, sizeof(*ret->slow));
    if (!all || !jd || !walls || !ret->slow)
        goto out;
    for (size_t i = 0, k = 0; i < n; i++)
        for (size_t j = 0; j < in[i].n; j++, k++)
            all[k] = (struct flat){ in[i].s[j].step, (uint32_t)i, (uint32_t)j };
    qsort(all, total, sizeof(*all), flat_cmp);
    /* A step's group can hold more samples than there are ranks: a rank (or a hostile reply)
     * may list one step twice. The scratch space follows the largest group, not n. */
    size_t gmax = 1;
    for (size_t a = 0; a < total;) {
        size_t b = a;
        while (b < total && all[b].step == all[a].step)
            b++;
        if (b - a > gmax)
            gmax = b - a;
        a = b;
    }
    tmp = malloc(gmax * (Q_N + 1) * sizeof(*tmp));
    if (!tmp)
        goto out;

    for (size_t a = 0; a < total;) {
        size_t b = a;
        while (b < total && all[b].step == all[a].step)
            b++;
        if (b - a >= rule->min_ranks && b - a >= 1) {
            judge_step(in, all + a, b - a, active, off, rule, tmp, jd, walls, &nj);
            if (ret->first_step < 0)
                ret->first_step = all[a].step;
            ret->last_step = all[a].step;
            ret->judged_steps++;
        }
        a = b;
    }
    if (nj) {
        qsort(walls, nj, sizeof(*walls), dbl_cmp);
        ret->median_ms = (nj % 2 ? walls[nj / 2] : (walls[nj / 2 - 1] + walls[nj / 2]) / 2) / 1e6;
        size_t p = (size_t)ceil(0.99 * (double)nj);
        ret->p99_ms = walls[(p ? p : 1) - 1] / 1e6;
        ret->max_ms = walls[nj - 1] / 1e6;
    }

    /* Per rank: the run of slow judged steps that ends at its newest judged step. */
    for (size_t i = 0; i < n; i++) {
        struct slowrank_slow sl = { .rank_index = i, .since_step = -1, .last_step = -1, .cost_last_step = -1 };
        double ratio = 0, ex[3] = { 0, 0, 0 };
        /* the cost over the run's steps every rank has reported ([1]), or over all of them ([0]):
         * the newest steps of a view lack the ranks whose next summary is still to come */
        double waited[2] = { 0, 0 }, own_wall[2] = { 0, 0 }, own_busy[2] = { 0, 0 };
        uint32_t split = 0, full = 0;
        for (size_t j = in[i].n; j-- > 0;) {
            const struct judged *x = &jd[off[i] + j];
            if (!x->judged)
                continue;
            if (!x->slow)
                break;
            if (sl.last_step < 0)
                sl.last_step = in[i].s[j].step;
            sl.since_step = in[i].s[j].step;
            sl.run++;
            ratio += x->ratio;
            for (int c = 0; c < 2; c++) {
                if (c == 1 && !x->complete)
                    continue;
                waited[c] += x->waited;
                own_wall[c] += x->own_wall;
                own_busy[c] += x->own_busy;
            }
            if (x->complete && (sl.cost_last_step < 0 || in[i].s[j].step > sl.cost_last_step))
                sl.cost_last_step = in[i].s[j].step;
            full += x->complete;
            split += x->split;
            for (int k = 0; k < 3; k++)
                ex[k] += x->excess[k];
        }
        if (sl.run < rule->min_steps || sl.run == 0)
            continue;
        sl.ratio = ratio / sl.run;
        int best = 0;
        for (int k = 0; k < 3; k++) {
            sl.excess_ms[k] = ex[k] / sl.run;
            if (sl.excess_ms[k] > sl.excess_ms[best])
                best = k;
        }
        sl.cause = (enum slowrank_cause)best;
        /* The job-wide cost per step. Synchronised (the steps have waits): what the others wait
         * for it beyond its own wait; a slow link also costs its own longer transfer, which the
         * others meet only at the next collective. Otherwise its own longer step. */
        int c = full > 0;
        if (!c)
            sl.cost_last_step = sl.last_step;
        double k = c ? full : sl.run;
        if (split * 2 > sl.run) {
            sl.cost_ms = waited[c] / k;
            if (best == SLOWRANK_COMMUNICATION && own_busy[c] / k > sl.cost_ms)
                sl.cost_ms = own_busy[c] / k;
        } else {
            sl.cost_ms = own_wall[c] / k;
        }
        /* An excess nobody pays for (neither do the others wait for it nor is its own step
         * longer: work overlapped elsewhere, or noise) is no straggler. */
        if (sl.cost_ms < SLOWRANK_WAIT_SHARE * sl.excess_ms[best])
            continue;
        if (sl.cost_ms < 0)
            sl.cost_ms = 0;
        ret->slow[ret->nslow++] = sl;
    }
    rc = 0;
out:
    if (rc < 0)
        slowrank_result_fini(ret);
    free(off);
    free(all);
    free(jd);
    free(tmp);
    free(walls);
    return rc;
}
