/* legacy_merge: the `dyno steps` merge as it was before the synchronised rule of
 * docs/cluster.md §4 (wall time only), kept here only as the benchmark's baseline so the new
 * rule's cost is printed next to the old one measured in the same run. */
#include "legacy_merge.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct flat {
    int64_t step;
    uint32_t ri;
    uint32_t si;
};

struct judged {
    bool judged, slow;
    double ratio;
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

static void legacy_fini(struct slowrank_result *r)
{
    free(r->slow);
    r->slow = NULL;
    r->nslow = 0;
}

int legacy_merge(const struct slowrank_in *in, size_t n, const struct slowrank_rule *rule, struct slowrank_result *ret)
{
    size_t total = 0, *off = NULL, nj = 0;
    struct flat *all = NULL;
    struct judged *jd = NULL;
    double *tmp = NULL, *walls = NULL;
    int rc = -ENOMEM;

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
    all = malloc((total ? total : 1) * sizeof(*all));
    jd = calloc(total ? total : 1, sizeof(*jd));
    tmp = malloc((n ? n : 1) * 4 * sizeof(*tmp));
    walls = malloc((total ? total : 1) * sizeof(*walls));
    ret->slow = calloc(n ? n : 1, sizeof(*ret->slow));
    if (!all || !jd || !tmp || !walls || !ret->slow)
        goto out;
    for (size_t i = 0, k = 0; i < n; i++)
        for (size_t j = 0; j < in[i].n; j++, k++)
            all[k] = (struct flat){ in[i].s[j].step, (uint32_t)i, (uint32_t)j };
    qsort(all, total, sizeof(*all), flat_cmp);

    /* Per step: medians over the ranks that have it, then each rank's verdict. */
    for (size_t a = 0; a < total;) {
        size_t b = a;
        while (b < total && all[b].step == all[a].step)
            b++;
        size_t g = b - a;
        if (g >= rule->min_ranks && g >= 1) {
            double *w = tmp, *c = tmp + g, *m = tmp + 2 * g, *h = tmp + 3 * g;
            for (size_t k = 0; k < g; k++) {
                const struct slowrank_sample *s = &in[all[a + k].ri].s[all[a + k].si];
                w[k] = (double)s->wall;
                c[k] = (double)(s->compute + s->memcpy);
                m[k] = (double)s->comm;
                h[k] = (double)s->host;
            }
            double med = median(w, g), medc = median(c, g), medm = median(m, g), medh = median(h, g);
            for (size_t k = 0; k < g; k++) {
                const struct slowrank_sample *s = &in[all[a + k].ri].s[all[a + k].si];
                w[k] = fabs((double)s->wall - med);
            }
            double mad = median(w, g);
            for (size_t k = 0; k < g; k++) {
                const struct slowrank_sample *s = &in[all[a + k].ri].s[all[a + k].si];
                struct judged *j = &jd[off[all[a + k].ri] + all[a + k].si];
                double wall = (double)s->wall;
                j->judged = true;
                j->ratio = med > 0 ? wall / med : 1;
                j->slow = wall > med * (1 + rule->threshold) && wall - med > rule->mad_k * 1.4826 * mad;
                j->excess[0] = ((double)(s->compute + s->memcpy) - medc) / 1e6;
                j->excess[1] = ((double)s->comm - medm) / 1e6;
                j->excess[2] = ((double)s->host - medh) / 1e6;
                walls[nj++] = wall;
            }
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
        struct slowrank_slow sl = { .rank_index = i, .since_step = -1, .last_step = -1 };
        double ratio = 0, ex[3] = { 0, 0, 0 };
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
        ret->slow[ret->nslow++] = sl;
    }
    rc = 0;
out:
    if (rc < 0)
        legacy_fini(ret);
    free(off);
    free(all);
    free(jd);
    free(tmp);
    free(walls);
    return rc;
}
