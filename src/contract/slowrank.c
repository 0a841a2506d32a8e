/* slowrank: the slow-rank rule (see slowrank.h). First each step's communication is split:
 * measured where the records split it, else inferred from the ranks of the same step and job
 * (the members of a synchronised collective leave it together, so a rank's wait is its
 * communication less the step's shortest). Then per judged step, against the medians over the
 * ranks that have the step: an unsynchronised straggler's own wall time is long; a
 * synchronised one's compute or host time is long while the others wait that much longer in
 * the collective (their walls stay equal), or its transfer is long without a compute excess (a
 * slow link); a fail-slow device's compute or transfer is above its peers' by the threshold of
 * that component although the step hides it. docs/cluster.md §4 states the rule. */
#include "contract/slowrank.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { Q_WALL, Q_COMP, Q_HOST, Q_WAIT, Q_XFER, Q_N };

struct flat {
    int64_t step, job;
    uint32_t ri;
    uint32_t si;
};

/* A sample's communication as the rule reads it. */
struct split {
    double wait, xfer;
    enum datamsg_split how;
    bool long_wall; /* its step is longer than the median by more than threshold and jitter */
};

struct judged {
    bool judged, slow, failslow, complete; /* complete: every rank of the input has the step */
    double ratio, step_ms; /* step_ms: the step's median wall */
    double waited, own_wall, own_busy; /* ms: the others' extra wait; its own wall / work excess */
    double excess[3];
};

const char *slowrank_cause_name(enum slowrank_cause c)
{
    return c == SLOWRANK_COMPUTE ? "compute" : c == SLOWRANK_COMMUNICATION ? "communication" : "host";
}

const char *slowrank_severity_name(enum slowrank_severity s)
{
    return s == SLOWRANK_FAILSLOW ? "fail-slow" : "straggler";
}

static int flat_cmp(const void *x, const void *y)
{
    const struct flat *a = x, *b = y;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    if (a->job != b->job)
        return a->job < b->job ? -1 : 1;
    return a->ri < b->ri ? -1 : a->ri > b->ri;
}

static int dbl_cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The k-th smallest of v[0..n) (k < n; reorders v: smaller ones before it). Quickselect,
 * median-of-three pivots: a step's medians are most of the merge's time, and a sort does
 * more than they need. */
static double kth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        double a = v[lo], b = v[mid], c = v[hi];
        double p = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < p)
                i++;
            while (v[j] > p)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

/* Median of v[0..n) (n > 0; reorders v). */
static double median(double *v, size_t n)
{
    double hi = kth(v, n, n / 2);
    if (n % 2)
        return hi;
    double lo = v[0]; /* the largest of the n / 2 smaller ones */
    for (size_t i = 1; i < n / 2; i++)
        if (v[i] > lo)
            lo = v[i];
    return (lo + hi) / 2;
}

static const struct slowrank_sample *sample_of(const struct slowrank_in *in, const struct flat *f)
{
    return &in[f->ri].s[f->si];
}

static void quantities(const struct slowrank_sample *s, const struct split *sp, double q[Q_N])
{
    q[Q_WALL] = (double)s->wall;
    q[Q_COMP] = (double)s->compute + (double)s->memcpy;
    q[Q_HOST] = (double)s->host;
    q[Q_WAIT] = sp->wait;
    q[Q_XFER] = sp->xfer;
}

void slowrank_result_fini(struct slowrank_result *r)
{
    free(r->slow);
    r->slow = NULL;
    r->nslow = 0;
}

/* The split of the g samples all[0..g) of one step and one job. A measured split is kept.
 * Elsewhere the members' wait is inferred: they leave a synchronised collective together, so
 * the one that arrived last waited nothing and its communication (the step's shortest) is the
 * transfer; each other member waited its communication less that.
 * Ranks that do not synchronise have no wait to infer, and where one has a long transfer (a
 * slow link) its step is that much longer. A synchronised rank's step is long only now and
 * then (it started early, and waits longer for it); on average every member's step is as long
 * as the others'. So a rank keeps its communication unsplit when its step is longer than the
 * median by at least half its extra communication, by more than the rule's threshold of the
 * step and the steps' jitter (mad_k scaled MADs of the walls), and its previous step was that
 * long too; and only where that extra is above the threshold of the step's median
 * communication (below, it is the noise of the arrivals). col holds g doubles. */
