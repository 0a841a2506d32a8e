/* cmd_steps: `dyno steps` (see cmd_steps.h): getSteps on every host, one merged view per
 * window — median/p99/max step time and the slow ranks by the median/MAD rule of
 * docs/cluster.md §4 — as text or one JSON object; --watch repeats it. */
#include "cli/cmd_steps.h"

#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/cli_buf.h"
#include "cli/cli_gather.h"
#include "cli/cli_val.h"
#include "cli/cmd.h"
#include "cli/hosts.h"
#include "cli/rpc_client.h"
#include "common/log.h"
#include "common/strutil.h"

const char *steps_cause_name(enum steps_cause c)
{
    return c == STEPS_CAUSE_COMPUTE ? "compute" : c == STEPS_CAUSE_COMMUNICATION ? "communication" : "host";
}

/* ---------- the merge ---------- */

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

void steps_result_fini(struct steps_result *r)
{
    free(r->slow);
    r->slow = NULL;
    r->nslow = 0;
}

int steps_merge(const struct steps_in_rank *in, size_t n, const struct steps_rule *rule, struct steps_result *ret)
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
                const struct steps_sample *s = &in[all[a + k].ri].s[all[a + k].si];
                w[k] = (double)s->wall;
                c[k] = (double)(s->compute + s->memcpy);
                m[k] = (double)s->comm;
                h[k] = (double)s->host;
            }
            double med = median(w, g), medc = median(c, g), medm = median(m, g), medh = median(h, g);
            for (size_t k = 0; k < g; k++) {
                const struct steps_sample *s = &in[all[a + k].ri].s[all[a + k].si];
                w[k] = fabs((double)s->wall - med);
            }
            double mad = median(w, g);
            for (size_t k = 0; k < g; k++) {
                const struct steps_sample *s = &in[all[a + k].ri].s[all[a + k].si];
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
        struct steps_slow sl = { .rank_index = i, .since_step = -1, .last_step = -1 };
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
        sl.cause = (enum steps_cause)best;
        ret->slow[ret->nslow++] = sl;
    }
    rc = 0;
out:
    if (rc < 0)
        steps_result_fini(ret);
    free(off);
    free(all);
    free(jd);
    free(tmp);
    free(walls);
    return rc;
}

/* ---------- the command ---------- */

static const struct cli_flag steps_flags[] = {
    {"count", CLI_FLAG_VALUE, false, "0", "With --watch: stop after this many views (0 = until interrupted)"},
    {"interval-s", CLI_FLAG_VALUE, false, "2", "With --watch: seconds between views"},
    {"job-id", CLI_FLAG_VALUE, false, NULL, "Only this job's ranks"},
    {"json", CLI_FLAG_BOOL, false, NULL, "Print one JSON object per view"},
    {"last", CLI_FLAG_VALUE, false, "64", "Newest steps per rank to merge (1..128)"},
    {"mad-k", CLI_FLAG_VALUE, false, "3", "Slow when the excess is above K scaled MADs"},
    {"min-ranks", CLI_FLAG_VALUE, false, "3", "Judge a step only when this many ranks have it"},
    {"min-steps", CLI_FLAG_VALUE, false, "3", "Slow only after this many consecutive slow steps"},
    {"threshold", CLI_FLAG_VALUE, false, "0.1", "Slow when step time > median * (1 + THRESHOLD)"},
    {"watch", CLI_FLAG_BOOL, false, NULL, "Repeat the view every --interval-s seconds"},
};

struct steps_opts {
    struct steps_rule rule;
    int64_t count, interval_s, last;
    bool json, watch;
};