static void infer(const struct slowrank_in *in, const struct flat *all, size_t g, const size_t *off,
                  const struct slowrank_rule *rule, double *col, struct split *sp)
{
    double minc = 0, mwall, longish, least;
    size_t withc = 0;

    for (size_t i = 0; i < g; i++) {
        const struct slowrank_sample *s = sample_of(in, &all[i]);
        struct split *x = &sp[off[all[i].ri] + all[i].si];
        if (s->split == DATAMSG_SPLIT_MEASURED && s->wait <= s->comm && s->transfer <= s->comm)
            *x = (struct split){ (double)s->wait, (double)s->transfer, DATAMSG_SPLIT_MEASURED, false };
        else
            *x = (struct split){ 0, (double)s->comm, DATAMSG_SPLIT_NONE, false };
        if (s->comm && (!withc || (double)s->comm < minc))
            minc = (double)s->comm;
        withc += s->comm > 0;
        col[i] = (double)s->wall;
    }
    mwall = median(col, g);
    for (size_t i = 0; i < g; i++)
        col[i] = fabs((double)sample_of(in, &all[i])->wall - mwall);
    longish = rule->mad_k * 1.4826 * median(col, g);
    if (rule->threshold * mwall > longish)
        longish = rule->threshold * mwall;
    for (size_t i = 0; i < g; i++)
        col[i] = (double)sample_of(in, &all[i])->comm;
    least = rule->threshold * median(col, g);
    for (size_t i = 0; i < g; i++) {
        const struct slowrank_sample *s = sample_of(in, &all[i]);
        size_t at = off[all[i].ri] + all[i].si;
        struct split *x = &sp[at];
        double w = (double)s->comm - minc, longer = (double)s->wall - mwall;
        bool before = all[i].si > 0 && sp[at - 1].long_wall;
        x->long_wall = longer > longish;
        if (withc < 2 || x->how == DATAMSG_SPLIT_MEASURED || !s->comm)
            continue;
        if (w > least && x->long_wall && longer >= w / 2 && before)
            continue;
        x->wait = w;
        x->xfer = minc;
        x->how = DATAMSG_SPLIT_INFERRED;
    }
}

/* The verdict of each rank at one step: g samples all[0..g) of the same step. tmp holds
 * (Q_N + 1) * g doubles. */
static void judge_step(const struct slowrank_in *in, const struct flat *all, size_t g, size_t active,
                       const size_t *off, const struct slowrank_rule *rule, double *tmp, const struct split *sp,
                       struct judged *jd, double *walls, size_t *nj)
{
    double med[Q_N], mad[Q_N], q[Q_N], busy;
    double *col = tmp + Q_N * g;