static int parse_opts(const struct cli_args *a, struct steps_opts *o, char *err, size_t errcap)
{
    const char *v;
    int64_t i;
    double d;

    o->rule = (struct steps_rule)STEPS_RULE_DEFAULT;
    o->json = cli_flags_bool(a, "json");
    o->watch = cli_flags_bool(a, "watch");
    if (cli_val_i64("count", cli_flags_get(a, "count"), 0, INT32_MAX, "Must be a non-negative integer", &o->count,
                    err, errcap) < 0 ||
        cli_val_i64("interval-s", cli_flags_get(a, "interval-s"), 1, 86400, "Must be an integer in [1, 86400]",
                    &o->interval_s, err, errcap) < 0 ||
        cli_val_i64("last", cli_flags_get(a, "last"), 1, 128, "Must be an integer in [1, 128]", &o->last, err,
                    errcap) < 0 ||
        cli_val_i64("min-steps", cli_flags_get(a, "min-steps"), 1, 128, "Must be an integer in [1, 128]", &i, err,
                    errcap) < 0)
        return -EINVAL;
    o->rule.min_steps = (uint32_t)i;
    if (cli_val_i64("min-ranks", cli_flags_get(a, "min-ranks"), 1, 1 << 20, "Must be a positive integer", &i, err,
                    errcap) < 0)
        return -EINVAL;
    o->rule.min_ranks = (uint32_t)i;
    v = cli_flags_get(a, "threshold");
    if (str_to_decimal(v, &d) != 0 || !(d >= 0) || d > 100) {
        cli_val_err(err, errcap, "threshold", v, "Must be a number in [0, 100]");
        return -EINVAL;
    }
    o->rule.threshold = d;
    v = cli_flags_get(a, "mad-k");
    if (str_to_decimal(v, &d) != 0 || !(d >= 0) || d > 1000) {
        cli_val_err(err, errcap, "mad-k", v, "Must be a number in [0, 1000]");
        return -EINVAL;
    }
    o->rule.mad_k = d;
    v = cli_flags_get(a, "job-id");
    if (v && cli_val_i64("job-id", v, 0, INT64_MAX, "Must be an integer in [0, 9223372036854775807]", &i, err,
                         errcap) < 0)
        return -EINVAL;
    return 0;
}

static int steps_prepare(const struct cli_args *a, struct cmd_req *req, char *err, size_t errcap)
{
    struct steps_opts o;
    const char *job = cli_flags_get(a, "job-id");

    if (parse_opts(a, &o, err, errcap) < 0)
        return -EINVAL;
    cli_buf_printf(&req->body, "{\"fn\":\"getSteps\",\"last\":%lld", (long long)o.last);
    if (job)
        cli_buf_printf(&req->body, ",\"job_id\":%s", job);
    cli_buf_puts(&req->body, "}");
    return req->body.err;
}

static uint64_t u64_of(const cJSON *v)
{
    return (uint64_t)cli_json_i64(v, 0, INT64_MAX, 0);
}

/* The ranks of all replies as merge input. Samples are owned by *ret_samples. */
static int collect(const struct cli_reply *r, size_t nh, struct steps_in_rank **ret_in, size_t *ret_n,
                   struct steps_sample **ret_samples)
{
    size_t nr = 0, ns = 0;
    const cJSON *rk, *row;
    for (size_t i = 0; i < nh; i++) {
        const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(r[i].json, "ranks");
        cJSON_ArrayForEach(rk, ranks) {
            nr++;
            ns += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(rk, "steps"));
        }
    }
    struct steps_in_rank *in = calloc(nr ? nr : 1, sizeof(*in));
    struct steps_sample *s = calloc(ns ? ns : 1, sizeof(*s));
    if (!in || !s) {
        free(in);
        free(s);
        return -ENOMEM;
    }
    size_t k = 0, q = 0;
    for (size_t i = 0; i < nh; i++) {
        const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(r[i].json, "ranks");
        cJSON_ArrayForEach(rk, ranks) {
            struct steps_in_rank *x = &in[k++];
            const cJSON *f;
            x->host = r[i].host;
            f = cJSON_GetObjectItemCaseSensitive(rk, "rank");
            x->rank = (int32_t)cli_json_i64(f, INT32_MIN, INT32_MAX, -1);
            f = cJSON_GetObjectItemCaseSensitive(rk, "pid");
            x->pid = (int32_t)cli_json_i64(f, INT32_MIN, INT32_MAX, 0);
            f = cJSON_GetObjectItemCaseSensitive(rk, "job_id");
            x->job = cli_json_i64(f, INT64_MIN, INT64_MAX, 0);
            x->s = &s[q];
            cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(rk, "steps")) {
                /* columns: step, start_ns, wall_ns, compute_ns, comm_ns, memcpy_ns, host_ns */
                if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) < 7 || !cJSON_IsNumber(row->child))
                    continue;
                struct steps_sample *y = &s[q];
                const cJSON *c = row->child;
                y->step = cli_json_i64(c, INT64_MIN, INT64_MAX, 0);
                c = c->next->next;
                y->wall = u64_of(c);
                y->compute = u64_of(c = c->next);
                y->comm = u64_of(c = c->next);
                y->memcpy = u64_of(c = c->next);
                y->host = u64_of(c->next);
                q++;
                x->n++;
            }
        }
    }
    *ret_in = in;
    *ret_n = nr;
    *ret_samples = s;
    return 0;
}