    for (size_t i = 0; i < g; i++) {
        quantities(sample_of(in, &all[i]), &sp[off[all[i].ri] + all[i].si], q);
        for (int k = 0; k < Q_N; k++)
            tmp[k * g + i] = q[k];
    }
    for (int k = 0; k < Q_N; k++) {
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
        size_t at = off[all[i].ri] + all[i].si;
        struct judged *j = &jd[at];
        double margin[Q_N], fmargin[Q_N];
        quantities(sample_of(in, &all[i]), &sp[at], q);
        /* A straggler's excess counts against the step's own work (wall less waiting): waits
         * inflate every wall of a synchronised job without making a rank's work any longer.
         * A fail-slow device's counts against the component's own median: a 20 % slower
         * device in a step mostly spent on the host is still 20 % slower. */
        for (int k = 0; k < Q_N; k++) {
            double noise = rule->mad_k * 1.4826 * mad[k];
            margin[k] = rule->threshold * (k == Q_WALL ? med[Q_WALL] : busy);
            fmargin[k] = rule->threshold * med[k];
            if (noise > margin[k])
                margin[k] = noise;
            if (noise > fmargin[k])
                fmargin[k] = noise;
        }
        double ec = q[Q_COMP] - med[Q_COMP], eh = q[Q_HOST] - med[Q_HOST], et = q[Q_XFER] - med[Q_XFER];
        bool wall_slow = q[Q_WALL] > med[Q_WALL] * (1 + rule->threshold) && q[Q_WALL] - med[Q_WALL] > margin[Q_WALL];
        bool link_slow = et > margin[Q_XFER] && ec <= margin[Q_COMP];
        j->judged = true;
        j->complete = g >= active;
        j->ratio = med[Q_WALL] > 0 ? q[Q_WALL] / med[Q_WALL] : 1;
        j->step_ms = med[Q_WALL] / 1e6;
        /* A step's waits are as noisy as the ranks' start times, so whether the others wait
         * for this excess is judged over the run (slowrank_merge), not per step. */
        j->slow = wall_slow || ec > margin[Q_COMP] || eh > margin[Q_HOST] || link_slow;
        /* Only a measured transfer is the rank's own: an inferred one is the step's shortest
         * communication, the same for every member. */
        j->failslow = (med[Q_COMP] > 0 && ec > fmargin[Q_COMP]) ||
                      (sp[at].how == DATAMSG_SPLIT_MEASURED && med[Q_XFER] > 0 && et > fmargin[Q_XFER] &&
                       ec <= fmargin[Q_COMP]);
        j->excess[SLOWRANK_COMPUTE] = ec / 1e6;
        j->excess[SLOWRANK_COMMUNICATION] = et / 1e6;
        j->excess[SLOWRANK_HOST] = eh / 1e6;
        j->waited = (med[Q_WAIT] - q[Q_WAIT]) / 1e6;
        j->own_wall = (q[Q_WALL] - med[Q_WALL]) / 1e6;
        j->own_busy = (q[Q_WALL] - q[Q_WAIT] - busy) / 1e6;
        walls[(*nj)++] = q[Q_WALL];
    }
}

/* The run of slow judged steps of rank i that ends at its newest judged step, as a verdict in
 * *ret; false when there is none to report. */