static void print_view(const struct steps_opts *o, const struct cli_targets *t, const struct cli_reply *r,
                       const struct steps_in_rank *in, const struct steps_result *res, FILE *out)
{
    size_t nfail = 0;
    for (size_t i = 0; i < t->hosts->n; i++)
        nfail += r[i].failed;
    if (o->json) {
        cJSON *root = cJSON_CreateObject(), *fh = cJSON_AddArrayToObject(root, "failed_hosts");
        for (size_t i = 0; i < t->hosts->n; i++) {
            if (!r[i].failed)
                continue;
            cJSON *h = cJSON_CreateObject();
            cJSON_AddStringToObject(h, "host", r[i].host ? r[i].host : t->hosts->v[i]);
            cJSON_AddStringToObject(h, "error", r[i].err);
            cJSON_AddItemToArray(fh, h);
        }
        cJSON_AddNumberToObject(root, "hosts", (double)t->hosts->n);
        cJSON_AddNumberToObject(root, "ranks", (double)res->ranks);
        cJSON *rule = cJSON_AddObjectToObject(root, "rule");
        cJSON_AddNumberToObject(rule, "mad_k", o->rule.mad_k);
        cJSON_AddNumberToObject(rule, "min_ranks", o->rule.min_ranks);
        cJSON_AddNumberToObject(rule, "min_steps", o->rule.min_steps);
        cJSON_AddNumberToObject(rule, "threshold", o->rule.threshold);
        cJSON *sr = cJSON_AddArrayToObject(root, "slow_ranks");
        for (size_t i = 0; i < res->nslow; i++) {
            const struct steps_slow *s = &res->slow[i];
            const struct steps_in_rank *x = &in[s->rank_index];
            cJSON *e = cJSON_CreateObject(), *ex;
            cJSON_AddStringToObject(e, "cause", steps_cause_name(s->cause));
            ex = cJSON_AddObjectToObject(e, "excess_ms");
            cJSON_AddNumberToObject(ex, "communication", s->excess_ms[1]);
            cJSON_AddNumberToObject(ex, "compute", s->excess_ms[0]);
            cJSON_AddNumberToObject(ex, "host", s->excess_ms[2]);
            cJSON_AddStringToObject(e, "host", x->host);
            cJSON_AddNumberToObject(e, "job_id", (double)x->job);
            cJSON_AddNumberToObject(e, "last_step", (double)s->last_step);
            cJSON_AddNumberToObject(e, "pid", x->pid);
            cJSON_AddNumberToObject(e, "rank", x->rank);
            cJSON_AddNumberToObject(e, "ratio", round(s->ratio * 1000) / 1000);
            cJSON_AddNumberToObject(e, "since_step", (double)s->since_step);
            cJSON_AddNumberToObject(e, "slow_steps", s->run);
            cJSON_AddItemToArray(sr, e);
        }
        cJSON *st = cJSON_AddObjectToObject(root, "step_time_ms");
        cJSON_AddNumberToObject(st, "max", res->max_ms);
        cJSON_AddNumberToObject(st, "median", res->median_ms);
        cJSON_AddNumberToObject(st, "p99", res->p99_ms);
        cJSON *w = cJSON_AddObjectToObject(root, "window");
        cJSON_AddNumberToObject(w, "first_step", (double)res->first_step);
        cJSON_AddNumberToObject(w, "last_step", (double)res->last_step);
        cJSON_AddNumberToObject(w, "steps", (double)res->judged_steps);
        char *text = cJSON_PrintUnformatted(root);
        if (text)
            fprintf(out, "%s\n", text);
        free(text);
        cJSON_Delete(root);
        fflush(out);
        return;
    }
    if (o->watch) {
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
        fprintf(out, "--- %s\n", when);
    }
    char esc[sizeof(r[0].err)];
    for (size_t i = 0; i < t->hosts->n; i++)
        if (r[i].failed)
            fprintf(out, "[%s] ERROR: %s\n", t->hosts->v[i], cli_term_str(r[i].err, esc, sizeof(esc)));
    if (res->judged_steps == 0) {
        fprintf(out, "steps: no step judged yet (%zu ranks on %zu hosts; a step needs %u ranks)\n", res->ranks,
                t->hosts->n - nfail, o->rule.min_ranks);
    } else {
        fprintf(out, "steps %lld-%lld (%zu judged, %zu ranks, %zu hosts): step time median %.2f ms, p99 %.2f ms, "
                "max %.2f ms\n", (long long)res->first_step, (long long)res->last_step, res->judged_steps,
                res->ranks, t->hosts->n - nfail, res->median_ms, res->p99_ms, res->max_ms);
    }
    fprintf(out, "slow ranks: %zu\n", res->nslow);
    if (res->nslow)
        fprintf(out, "%-24s %6s %8s %8s %6s %-13s %s\n", "HOST", "RANK", "PID", "SINCE", "RATIO", "CAUSE",
                "EXCESS (compute/comm/host ms)");
    for (size_t i = 0; i < res->nslow; i++) {
        const struct steps_slow *s = &res->slow[i];
        const struct steps_in_rank *x = &in[s->rank_index];
        fprintf(out, "%-24s %6d %8d %8lld %6.2f %-13s %+.2f/%+.2f/%+.2f\n", x->host, x->rank, x->pid,
                (long long)s->since_step, s->ratio, steps_cause_name(s->cause), s->excess_ms[0], s->excess_ms[1],
                s->excess_ms[2]);
    }
    fflush(out);
}

static int one_view(const struct steps_opts *o, struct cmd_req *req, const struct cli_targets *t, FILE *out,
                    FILE *errf, bool *ret_failed)
{
    size_t nh = t->hosts->n, nr = 0;
    struct cli_reply *r = calloc(nh, sizeof(*r));
    struct steps_in_rank *in = NULL;
    struct steps_sample *samples = NULL;
    struct steps_result res = { 0 };
    int rc = -ENOMEM;

    /* each view of --watch gets the whole --timeout-s (docs/cli.md) */
    rpc_set_overall_deadline(clock_mono_ns() + (uint64_t)t->timeout_s * 1000000000ull);
    if (!r || cli_gather(t, cli_buf_str(&req->body), req->body.len, r) < 0)
        goto out;
    for (size_t i = 0; i < nh; i++) {
        if (!r[i].failed && !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(r[i].json, "ranks"))) {
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(r[i].json, "status");
            r[i].failed = true;
            snprintf(r[i].err, sizeof(r[i].err), "no step data in the reply (%s); is the daemon older than getSteps?",
                     cJSON_IsString(s) ? s->valuestring : "no 'ranks'");
        }
        *ret_failed |= r[i].failed;
    }
    if (collect(r, nh, &in, &nr, &samples) < 0 || steps_merge(in, nr, &o->rule, &res) < 0)
        goto out;
    print_view(o, t, r, in, &res, out);
    rc = 0;
out:
    if (rc < 0)
        fprintf(errf, "error: out of memory merging the step windows\n");
    steps_result_fini(&res);
    free(in);
    free(samples);
    if (r)
        cli_gather_fini(r, nh);
    free(r);
    return rc;
}

static int steps_run_all(struct cmd_req *req, const struct cli_targets *t, FILE *out, FILE *errf)
{
    struct steps_opts o;
    char err[256];
    bool failed = false;

    if (parse_opts(req->args, &o, err, sizeof(err)) < 0) {
        fprintf(errf, "%s\n", err);
        return CLI_EXIT_USAGE;
    }
    for (int64_t k = 0;; k++) {
        if (one_view(&o, req, t, out, errf, &failed) < 0)
            return CLI_EXIT_RUNTIME;
        if (!o.watch || (o.count > 0 && k + 1 >= o.count))
            break;
        struct timespec ts = { (time_t)o.interval_s, 0 };
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
    return failed ? CLI_EXIT_RUNTIME : CLI_EXIT_OK;
}

static void steps_render(const struct cmd_req *req, const char *reply, size_t len, const cJSON *json,
                         struct cli_buf *out, bool *ret_failed, char *err, size_t errcap)
{
    cmd_render_verbatim(req, reply, len, json, out, ret_failed, err, errcap);
}

const struct cli_cmd cmd_steps = {
    .name = "steps",
    .about = "Merge the ranks' step summaries of all hosts: step time and slow ranks",
    .flags = steps_flags,
    .nflags = sizeof(steps_flags) / sizeof(steps_flags[0]),
    .prepare = steps_prepare,
    .render = steps_render,
    .run_all = steps_run_all,
};