static bool verdict(const struct slowrank_in *in, size_t i, const size_t *off, const struct judged *jd,
                    const struct split *sp, const struct slowrank_rule *rule, struct slowrank_slow *ret)
{
    struct slowrank_slow sl = { .rank_index = i, .since_step = -1, .last_step = -1, .cost_last_step = -1 };
    double ratio = 0, ex[3] = { 0, 0, 0 };
    /* the cost over the run's steps every rank has reported ([1]), or over all of them ([0]):
     * the newest steps of a view lack the ranks whose next summary is still to come */
    double waited[2] = { 0, 0 }, own_wall[2] = { 0, 0 }, own_busy[2] = { 0, 0 }, step_ms[2] = { 0, 0 };
    uint32_t full = 0, strag = 0, how[DATAMSG_SPLIT_COUNT] = { 0 };

    for (size_t j = in[i].n; j-- > 0;) {
        const struct judged *x = &jd[off[i] + j];
        if (!x->judged)
            continue;
        if (!x->slow && !x->failslow)
            break;
        if (sl.last_step < 0)
            sl.last_step = in[i].s[j].step;
        sl.since_step = in[i].s[j].step;
        sl.run++;
        strag += x->slow;
        how[sp[off[i] + j].how]++;
        ratio += x->ratio;
        for (int c = 0; c < 2; c++) {
            if (c == 1 && !x->complete)
                continue;
            waited[c] += x->waited;
            own_wall[c] += x->own_wall;
            own_busy[c] += x->own_busy;
            step_ms[c] += x->step_ms;
        }
        if (x->complete && (sl.cost_last_step < 0 || in[i].s[j].step > sl.cost_last_step))
            sl.cost_last_step = in[i].s[j].step;
        full += x->complete;
        for (int k = 0; k < 3; k++)
            ex[k] += x->excess[k];
    }
    if (sl.run < rule->min_steps || sl.run == 0)
        return false;
    sl.ratio = ratio / sl.run;
    int best = 0;
    for (int k = 0; k < 3; k++) {
        sl.excess_ms[k] = ex[k] / sl.run;
        if (sl.excess_ms[k] > sl.excess_ms[best])
            best = k;
    }
    sl.cause = (enum slowrank_cause)best;
    sl.severity = strag * 2 > sl.run ? SLOWRANK_STRAGGLER : SLOWRANK_FAILSLOW;
    for (int k = 0; k < DATAMSG_SPLIT_COUNT; k++) /* a tie goes to the better-known split */
        if (how[k] >= how[sl.split])
            sl.split = (enum datamsg_split)k;
    /* The job-wide cost per step: what the others wait for it beyond its own wait where they
     * noticeably do (a synchronised job: its own step is then as long as theirs, give or take
     * when each woke), else its own longer step (nobody waits: ranks that do not
     * synchronise). A slow link also costs its own longer transfer, which the others meet
     * only at the next collective. */
    int c = full > 0;
    if (!c)
        sl.cost_last_step = sl.last_step;
    double k = c ? full : sl.run;
    sl.cost_ms = waited[c] / k >= SLOWRANK_WAIT_SHARE * sl.excess_ms[best] ? waited[c] / k : own_wall[c] / k;
    if (best == SLOWRANK_COMMUNICATION && own_busy[c] / k > sl.cost_ms)
        sl.cost_ms = own_busy[c] / k;
    /* An excess nobody pays for (neither do the others wait for it nor is its own step
     * longer: work overlapped elsewhere, or noise) is no straggler. */
    if (sl.cost_ms < SLOWRANK_WAIT_SHARE * sl.excess_ms[best])
        return false;
    if (sl.cost_ms < 0)
        sl.cost_ms = 0;
    sl.cost_share = step_ms[c] > 0 ? sl.cost_ms / (step_ms[c] / k) : 0;
    *ret = sl;
    return true;
}

int slowrank_merge(const struct slowrank_in *in, size_t n, const struct slowrank_rule *rule,
                   struct slowrank_result *ret)
{
    size_t total = 0, *off = NULL, nj = 0;
    struct flat *all = NULL;
    struct judged *jd = NULL;
    struct split *sp = NULL;
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
    sp = calloc(total ? total : 1, sizeof(*sp));
    walls = malloc((total ? total : 1) * sizeof(*walls));
    ret->slow = calloc(n ? n : 1, sizeof(*ret->slow));
    if (!all || !jd || !sp || !walls || !ret->slow)
        goto out;
    for (size_t i = 0, k = 0; i < n; i++)
        for (size_t j = 0; j < in[i].n; j++, k++)
            all[k] = (struct flat){ in[i].s[j].step, in[i].job, (uint32_t)i, (uint32_t)j };
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
        /* the members of a collective are one job's ranks */
        for (size_t c = a; c < b;) {
            size_t d = c;
            while (d < b && all[d].job == all[c].job)
                d++;
            infer(in, all + c, d - c, off, rule, tmp, sp);
            c = d;
        }
        if (b - a >= rule->min_ranks && b - a >= 1) {
            judge_step(in, all + a, b - a, active, off, rule, tmp, sp, jd, walls, &nj);
            for (size_t i = a; i < b; i++)
                ret->split[sp[off[all[i].ri] + all[i].si].how]++;
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
    for (size_t i = 0; i < n; i++)
        if (verdict(in, i, off, jd, sp, rule, &ret->slow[ret->nslow]))
            ret->nslow++;
    rc = 0;
out:
    if (rc < 0)
        slowrank_result_fini(ret);
    free(off);
    free(all);
    free(jd);
    free(sp);
    free(tmp);
    free(walls);
    return rc;
}
